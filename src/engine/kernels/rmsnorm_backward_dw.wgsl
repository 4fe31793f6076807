// rmsnorm backward, weight gradient: dw[c] = sum_r dy[r, c] * x[r, c] * rstd[r].
// rstd comes from rmsnorm_backward.wgsl (recorded before this dispatch).
// Constants (overrides): WG = workgroup size (default 64).
// Dispatch: ceil(C / WG) workgroups in x; one invocation per column, looping over the rows.

override WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;        // (R, C)
@group(0) @binding(1) var<storage, read> dy: array<f32>;       // (R, C)
@group(0) @binding(2) var<storage, read> rstd: array<f32>;     // (R,)
@group(0) @binding(3) var<storage, read_write> dw: array<f32>; // (C,)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  if (c >= p.cols) {
    return;
  }
  var s = 0.0;
  for (var r = 0u; r < p.rows; r++) {
    s += dy[r * p.cols + c] * x[r * p.cols + c] * rstd[r];
  }
  dw[c] = s;
}
