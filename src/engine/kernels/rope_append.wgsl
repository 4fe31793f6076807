// rope_append: the attention input stage of a batched decode step, one dispatch. From each row n
// of qkv = [q heads | k heads | v heads] (linearFused's column order):
//   q head h:   optional per-head RMSNorm (qNorm, Qwen3), then RoPE at position pos[n] → out[n, h]
//   k head h:   optional per-head RMSNorm (kNorm), then RoPE at pos[n]            → kStore[dest[n], h]
//   v head h:   copied as is                                                        → vStore[dest[n], h]
// RMSNorm as rmsnorm.wgsl: y = x * inverseSqrt(mean(x^2) + eps) * w over the head's D values.
// RoPE as rope.wgsl (HF rotate_half, dim i pairs with i + D/2), angle = f32(pos) * freqs[i] in f32,
// cos/sin from rope.wgsl's cosSin (appended to this source by rope_append.ts).
// pos and dest are read from one u32 index tensor (the step's PagedBatch, kv_pages.ts) at offsets.
// KV_F16 (preprocessor flag): the stores hold k and v as f16, two per u32 word (pack2x16float,
// round to nearest even: word w of a head is elements 2w, 2w + 1), (rows, Hkv, D / 2) words; an
// invocation then writes whole words, computing both rotated elements of its word. Values are
// clamped to f16's finite range (+-65504) first: pack2x16float's result is undefined beyond it.
// Constants (overrides): WG = workgroup size, a power of two (default 64; D/2 rounded up if less).
// Dispatch: (Hq + Hkv, N) workgroups: x < Hq is q head x, else k/v head x - Hq; each invocation
// loops over pairs i = lid, lid + WG, ... < D/2.

override WG: u32 = 64u;

struct Params {
  N: u32,
  Hq: u32,
  Hkv: u32,
  D: u32,
  posOff: u32,  // pos (N,) at idx[posOff ..]
  destOff: u32, // dest (N,) at idx[destOff ..]
  flags: u32,   // bit 0: qNorm given, bit 1: kNorm given
  eps: f32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;          // (N, (Hq + 2 Hkv) D)
@group(0) @binding(1) var<storage, read> freqs: array<f32>;        // (D/2,)
@group(0) @binding(2) var<storage, read> qNorm: array<f32>;        // (D,) (a stand-in when flags bit 0 is 0)
@group(0) @binding(3) var<storage, read> kNorm: array<f32>;        // (D,) (a stand-in when flags bit 1 is 0)
@group(0) @binding(4) var<storage, read> idx: array<u32>;          // [pos (N) | dest (N) | ...] at posOff, destOff
@group(0) @binding(5) var<storage, read_write> out: array<f32>;    // (N, Hq, D)
// #if KV_F16
@group(0) @binding(6) var<storage, read_write> kStore: array<u32>; // (rows, Hkv, D / 2) f16 pairs
@group(0) @binding(7) var<storage, read_write> vStore: array<u32>; // (rows, Hkv, D / 2) f16 pairs
// #else
@group(0) @binding(6) var<storage, read_write> kStore: array<f32>; // (rows, Hkv, D)
@group(0) @binding(7) var<storage, read_write> vStore: array<f32>; // (rows, Hkv, D)
// #endif
@group(0) @binding(8) var<uniform> p: Params;

alias SumT = f32; // wg_sum.wgsl: the head's sum of squares
// #include "wg_sum.wgsl"

// #if KV_F16
const F16_MAX: f32 = 65504.0;

// Element e of k head `src`'s rotation (normed by kNorm when `normed`), as the pair loop of main
// computes it: e < D/2 is y1 of pair e, e >= D/2 is y2 of pair e - D/2.
fn rotatedK(src: u32, e: u32, half: u32, normed: bool, rstd: f32, pos: f32) -> f32 {
  let i = e % half;
  var x1 = qkv[src + i];
  var x2 = qkv[src + i + half];
  if (normed) {
    x1 = x1 * rstd * kNorm[i];
    x2 = x2 * rstd * kNorm[i + half];
  }
  let cs = cosSin(pos * freqs[i]);
  if (e < half) {
    return x1 * cs.x - x2 * cs.y;
  }
  return x2 * cs.x + x1 * cs.y;
}
// #endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hh = wid.x; // q head, or Hq + k/v head
  let n = wid.y;
  let D = p.D;
  let half = D / 2u;
  let isQ = hh < p.Hq;
  let src = n * (p.Hq + 2u * p.Hkv) * D + hh * D; // this head's column block in row n

  // sum of squares of the head (always reduced, so the barriers stay in uniform control flow)
  var ss = 0.0;
  for (var i = lid; i < half; i += WG) {
    let a = qkv[src + i];
    let b = qkv[src + i + half];
    ss += a * a + b * b;
  }
  let total = wg_sum(lid, ss);
  let normed = (isQ && (p.flags & 1u) != 0u) || (!isQ && (p.flags & 2u) != 0u);
  let rstd = inverseSqrt(total / f32(D) + p.eps);

  let pos = f32(idx[p.posOff + n]);
  var dst: u32;
  if (isQ) {
    dst = (n * p.Hq + hh) * D;
  } else {
    dst = (idx[p.destOff + n] * p.Hkv + (hh - p.Hq)) * D;
  }
  // #if KV_F16
  if (!isQ) {
    let w0 = dst / 2u; // dst is even (D is)
    let vSrc = src + p.Hkv * D; // v head (hh - Hq) sits Hkv heads after k head (hh - Hq)
    for (var w = lid; w < half; w += WG) {
      let e = 2u * w;
      let k2 = vec2(rotatedK(src, e, half, normed, rstd, pos), rotatedK(src, e + 1u, half, normed, rstd, pos));
      kStore[w0 + w] = pack2x16float(clamp(k2, vec2(-F16_MAX), vec2(F16_MAX)));
      vStore[w0 + w] = pack2x16float(clamp(vec2(qkv[vSrc + e], qkv[vSrc + e + 1u]), vec2(-F16_MAX), vec2(F16_MAX)));
    }
    return;
  }
  // #endif
  for (var i = lid; i < half; i += WG) {
    var x1 = qkv[src + i];
    var x2 = qkv[src + i + half];
    if (normed) {
      if (isQ) {
        x1 = x1 * rstd * qNorm[i];
        x2 = x2 * rstd * qNorm[i + half];
      } else {
        x1 = x1 * rstd * kNorm[i];
        x2 = x2 * rstd * kNorm[i + half];
      }
    }
    let cs = cosSin(pos * freqs[i]);
    let y1 = x1 * cs.x - x2 * cs.y;
    let y2 = x2 * cs.x + x1 * cs.y;
    if (isQ) {
      out[dst + i] = y1;
      out[dst + i + half] = y2;
    } else {
      // #if KV_F16
      // (not reached: k/v heads wrote their packed words above and returned)
      // #else
      kStore[dst + i] = y1;
      kStore[dst + i + half] = y2;
      let vSrc = src + p.Hkv * D; // v head (hh - Hq) sits Hkv heads after k head (hh - Hq)
      vStore[dst + i] = qkv[vSrc + i];
      vStore[dst + i + half] = qkv[vSrc + i + half];
      // #endif
    }
  }
}
