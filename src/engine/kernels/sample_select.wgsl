// sample_select: pass 2 (filtered sampling) — one workgroup per row merges the chunk histograms
// of sample_stats onto the row max's grid and picks the last relative bin c the kept set can
// reach, so the candidates (g(l) ≥ g(M) − c: a prefix of the (p desc) order) hold every id the
// filters can keep and everything they need to decide:
//   top-k: the first bin where the running count reaches k (the whole top-k set; top-p's base
//     is its mass); with min-p and no top-p also ≤ the min-p bin (the final kernel applies top-k
//     only when the candidates outnumber k);
//   top-p alone: the first bin where a lower bound of the running mass (the fixed-point sums)
//     reaches top_p·Z, and the bin of τ = (1 − top_p)·Z/V: the last kept id x has
//     p_x·V ≥ (mass from x on) > (1 − top_p)·Z, so no id with p ≤ τ is kept;
//   min-p: the bin of p = min_p (p < min_p is never kept; with top-p, a crossing past it keeps
//     exactly the ids with p ≥ min_p).
// Margins (×1.001, ×0.999, +2 bins) cover f32 rounding and the grid's offset. Writes
// info[row] = g(M) − c (i32 bits) and each chunk's number of candidates.
// Dispatch: grid1d(B) — row = wid.x + wid.y * nwg.x.

// #include "grid.wgsl"
// #include "sample_totals.wgsl"

@group(0) @binding(0) var<storage, read> part: array<u32>;         // (B, NC, 4)
@group(0) @binding(1) var<storage, read> chist: array<u32>;        // (B, NC, NB, 2)
@group(0) @binding(2) var<storage, read_write> info: array<u32>;   // (B,) candidate grid threshold
@group(0) @binding(3) var<storage, read_write> ccount: array<u32>; // (B, NC) candidates per chunk
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> g_count: array<u32, NB>;
var<workgroup> g_mass: array<f32, NB>;
var<workgroup> cut: u32;

/** The relative bin holding p = x (x in (0, 1]), plus two bins of margin. */
fn bin_of_p(x: f32) -> u32 {
  return min(u32(min(max(-log2(x), 0.0) * BPO, f32(NB))) + 2u, NB - 1u);
}

/** Chunk cc's shift onto the row max's grid: g(M) − g(m_c) ≥ 0. */
fn shift_of(row: u32, cc: u32, gm: i32) -> i32 {
  return gm - grid_of(bitcast<f32>(part[(row * p.NC + cc) * 4u]));
}

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.B) {
    return; // uniform across the workgroup
  }
  let t = row_totals(lid, row);
  let gm = grid_of(t.m);
  // the row histogram: relative bin j gathers chunk bin j − shift (the last bin: everything past)
  for (var j = lid; j < NB; j += WG) {
    var n = 0u;
    var m = 0.0;
    for (var cc = 0u; cc < p.NC; cc++) {
      let sh = shift_of(row, cc, gm);
      let scale = exp((bitcast<f32>(part[(row * p.NC + cc) * 4u]) - t.m) * p.inv_t) / 131072.0;
      var lo = i32(j) - sh;
      var hi = lo;
      if (j == NB - 1u) {
        hi = i32(NB) - 1;
      }
      lo = max(lo, 0);
      let h = (row * p.NC + cc) * NB * 2u;
      for (var src = lo; src <= hi; src++) {
        n += chist[h + 2u * u32(src)];
        m += f32(chist[h + 2u * u32(src) + 1u]) * scale;
      }
    }
    g_count[j] = n;
    g_mass[j] = m;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var bm = NB - 1u;
    if (p.min_p > 0.0) {
      bm = bin_of_p(p.min_p * 0.999);
    }
    var c = NB - 1u;
    if (p.top_k != 0u) {
      var cum = 0u;
      for (var b = 0u; b < NB; b++) {
        cum += g_count[b];
        if (cum >= p.top_k) {
          c = b;
          break;
        }
      }
      if (p.top_p >= 1.0) {
        c = min(c, bm);
      }
    } else if (p.top_p < 1.0) {
      let goal = p.top_p * t.z * 1.001;
      var acc = 0.0;
      for (var b = 0u; b < NB; b++) {
        acc += g_mass[b];
        if (acc >= goal) {
          c = b;
          break;
        }
      }
      let tau = (1.0 - p.top_p) * t.z / f32(p.V) * 0.999;
      if (tau > 0.0) {
        c = min(c, bin_of_p(tau));
      }
      c = min(c, bm);
    } else {
      c = bm;
    }
    cut = c;
    // the last bin holds everything past it: c = NB − 1 keeps the whole row
    info[row] = bitcast<u32>(select(gm - i32(c), -2147483647 - 1, c == NB - 1u));
  }
  let c = workgroupUniformLoad(&cut);
  // candidates per chunk: its bins up to c − shift
  for (var cc = lid; cc < p.NC; cc += WG) {
    var last = min(i32(c) - shift_of(row, cc, gm), i32(NB) - 1);
    if (c == NB - 1u) {
      last = i32(NB) - 1;
    }
    let h = (row * p.NC + cc) * NB * 2u;
    var n = 0u;
    for (var src = 0; src <= last; src++) {
      n += chist[h + 2u * u32(src)];
    }
    ccount[row * p.NC + cc] = n;
  }
}
