// attention: causal scaled-dot-product attention with grouped-query heads over a contiguous KV.
//   q (T, Hq, D) against k, v (S, Hkv, D), a KV-cache prefix; query t sits at position S - T + t and
//   sees keys 0 ..= S - T + t. Also writes, for the backward, the log-sum-exp of each score row:
//   lse[h, t] = log(sum_j exp(s_j)), so that p_j = exp(s_j - lse). (Decode on the paged cache is
//   attention_paged.wgsl, GQA-packed.)
// Packed (p.segmented = 1, S = T): query t sees keys seg[2t] ..= t only, those of its segment.
// Query head h reads KV head h / (Hq / Hkv). Scores are scale * q.k (scale = 1/sqrt(D)).
// One workgroup per (query head, query): a single pass over the keys in chunks of WG with an
// online softmax (running max m and per-invocation running sums). In each chunk, invocation i
// scores key j0 + i; then invocation i accumulates output dims d = i, i + WG, ... over the chunk.
// Constants (overrides): WG = workgroup size, a power of two (default 64). D <= MAX_D.
// Dispatch: (Hq, T) workgroups.

override WG: u32 = 64u;

// #include "wg_sum.wgsl"
const MAX_D: u32 = 256u;
const NEG_BIG: f32 = -3.0e38;

// #include "attention_layout.wgsl"

@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (T, Hq, D)
@group(0) @binding(4) var<storage, read_write> lse: array<f32>; // (Hq, T)
@group(0) @binding(5) var<storage, read> seg: array<u32>; // (T, 2) segment [start, end) per row
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAX_D>;  // q row, pre-scaled
var<workgroup> acc: array<f32, MAX_D>; // unnormalised output row
var<workgroup> probs: array<f32, WG>;  // exp(s - m) for the chunk's keys
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

  // keys j = lo + i, i in 0 .. nKeys - 1, of this query
  var lo = 0u;
  if (p.segmented != 0u) {
    lo = seg[2u * t];
  }
  let nKeys = p.S - p.T + t + 1u - lo;
  var m = NEG_BIG; // running max (the same in every invocation)
  var l = 0.0;     // this invocation's share of the running sum of exp(s - m)
  for (var j0 = 0u; j0 < nKeys; j0 += WG) {
    let j = j0 + lid;
    var s = NEG_BIG;
    if (j < nKeys) {
      let kBase = (lo + j) * kvStride + kvh * D;
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
        a += probs[jj] * v[(lo + j0 + jj) * kvStride + kvh * D + d];
      }
      acc[d] = a;
    }
    workgroupBarrier(); // probs and red are rewritten by the next chunk
  }

  let total = wg_sum(lid, l);
  for (var d = lid; d < D; d += WG) {
    out[qBase + d] = acc[d] / total;
  }
  if (lid == 0u) {
    lse[h * p.T + t] = m + log(total);
  }
}
