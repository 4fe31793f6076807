// embedding: out[t, c] = table[ids[t], c] — gather rows of a frozen (V, C) table by token id.
// An id ≥ V gives a zero row (never an out-of-bounds read). The table's storage type TT is f32,
// or f16 in the variant that embedding.ts makes (enable f16 + rewriting the alias); out is f32.
// Constants (overrides): WG = workgroup size (default 256).
// Dispatch: ceil(T * C / WG) workgroups laid out as (x, y) (dispatch_grid.ts).

alias TT = f32;

override WG: u32 = 256u;

struct Params {
  T: u32,
  C: u32,
  V: u32,
  off: u32,  // first id read: ids[off + t] (a multi-step decode reads the sampler's output in place)
  base: u32, // the table's first vocabulary row (a shard of a larger table): row = id − base
}

@group(0) @binding(0) var<storage, read> table: array<TT>;     // (V, C)
@group(0) @binding(1) var<storage, read> ids: array<u32>;      // (≥ off + T,)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (T, C)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.T * p.C) {
    return;
  }
  let t = i / p.C;
  let c = i % p.C;
  let id = ids[p.off + t] - p.base; // below base: wraps past V, a zero row
  var v = 0.0;
  if (id < p.V) {
    v = f32(table[id * p.C + c]);
  }
  out[i] = v;
}
