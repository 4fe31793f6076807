// embedding: out[t, c] = table[ids[t], c] — gather rows of a frozen (V, C) table by token id.
// An id ≥ V gives a zero row (never an out-of-bounds read). The table's storage type TT is f32,
// or f16 in the variant that embedding.ts makes (flag F16, wgsl_preprocess.ts); out is f32.
// Constants (overrides): WG = workgroup size (default 256).
// The gather is shared/embedding_gather.wgsl's. Dispatch: grid1d(ceil(T * C / WG)) (x, y).

// #if F16
enable f16;
alias TT = f16;
// #else
alias TT = f32;
// #endif

override WG: u32 = 256u;

struct Params {
  T: u32,
  C: u32,
  V: u32,
  off: u32,  // first id read: ids[off + t] (a multi-step decode reads the sampler's output in place)
  base: u32, // the table's first vocabulary row (a shard of a larger table): row = id − base
}

@group(0) @binding(0) var<storage, read> table: array<TT>; // (V, C)
@group(0) @binding(3) var<uniform> p: Params;

fn table_at(row: u32, c: u32) -> f32 {
  return f32(table[row * p.C + c]);
}

// #include "embedding_gather.wgsl"
