// fma_peak: a pure-FMA throughput probe for the benchmark (no memory traffic in the loop).
// Each thread runs CHAINS = 16 independent dependency chains (4 vec4 registers) for `iters`
// rounds of `acc = fma(acc, x, y)`, so one round is 16 fma = 32 flops per thread. The inputs come
// from the uniform block and the result is stored, so the compiler can neither fold nor drop
// the loop. Constants (overrides): WG = workgroup size (default 256).
// Dispatch: any number of workgroups in x; flops = workgroups · WG · iters · 32.

override WG: u32 = 256u;

struct Params {
  iters: u32,
  x: f32, // multiplier, close to 1 so that the chains stay finite
  y: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>; // (workgroups · WG,)
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let s = f32(gid.x) * 1e-6;
  var a0 = vec4<f32>(s, s + 1.0, s + 2.0, s + 3.0);
  var a1 = a0 + 4.0;
  var a2 = a0 + 8.0;
  var a3 = a0 + 12.0;
  let x = vec4<f32>(p.x);
  let y = vec4<f32>(p.y);
  for (var i = 0u; i < p.iters; i++) {
    a0 = a0 * x + y;
    a1 = a1 * x + y;
    a2 = a2 * x + y;
    a3 = a3 * x + y;
  }
  let r = a0 + a1 + a2 + a3;
  let idx = gid.x;
  if (idx < arrayLength(&out)) {
    out[idx] = r.x + r.y + r.z + r.w;
  }
}
