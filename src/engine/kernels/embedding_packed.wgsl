// embedding_packed: out[t, c] = W[ids[t], c] — gather rows of a frozen (V, C) table packed as
// bf16 / f16 / q4 in u32 words (io/pack.ts; packed_weight.wgsl, prepended by
// embedding_packed.ts, reads them). An id ≥ V gives a zero row (never an out-of-bounds read).
// Constants: WG = workgroup size. Dispatch: grid1d(ceil(T * C / WG)) (x, y).

override WG: u32 = 256u;

struct Params { T: u32, C: u32, V: u32, soff: u32, off: u32, base: u32 } // ids[off + t] − base (a vocabulary shard)

@group(0) @binding(0) var<storage, read> w: array<u32>;         // table (V, C) packed
@group(0) @binding(1) var<storage, read> ids: array<u32>;       // (≥ off + T,)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (T, C)
@group(0) @binding(3) var<uniform> p: Params;

fn w_word(i: u32) -> u32 { return w[i]; } // the packed words, for packed_weight.wgsl

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
    v = w_at(id, c, p.C, p.soff);
  }
  out[i] = v;
}
