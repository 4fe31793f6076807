// sample_stats: pass 1 of the sampler — one workgroup per (chunk of CHUNK logits, row): the
// chunk's max m_c, Σ exp((l − m_c) / T), whether it holds NaN/±Infinity, and the lowest id of
// m_c; for filtered sampling also the chunk's histogram against its own max (relative bin
// g(m_c) − g(l), the last bin holding the rest): per bin the count and a lower bound of the mass
// in fixed point, Σ floor(exp((l − m_c) / T) · 2¹⁷) (≤ 2³¹ for a chunk of ≤ 16,384: no overflow).
// Dispatch: (NC, B); part: (B, NC, 4) u32 words [m_c bits, sum bits, non-finite 0/1, first id];
// chist: (B, NC, NB, 2) [count, fixed-point mass], written whole (no clearing needed).

// #include "sample_common.wgsl"

@group(0) @binding(0) var<storage, read> logits: array<f32>;    // (B, V)
@group(0) @binding(1) var<storage, read_write> part: array<u32>;  // (B, NC, 4)
@group(0) @binding(2) var<storage, read_write> chist: array<u32>; // (B, NC, NB, 2)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> bins: array<atomic<u32>, NB>;
var<workgroup> bins_m: array<atomic<u32>, NB>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x;
  let row = wid.y;
  let base = row * p.V;
  let end = min((c + 1u) * CHUNK, p.V);
  var m = -3.0e38;
  var bad = 0u;
  for (var i = c * CHUNK + lid; i < end; i += WG) {
    let l = logits[base + i];
    if (non_finite(l)) {
      bad = 1u;
    }
    m = max(m, l);
  }
  let mx = reduce_max_f(lid, m);
  if (p.filtered != 0u) {
    for (var j = lid; j < NB; j += WG) {
      atomicStore(&bins[j], 0u);
      atomicStore(&bins_m[j], 0u);
    }
  }
  workgroupBarrier();
  let gm = grid_of(mx);
  var s = 0.0;
  var first = ALL;
  for (var i = c * CHUNK + lid; i < end; i += WG) {
    let l = logits[base + i];
    var pl = 0.0;
    if (p.greedy == 0u) {
      pl = exp((l - mx) * p.inv_t); // greedy needs no mass
    }
    s += pl;
    if (l == mx) {
      first = min(first, i);
    }
    if (p.filtered != 0u) {
      let j = u32(min(max(gm - grid_of(l), 0), i32(NB - 1u)));
      atomicAdd(&bins[j], 1u);
      atomicAdd(&bins_m[j], u32(pl * 131072.0));
    }
  }
  let sum = reduce_sum_f(lid, s);
  let f = reduce_min_u(lid, first);
  let b = reduce_sum_u(lid, bad);
  if (lid == 0u) {
    let o = (row * p.NC + c) * 4u;
    part[o] = bitcast<u32>(mx);
    part[o + 1u] = bitcast<u32>(sum);
    part[o + 2u] = select(0u, 1u, b > 0u);
    part[o + 3u] = f;
  }
  if (p.filtered != 0u) {
    let h = (row * p.NC + c) * NB * 2u;
    for (var j = lid; j < NB; j += WG) {
      chist[h + 2u * j] = atomicLoad(&bins[j]);
      chist[h + 2u * j + 1u] = atomicLoad(&bins_m[j]);
    }
  }
}
