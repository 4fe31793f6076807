// nll: fused log-softmax + weighted negative log-likelihood, one workgroup per row t.
// Each thread walks its strided share of the V logits keeping an online (max, Σ exp(x − max))
// pair, the pairs are merged in workgroup memory, and thread 0 writes
//   lse[t]  = log Σ_j exp(logits[t, j])        (max-subtracted: stable at any scale)
//   logp[t] = logits[t, target[t]] − lse[t]
//   loss[t] = −weights[t] · logp[t]
// A target id ≥ V marks an ignored row (padding): logp = loss = 0. The backward is
// nll_backward.wgsl (it reuses lse).
// Constants (overrides): WG = workgroup size (power of two, default 256).
// Dispatch: T workgroups laid out as (x, y) (dispatch_grid.ts), row = wid.x + wid.y * nwg.x.

// #include "grid.wgsl"

override WG: u32 = 256u;

struct Params {
  T: u32,
  V: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;     // (T, V)
@group(0) @binding(1) var<storage, read> targets: array<u32>;    // (T,)
@group(0) @binding(2) var<storage, read> weights: array<f32>;    // (T,)
@group(0) @binding(3) var<storage, read_write> loss: array<f32>; // (T,)
@group(0) @binding(4) var<storage, read_write> logp: array<f32>; // (T,)
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;  // (T,)
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> red_max: array<f32, WG>;
var<workgroup> red_sum: array<f32, WG>;

const NEG_BIG: f32 = -3.0e38; // stands in for −∞ (exp(−∞ − NEG_BIG) = 0, no NaN)

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.T) {
    return; // uniform across the workgroup, so the barriers below stay uniform
  }
  let base = row * p.V;
  var m = NEG_BIG;
  var s = 0.0;
  for (var j = lid; j < p.V; j += WG) {
    let x = logits[base + j];
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s += exp(x - m);
    }
  }
  red_max[lid] = m;
  red_sum[lid] = s;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    if (lid < half) {
      let m1 = red_max[lid];
      let m2 = red_max[lid + half];
      let mm = max(m1, m2);
      red_sum[lid] = red_sum[lid] * exp(m1 - mm) + red_sum[lid + half] * exp(m2 - mm);
      red_max[lid] = mm;
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let l = red_max[0] + log(red_sum[0]);
    let tgt = targets[row];
    var lp = 0.0; // an ignored row (target ≥ V)
    if (tgt < p.V) {
      lp = logits[base + tgt] - l;
    }
    lse[row] = l;
    logp[row] = lp;
    loss[row] = -weights[row] * lp;
  }
}
