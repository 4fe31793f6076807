// rmsnorm_rows: what rmsnorm.wgsl and rmsnorm_backward.wgsl share: one workgroup per row of x
// (R, C) with its weight w (C,) in bindings 0, 1, the sizes and eps, the grid and the workgroup sum
// (wg_sum.wgsl; the includer picks its SumT).
// Constants (overrides): WG = workgroup size, a power of two (default 64; smaller for short rows).

// #include "grid.wgsl"
// #include "wg_sum.wgsl"

override WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>; // (R, C)
@group(0) @binding(1) var<storage, read> w: array<f32>; // (C,)
