// matvec: y = alpha · x · Wᵀ (+ y) for a few rows of x (decode steps: M = 1 … 16), W stored (N, K)
// row-major as PyTorch keeps linear weights. A workgroup of WG threads computes COLS = WG / LANES
// output columns: LANES threads share a column, striding over K, and reduce in shared memory
// (a fixed tree, so a row's sum never depends on ROWS, WG or the other weights of the dispatch).
// The tiled matmul wastes most of a tile at M = 1; this reads each weight once.
// Variants (wgsl_preprocess flags, set by matvec.ts):
//   PACKED  W is a frozen weight in bf16 / f16 / q4 u32 words (io/pack.ts): packed_weight.wgsl is
//           appended (its BF16 / F16 / Q4 flag), K % 8 == 0, x read as vec4, 8 elements per step;
//           else W is f32, one element per step (any K).
//   FUSED   up to three weights W0, W1, W2 (n_j, K) with optional biases b_j (n_j,):
//           y (M, n0 + n1 + n2) = [x·W0ᵀ + b0 | x·W1ᵀ + b1 | x·W2ᵀ + b2] (Ops.linearFused).
//           Each workgroup reads one weight (its columns never straddle two), so a column's value
//           is that of a plain matvec of its weight, plus the bias.
//   GLU     two weights: y (M, n0) = silu(x·W0ᵀ) ⊙ (x·W1ᵀ) (Ops.gluLinear), both dot products of a
//           column in the same loop; SiLU as swiglu.wgsl.
// Constants: WG (threads), LANES (threads per column; a power of two dividing WG), ROWS (= M ≤ 16).
// Workgroup memory: NACC · ROWS · WG f32 (NACC = 2 with GLU); matvec.ts keeps it ≤ 16 KiB.
// Grid: grid1d(Σ_j ceil(n_j / COLS)) (x, y) — flat group index wid.x + wid.y * nwg.x.

override WG: u32 = 256u;
override LANES: u32 = 8u;
override ROWS: u32 = 1u;                                        // = M, so the row loops unroll
const MAX_ROWS = 16u;                                           // = MATVEC_MAX_ROWS

// alpha, accumulate: plain variant only (matvec.ts passes 1 and 0 otherwise).
// n_j: columns of W_j; soff_j: q4 scale offset of W_j (packed_weight.wgsl); bias: bit j set when b_j is bound.
struct Params {
  m: u32, k: u32, alpha: f32, accumulate: u32,
  n0: u32, n1: u32, n2: u32, bias: u32,
  soff0: u32, soff1: u32, soff2: u32,
}

// #if PACKED
alias WT = u32;                                                // packed words
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;  // (M, K) as (M, K / 4) vec4
// #else
alias WT = f32;
@group(0) @binding(0) var<storage, read> x: array<f32>;        // (M, K)
// #endif
@group(0) @binding(1) var<storage, read> w0: array<WT>;        // W0 (n0, K)
// #if FUSED
@group(0) @binding(2) var<storage, read> w1: array<WT>;        // W1 (n1, K) (W0 again when absent)
@group(0) @binding(3) var<storage, read> w2: array<WT>;        // W2 (n2, K) (W0 again when absent)
@group(0) @binding(4) var<storage, read> b0: array<f32>;       // (n0,) (any buffer when absent)
@group(0) @binding(5) var<storage, read> b1: array<f32>;       // (n1,)
@group(0) @binding(6) var<storage, read> b2: array<f32>;       // (n2,)
@group(0) @binding(7) var<storage, read_write> y: array<f32>;  // (M, n0 + n1 + n2)
@group(0) @binding(8) var<uniform> p: Params;
const NACC = 1u;
// #else
// #if GLU
@group(0) @binding(2) var<storage, read> w1: array<WT>;        // W_up (n0, K); W0 is W_gate
@group(0) @binding(3) var<storage, read_write> y: array<f32>;  // (M, n0)
@group(0) @binding(4) var<uniform> p: Params;
const NACC = 2u;                                               // gate and up sums per row
// #else
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // (M, n0)
@group(0) @binding(3) var<uniform> p: Params;
const NACC = 1u;
// #endif
// #endif

var<workgroup> partial: array<f32, NACC * ROWS * WG>;          // (NACC · ROWS, WG)

// The weight being read (0, 1, 2): uniform across a workgroup except in GLU, which reads both.
var<private> wsel: u32;

