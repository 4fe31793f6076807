// sample_totals: a row's max, mass and non-finite flag from the per-chunk partials of
// sample_stats, for the kernels that bind `part` (they include this; it includes sample_common).

// #include "sample_common.wgsl"

struct Totals {
  m: f32,    // the row's largest logit
  z: f32,    // Σ exp((l − m) / T) over the row
  bad: u32,  // 1: the row holds NaN or ±Infinity
}

/** The row's max, mass and non-finite flag from its chunk partials (the same order in every kernel). */
fn row_totals(lid: u32, row: u32) -> Totals {
  var m = -3.0e38;
  var bad = 0u;
  for (var c = lid; c < p.NC; c += WG) {
    let o = (row * p.NC + c) * 4u;
    m = max(m, bitcast<f32>(part[o]));
    bad |= part[o + 2u];
  }
  let mx = reduce_max_f(lid, m);
  var z = 0.0;
  for (var c = lid; c < p.NC; c += WG) {
    let o = (row * p.NC + c) * 4u;
    z += bitcast<f32>(part[o + 1u]) * exp((bitcast<f32>(part[o]) - mx) * p.inv_t);
  }
  let zs = reduce_sum_f(lid, z);
  let b = reduce_min_u(lid, 1u - bad); // 0 when any chunk is bad
  return Totals(mx, zs, 1u - b);
}
