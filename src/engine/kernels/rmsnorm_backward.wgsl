// rmsnorm backward, input gradient. With r = 1 / sqrt(mean(x^2) + eps) and g = dy * w (per row):
//   dx[c] = r * (g[c] - x[c] * r^2 * sum_c'(g[c'] * x[c']) / C)
// Also writes r per row, which rmsnorm_backward_dw.wgsl uses for the weight gradient.
// Constants (overrides): WG = workgroup size, a power of two (default 64; smaller for short rows).
// Dispatch: one workgroup per row, grid1d(R) (x, y) — row = wid.y * nwg.x + wid.x; excess groups exit.

override WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;          // (R, C)
@group(0) @binding(1) var<storage, read> w: array<f32>;          // (C,)
@group(0) @binding(2) var<storage, read> dy: array<f32>;         // (R, C)
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>; // (R,)
@group(0) @binding(5) var<uniform> p: Params;

// (sum x^2, sum g*x) partial sums
var<workgroup> partial: array<vec2<f32>, WG>;

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

  var s = vec2<f32>(0.0, 0.0);
  for (var c = lid; c < p.cols; c += WG) {
    let xv = x[base + c];
    s += vec2<f32>(xv * xv, dy[base + c] * w[c] * xv);
  }
  partial[lid] = s;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      partial[lid] += partial[lid + stride];
    }
    workgroupBarrier();
  }
  let n = f32(p.cols);
  let r = inverseSqrt(partial[0].x / n + p.eps);
  let k = r * r * partial[0].y / n;

  for (var c = lid; c < p.cols; c += WG) {
    dx[base + c] = r * (dy[base + c] * w[c] - x[base + c] * k);
  }
  if (lid == 0u) {
    rstd[row] = r;
  }
}
