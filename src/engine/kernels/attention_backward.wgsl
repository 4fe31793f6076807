// attention backward, part 1 of 2: dq, and delta for part 2. Per query row (h, t), with
// p_j = exp(s_j - lse) recomputed from the forward's log-sum-exp:
//   delta      = sum_d dout[d] * out[d]            (= sum_j p_j * dp_j)
//   dp_j       = dout . v_j
//   ds_j       = p_j * (dp_j - delta)              (softmax backward)
//   dq         = scale * sum_j ds_j * k_j
// Same layout and masking (segments included) as attention.wgsl; one workgroup per (query head, query), keys in
// chunks of WG (invocation i handles key j0 + i, then dims d = i, i + WG, ...).
// Constants (overrides): WG = workgroup size, a power of two (default 64). D <= MAX_D.
// Dispatch: (Hq, T) workgroups.

override WG: u32 = 64u;
const MAX_D: u32 = 256u;

// #include "attention_layout.wgsl"
// #include "wg_sum.wgsl"

@group(0) @binding(3) var<storage, read> out: array<f32>;         // (T, Hq, D)
@group(0) @binding(4) var<storage, read> dout: array<f32>;        // (T, Hq, D)
// stats (2, Hq, T): [0] the forward's lse (copied in), [1] delta, written here for part 2; one
// binding for both keeps the kernel at 8 storage buffers with seg (the default limit)
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
@group(0) @binding(6) var<storage, read_write> dq: array<f32>;    // (T, Hq, D)
@group(0) @binding(7) var<storage, read> seg: array<u32>;         // (T, 2) segment [start, end) per row
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAX_D>;
var<workgroup> dos: array<f32, MAX_D>;
var<workgroup> acc: array<f32, MAX_D>;
var<workgroup> dss: array<f32, WG>; // ds_j for the chunk's keys
alias SumT = f32; // wg_sum.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  let D = p.D;
  let kvh = h / (p.Hq / p.Hkv);
  let kvStride = p.Hkv * D;
  let qBase = (t * p.Hq + h) * D;

  var part = 0.0;
  for (var d = lid; d < D; d += WG) {
    qs[d] = q[qBase + d];
    dos[d] = dout[qBase + d];
    acc[d] = 0.0;
    part += dout[qBase + d] * out[qBase + d];
  }
  let dlt = wg_sum(lid, part);
  let L = stats[h * p.T + t];
  if (lid == 0u) {
    stats[(p.Hq + h) * p.T + t] = dlt;
  }

  // keys lo + j, j in 0 .. nKeys - 1
  var lo = 0u;
  if (p.segmented != 0u) {
    lo = seg[2u * t];
  }
  let nKeys = p.S - p.T + t + 1u - lo;
  for (var j0 = 0u; j0 < nKeys; j0 += WG) {
    let j = j0 + lid;
    var ds = 0.0;
    if (j < nKeys) {
      let kvBase = (lo + j) * kvStride + kvh * D;
      var s = 0.0;
      var dp = 0.0;
      for (var d = 0u; d < D; d++) {
        s += qs[d] * k[kvBase + d];
        dp += dos[d] * v[kvBase + d];
      }
      ds = exp(s * p.scale - L) * (dp - dlt);
    }
    dss[lid] = ds;
    workgroupBarrier();

    let n = min(WG, nKeys - j0);
    for (var d = lid; d < D; d += WG) {
      var a = acc[d];
      for (var jj = 0u; jj < n; jj++) {
        a += dss[jj] * k[(lo + j0 + jj) * kvStride + kvh * D + d];
      }
      acc[d] = a;
    }
    workgroupBarrier();
  }

  for (var d = lid; d < D; d += WG) {
    dq[qBase + d] = acc[d] * p.scale;
  }
}
