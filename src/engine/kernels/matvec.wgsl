// matvec: y = alpha · x · Wᵀ (+ y) for a few rows of x (decode steps: M = 1 … 8), W stored
// (N, K) row-major as PyTorch keeps linear weights. A workgroup of WG threads computes
// COLS = WG / LANES output columns: LANES threads share a column, striding over K, and reduce in
// shared memory. The tiled matmul wastes most of a tile at M = 1; this reads each weight once.
// Constants: WG (threads), LANES (threads per column; a power of two dividing WG), ROWS (= M ≤ 8).
// Grid: grid1d(ceil(N / COLS)) (x, y) — flat group index wid.x + wid.y * nwg.x.

override WG: u32 = 256u;
override LANES: u32 = 8u;
override ROWS: u32 = 1u;                                        // = M, so the row loops unroll

struct Params { m: u32, n: u32, k: u32, alpha: f32, accumulate: u32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;        // (M, K)
@group(0) @binding(1) var<storage, read> w: array<f32>;        // (N, K)
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // (M, N)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, 2048>;                      // (8 rows, WG), WG ≤ 256

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let cols = WG / LANES;
  let group = wid.x + wid.y * nwg.x;
  let t = lid.x;
  let lane = t % LANES;
  let col = group * cols + t / LANES;
  var acc: array<f32, 8>;
  for (var r = 0u; r < 8u; r++) { acc[r] = 0.0; }
  if (col < p.n) {
    let wrow = col * p.k;
    for (var kk = lane; kk < p.k; kk += LANES) {
      let wv = w[wrow + kk];
      for (var r = 0u; r < ROWS; r++) { acc[r] = fma(x[r * p.k + kk], wv, acc[r]); }
    }
  }
  for (var r = 0u; r < ROWS; r++) { partial[r * WG + t] = acc[r]; }
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s = s / 2u) {
    if (lane < s) {
      for (var r = 0u; r < ROWS; r++) { partial[r * WG + t] += partial[r * WG + t + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && col < p.n) {
    for (var r = 0u; r < ROWS; r++) {
      let i = r * p.n + col;
      let v = p.alpha * partial[r * WG + t];
      if (p.accumulate == 1u) { y[i] = y[i] + v; } else { y[i] = v; }
    }
  }
}
