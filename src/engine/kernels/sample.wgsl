// sample: the sampler's last pass — one token id per row, with temperature, top-k, top-p and
// min-p, the same rule as the CPU reference (src/engine/kernels/sample_cpu.ts): ids ordered by (logit desc,
// id asc); the kept set is a prefix of that order; the sampled id is the first, in that order,
// where the running mass Σ exp((l − max) / T) reaches u · (mass of the kept prefix). Without any
// filter the walk is in id order instead (as the CPU does). Temperature ≤ 0 (GREEDY) is argmax,
// lowest id on ties. A row holding NaN or ±Infinity gets NON_FINITE.
//
// One workgroup per row, after sample_stats (per-chunk max, mass, first argmax):
//   greedy: the lowest first-argmax of the chunks holding the row max — no pass over the row;
//   no filter: the chunk where the running chunk mass crosses u·Z, then a walk inside it;
//   filtered, at most SORT_CAP candidates (sample_compact: a prefix of the (p desc) order that
//     holds the kept set): a bitonic sort by (key desc, id asc) in workgroup memory, a running
//     sum, and the CPU's walks as searches over it — the one exact scan;
//   filtered, more: an exact search over the candidates, or over the whole row when they
//     overflowed CAP, without sorting. A prefix is named by its last element (kk, ii): the
//     elements with key > kk, and those with key == kk and id ≤ ii, where key is the logit's
//     f32 bits mapped to an order-keeping u32. "The first element where the running mass reaches
//     R" is found by a binary search over keys (each step a workgroup reduction of count and
//     mass), then among equal keys by id.
// Every branch that reaches a barrier is workgroup-uniform (the values come from
// workgroupUniformLoad). Dispatch: grid1d(B) — row = wid.x + wid.y * nwg.x.

// #include "grid.wgsl"
// #include "sample_totals.wgsl"

@group(0) @binding(0) var<storage, read> logits: array<f32>;   // (B, V)
@group(0) @binding(1) var<storage, read> part: array<u32>;     // (B, NC, 4)
@group(0) @binding(2) var<storage, read> ccount: array<u32>;   // (B, NC) candidates per chunk
@group(0) @binding(3) var<storage, read> cand: array<u32>;     // (B, CAP, 2) [logit bits, id]
@group(0) @binding(4) var<storage, read> rand: array<f32>;     // uniforms u in [0, 1) from the host's seeded Rng
@group(0) @binding(5) var<storage, read_write> ids: array<u32>; // sampled ids
@group(0) @binding(6) var<uniform> p: Params;

// SORT_CAP (a power of two): candidates up to this many are sorted in workgroup memory
override SORT_CAP: u32 = 1024u;

var<workgroup> found: u32;
var<workgroup> found_f: f32;
var<workgroup> sk: array<u32, SORT_CAP>;  // keys; after the sort, running masses (f32 bits)
var<workgroup> sid: array<u32, SORT_CAP>; // ids

var<private> base: u32;      // row * V
var<private> max_l: f32;     // the row's largest logit
var<private> from_cand: bool; // elements are the candidates (else the whole row)
var<private> cbase: u32;     // row * CAP * 2

fn prob(l: f32) -> f32 {
  return exp((l - max_l) * p.inv_t);
}

/** Logit of element j (a candidate, or the row's j-th logit). */
fn el_l(j: u32) -> f32 {
  if (from_cand) {
    return bitcast<f32>(cand[cbase + 2u * j]);
  }
  return logits[base + j];
}

/** Id of element j; elements are in id order. */
fn el_id(j: u32) -> u32 {
  if (from_cand) {
    return cand[cbase + 2u * j + 1u];
  }
  return j;
}

/** Is element (k, i) in the prefix ending at (kk, ii)? */
fn in_prefix(k: u32, i: u32, kk: u32, ii: u32) -> bool {
  return k > kk || (k == kk && i <= ii);
}

struct Sums {
  mass: f32,
  count: u32,
}

