// rmsnorm: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c], over the last dim.
// Rows R = numel(x) / C: hidden states (T, C), or Qwen3's per-head q/k norm on (T*H, D) rows.
// Constants (overrides): WG = workgroup size, a power of two (default 64; smaller for short rows).
// Dispatch: one workgroup per row, grid1d(R) (x, y) — row = wid.y * nwg.x + wid.x; excess groups exit.

override WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;       // (R, C)
@group(0) @binding(1) var<storage, read> w: array<f32>;       // (C,)
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // (R, C)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) {
    return; // whole workgroup: row is uniform
  }
  let base = row * p.cols;

  var s = 0.0;
  for (var c = lid; c < p.cols; c += WG) {
    let v = x[base + c];
    s += v * v;
  }
  partial[lid] = s;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      partial[lid] += partial[lid + stride];
    }
    workgroupBarrier();
  }
  let rstd = inverseSqrt(partial[0] / f32(p.cols) + p.eps);

  for (var c = lid; c < p.cols; c += WG) {
    y[base + c] = x[base + c] * rstd * w[c];
  }
}
