// matvec_packed: y = alpha · x · Wᵀ (+ y) for a few rows of x (decode steps: M = 1 … 8), W (N, K)
// a frozen weight packed as bf16 / f16 / q4 in u32 words (io/pack.ts; the reading functions are
// packed_weight.wgsl, prepended by matvec_packed.ts). As matvec.wgsl: LANES threads share an
// output column, striding over K in chunks of 8 elements (4 words of bf16/f16, 1 word of q4),
// reduce in shared memory; each weight word is read once. K % 8 == 0 (io/pack.ts needs more).
// Constants: WG (threads), LANES (threads per column; a power of two dividing WG), ROWS (= M ≤ 8).
// Grid: grid1d(ceil(N / COLS)) (x, y) — flat group index wid.x + wid.y * nwg.x.

override WG: u32 = 256u;
override LANES: u32 = 8u;
override ROWS: u32 = 1u;

struct Params { m: u32, n: u32, k: u32, alpha: f32, accumulate: u32, soff: u32 }

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;   // (M, K) as (M, K / 4) vec4
@group(0) @binding(1) var<storage, read> w: array<u32>;         // W (N, K) packed: words of io/pack.ts
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // (M, N)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, 2048>;                        // (8 rows, WG), WG ≤ 256

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
    let chunks = p.k / 8u;
    let xrow = p.k / 4u;
    for (var c = lane; c < chunks; c += LANES) {
      let wv = w_chunk8(col, c, p.k, p.soff);
      for (var r = 0u; r < ROWS; r++) {
        let xi = r * xrow + 2u * c;
        acc[r] += dot(x[xi], wv[0]) + dot(x[xi + 1u], wv[1]);
      }
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
