// swiglu: out = silu(gate) * up = gate * sigmoid(gate) * up, elementwise.
// Constants (overrides): WG = workgroup size (default 256; shared/swiglu_common.wgsl).
// Dispatch: grid1d(ceil(N / WG)) (x, y) — flat group index wid.y * nwg.x + wid.x; excess threads exit.

// #include "swiglu_common.wgsl"

@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (T, F)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let i = grid_thread(at, lid);
  if (i >= p.n) {
    return;
  }
  let g = gate[i];
  out[i] = g * sigmoid(g) * up[i];
}
