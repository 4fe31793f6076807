// grpo_weights: the GRPO weight and loss terms of each token from its log-prob under the current
// adapter, on the device, so a training step never reads log-probs back (train.ts has the equations).
// For row j with info[j] = (trained, old, c) and lp = logp[j]:
//   old'  = lp when ON_POLICY (ratio 1), else old
//   r     = exp(clamp(lp − old', −MAX_LOG_RATIO, MAX_LOG_RATIO))
//   clipped = (A > 0 and r > 1 + εh) or (A < 0 and r < 1 − εl)
//   ℓ     = −c·min(r·A, clamp(r, 1 − εl, 1 + εh)·A) + β·k3,   k3 = exp(δ) − δ − 1,  δ = base[j] − lp
//   w[j]  = invN · ([not clipped]·c·A·r − β·(1 − exp δ))    (= −∂L/∂lp, the nll backward's weight)
//   stats[j] = (ℓ, clipped, old' − lp, k3)                  (the host sums them once per step)
// c is the token's truncated importance weight min(exp(log π_old − log π_sampler), C), from the
// host (1 when TIS is off): a constant of the round, so it scales the policy term and its gradient.
// Untrained rows (trained = 0) get w = 0 and zero stats. Without a base (HAS_BASE false) the β terms
// are skipped and `base` is unused (bind logp again).
// Constants (overrides): WG = workgroup size (default 64), ON_POLICY, HAS_BASE.
// Dispatch: ceil(R / WG) workgroups laid out as (x, y) (dispatch_grid.ts), flat row index.

// #include "grid.wgsl"

override WG: u32 = 64u;
override ON_POLICY: bool = false;
override HAS_BASE: bool = false;

struct Params {
  R: u32,
  A: f32,
  invN: f32,
  clipLow: f32,
  clipHigh: f32,
  beta: f32,
  maxLogRatio: f32,
}

@group(0) @binding(0) var<storage, read> logp: array<f32>;        // (R,)
@group(0) @binding(1) var<storage, read> info: array<f32>;        // (R, 3): trained 0/1, old log-prob, TIS weight
@group(0) @binding(2) var<storage, read> base: array<f32>;        // (R,) log-prob under the base model
@group(0) @binding(3) var<storage, read_write> w: array<f32>;     // (R,)
@group(0) @binding(4) var<storage, read_write> stats: array<f32>; // (R, 4)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let j = grid_thread(at, lid);
  if (j >= p.R) {
    return;
  }
  if (info[3u * j] == 0.0) {
    w[j] = 0.0;
    for (var k = 0u; k < 4u; k++) {
      stats[4u * j + k] = 0.0;
    }
    return;
  }
  let lp = logp[j];
  var old = info[3u * j + 1u];
  if (ON_POLICY) {
    old = lp;
  }
  let c = info[3u * j + 2u];
  let a = p.A;
  let ratio = exp(clamp(lp - old, -p.maxLogRatio, p.maxLogRatio));
  let clipped = (a > 0.0 && ratio > 1.0 + p.clipHigh) || (a < 0.0 && ratio < 1.0 - p.clipLow);
  let rc = clamp(ratio, 1.0 - p.clipLow, 1.0 + p.clipHigh);
  var loss = -c * min(ratio * a, rc * a);
  var wt = 0.0;
  if (!clipped) {
    wt = c * a * ratio;
  }
  var k3 = 0.0;
  if (HAS_BASE) {
    let d = base[j] - lp;
    let ed = exp(d);
    k3 = ed - d - 1.0;
    loss += p.beta * k3;
    wt -= p.beta * (1.0 - ed);
  }
  w[j] = wt * p.invN;
  stats[4u * j] = loss;
  stats[4u * j + 1u] = select(0.0, 1.0, clipped);
  stats[4u * j + 2u] = old - lp;
  stats[4u * j + 3u] = k3;
}
