// embedding_gather: the row gather of embedding.wgsl and embedding_packed.wgsl,
// out[t, c] = table[ids[off + t] − base, c], one thread per output element; an id outside
// [base, base + V) gives a zero row (never an out-of-bounds read). The includer declares
// `override WG`, uniforms p with T, C, V, off, base, and table_at(row, c) -> f32, the table's
// element. Dispatch: grid1d(ceil(T * C / WG)) (x, y).

// #include "grid.wgsl"

@group(0) @binding(1) var<storage, read> ids: array<u32>;       // (≥ off + T,)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (T, C)

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let i = grid_thread(at, lid);
  if (i >= p.T * p.C) {
    return;
  }
  let t = i / p.C;
  let c = i % p.C;
  let id = ids[p.off + t] - p.base; // below base: wraps past V, a zero row
  var v = 0.0;
  if (id < p.V) {
    v = table_at(id, c);
  }
  out[i] = v;
}
