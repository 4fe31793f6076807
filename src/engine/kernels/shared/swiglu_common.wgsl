// swiglu_common: what swiglu.wgsl and swiglu_backward.wgsl share: the workgroup size, the element
// count, the gate and up inputs (bindings 0, 1), the grid and the sigmoid.
// Constants (overrides): WG = workgroup size (default 256).

// #include "grid.wgsl"
// #include "sigmoid.wgsl"

override WG: u32 = 256u;

struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>; // (T, F)
@group(0) @binding(1) var<storage, read> up: array<f32>;   // (T, F)
