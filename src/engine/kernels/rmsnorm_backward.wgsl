// rmsnorm backward, input gradient. With r = 1 / sqrt(mean(x^2) + eps) and g = dy * w (per row):
//   dx[c] = r * (g[c] - x[c] * r^2 * sum_c'(g[c'] * x[c']) / C)
// Also writes r per row, which rmsnorm_backward_dw.wgsl uses for the weight gradient.
// Constants (overrides): WG = workgroup size, a power of two (default 64; smaller for short rows;
// shared/rmsnorm_rows.wgsl).
// Dispatch: one workgroup per row, grid1d(R) (x, y) — row = wid.y * nwg.x + wid.x; excess groups exit.

// #include "rmsnorm_rows.wgsl"

@group(0) @binding(2) var<storage, read> dy: array<f32>;         // (R, C)
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>; // (R,)
@group(0) @binding(5) var<uniform> p: Params;

alias SumT = vec2<f32>; // (sum x^2, sum g*x)

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.rows) {
    return; // whole workgroup: row is uniform
  }
  let base = row * p.cols;

  var s = vec2<f32>(0.0, 0.0);
  for (var c = lid; c < p.cols; c += WG) {
    let xv = x[base + c];
    s += vec2<f32>(xv * xv, dy[base + c] * w[c] * xv);
  }
  let sums = wg_sum(lid, s);
  let n = f32(p.cols);
  let r = inverseSqrt(sums.x / n + p.eps);
  let k = r * r * sums.y / n;

  for (var c = lid; c < p.cols; c += WG) {
    dx[base + c] = r * (dy[base + c] * w[c] - x[base + c] * k);
  }
  if (lid == 0u) {
    rstd[row] = r;
  }
}
