// attention_paged: causal attention of a batched decode step against a paged KV cache, a KV head
// read once for its whole query group (GQA-packed). q (N, Hq, D), one new token per row; row n at
// position pos[n] of sequence seq[n] sees keys 0 ..= pos[n], key j at store row
// pages[seq[n] * maxPages + j / pageSize] * pageSize + j % pageSize of kStore / vStore (rows, Hkv, D).
// Query head h reads KV head h / (Hq / Hkv); scores are scale * q.k (scale = 1/sqrt(D)).
// One workgroup per (group of GW query heads sharing a KV head, row): a single pass over the keys
// in chunks of WG with an online softmax per head (running max m and per-invocation running sums
// l). In each chunk invocation i loads key j0 + i once and scores it against the GW queries, and
// records its store row; then invocation i accumulates its output dims d = i, i + WG, ... of the
// GW heads, each v element loaded once for all of them. Per head the arithmetic and its order are
// attention.wgsl's (pre-scaled q, one sequential dot per key, a tree max, exp(s - m), the chunk's
// terms added in key order, a tree sum of l), so each head's output is what one workgroup per
// head computed before.
// SPLIT (override): pass 1 of the split decode (flash-decoding) for long keys and few workgroups:
// workgroup (g, n, s) covers only keys [s * splitKeys, (s + 1) * splitKeys) of its row (maybe
// none) and writes each head's unnormalised partial (m, l, acc[D]) to part (N, Hq, splits, 2 + D);
// attention_merge.wgsl combines the splits into out (N, Hq, D).
// KV_F16 (preprocessor flag): the stores hold f16 pairs in u32 words (rope_append.wgsl's KV_F16:
// element e of a store at word e / 2, unpack2x16float), read here as f32; the arithmetic is the same.
// Constants: GW (query heads per workgroup, a divisor of Hq / Hkv, ≤ MAX_G), SPLIT. D ≤ MAX_D.
// Dispatch: (Hq / GW, N) workgroups; SPLIT: (Hq / GW, N, splits).

const WG: u32 = 64u;
const MAX_D: u32 = 256u;
const MAX_G: u32 = 8u;
const DPI: u32 = MAX_D / WG;      // output dims per invocation at most
const NEG_BIG: f32 = -3.0e38;

override GW: u32 = 1u;
override SPLIT: bool = false;

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