/** Mass and count of the prefix (kk, ii) restricted to keys ≥ lo, over the n elements. */
fn sums_from(lid: u32, n: u32, lo: u32, kk: u32, ii: u32) -> Sums {
  var m = 0.0;
  var c = 0u;
  for (var j = lid; j < n; j += WG) {
    let l = el_l(j);
    let k = key_of(l);
    if (k >= lo && in_prefix(k, el_id(j), kk, ii)) {
      m += prob(l);
      c += 1u;
    }
  }
  return Sums(reduce_sum_f(lid, m), reduce_sum_u(lid, c));
}

/** The id of the n-th (1-based) element with key k inside the prefix (kk, ii), in id order. */
fn nth_with_key(lid: u32, count: u32, k: u32, n: u32, kk: u32, ii: u32) -> u32 {
  let chunk = (count + WG - 1u) / WG;
  let start = min(lid * chunk, count);
  let end = min(start + chunk, count);
  var c = 0u;
  for (var j = start; j < end; j++) {
    if (key_of(el_l(j)) == k && in_prefix(k, el_id(j), kk, ii)) {
      c += 1u;
    }
  }
  workgroupBarrier();
  red_u[lid] = c;
  if (lid == 0u) {
    found = ALL;
  }
  workgroupBarrier();
  var before = 0u;
  for (var t = 0u; t < lid; t++) {
    before += red_u[t];
  }
  if (before < n && n <= before + c) {
    var seen = before;
    for (var j = start; j < end; j++) {
      if (key_of(el_l(j)) == k && in_prefix(k, el_id(j), kk, ii)) {
        seen += 1u;
        if (seen == n) {
          found = el_id(j);
          break;
        }
      }
    }
  }
  return workgroupUniformLoad(&found);
}

/**
 * The first element, in (key desc, id asc) order within the prefix (kk, ii), where the running
 * mass reaches r; returns it as a prefix end (key, id). Past the end (rounding): the whole prefix.
 */
fn crossing(lid: u32, n: u32, r: f32, kk: u32, ii: u32, max_k: u32) -> vec2<u32> {
  // largest key k with mass(key ≥ k) ≥ r and at least one element: binary search in [kk, max_k]
  var lo = kk;
  var hi = max_k;
  while (lo < hi) {
    let d = hi - lo;
    let mid = lo + (d >> 1u) + (d & 1u);
    let s = sums_from(lid, n, mid, kk, ii);
    if (s.count > 0u && s.mass >= r) {
      lo = mid;
    } else {
      hi = mid - 1u;
    }
  }
  let k = lo;
  var above = Sums(0.0, 0u);
  if (k < ALL) {
    above = sums_from(lid, n, k + 1u, kk, ii);
  }
  let ties = sums_from(lid, n, k, kk, ii).count - above.count;
  let pk = prob(logit_of(k));
  var m = 1u;
  if (r > above.mass && pk > 0.0) {
    m = u32(max(1.0, ceil((r - above.mass) / pk)));
  }
  m = min(m, ties);
  return vec2<u32>(k, nth_with_key(lid, n, k, m, kk, ii));
}

/** a precedes b in (key desc, id asc) order */
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  return ka > kb || (ka == kb && ia < ib);
}

/** First position q < len with running mass sk[q] ≥ r, else len − 1. */
fn first_reaching(len: u32, r: f32) -> u32 {
  var lo = 0u;
  var hi = len - 1u;
  while (lo < hi) {
    let mid = (lo + hi) / 2u;
    if (bitcast<f32>(sk[mid]) >= r) {
      hi = mid;
    } else {
      lo = mid + 1u;
    }
  }
  return lo;
}

/**
 * The filters and the walk over n ≤ SORT_CAP candidates, as the CPU reference does them: sort
 * by (key desc, id asc), running masses, then top-k (the first k), top-p (the shortest prefix
 * reaching top_p × its base), min-p (the leading ids with p ≥ min_p), and the first position
 * where the running mass reaches u × the kept mass. `z` is the row's mass (top-p's base without top-k).
 */
