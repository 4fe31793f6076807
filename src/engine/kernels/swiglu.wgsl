// swiglu: out = silu(gate) * up = gate * sigmoid(gate) * up, elementwise.
// Constants (overrides): WG = workgroup size (default 256).
// Dispatch: grid1d(ceil(N / WG)) (x, y) — flat group index wid.y * nwg.x + wid.x; excess threads exit.

override WG: u32 = 256u;

struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;      // (T, F)
@group(0) @binding(1) var<storage, read> up: array<f32>;        // (T, F)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (T, F)
@group(0) @binding(3) var<uniform> p: Params;

// 1 / (1 + exp(-g)) without overflowing exp for large |g|.
fn sigmoid(g: f32) -> f32 {
  if (g >= 0.0) {
    return 1.0 / (1.0 + exp(-g));
  }
  let z = exp(g);
  return z / (1.0 + z);
}

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  if (i >= p.n) {
    return;
  }
  let g = gate[i];
  out[i] = g * sigmoid(g) * up[i];
}
