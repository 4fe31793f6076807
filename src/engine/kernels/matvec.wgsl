// matvec: y = alpha · x · Wᵀ (+ y) for a few rows of x (decode steps: M = 1 … 16), W stored (N, K)
// row-major as PyTorch keeps linear weights. The kernel streams each weight once, so its speed is
// the memory bandwidth: wide loads, several loads in flight per thread, enough workgroups.
//   A workgroup of WG threads covers COLS = (WG / LANES) · CPT output columns: LANES threads share a
//   block of CPT adjacent columns and stride over K in chunks (a chunk = 8 elements packed, 4 with
//   VEC4, 1 else). Per chunk a thread loads the CPT weight chunks first (CPT loads in flight), then
//   each row of x once, used for all CPT columns. LANES up to 128 splits a skinny product's K over
//   the whole workgroup (many workgroups for few columns: o and down projections).
//   Reduction of a column's LANES partial sums: with SUBGROUPS, a butterfly of subgroupShuffleXor
//   over B = min(LANES, the adapter's smallest subgroup size) lanes (aligned runs of that many
//   invocations share a subgroup), then a fixed shared-memory tree over the LANES / B results;
//   without, B = 1: the tree over all LANES. The order depends only on LANES and B, never on ROWS, CPT,
//   WG or the other weights of the dispatch, so row r of an M-row call equals row r alone, bit for
//   bit, and a fused column equals a plain matvec of its weight.
// Variants (wgsl_preprocess flags, set by matvec.ts):
//   PACKED  W is a frozen weight in bf16 / f16 / q4 u32 words (io/pack.ts): packed_weight.wgsl is
//           appended (its BF16 / F16 / Q4 flag), K % 8 == 0, x read as vec4, 8 elements per chunk;
//           bf16 / f16 W bound as vec4<u32> (a chunk in one 16-byte load), q4 as words.
//   VEC4    (f32 W) K % 4 == 0: W and x read as vec4, 4 elements per chunk; else one element (any K).
//   FUSED   up to three weights W0, W1, W2 (n_j, K) with optional biases b_j (n_j,):
//           y (M, n0 + n1 + n2) = [x·W0ᵀ + b0 | x·W1ᵀ + b1 | x·W2ᵀ + b2] (Ops.linearFused).
//           Each workgroup reads one weight (its columns never straddle two).
//   GLU     two weights: y (M, n0) = silu(x·W0ᵀ) ⊙ (x·W1ᵀ) (Ops.gluLinear), both dot products of a
//           column in the same loop; SiLU as swiglu.wgsl.
//   SUBGROUPS  the adapter has `subgroups` (enabled on the device): the butterfly above.
// Constants: WG (threads), LANES (threads per column block; a power of two dividing WG), CPT
// (columns per thread, ≤ 4), ROWS (= M ≤ 16), B (a power of two ≤ LANES; 1 without SUBGROUPS).
// CPT · ROWS ≤ 16 (accumulators). Workgroup memory: NACC · CPT · ROWS · WG / B f32 (NACC = 2 with
// GLU); matvec.ts keeps it ≤ 16 KiB.
// Grid: grid1d(Σ_j ceil(n_j / COLS)) (x, y) — flat group index wid.x + wid.y * nwg.x.

// #if SUBGROUPS
enable subgroups;
diagnostic(off, subgroup_uniformity);
// #endif

override WG: u32 = 256u;
override LANES: u32 = 8u;
override CPT: u32 = 1u;
override ROWS: u32 = 1u;                                        // = M, so the row loops unroll
override B: u32 = 1u;                                           // lanes reduced by shuffles (1: none)
const MAX_ACC = 16u;                                            // CPT · ROWS at most (= MATVEC_MAX_ROWS)
const MAX_CPT = 4u;

// alpha, accumulate: plain variant only (matvec.ts passes 1 and 0 otherwise).
// n_j: columns of W_j; soff_j: q4 scale offset of W_j (packed_weight.wgsl); bias: bit j set when b_j is bound.
struct Params {
  m: u32, k: u32, alpha: f32, accumulate: u32,
  n0: u32, n1: u32, n2: u32, bias: u32,
  soff0: u32, soff1: u32, soff2: u32,
}

// #if PACKED
// #if Q4
alias WT = u32;                                                // packed words (a chunk: one word + its scale)
// #else
alias WT = vec4<u32>;                                          // bf16 / f16: one chunk of 8 per vec4 (16-byte loads)
// #endif
// #else
// #if VEC4
alias WT = vec4<f32>;                                          // 4 elements of a row (K % 4 == 0)
// #else
alias WT = f32;
// #endif
// #endif
// #if VEC4
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;  // (M, K) as (M, K / 4) vec4
// #else
// #if PACKED
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;  // (M, K) as (M, K / 4) vec4
// #else
@group(0) @binding(0) var<storage, read> x: array<f32>;        // (M, K)
// #endif
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

var<workgroup> partial: array<f32, NACC * CPT * ROWS * WG / B>;  // (NACC · CPT · ROWS, WG / B)

// The weight being read (0, 1, 2): uniform across a workgroup except in GLU, which reads both.
var<private> wsel: u32;

// Element / word / vec4 i of weight `wsel`.
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
// Word i of weight `wsel`, for packed_weight.wgsl.
fn w_word(i: u32) -> u32 {
// #if Q4
  return w_elem(i);
// #else
  return w_elem(i >> 2u)[i & 3u];
// #endif
}
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

