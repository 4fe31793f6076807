// swiglu backward. With s = sigmoid(gate):
//   dgate = dout * up * s * (1 + gate * (1 - s))   (d silu / d gate)
//   dup   = dout * gate * s                         (silu(gate))
// Constants (overrides): WG = workgroup size (default 256).
// Dispatch: grid1d(ceil(N / WG)) (x, y) — flat group index wid.y * nwg.x + wid.x; excess threads exit.

override WG: u32 = 256u;

struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;        // (T, F)
@group(0) @binding(1) var<storage, read> up: array<f32>;          // (T, F)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (T, F)
@group(0) @binding(3) var<storage, read_write> dgate: array<f32>; // (T, F)
@group(0) @binding(4) var<storage, read_write> dup: array<f32>;   // (T, F)
@group(0) @binding(5) var<uniform> p: Params;

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
  let s = sigmoid(g);
  let d = dout[i];
  dgate[i] = d * up[i] * s * (1.0 + g * (1.0 - s));
  dup[i] = d * g * s;
}
