// vector_add: out[i] = a[i] + b[i]. The smallest kernel; proves the device computes.
// Constants (overrides): WG = workgroup size (default 64).
// Dispatch: ceil(N / WG) workgroups in x.

override WG: u32 = 64u;

@group(0) @binding(0) var<storage, read> a: array<f32>;        // (N,)
@group(0) @binding(1) var<storage, read> b: array<f32>;        // (N,)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (N,)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i < arrayLength(&out)) {
    out[i] = a[i] + b[i];
  }
}