// One chunk of column `col` of weight `sel` (PACKED: 8 elements as two vec4; VEC4: 4; else 1 in .x).
fn w_load(sel: u32, col: u32, q: u32, soff: u32) -> array<vec4<f32>, 2> {
  wsel = sel;
// #if PACKED
// #if Q4
  return w_chunk8(col, q, p.k, soff);
// #else
  let d = w_elem(col * (p.k / 8u) + q);                        // the chunk's four words, one load
// #if BF16
  let m = 0xffff0000u;
  return array<vec4<f32>, 2>(
    bitcast<vec4<f32>>(vec4<u32>(d.x << 16u, d.x & m, d.y << 16u, d.y & m)),
    bitcast<vec4<f32>>(vec4<u32>(d.z << 16u, d.z & m, d.w << 16u, d.w & m)));
// #else
  return array<vec4<f32>, 2>(
    vec4<f32>(unpack2x16float(d.x), unpack2x16float(d.y)),
    vec4<f32>(unpack2x16float(d.z), unpack2x16float(d.w)));
// #endif
// #endif
// #else
// #if VEC4
  return array<vec4<f32>, 2>(w_elem(col * (p.k / 4u) + q), vec4<f32>());
// #else
  return array<vec4<f32>, 2>(vec4<f32>(w_elem(col * p.k + q), 0.0, 0.0, 0.0), vec4<f32>());
// #endif
// #endif
}

// acc + x · w over one chunk of row r (the same chunk layout as w_load).
fn x_fma(r: u32, q: u32, w: array<vec4<f32>, 2>, acc: f32) -> f32 {
// #if PACKED
  let xi = r * (p.k / 4u) + 2u * q;
  return acc + (dot(x[xi], w[0]) + dot(x[xi + 1u], w[1]));
// #else
// #if VEC4
  return acc + dot(x[r * (p.k / 4u) + q], w[0]);
// #else
  return fma(x[r * p.k + q], w[0].x, acc);
// #endif
// #endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let cols = (WG / LANES) * CPT;
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
  let col0 = group * cols + (t / LANES) * CPT;                 // this thread's first column
// #if PACKED
  let chunks = p.k / 8u;
// #else
// #if VEC4
  let chunks = p.k / 4u;
// #else
  let chunks = p.k;
// #endif
// #endif
  var acc: array<f32, MAX_ACC>;                                // [c · ROWS + r]
  for (var a = 0u; a < MAX_ACC; a++) { acc[a] = 0.0; }
// #if GLU
  var acc_up: array<f32, MAX_ACC>;
  for (var a = 0u; a < MAX_ACC; a++) { acc_up[a] = 0.0; }
// #endif
  if (col0 < n) {
    for (var q = lane; q < chunks; q += LANES) {
      if (CPT == 1u) {                                         // one column: no arrays of chunks
        let wv = w_load(j, col0, q, soff);
// #if GLU
        let wu = w_load(1u, col0, q, p.soff1);
// #endif
        for (var r = 0u; r < ROWS; r++) {
          acc[r] = x_fma(r, q, wv, acc[r]);
// #if GLU
          acc_up[r] = x_fma(r, q, wu, acc_up[r]);
// #endif
        }
        continue;
      }
      // the CPT chunks first (CPT loads in flight); columns past n re-read the last one (never written)
      var wv: array<array<vec4<f32>, 2>, MAX_CPT>;
// #if GLU
      var wu: array<array<vec4<f32>, 2>, MAX_CPT>;
// #endif
      for (var c = 0u; c < CPT; c++) {
        let cc = min(col0 + c, n - 1u);
        wv[c] = w_load(j, cc, q, soff);
// #if GLU
        wu[c] = w_load(1u, cc, q, p.soff1);
// #endif
      }
      // then each row of x once, for all CPT columns
      for (var r = 0u; r < ROWS; r++) {
        for (var c = 0u; c < CPT; c++) {
          acc[c * ROWS + r] = x_fma(r, q, wv[c], acc[c * ROWS + r]);
// #if GLU
          acc_up[c * ROWS + r] = x_fma(r, q, wu[c], acc_up[c * ROWS + r]);
// #endif
        }
      }
    }
  }
  // reduce each accumulator over the LANES threads of this column block
  let nacc = CPT * ROWS;
  let slots = WG / B;                                          // partial sums per accumulator in the tree
// #if SUBGROUPS
  for (var s = B / 2u; s > 0u; s = s / 2u) {
    for (var a = 0u; a < nacc; a++) {
      acc[a] += subgroupShuffleXor(acc[a], s);
// #if GLU
      acc_up[a] += subgroupShuffleXor(acc_up[a], s);
// #endif
    }
  }
// #endif
  let slot = t / B;                                            // this thread's slot when lane % B == 0
  let slane = lane / B;                                        // its index among the block's slots
  let head = lane % B == 0u;
  if (head) {
    for (var a = 0u; a < nacc; a++) { partial[a * slots + slot] = acc[a]; }
// #if GLU
    for (var a = 0u; a < nacc; a++) { partial[(nacc + a) * slots + slot] = acc_up[a]; }
// #endif
  }
  workgroupBarrier();
  for (var s = LANES / B / 2u; s > 0u; s = s / 2u) {
    if (head && slane < s) {
      for (var a = 0u; a < NACC * nacc; a++) { partial[a * slots + slot] += partial[a * slots + slot + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    for (var c = 0u; c < CPT; c++) {
      let col = col0 + c;
      if (col >= n) { break; }
      for (var r = 0u; r < ROWS; r++) {
        let a = c * ROWS + r;
        let i = r * ldy + ycol0 + col;
        var v = p.alpha * partial[a * slots + slot];
// #if GLU
        let u = p.alpha * partial[(nacc + a) * slots + slot];
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
}
