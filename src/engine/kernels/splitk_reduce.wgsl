// splitk_reduce: the second pass of a split-K matmul (matmul.ts): each output element is the sum
// of its S slice partials, added in slice order 0, 1, …, S − 1 (a fixed order, no atomics: the
// result is the same on every run), onto the output's previous value with ACCUMULATE.
//   out[i] = (ACCUMULATE ? out[i] : 0) + Σ_s parts[s · n + i]
// Constants (overrides): WG (threads per workgroup), ACCUMULATE.
// Dispatch: grid1d(ceil(n / WG)) (dispatch_grid.ts), one thread per element.

override WG: u32 = 256u;
override ACCUMULATE: bool = false;

struct Params {
  n: u32, // elements of the output
  slices: u32,
}

@group(0) @binding(0) var<storage, read> parts: array<f32>; // (slices, n)
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

// #include "grid.wgsl"

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let i = grid_thread(at, lid);
  if (i >= p.n) {
    return;
  }
  var s = parts[i];
  for (var j = 1u; j < p.slices; j++) {
    s += parts[j * p.n + i];
  }
  if (ACCUMULATE) {
    s = out[i] + s;
  }
  out[i] = s;
}
