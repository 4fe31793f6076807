// sample_common: declarations shared by the sampler's kernels (sample_stats, sample_select,
// sample_compact, sample), which include it (directly or through sample_totals.wgsl).
// Each kernel declares its own bindings; the functions here read the uniform block `p` by name.
// Constants (overrides): WG = workgroup size (power of two), CHUNK = logits per chunk (a
// multiple of WG), NB = histogram bins (BPO per octave of p; the last bin holds the rest).
//
// Histogram bins live on an absolute grid, g(l) = floor(l / T · BPO / ln 2), so that chunks binned
// against their own max agree: an id's bin relative to the row max M is g(M) − g(l), an integer,
// and p = exp((l − M) / T) lies in (2^(−(d + 1) / BPO), 2^(−(d − 1) / BPO)) for relative bin d.

override WG: u32 = 256u;
override CHUNK: u32 = 1024u;
override NB: u32 = 512u;

/** Histogram bins per octave of p = exp((l − max) / T). */
const BPO: f32 = 8.0;
const ALL: u32 = 0xffffffffu;
/** The id written for a row holding NaN or ±Infinity (sample.ts turns it into NonFiniteLogitsError). */
const NON_FINITE: u32 = 0xffffffffu;

struct Params {
  V: u32,
  B: u32,
  top_k: u32,    // 0 = off (the host turns k ≥ V into 0)
  greedy: u32,   // 1: argmax
  inv_t: f32,    // 1 / temperature
  top_p: f32,    // 1 = off
  min_p: f32,    // 0 = off
  filtered: u32, // any of top-k, top-p, min-p active (else the id-order walk)
  NC: u32,       // chunks per row = ceil(V / CHUNK)
  CAP: u32,      // candidates kept per row (more: the final kernel scans the whole row)
  rand_off: u32, // first uniform of this call in `rand`
  out_off: u32,  // first id of this call in `ids`
}

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;

/** Order-keeping map of an f32 to u32: a > b ⇔ key(a) > key(b) (for non-NaN values). */
fn key_of(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn logit_of(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

/** NaN or ±Infinity: the exponent bits all set. */
fn non_finite(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}

/**
 * Absolute histogram grid of logit l: floor(l / T · BPO / ln 2), clamped to ±2^29 before the
 * conversion, so that a logit pushed to −1e9 by a logit bias neither overflows i32 nor makes a
 * difference of two grids wrap (any grid more than NB below the max lands in the last bin anyway).
 */
fn grid_of(l: f32) -> i32 {
  return i32(clamp(floor(l * p.inv_t * (BPO / log(2.0))), -536870912.0, 536870912.0));
}

fn reduce_max_f(lid: u32, x: f32) -> f32 {
  workgroupBarrier(); // earlier readers of red_f are done
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

fn reduce_sum_f(lid: u32, x: f32) -> f32 {
  workgroupBarrier();
  red_f[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      red_f[lid] += red_f[lid + s];
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red_f[0]);
}

fn reduce_sum_u(lid: u32, x: u32) -> u32 {
  workgroupBarrier();
  red_u[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      red_u[lid] += red_u[lid + s];
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red_u[0]);
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
