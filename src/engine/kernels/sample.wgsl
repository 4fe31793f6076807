// sample: one token id per row of logits, with temperature, top-k, top-p and min-p, the same
// rule as the CPU reference (src/engine/sample.ts): ids ordered by (logit desc, id asc); the kept
// set is a prefix of that order; the sampled id is the first, in that order, where the running
// mass Σ exp((l − max) / T) reaches u · (mass of the kept prefix). Without any filter the walk is
// in id order instead (as the CPU does). Temperature ≤ 0 (GREEDY) is argmax, lowest id on ties.
//
// Nothing is sorted. A prefix is named by its last element (kk, ii): the ids with key > kk, and
// those with key == kk and id ≤ ii, where key is the logit's f32 bits mapped to an order-keeping
// u32. "The first element where the running mass reaches R" is found by a binary search over
// keys (32 passes over the row, each a workgroup reduction of count and mass), then among equal
// keys by id. One workgroup per row; every branch that reaches a barrier is workgroup-uniform
// (the values come from workgroupUniformLoad).
// Constants (overrides): WG = workgroup size (power of two, default 256).
// Dispatch: grid1d(B) (x, y) — row = wid.x + wid.y * nwg.x; excess workgroups exit.

override WG: u32 = 256u;

struct Params {
  V: u32,
  B: u32,
  top_k: u32,  // 0 = off (the host turns k ≥ V into 0)
  greedy: u32, // 1: argmax
  inv_t: f32,  // 1 / temperature
  top_p: f32,  // 1 = off
  min_p: f32,  // 0 = off
  filtered: u32, // any of top-k, top-p, min-p active (else the id-order walk)
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;  // (B, V)
@group(0) @binding(1) var<storage, read> rand: array<f32>;    // (B,) uniforms u in [0, 1) from the host's seeded Rng
@group(0) @binding(2) var<storage, read_write> ids: array<u32>; // (B,) sampled ids
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> found: u32;

var<private> base: u32;  // row * V
var<private> max_l: f32; // the row's largest logit

const ALL: u32 = 0xffffffffu;

/** Order-keeping map of an f32 to u32: a > b ⇔ key(a) > key(b) (for non-NaN values). */
fn key_of(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn logit_of(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn prob(l: f32) -> f32 {
  return exp((l - max_l) * p.inv_t);
}

/** Is element (k, i) in the prefix ending at (kk, ii)? */
fn in_prefix(k: u32, i: u32, kk: u32, ii: u32) -> bool {
  return k > kk || (k == kk && i <= ii);
}

struct Sums {
  mass: f32,
  count: u32,
}

/** Workgroup sums of (mass, count); the result is uniform. */
fn reduce(lid: u32, mass: f32, count: u32) -> Sums {
  workgroupBarrier(); // earlier readers of red_* are done
  red_f[lid] = mass;
  red_u[lid] = count;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      red_f[lid] += red_f[lid + s];
      red_u[lid] += red_u[lid + s];
    }
    workgroupBarrier();
  }
  return Sums(workgroupUniformLoad(&red_f[0]), workgroupUniformLoad(&red_u[0]));
}

fn reduce_max(lid: u32, x: f32) -> f32 {
  workgroupBarrier();
  red_f[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      red_f[lid] = max(red_f[lid], red_f[lid + s]);
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red_f[0]);
}

fn reduce_min_u(lid: u32, x: u32) -> u32 {
  workgroupBarrier();
  red_u[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      red_u[lid] = min(red_u[lid], red_u[lid + s]);
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red_u[0]);
}

/** Mass and count of the prefix (kk, ii) restricted to keys ≥ lo. */
fn sums_from(lid: u32, lo: u32, kk: u32, ii: u32) -> Sums {
  var m = 0.0;
  var c = 0u;
  for (var i = lid; i < p.V; i += WG) {
    let l = logits[base + i];
    let k = key_of(l);
    if (k >= lo && in_prefix(k, i, kk, ii)) {
      m += prob(l);
      c += 1u;
    }
  }
  return reduce(lid, m, c);
}

/** The id of the n-th (1-based) element with key k inside the prefix (kk, ii), in id order. */
fn nth_with_key(lid: u32, k: u32, n: u32, kk: u32, ii: u32) -> u32 {
  let chunk = (p.V + WG - 1u) / WG;
  let start = min(lid * chunk, p.V);
  let end = min(start + chunk, p.V);
  var c = 0u;
  for (var i = start; i < end; i++) {
    if (key_of(logits[base + i]) == k && in_prefix(k, i, kk, ii)) {
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
    for (var i = start; i < end; i++) {
      if (key_of(logits[base + i]) == k && in_prefix(k, i, kk, ii)) {
        seen += 1u;
        if (seen == n) {
          found = i;
          break;
        }
      }
    }
  }
  return workgroupUniformLoad(&found);
}

/**
 * The first element, in (key desc, id asc) order within the prefix (kk, ii), where the running
 * mass reaches r; returns it as a prefix end (key, id). Past the end (rounding): the last element.
 */
fn crossing(lid: u32, r: f32, kk: u32, ii: u32, max_k: u32) -> vec2<u32> {
  // largest key k with mass(key ≥ k) ≥ r and at least one element: binary search in [kk, max_k]
  var lo = kk;
  var hi = max_k;
  while (lo < hi) {
    let d = hi - lo;
    let mid = lo + (d >> 1u) + (d & 1u);
    let s = sums_from(lid, mid, kk, ii);
    if (s.count > 0u && s.mass >= r) {
      lo = mid;
    } else {
      hi = mid - 1u;
    }
  }
  let k = lo;
  var above = Sums(0.0, 0u);
  if (k < ALL) {
    above = sums_from(lid, k + 1u, kk, ii);
  }
  let ties = sums_from(lid, k, kk, ii).count - above.count;
  let pk = prob(logit_of(k));
  var n = 1u;
  if (r > above.mass && pk > 0.0) {
    n = u32(max(1.0, ceil((r - above.mass) / pk)));
  }
  n = min(n, ties);
  return vec2<u32>(k, nth_with_key(lid, k, n, kk, ii));
}

/** The first id, in id order, where the running mass reaches r (no filter); past the end: V − 1. */
fn walk_ids(lid: u32, r: f32) -> u32 {
  let chunk = (p.V + WG - 1u) / WG;
  let start = min(lid * chunk, p.V);
  let end = min(start + chunk, p.V);
  var s = 0.0;
  for (var i = start; i < end; i++) {
    s += prob(logits[base + i]);
  }
  workgroupBarrier();
  red_f[lid] = s;
  if (lid == 0u) {
    found = p.V - 1u;
  }
  workgroupBarrier();
  var before = 0.0;
  for (var t = 0u; t < lid; t++) {
    before += red_f[t];
  }
  if (r <= 0.0) {
    if (lid == 0u) {
      found = 0u;
    }
  } else if (before < r && r <= before + s) {
    var acc = before;
    for (var i = start; i < end; i++) {
      acc += prob(logits[base + i]);
      if (acc >= r) {
        found = i;
        break;
      }
    }
  }
  return workgroupUniformLoad(&found);
}

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_index) lid: u32,
) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.B) {
    return; // uniform across the workgroup
  }
  base = row * p.V;
  var m = -3.0e38;
  for (var i = lid; i < p.V; i += WG) {
    m = max(m, logits[base + i]);
  }
  let mx = reduce_max(lid, m); // uniform (a private variable would not be, for the analysis)
  max_l = mx;
  let max_k = key_of(mx);

  if (p.greedy != 0u) {
    var first = ALL;
    for (var i = lid; i < p.V; i += WG) {
      if (logits[base + i] == mx) {
        first = min(first, i);
      }
    }
    let id = reduce_min_u(lid, first);
    if (lid == 0u) {
      ids[row] = id;
    }
    return;
  }

  let u = rand[row];
  if (p.filtered == 0u) {
    let total = sums_from(lid, 0u, 0u, ALL).mass;
    let id = walk_ids(lid, u * total);
    if (lid == 0u) {
      ids[row] = id;
    }
    return;
  }

  // the kept prefix, as its last element (kk, ii); starts as everything
  var kk = 0u;
  var ii = ALL;
  if (p.top_k != 0u) {
    // largest key with at least k elements at or above it, then the ties it may keep, by id
    var lo = 0u;
    var hi = max_k;
    while (lo < hi) {
      let d = hi - lo;
      let mid = lo + (d >> 1u) + (d & 1u);
      if (sums_from(lid, mid, 0u, ALL).count >= p.top_k) {
        lo = mid;
      } else {
        hi = mid - 1u;
      }
    }
    var above = 0u;
    if (lo < ALL) {
      above = sums_from(lid, lo + 1u, 0u, ALL).count;
    }
    ii = nth_with_key(lid, lo, p.top_k - above, 0u, ALL);
    kk = lo;
  }
  if (p.top_p < 1.0) {
    let goal = p.top_p * sums_from(lid, 0u, kk, ii).mass;
    let e = crossing(lid, goal, kk, ii, max_k);
    kk = e.x;
    ii = e.y;
  }
  if (p.min_p > 0.0) {
    // survivors p ≥ min_p are the keys down to the smallest surviving one (the top always survives)
    var smallest = max_k;
    for (var i = lid; i < p.V; i += WG) {
      let l = logits[base + i];
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
  let total = sums_from(lid, 0u, kk, ii).mass;
  let e = crossing(lid, u * total, kk, ii, max_k);
  if (lid == 0u) {
    ids[row] = e.y;
  }
}