fn sample_sorted(lid: u32, n: u32, z: f32, u: f32) -> u32 {
  for (var j = lid; j < SORT_CAP; j += WG) {
    if (j < n) {
      sk[j] = key_of(el_l(j));
      sid[j] = el_id(j);
    } else {
      sk[j] = 0u; // below every finite logit's key: sorts last
      sid[j] = ALL;
    }
  }
  for (var size = 2u; size <= SORT_CAP; size <<= 1u) {
    for (var stride = size / 2u; stride > 0u; stride >>= 1u) {
      workgroupBarrier();
      for (var t = lid; t < SORT_CAP / 2u; t += WG) {
        let i = 2u * stride * (t / stride) + t % stride;
        let j = i + stride;
        let ki = sk[i];
        let ii = sid[i];
        let kj = sk[j];
        let ij = sid[j];
        if (before(kj, ij, ki, ii) == ((i & size) == 0u)) {
          sk[i] = kj;
          sid[i] = ij;
          sk[j] = ki;
          sid[j] = ii;
        }
      }
    }
  }
  workgroupBarrier();
  // running masses: each thread a contiguous segment, then the segments' offsets; and the
  // count of p ≥ min_p (a prefix in this order)
  let per = SORT_CAP / WG;
  let s0 = lid * per;
  var acc = 0.0;
  var survivors = 0u;
  for (var j = s0; j < s0 + per; j++) {
    if (j < n) {
      let pj = prob(logit_of(sk[j]));
      acc += pj;
      survivors += select(0u, 1u, pj >= p.min_p);
    }
    sk[j] = bitcast<u32>(acc);
  }
  red_f[lid] = acc;
  red_u[lid] = survivors;
  workgroupBarrier();
  var off = 0.0;
  for (var t = 0u; t < lid; t++) {
    off += red_f[t];
  }
  for (var j = s0; j < s0 + per; j++) {
    sk[j] = bitcast<u32>(bitcast<f32>(sk[j]) + off);
  }
  workgroupBarrier();
  var id = 0u;
  if (lid == 0u) {
    var len = n;
    var base_mass = z;
    if (p.top_k != 0u) {
      len = min(len, p.top_k); // fewer candidates than k: they are the whole top-k set
      base_mass = bitcast<f32>(sk[len - 1u]);
    }
    if (p.top_p < 1.0) {
      len = first_reaching(len, p.top_p * base_mass) + 1u;
    }
    if (p.min_p > 0.0) {
      var keep = 0u;
      for (var t = 0u; t < WG; t++) {
        keep += red_u[t];
      }
      len = max(1u, min(len, keep));
    }
    id = sid[first_reaching(len, u * bitcast<f32>(sk[len - 1u]))];
  }
  return id; // thread 0's is written
}

/** Mass of chunk c relative to the row max. */
fn chunk_mass(row: u32, c: u32) -> f32 {
  let o = (row * p.NC + c) * 4u;
  return bitcast<f32>(part[o + 1u]) * exp((bitcast<f32>(part[o]) - max_l) * p.inv_t);
}

/** The first id, in id order, where the running mass reaches u · (row mass) (no filter). */
fn walk_ids(lid: u32, row: u32, u: f32) -> u32 {
  // the chunk: each thread sums a contiguous range of chunks; the crossing is in exactly one
  let per = (p.NC + WG - 1u) / WG;
  let c0 = min(lid * per, p.NC);
  let c1 = min(c0 + per, p.NC);
  var s = 0.0;
  for (var c = c0; c < c1; c++) {
    s += chunk_mass(row, c);
  }
  workgroupBarrier();
  red_f[lid] = s;
  if (lid == 0u) {
    found = p.NC - 1u;
    found_f = 0.0;
  }
  workgroupBarrier();
  var before = 0.0;
  for (var t = 0u; t < lid; t++) {
    before += red_f[t];
  }
  var total = before;
  for (var t = lid; t < WG; t++) {
    total += red_f[t];
  }
  let r = u * total;
  if (before < r && r <= before + s) {
    var acc = before;
    for (var c = c0; c < c1; c++) {
      let m = chunk_mass(row, c);
      if (acc + m >= r) {
        found = c;
        found_f = r - acc;
        break;
      }
      acc += m;
    }
  }
  let chunk = workgroupUniformLoad(&found);
  let rest = workgroupUniformLoad(&found_f);
  // inside the chunk: the same, element by element
  let first = chunk * CHUNK;
  let last = min(first + CHUNK, p.V);
  let per_e = CHUNK / WG;
  let i0 = min(first + lid * per_e, last);
  let i1 = min(i0 + per_e, last);
  var se = 0.0;
  for (var i = i0; i < i1; i++) {
    se += prob(logits[base + i]);
  }
  workgroupBarrier();
  red_f[lid] = se;
  if (lid == 0u) {
    found = last - 1u; // past the end (rounding): the chunk's last id
  }
  workgroupBarrier();
  var be = 0.0;
  for (var t = 0u; t < lid; t++) {
    be += red_f[t];
  }
  if (be < rest && rest <= be + se) {
    var acc = be;
    for (var i = i0; i < i1; i++) {
      acc += prob(logits[base + i]);
      if (acc >= rest) {
        found = i;
        break;
      }
    }
  }
  return select(workgroupUniformLoad(&found), 0u, !(r > 0.0)); // u = 0: the first id
}

