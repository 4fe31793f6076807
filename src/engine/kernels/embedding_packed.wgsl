// embedding_packed: out[t, c] = W[ids[t], c] — gather rows of a frozen (V, C) table packed as
// bf16 / f16 / q4 in u32 words (io/pack.ts; packed_weight.wgsl, prepended by
// embedding_packed.ts, reads them). An id ≥ V gives a zero row (never an out-of-bounds read).
// The gather is shared/embedding_gather.wgsl's. Constants: WG = workgroup size.
// Dispatch: grid1d(ceil(T * C / WG)) (x, y).

override WG: u32 = 256u;

struct Params { T: u32, C: u32, V: u32, soff: u32, off: u32, base: u32 } // ids[off + t] − base (a vocabulary shard)

@group(0) @binding(0) var<storage, read> w: array<u32>; // table (V, C) packed
@group(0) @binding(3) var<uniform> p: Params;

fn w_word(i: u32) -> u32 { return w[i]; } // the packed words, for packed_weight.wgsl

fn table_at(row: u32, c: u32) -> f32 {
  return w_at(row, c, p.C, p.soff);
}

// #include "embedding_gather.wgsl"
