// attention_merge: pass 2 of the split paged decode attention (attention_paged.ts). Pass 1
// (attention.wgsl's SPLIT variant) leaves, per (row n, query head h, split s), the partial of the
// keys of that split:
//   m_s = max score, l_s = sum_j exp(s_j - m_s), acc_s[d] = sum_j exp(s_j - m_s) * v_j[d].
// This kernel rescales them to the row's overall max M = max_s m_s (log-sum-exp) and normalises:
//   out[n, h, d] = sum_s exp(m_s - M) * acc_s[d] / sum_s exp(m_s - M) * l_s.
// An empty split (m_s = -3e38, l_s = 0, acc_s = 0) weighs exp(-3e38 - M) = 0; split 0 of a row
// always holds key 0, so M is a real score and the sum is > 0.
// One workgroup per (query head, row); every invocation computes the splits' weights (splits <=
// MAX_SPLITS) and then writes dims d = lid, lid + WG, ...
// Constants (overrides): WG = workgroup size (default 64).
// Dispatch: (Hq, N) workgroups.

override WG: u32 = 64u;
const MAX_SPLITS: u32 = 32u;
const NEG_BIG: f32 = -3.0e38;

struct Params {
  Hq: u32,
  D: u32,
  splits: u32, // partials per (row, head), <= MAX_SPLITS
}

@group(0) @binding(0) var<storage, read> part: array<f32>;      // (N, Hq, splits, 2 + D): [m, l, acc[D]]
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // (N, Hq, D)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let n = wid.y;
  let D = p.D;
  let W = D + 2u;                             // floats per partial
  let first = (n * p.Hq + h) * p.splits * W; // this (row, head)'s first partial
  var M = NEG_BIG;
  for (var s = 0u; s < p.splits; s++) {
    M = max(M, part[first + s * W]);
  }
  var w: array<f32, MAX_SPLITS>; // exp(m_s - M)
  var L = 0.0;
  for (var s = 0u; s < p.splits; s++) {
    w[s] = exp(part[first + s * W] - M);
    L += w[s] * part[first + s * W + 1u];
  }
  let oBase = (n * p.Hq + h) * D;
  for (var d = lid; d < D; d += WG) {
    var a = 0.0;
    for (var s = 0u; s < p.splits; s++) {
      a += w[s] * part[first + s * W + 2u + d];
    }
    out[oBase + d] = a / L;
  }
}
