// rmsnorm: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c], over the last dim.
// Rows R = numel(x) / C: hidden states (T, C), or Qwen3's per-head q/k norm on (T*H, D) rows.
// Constants (overrides): WG = workgroup size, a power of two (default 64; smaller for short rows;
// shared/rmsnorm_rows.wgsl).
// Dispatch: one workgroup per row, grid1d(R) (x, y) — row = wid.y * nwg.x + wid.x; excess groups exit.

// #include "rmsnorm_rows.wgsl"

@group(0) @binding(2) var<storage, read_write> y: array<f32>; // (R, C)
@group(0) @binding(3) var<uniform> p: Params;

alias SumT = f32; // wg_sum.wgsl: the row's sum of squares

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.rows) {
    return; // whole workgroup: row is uniform
  }
  let base = row * p.cols;

  var s = 0.0;
  for (var c = lid; c < p.cols; c += WG) {
    let v = x[base + c];
    s += v * v;
  }
  let rstd = inverseSqrt(wg_sum(lid, s) / f32(p.cols) + p.eps);

  for (var c = lid; c < p.cols; c += WG) {
    y[base + c] = x[base + c] * rstd * w[c];
  }
}