@group(0) @binding(0) var<storage, read> q: array<f32>;         // (N, Hq, D)
// #if KV_F16
@group(0) @binding(1) var<storage, read> k: array<u32>;         // kStore (rows, Hkv, D / 2) f16 pairs
@group(0) @binding(2) var<storage, read> v: array<u32>;         // vStore (rows, Hkv, D / 2) f16 pairs
// Element i of the V store (i = (row * Hkv + h) * D + d).
fn vAt(i: u32) -> f32 {
  let w = unpack2x16float(v[i >> 1u]);
  return select(w.x, w.y, (i & 1u) == 1u);
}
// #else
@group(0) @binding(1) var<storage, read> k: array<f32>;         // kStore (rows, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>;         // vStore (rows, Hkv, D)
fn vAt(i: u32) -> f32 {
  return v[i];
}
// #endif
@group(0) @binding(3) var<storage, read> idx: array<u32>;       // [pos (N) | dest (N) | seq (N) | pages] at the offsets
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // (N, Hq, D); SPLIT: part (N, Hq, splits, 2 + D)
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAX_G * MAX_D>; // the GW q rows, pre-scaled: [g * D + d]
var<workgroup> probs: array<f32, MAX_G * WG>; // exp(s - m) of the chunk's keys: [g * WG + i]
var<workgroup> red: array<f32, MAX_G * WG>;   // the chunk's max and the final sum: [g * WG + i]
var<workgroup> kvRow: array<u32, WG>;         // k/v row of the chunk's keys

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h0 = wid.x * GW;            // first query head of this workgroup
  let t = wid.y;
  let D = p.D;
  let kvh = h0 / (p.Hq / p.Hkv);  // shared by the GW heads (GW divides the group)
  let kvStride = p.Hkv * D;
  for (var g = 0u; g < GW; g++) {
    let qBase = (t * p.Hq + h0 + g) * D;
    for (var d = lid; d < D; d += WG) {
      qs[g * D + d] = q[qBase + d] * p.scale;
    }
  }
  var acc: array<f32, MAX_G * DPI>; // [g * DPI + i]: head g, dim lid + i * WG (unnormalised)
  var m: array<f32, MAX_G>;         // running max per head (the same in every invocation)
  var l: array<f32, MAX_G>;         // this invocation's share of each head's running sum of exp(s - m)
  var alpha: array<f32, MAX_G>;     // rescale of the chunk per head
  var s: array<f32, MAX_G>;         // this invocation's key's scores
  for (var g = 0u; g < GW; g++) {
    m[g] = NEG_BIG;
    l[g] = 0.0;
    for (var i = 0u; i < DPI; i++) { acc[g * DPI + i] = 0.0; }
  }
  workgroupBarrier();

  // keys jBegin .. nKeys - 1 of this row
  let nAll = idx[p.posOff + t] + 1u;
  let pageBase = p.pagesOff + idx[p.seqOff + t] * p.maxPages;
  let jBegin = select(0u, min(wid.z * p.splitKeys, nAll), SPLIT);
  let nKeys = select(nAll, min(jBegin + p.splitKeys, nAll), SPLIT);
  for (var j0 = jBegin; j0 < nKeys; j0 += WG) {
    let j = j0 + lid;
    for (var g = 0u; g < GW; g++) { s[g] = NEG_BIG; }
    if (j < nKeys) {
      let row = idx[pageBase + j / p.pageSize] * p.pageSize + j % p.pageSize;
      kvRow[lid] = row;
      let kBase = row * kvStride + kvh * D;
      for (var g = 0u; g < GW; g++) { s[g] = 0.0; }
      // #if KV_F16
      for (var d = 0u; d < D; d += 2u) { // a word: dims d, d + 1 (kBase and D are even)
        let kw = unpack2x16float(k[(kBase + d) >> 1u]);
        for (var g = 0u; g < GW; g++) { s[g] += qs[g * D + d] * kw.x; }
        for (var g = 0u; g < GW; g++) { s[g] += qs[g * D + d + 1u] * kw.y; }
      }
      // #else
      for (var d = 0u; d < D; d++) {
        let kd = k[kBase + d];
        for (var g = 0u; g < GW; g++) { s[g] += qs[g * D + d] * kd; }
      }
      // #endif
    }
    for (var g = 0u; g < GW; g++) { red[g * WG + lid] = s[g]; }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lid < stride) {
        for (var g = 0u; g < GW; g++) { red[g * WG + lid] = max(red[g * WG + lid], red[g * WG + lid + stride]); }
      }
      workgroupBarrier();
    }
    for (var g = 0u; g < GW; g++) {
      let mNew = max(m[g], red[g * WG]);
      alpha[g] = exp(max(m[g] - mNew, -80.0)); // 0 in effect on the first chunk (m = NEG_BIG)
      var e = 0.0;
      if (j < nKeys) {
        e = exp(s[g] - mNew);
      }
      probs[g * WG + lid] = e;
      l[g] = l[g] * alpha[g] + e;
      m[g] = mNew;
    }
    workgroupBarrier();

    let cnt = min(WG, nKeys - j0);
    for (var i = 0u; i < DPI; i++) {
      let d = lid + i * WG;
      if (d >= D) { break; }
      var a: array<f32, MAX_G>;
      for (var g = 0u; g < GW; g++) { a[g] = acc[g * DPI + i] * alpha[g]; }
      for (var jj = 0u; jj < cnt; jj++) {
        let vd = vAt(kvRow[jj] * kvStride + kvh * D + d);
        for (var g = 0u; g < GW; g++) { a[g] += probs[g * WG + jj] * vd; }
      }
      for (var g = 0u; g < GW; g++) { acc[g * DPI + i] = a[g]; }
    }
    workgroupBarrier(); // probs, kvRow and red are rewritten by the next chunk
  }

  for (var g = 0u; g < GW; g++) { red[g * WG + lid] = l[g]; }
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      for (var g = 0u; g < GW; g++) { red[g * WG + lid] += red[g * WG + lid + stride]; }
    }
    workgroupBarrier();
  }
  for (var g = 0u; g < GW; g++) {
    let total = red[g * WG];
    let h = h0 + g;
    if (SPLIT) {
      // an empty split leaves m = NEG_BIG, total = 0, acc = 0: weight exp(NEG_BIG - M) = 0 in the merge
      let pBase = ((t * p.Hq + h) * p.splits + wid.z) * (D + 2u);
      if (lid == 0u) {
        out[pBase] = m[g];
        out[pBase + 1u] = total;
      }
      for (var i = 0u; i < DPI; i++) {
        let d = lid + i * WG;
        if (d < D) { out[pBase + 2u + d] = acc[g * DPI + i]; }
      }
    } else {
      let qBase = (t * p.Hq + h) * D;
      for (var i = 0u; i < DPI; i++) {
        let d = lid + i * WG;
        if (d < D) { out[qBase + d] = acc[g * DPI + i] / total; }
      }
    }
  }
}
