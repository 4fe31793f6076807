// attention_paged: causal attention of a batched decode step against a paged KV cache (kv_pages.ts).
// Row n (a new token at position pos[n] of sequence seq[n]) sees keys j = 0 ..= pos[n]; key j is
// store row pages[seq[n] * maxPages + j / pageSize] * pageSize + j % pageSize. Query head h reads
// KV head h / (Hq / Hkv). Scores are scale * q.k (scale = 1/sqrt(D)).
// The same online softmax as attention.wgsl (one workgroup per (query head, row), keys in chunks
// of WG: invocation i scores key j0 + i and records its store row; then invocation i accumulates
// output dims d = i, i + WG, ... over the chunk), so both kernels round alike. No lse (no backward).
// pos, seq and pages are read from one u32 index tensor (the step's PagedBatch) at offsets.
// Constants (overrides): WG = workgroup size, a power of two (default 64). D <= MAX_D.
// Dispatch: (Hq, N) workgroups.

override WG: u32 = 64u;
const MAX_D: u32 = 256u;
const NEG_BIG: f32 = -3.0e38;

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
}

@group(0) @binding(0) var<storage, read> q: array<f32>;         // (N, Hq, D)
@group(0) @binding(1) var<storage, read> kStore: array<f32>;    // (rows, Hkv, D)
@group(0) @binding(2) var<storage, read> vStore: array<f32>;    // (rows, Hkv, D)
@group(0) @binding(3) var<storage, read> idx: array<u32>;       // [pos (N) | dest (N) | seq (N) | pages] at the offsets
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // (N, Hq, D)
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAX_D>;  // q row, pre-scaled
var<workgroup> acc: array<f32, MAX_D>; // unnormalised output row
var<workgroup> probs: array<f32, WG>;  // exp(s - m) for the chunk's keys
var<workgroup> kvRow: array<u32, WG>;  // store row of the chunk's keys
var<workgroup> red: array<f32, WG>;    // reduction scratch

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let n = wid.y;
  let D = p.D;
  let kvh = h / (p.Hq / p.Hkv);
  let kvStride = p.Hkv * D;
  let qBase = (n * p.Hq + h) * D;
  for (var d = lid; d < D; d += WG) {
    qs[d] = q[qBase + d] * p.scale;
    acc[d] = 0.0;
  }
  workgroupBarrier();

  let nKeys = idx[p.posOff + n] + 1u;
  let pageBase = p.pagesOff + idx[p.seqOff + n] * p.maxPages;
  var m = NEG_BIG; // running max (the same in every invocation)
  var l = 0.0;     // this invocation's share of the running sum of exp(s - m)
  for (var j0 = 0u; j0 < nKeys; j0 += WG) {
    let j = j0 + lid;
    var s = NEG_BIG;
    if (j < nKeys) {
      let row = idx[pageBase + j / p.pageSize] * p.pageSize + j % p.pageSize;
      kvRow[lid] = row;
      let kBase = row * kvStride + kvh * D;
      s = 0.0;
      for (var d = 0u; d < D; d++) {
        s += qs[d] * kStore[kBase + d];
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
        a += probs[jj] * vStore[kvRow[jj] * kvStride + kvh * D + d];
      }
      acc[d] = a;
    }
    workgroupBarrier(); // probs, kvRow and red are rewritten by the next chunk
  }

  red[lid] = l;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      red[lid] += red[lid + stride];
    }
    workgroupBarrier();
  }
  let total = red[0];
  for (var d = lid; d < D; d += WG) {
    out[qBase + d] = acc[d] / total;
  }
}
