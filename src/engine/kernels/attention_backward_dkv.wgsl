// attention backward, part 2 of 2: dk and dv. Key j (of S) is seen by queries t >= j - (S - T)
// of every query head h in its group (h / (Hq / Hkv) = kv head); packed (p.segmented = 1, S = T),
// by queries j .. seg[2j + 1] - 1 only, the rest of its segment. Over those (t, h) pairs, with
// p = exp(scale * q.k_j - lse[h, t]) and delta from part 1 (attention_backward.wgsl):
//   dv_j = sum p * dout[t, h]
//   dk_j = scale * sum p * (dout[t, h] . v_j - delta[h, t]) * q[t, h]
// One workgroup per (kv head, key): pairs in chunks of WG (invocation i handles pair c0 + i,
// then dims d = i, i + WG, ...). No atomics: each workgroup owns its dk and dv rows.
// Constants (overrides): WG = workgroup size (default 64). D <= MAX_D.
// Dispatch: (Hkv, S) workgroups.

override WG: u32 = 64u;
const MAX_D: u32 = 256u;

// #include "attention_layout.wgsl"

@group(0) @binding(3) var<storage, read> dout: array<f32>;     // (T, Hq, D)
@group(0) @binding(4) var<storage, read> stats: array<f32>;    // (2, Hq, T): lse, then delta
@group(0) @binding(5) var<storage, read_write> dk: array<f32>; // (S, Hkv, D)
@group(0) @binding(6) var<storage, read_write> dv: array<f32>; // (S, Hkv, D)
@group(0) @binding(7) var<storage, read> seg: array<u32>;      // (T, 2) segment [start, end) per row
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> ks: array<f32, MAX_D>;
var<workgroup> vs: array<f32, MAX_D>;
var<workgroup> accK: array<f32, MAX_D>;
var<workgroup> accV: array<f32, MAX_D>;
var<workgroup> probs: array<f32, WG>; // p for the chunk's pairs
var<workgroup> dss: array<f32, WG>;   // p * (dp - delta) for the chunk's pairs

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let kvh = wid.x;
  let j = wid.y;
  let D = p.D;
  let G = p.Hq / p.Hkv;
  let kvBase = (j * p.Hkv + kvh) * D;
  for (var d = lid; d < D; d += WG) {
    ks[d] = k[kvBase + d];
    vs[d] = v[kvBase + d];
    accK[d] = 0.0;
    accV[d] = 0.0;
  }
  workgroupBarrier();

  // Queries t0 .. tEnd - 1 see key j: queries before it only see earlier keys (and, packed,
  // those after its segment only their own segment's).
  let offset = p.S - p.T;
  var t0 = 0u;
  if (j > offset) {
    t0 = j - offset;
  }
  var tEnd = p.T;
  if (p.segmented != 0u) {
    tEnd = seg[2u * j + 1u];
  }
  let nPairs = (tEnd - t0) * G; // pair c -> t = t0 + c / G, h = kvh * G + c % G
  for (var c0 = 0u; c0 < nPairs; c0 += WG) {
    let c = c0 + lid;
    var pr = 0.0;
    var ds = 0.0;
    if (c < nPairs) {
      let t = t0 + c / G;
      let h = kvh * G + c % G;
      let rowBase = (t * p.Hq + h) * D;
      var s = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < D; d++) {
        s += q[rowBase + d] * ks[d];
        dp += dout[rowBase + d] * vs[d];
      }
      pr = exp(s * p.scale - stats[h * p.T + t]);
      ds = pr * (dp - stats[(p.Hq + h) * p.T + t]);
    }
    probs[lid] = pr;
    dss[lid] = ds;
    workgroupBarrier();

    let n = min(WG, nPairs - c0);
    for (var d = lid; d < D; d += WG) {
      var ak = accK[d];
      var av = accV[d];
      for (var cc = 0u; cc < n; cc++) {
        let cAll = c0 + cc;
        let rowBase = ((t0 + cAll / G) * p.Hq + kvh * G + cAll % G) * D;
        ak += dss[cc] * q[rowBase + d];
        av += probs[cc] * dout[rowBase + d];
      }
      accK[d] = ak;
      accV[d] = av;
    }
    workgroupBarrier();
  }

  for (var d = lid; d < D; d += WG) {
    dk[kvBase + d] = accK[d] * p.scale;
    dv[kvBase + d] = accV[d];
  }
}