// Element / word i of weight `wsel`.
fn w_elem(i: u32) -> WT {
// #if FUSED
  switch wsel {
    case 0u: { return w0[i]; }
    case 1u: { return w1[i]; }
    default: { return w2[i]; }
  }
// #else
// #if GLU
  if (wsel == 0u) { return w0[i]; }
  return w1[i];
// #else
  return w0[i];
// #endif
// #endif
}

// #if PACKED
fn w_word(i: u32) -> u32 { return w_elem(i); }                 // read by packed_weight.wgsl
// #endif

// #if GLU
// 1 / (1 + exp(-g)) without overflowing exp for large |g| (as swiglu.wgsl).
fn sigmoid(g: f32) -> f32 {
  if (g >= 0.0) {
    return 1.0 / (1.0 + exp(-g));
  }
  let z = exp(g);
  return z / (1.0 + z);
}
// #endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let cols = WG / LANES;
  var group = wid.x + wid.y * nwg.x;
  let t = lid.x;
  let lane = t % LANES;
  // this workgroup's weight j: its column count, q4 scale offset and first column in y
  var j = 0u;
  var n = p.n0;
  var soff = p.soff0;
  var ycol0 = 0u;
// #if FUSED
  let g0 = (p.n0 + cols - 1u) / cols;
  let g1 = (p.n1 + cols - 1u) / cols;
  let ldy = p.n0 + p.n1 + p.n2;
  if (group >= g0 + g1) {
    j = 2u; group -= g0 + g1; n = p.n2; soff = p.soff2; ycol0 = p.n0 + p.n1;
  } else if (group >= g0) {
    j = 1u; group -= g0; n = p.n1; soff = p.soff1; ycol0 = p.n0;
  }
// #else
  let ldy = p.n0;
// #endif
  let col = group * cols + t / LANES;
  var acc: array<f32, MAX_ROWS>;
  for (var r = 0u; r < MAX_ROWS; r++) { acc[r] = 0.0; }
// #if GLU
  var acc_up: array<f32, MAX_ROWS>;
  for (var r = 0u; r < MAX_ROWS; r++) { acc_up[r] = 0.0; }
// #endif
  if (col < n) {
// #if PACKED
    let chunks = p.k / 8u;
    let xrow = p.k / 4u;
    for (var c = lane; c < chunks; c += LANES) {
      wsel = j;
      let wv = w_chunk8(col, c, p.k, soff);
// #if GLU
      wsel = 1u;
      let wu = w_chunk8(col, c, p.k, p.soff1);
// #endif
      for (var r = 0u; r < ROWS; r++) {
        let xi = r * xrow + 2u * c;
        acc[r] += dot(x[xi], wv[0]) + dot(x[xi + 1u], wv[1]);
// #if GLU
        acc_up[r] += dot(x[xi], wu[0]) + dot(x[xi + 1u], wu[1]);
// #endif
      }
    }
// #else
    let wrow = col * p.k;
    for (var kk = lane; kk < p.k; kk += LANES) {
      wsel = j;
      let wv = w_elem(wrow + kk);
// #if GLU
      wsel = 1u;
      let wu = w_elem(wrow + kk);
// #endif
      for (var r = 0u; r < ROWS; r++) {
        acc[r] = fma(x[r * p.k + kk], wv, acc[r]);
// #if GLU
        acc_up[r] = fma(x[r * p.k + kk], wu, acc_up[r]);
// #endif
      }
    }
// #endif
  }
  for (var r = 0u; r < ROWS; r++) { partial[r * WG + t] = acc[r]; }
// #if GLU
  for (var r = 0u; r < ROWS; r++) { partial[(ROWS + r) * WG + t] = acc_up[r]; }
// #endif
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s = s / 2u) {
    if (lane < s) {
      for (var r = 0u; r < NACC * ROWS; r++) { partial[r * WG + t] += partial[r * WG + t + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && col < n) {
    for (var r = 0u; r < ROWS; r++) {
      let i = r * ldy + ycol0 + col;
      var v = p.alpha * partial[r * WG + t];
// #if GLU
      let u = p.alpha * partial[(ROWS + r) * WG + t];
      v = v * sigmoid(v) * u;
// #endif
// #if FUSED
      if ((p.bias & (1u << j)) != 0u) {
        switch j {
          case 0u: { v = v + b0[col]; }
          case 1u: { v = v + b1[col]; }
          default: { v = v + b2[col]; }
        }
      }
// #endif
      if (p.accumulate == 1u) { y[i] = y[i] + v; } else { y[i] = v; }
    }
  }
}
