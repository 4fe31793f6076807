// adamw: one in-place AdamW step (decoupled weight decay, as in PyTorch's AdamW) per element:
//   g  = grad[i] · scale        scale = grad_scale, times min(1, max_norm / ‖g‖) with USE_NORM
//   p  = p · (1 − lr · weight_decay)
//   m  = beta1 · m + (1 − beta1) · g
//   v  = beta2 · v + (1 − beta2) · g²
//   p  = p − lr · (m / bc1) / (sqrt(v / bc2) + eps)     bc1 = 1 − beta1^t, bc2 = 1 − beta2^t
// With USE_NORM the global norm comes from norm_sq[0] = Σ g² over all parameters (reduce.ts's
// sumSquares), so clipping needs no read-back; without it norm_sq is unused (bind any buffer).
// Constants (overrides): WG = workgroup size (default 256), USE_NORM.
// Dispatch: ceil(N / WG) workgroups laid out as (x, y) (dispatch_grid.ts).

// #include "grid.wgsl"

override WG: u32 = 256u;
override USE_NORM: bool = false;

struct Params {
  n: u32,
  lr: f32,
  beta1: f32,
  beta2: f32,
  one_minus_beta1: f32, // computed in f64 on the host: 1 − f32(0.999) would be off by 1e-5
  one_minus_beta2: f32,
  eps: f32,
  weight_decay: f32,
  bc1: f32,
  bc2: f32,
  grad_scale: f32,
  max_norm: f32,
}

@group(0) @binding(0) var<storage, read_write> param: array<f32>; // (N,)
@group(0) @binding(1) var<storage, read> grad: array<f32>;        // (N,)
@group(0) @binding(2) var<storage, read_write> m: array<f32>;     // (N,) first moment
@group(0) @binding(3) var<storage, read_write> v: array<f32>;     // (N,) second moment
@group(0) @binding(4) var<storage, read> norm_sq: array<f32>;     // (1,) Σ g² (USE_NORM)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let i = grid_thread(at, lid);
  if (i >= p.n) {
    return;
  }
  var scale = p.grad_scale;
  if (USE_NORM) {
    let norm = sqrt(norm_sq[0]);
    if (norm > p.max_norm) {
      scale *= p.max_norm / norm;
    }
  }
  let g = grad[i] * scale;
  let mi = p.beta1 * m[i] + p.one_minus_beta1 * g;
  let vi = p.beta2 * v[i] + p.one_minus_beta2 * g * g;
  m[i] = mi;
  v[i] = vi;
  let decayed = param[i] * (1.0 - p.lr * p.weight_decay);
  param[i] = decayed - p.lr * (mi / p.bc1) / (sqrt(vi / p.bc2) + p.eps);
}
