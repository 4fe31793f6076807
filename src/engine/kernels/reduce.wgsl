// reduce: sums of f32 tensors in two passes, no atomics.
//   Pass 1 (entry point `main`, PASS = 1): workgroup g of G sums x[i] (or x[i]² when SQUARE) over
//     i = g*WG + lid, stepping by G*WG, reduces in workgroup memory and writes
//     partials[offset + g]. Several tensors write disjoint slices of one partials buffer.
//   Pass 2 (PASS = 2): one workgroup sums partials[0 .. count) and adds the total to out[0]
//     (out += total, so sums accumulate over calls).
// Bindings are the same in both passes: pass 2 binds any read-only buffer as x (not partials:
// a buffer may not be both read-only and writable storage in one dispatch), and pass 1 binds
// out without touching it.
// Constants (overrides): PASS, SQUARE, WG = workgroup size (default 256, a power of two).
// Dispatch: pass 1 (G,) workgroups with G ≤ 256 (reduce.ts caps it); pass 2 (1,).

override PASS: u32 = 1u;
override SQUARE: bool = false;
override WG: u32 = 256u;

struct Params {
  n: u32,      // pass 1: elements of x; pass 2: number of partials
  offset: u32, // pass 1: first slot of this tensor in partials
}

@group(0) @binding(0) var<storage, read> x: array<f32>;              // (n,) pass 1 input
@group(0) @binding(1) var<storage, read_write> partials: array<f32>; // (count,)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;      // (1,) pass 2 output
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> scratch: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  var s = 0.0;
  if (PASS == 1u) {
    for (var i = wid.x * WG + lid; i < p.n; i += nwg.x * WG) {
      let v = x[i];
      if (SQUARE) {
        s = fma(v, v, s);
      } else {
        s += v;
      }
    }
  } else {
    for (var i = lid; i < p.n; i += WG) {
      s += partials[i];
    }
  }
  scratch[lid] = s;
  workgroupBarrier();
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    if (lid < half) {
      scratch[lid] += scratch[lid + half];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    if (PASS == 1u) {
      partials[p.offset + wid.x] = scratch[0];
    } else {
      out[0] += scratch[0];
    }
  }
}
