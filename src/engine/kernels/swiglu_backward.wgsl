// swiglu backward. With s = sigmoid(gate):
//   dgate = dout * up * s * (1 + gate * (1 - s))   (d silu / d gate)
//   dup   = dout * gate * s                         (silu(gate))
// Constants (overrides): WG = workgroup size (default 256; shared/swiglu_common.wgsl).
// Dispatch: grid1d(ceil(N / WG)) (x, y) — flat group index wid.y * nwg.x + wid.x; excess threads exit.

// #include "swiglu_common.wgsl"

@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (T, F)
@group(0) @binding(3) var<storage, read_write> dgate: array<f32>; // (T, F)
@group(0) @binding(4) var<storage, read_write> dup: array<f32>;   // (T, F)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let i = grid_thread(at, lid);
  if (i >= p.n) {
    return;
  }
  let g = gate[i];
  let s = sigmoid(g);
  let d = dout[i];
  dgate[i] = d * up[i] * s * (1.0 + g * (1.0 - s));
  dup[i] = d * g * s;
}
