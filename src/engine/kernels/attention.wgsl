// attention: causal scaled-dot-product attention with grouped-query heads, in two variants.
//   contiguous (#if !PAGED): q (T, Hq, D) against k, v (S, Hkv, D), a KV-cache prefix; query t sits
//     at position S - T + t and sees keys 0 ..= S - T + t. Also writes, for the backward, the
//     log-sum-exp of each score row: lse[h, t] = log(sum_j exp(s_j)), so that p_j = exp(s_j - lse).
//   paged (#if PAGED, attention_paged.ts): q (N, Hq, D), one new token per row, against a paged KV
//     cache (kv_pages.ts): row n at position pos[n] of sequence seq[n] sees keys 0 ..= pos[n], key j
//     at store row pages[seq[n] * maxPages + j / pageSize] * pageSize + j % pageSize. No lse.
//     SPLIT (an override, paged only): pass 1 of the split decode (flash-decoding) for long keys
//     and few rows: workgroup (h, n, s) covers only keys [s * splitKeys, (s + 1) * splitKeys) of
//     its row (maybe none) and writes the unnormalised partial (m, l, acc[D]) of that split to
//     part (N, Hq, splits, 2 + D); attention_merge.wgsl combines the splits into out (N, Hq, D).
// Query head h reads KV head h / (Hq / Hkv). Scores are scale * q.k (scale = 1/sqrt(D)).
// One workgroup per (query head, query): a single pass over the keys in chunks of WG with an
// online softmax (running max m and per-invocation running sums). In each chunk, invocation i
// scores key j0 + i and records its store row; then invocation i accumulates output dims
// d = i, i + WG, ... over the chunk. Both variants run the same arithmetic, so they round alike.
// Constants (overrides): WG = workgroup size, a power of two (default 64); SPLIT (paged only,
// default false). D <= MAX_D.
// Dispatch: (Hq, T) workgroups (paged: (Hq, N); SPLIT: (Hq, N, splits)).

override WG: u32 = 64u;

// #include "wg_sum.wgsl"
const MAX_D: u32 = 256u;
const NEG_BIG: f32 = -3.0e38;

// #if PAGED
struct Params {
  Hq: u32,
  Hkv: u32,
  D: u32,
  pageSize: u32,
  maxPages: u32,
  posOff: u32,   // pos (N,) at idx[posOff ..]
  seqOff: u32,   // seq (N,) at idx[seqOff ..]
  pagesOff: u32, // pages (numSeq, maxPages) at idx[pagesOff ..]
  scale: f32,
  splits: u32,    // SPLIT: splits per row (the third grid dimension)
  splitKeys: u32, // SPLIT: keys per split
}

// Pass 1 of the split decode: write partials instead of out. A pipeline constant (fixed per
// pipeline, so the branches cost nothing at run time) rather than an #if: the contiguous variant's
// preprocessing would otherwise have to name a flag it never uses.
override SPLIT: bool = false;

@group(0) @binding(0) var<storage, read> q: array<f32>;         // (N, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>;         // kStore (rows, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;         // vStore (rows, Hkv, D)
@group(0) @binding(3) var<storage, read> idx: array<u32>;       // [pos (N) | dest (N) | seq (N) | pages] at the offsets
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // (N, Hq, D); SPLIT: part (N, Hq, splits, 2 + D)
@group(0) @binding(5) var<uniform> p: Params;
// #else
// #include "attention_layout.wgsl"

@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (T, Hq, D)
@group(0) @binding(4) var<storage, read_write> lse: array<f32>; // (Hq, T)
@group(0) @binding(5) var<uniform> p: Params;
// #endif

var<workgroup> qs: array<f32, MAX_D>;  // q row, pre-scaled
var<workgroup> acc: array<f32, MAX_D>; // unnormalised output row
var<workgroup> probs: array<f32, WG>;  // exp(s - m) for the chunk's keys
var<workgroup> kvRow: array<u32, WG>;  // k/v row of the chunk's keys
var<workgroup> red: array<f32, WG>;    // the chunk's max reduction
alias SumT = f32;                      // wg_sum.wgsl: the final Σ

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  let D = p.D;
  let kvh = h / (p.Hq / p.Hkv);
  let kvStride = p.Hkv * D;
  let qBase = (t * p.Hq + h) * D;
  for (var d = lid; d < D; d += WG) {
    qs[d] = q[qBase + d] * p.scale;
    acc[d] = 0.0;
  }
  workgroupBarrier();

  // keys jBegin .. nKeys - 1 of this query
  // #if PAGED
  let nAll = idx[p.posOff + t] + 1u;
  let pageBase = p.pagesOff + idx[p.seqOff + t] * p.maxPages;
  let jBegin = select(0u, min(wid.z * p.splitKeys, nAll), SPLIT);
  let nKeys = select(nAll, min(jBegin + p.splitKeys, nAll), SPLIT);
  // #else
  let jBegin = 0u;
  let nKeys = p.S - p.T + t + 1u;
  // #endif
  var m = NEG_BIG; // running max (the same in every invocation)
  var l = 0.0;     // this invocation's share of the running sum of exp(s - m)
  for (var j0 = jBegin; j0 < nKeys; j0 += WG) {
    let j = j0 + lid;
    var s = NEG_BIG;
    if (j < nKeys) {
      // #if PAGED
      let row = idx[pageBase + j / p.pageSize] * p.pageSize + j % p.pageSize;
      // #else
      let row = j;
      // #endif
      kvRow[lid] = row;
      let kBase = row * kvStride + kvh * D;
      s = 0.0;
      for (var d = 0u; d < D; d++) {
        s += qs[d] * k[kBase + d];
      }
    }
    red[lid] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lid < stride) {
        red[lid] = max(red[lid], red[lid + stride]);
      }
      workgroupBarrier();
    }
    let mNew = max(m, red[0]);
    let alpha = exp(max(m - mNew, -80.0)); // 0 in effect on the first chunk (m = NEG_BIG)
    var e = 0.0;
    if (j < nKeys) {
      e = exp(s - mNew);
    }
    probs[lid] = e;
    l = l * alpha + e;
    m = mNew;
    workgroupBarrier();

    let cnt = min(WG, nKeys - j0);
    for (var d = lid; d < D; d += WG) {
      var a = acc[d] * alpha;
      for (var jj = 0u; jj < cnt; jj++) {
        a += probs[jj] * v[kvRow[jj] * kvStride + kvh * D + d];
      }
      acc[d] = a;
    }
    workgroupBarrier(); // probs, kvRow and red are rewritten by the next chunk
  }

  let total = wg_sum(lid, l);
  // #if PAGED
  if (SPLIT) {
    // an empty split leaves m = NEG_BIG, total = 0, acc = 0: weight exp(NEG_BIG - M) = 0 in the merge
    let pBase = ((t * p.Hq + h) * p.splits + wid.z) * (D + 2u);
    if (lid == 0u) {
      out[pBase] = m;
      out[pBase + 1u] = total;
    }
    for (var d = lid; d < D; d += WG) {
      out[pBase + 2u + d] = acc[d];
    }
    return;
  }
  // #endif
  for (var d = lid; d < D; d += WG) {
    out[qBase + d] = acc[d] / total;
  }
  // #if PAGED
  // #else
  if (lid == 0u) {
    lse[h * p.T + t] = m + log(total);
  }
  // #endif
}
