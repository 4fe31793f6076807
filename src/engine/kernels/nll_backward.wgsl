// nll_backward: gradient of the per-token loss of nll.wgsl w.r.t. the logits, scaled by a
// scalar upstream gradient (d total / d loss_t, the same for every t):
//   dlogits[t, j] = upstream · weights[t] · (exp(logits[t, j] − lse[t]) − [j == target[t]])
// (softmax minus one-hot), one workgroup per row, with lse from the forward. With IN_PLACE the
// logits are read from dlogits itself (bound to the logits' buffer), so the gradient overwrites
// them without a second (T, V) buffer; the `logits` binding is then unused (bind any read-only
// buffer). An ignored row (target ≥ V) gets a zero gradient.
// Constants (overrides): WG = workgroup size (default 256), IN_PLACE.
// Dispatch: T workgroups laid out as (x, y) (dispatch_grid.ts), row = wid.x + wid.y * nwg.x.

// #include "grid.wgsl"

override WG: u32 = 256u;
override IN_PLACE: bool = false;

struct Params {
  T: u32,
  V: u32,
  upstream: f32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;        // (T, V)
@group(0) @binding(1) var<storage, read> targets: array<u32>;       // (T,)
@group(0) @binding(2) var<storage, read> weights: array<f32>;       // (T,)
@group(0) @binding(3) var<storage, read> lse: array<f32>;           // (T,)
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>; // (T, V)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.T) {
    return;
  }
  let base = row * p.V;
  let l = lse[row];
  let tgt = targets[row];
  var g = p.upstream * weights[row];
  if (tgt >= p.V) {
    g = 0.0;
  }
  for (var j = lid; j < p.V; j += WG) {
    var x: f32;
    if (IN_PLACE) {
      x = dlogits[base + j];
    } else {
      x = logits[base + j];
    }
    var d = exp(x - l);
    if (j == tgt) {
      d -= 1.0;
    }
    dlogits[base + j] = g * d;
  }
}