@compute @workgroup_size(WG)
fn main(at: Groups, @builtin(local_invocation_index) lid: u32) {
  let row = grid_group(at);
  if (row >= p.B) {
    return; // uniform across the workgroup
  }
  base = row * p.V;
  let t = row_totals(lid, row);
  max_l = t.m;
  let max_k = key_of(t.m);
  var id = 0u;
  if (t.bad != 0u) {
    id = NON_FINITE;
  } else if (p.greedy != 0u) {
    var first = ALL;
    for (var c = lid; c < p.NC; c += WG) {
      let o = (row * p.NC + c) * 4u;
      if (bitcast<f32>(part[o]) == t.m) {
        first = min(first, part[o + 3u]);
      }
    }
    id = reduce_min_u(lid, first);
  } else if (p.filtered == 0u) {
    id = walk_ids(lid, row, rand[p.rand_off + row]);
  } else {
    var cn = 0u;
    for (var c = lid; c < p.NC; c += WG) {
      cn += ccount[row * p.NC + c];
    }
    let total_cand = reduce_sum_u(lid, cn);
    from_cand = total_cand <= p.CAP;
    cbase = row * p.CAP * 2u;
    let n = select(p.V, total_cand, total_cand <= p.CAP);
    if (n <= SORT_CAP) {
      id = sample_sorted(lid, n, t.z, rand[p.rand_off + row]);
    } else {

    // the kept prefix, as its last element (kk, ii); starts as every element
    var kk = 0u;
    var ii = ALL;
    var top_base = t.z; // top-p's base: the row's mass, or the top-k set's
    if (p.top_k != 0u && n > p.top_k) {
      // largest key with at least k elements at or above it, then the ties it may keep, by id
      var lo = 0u;
      var hi = max_k;
      while (lo < hi) {
        let d = hi - lo;
        let mid = lo + (d >> 1u) + (d & 1u);
        if (sums_from(lid, n, mid, 0u, ALL).count >= p.top_k) {
          lo = mid;
        } else {
          hi = mid - 1u;
        }
      }
      var above = 0u;
      if (lo < ALL) {
        above = sums_from(lid, n, lo + 1u, 0u, ALL).count;
      }
      ii = nth_with_key(lid, n, lo, p.top_k - above, 0u, ALL);
      kk = lo;
      top_base = sums_from(lid, n, 0u, kk, ii).mass;
    } else if (p.top_k != 0u) {
      top_base = sums_from(lid, n, 0u, kk, ii).mass; // the candidates are the whole top-k set
    }
    if (p.top_p < 1.0) {
      let e = crossing(lid, n, p.top_p * top_base, kk, ii, max_k);
      kk = e.x;
      ii = e.y;
    }
    if (p.min_p > 0.0) {
      // survivors p ≥ min_p are the keys down to the smallest surviving one (the top always survives)
      var smallest = max_k;
      for (var j = lid; j < n; j += WG) {
        let l = el_l(j);
        if (prob(l) >= p.min_p) {
          smallest = min(smallest, key_of(l));
        }
      }
      let km = reduce_min_u(lid, smallest);
      if (km > kk) {
        kk = km;
        ii = ALL;
      }
    }
    let kept = sums_from(lid, n, 0u, kk, ii).mass;
    id = min(crossing(lid, n, rand[p.rand_off + row] * kept, kk, ii, max_k).y, p.V - 1u);
    }
  }
  if (lid == 0u) {
    ids[p.out_off + row] = id;
  }
}
