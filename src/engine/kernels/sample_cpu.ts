/**
 * Token sampling on the CPU: temperature, top-k, top-p and min-p over one row of logits, given
 * one uniform u in [0, 1) from the caller's seeded Rng. Two implementations with identical
 * results:
 *
 * - `sampleTokenFullSort`: the reference, written for clarity; sorts the whole vocabulary.
 * - `sampleTokenU` (used by generation): the same arithmetic over only the candidates that can
 *   survive the filters, found with a histogram of −log₂ p, and sorted with a numeric typed-array
 *   sort instead of a comparator sort; no whole-vocabulary sort.
 *
 * Semantics (shared with the GPU kernel, kernels/sample.wgsl):
 *   temperature ≤ 0 → argmax (lowest id on ties); no uniform is used.
 *   p_i = exp((l_i − max l) / T) in f64, unnormalised.
 *   No filter active → walk the ids in index order: the first id where Σ p ≥ u · Σ p.
 *   Otherwise order ids by (p desc, id asc) and keep a prefix of that order:
 *     top-k (k ≥ 1; 0 or ≥ V = off): the first k;
 *     top-p (< 1): the shortest prefix of those whose mass reaches top_p × their total (at least 1);
 *     min-p (> 0): of those, the ones with p ≥ min_p × max p (= min_p, since max p = 1).
 *   Then walk the kept prefix in order: the first id where the running mass reaches u × its total.
 * (HF transformers' warper order: temperature, top-k, top-p, min-p.) With top-p alone this is
 * exactly the sampler the engine had before top-k and min-p existed, bit for bit.
 * A row holding NaN or ±Infinity has no distribution: every path throws NonFiniteLogitsError.
 */
import { NonFiniteLogitsError } from '../../core/errors.ts';

export interface SampleOptions {
  temperature: number;
  /** Nucleus mass (default 1 = off). */
  topP?: number;
  /** Keep the k most likely ids (default 0 = off). */
  topK?: number;
  /** Keep ids with p ≥ minP · max p (default 0 = off). */
  minP?: number;
}

/** Throws a RangeError naming the option that is out of range. */
export function checkSampleOptions(o: SampleOptions): void {
  if (Number.isNaN(o.temperature)) throw new RangeError('temperature must be a number ≥ 0 (0 = greedy)');
  if (o.topP !== undefined && !(o.topP >= 0 && o.topP <= 1))
    throw new RangeError(`top_p must be in [0, 1] (1 = off); got ${o.topP}`);
  if (o.minP !== undefined && !(o.minP >= 0 && o.minP <= 1))
    throw new RangeError(`min_p must be in [0, 1] (0 = off); got ${o.minP}`);
  if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 0))
    throw new RangeError(`top_k must be a whole number ≥ 0 (0 = off); got ${o.topK}`);
}

/** Whether any of top-k, top-p, min-p restricts the row (else the plain index-order walk). */
export function filtersActive(o: SampleOptions, vocab: number): boolean {
  const k = o.topK ?? 0;
  return (k >= 1 && k < vocab) || (o.topP ?? 1) < 1 || (o.minP ?? 0) > 0;
}

/** A NonFiniteLogitsError for the first NaN or ±Infinity in the row, if any. */
export function checkFiniteLogits(logits: Float32Array, row = 0): void {
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (v - v !== 0)
      throw new NonFiniteLogitsError(
        `The model produced a non-finite logit (${v} for token ${i}${row ? ` in row ${row}` : ''}), so no token can be sampled. ` +
          'Check the checkpoint (its weights may hold NaN/Inf or overflow this weight format: try --weights f32), ' +
          "the LoRA adapter's factors, and config.json's rope_scaling, rope_theta and rms_norm_eps.",
        { row, id: i, value: String(v) },
      );
  }
}

/** Lowest id of the largest logit; NonFiniteLogitsError when the row holds NaN or ±Infinity. */
export function argmax(logits: Float32Array): number {
  checkFiniteLogits(logits);
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

function unnormalised(logits: Float32Array, t: number): Float64Array {
  checkFiniteLogits(logits);
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const probs = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) probs[i] = Math.exp((logits[i]! - max) / t);
  return probs;
}

/** Plain walk in index order (no filter). */
function walkAll(probs: Float64Array, u: number): number {
  let sum = 0;
  for (let i = 0; i < probs.length; i++) sum += probs[i]!;
  let r = u * sum;
  for (let i = 0; i < probs.length; i++) {
    r -= probs[i]!;
    if (r <= 0) return i;
  }
  return probs.length - 1;
}

/** The reference: full sort by (p desc, id asc), then the filters and the walk as documented above. */
export function sampleTokenFullSort(logits: Float32Array, o: SampleOptions, u: number): number {
  if (!(o.temperature > 0)) return argmax(logits);
  const probs = unnormalised(logits, o.temperature);
  if (!filtersActive(o, logits.length)) return walkAll(probs, u);
  let order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]! || a - b);
  const k = o.topK ?? 0;
  let base = 0;
  if (k >= 1 && k < order.length) {
    order = order.slice(0, k);
    base = order.reduce((s, i) => s + probs[i]!, 0);
  } else for (let i = 0; i < probs.length; i++) base += probs[i]!;
  const topP = o.topP ?? 1;
  if (topP < 1) {
    let acc = 0;
    let keep = 0;
    while (keep < order.length && acc < topP * base) acc += probs[order[keep++]!]!;
    order = order.slice(0, Math.max(1, keep));
  }
  const minP = o.minP ?? 0;
  if (minP > 0) order = order.slice(0, Math.max(1, order.filter((i) => probs[i]! >= minP).length));
  const sum = order.reduce((s, i) => s + probs[i]!, 0);
  let r = u * sum;
  for (const i of order) {
    r -= probs[i]!;
    if (r <= 0) return i;
  }
  return order[order.length - 1]!;
}

/** Histogram bins per octave of p and octaves covered (p below 2^-64 shares the last bin). */
const BINS_PER_OCTAVE = 8;
const OCTAVES = 64;
const NBINS = BINS_PER_OCTAVE * OCTAVES;

/**
 * The fast path (same result as sampleTokenFullSort). The kept ids are always a prefix of the
 * (p desc, id asc) order, and every bound on that prefix (k, the top-p mass, min-p) can be read
 * off a histogram of −log₂ p: the candidates are the ids in the bins up to the one where the
 * bound is met (a prefix too, since bins are monotone in p). Only their values are sorted; the
 * walks below add exactly the values the reference adds, in the same order, and ties (equal p)
 * are resolved to ids in ascending order as the reference's comparator does.
 */
export function sampleTokenU(logits: Float32Array, o: SampleOptions, u: number): number {
  if (!(o.temperature > 0)) return argmax(logits);
  const probs = unnormalised(logits, o.temperature);
  const V = probs.length;
  if (!filtersActive(o, V)) return walkAll(probs, u);
  const k = o.topK ?? 0;
  const topK = k >= 1 && k < V ? k : 0;
  const topP = o.topP ?? 1;
  const minP = o.minP ?? 0;

  // total mass in index order (the reference's top-p base without top-k)
  let total = 0;
  for (let i = 0; i < V; i++) total += probs[i]!;

  // histogram: bin = floor(−log₂ p · BINS_PER_OCTAVE), from (max − l)/T without a log per id
  const bin = new Int32Array(V);
  const count = new Int32Array(NBINS);
  const mass = new Float64Array(NBINS);
  const scale = BINS_PER_OCTAVE / Math.LN2;
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  for (let i = 0; i < V; i++) {
    const z = ((max - logits[i]!) / o.temperature) * scale;
    const b = z < NBINS - 1 ? Math.floor(z) : NBINS - 1;
    bin[i] = b;
    count[b] = count[b]! + 1;
    mass[b] = mass[b]! + probs[i]!;
  }
  // last bin the kept prefix can reach; margins absorb the different summation order
  let last = NBINS - 1;
  let c = 0;
  let m = 0;
  for (let b = 0; b < NBINS; b++) {
    c += count[b]!;
    m += mass[b]!;
    if ((topK && c >= topK) || (!topK && topP < 1 && m >= topP * total * (1 + 1e-9) + 1e-300)) {
      last = b;
      break;
    }
  }
  if (minP > 0 && topP >= 1) {
    // p ≥ minP ⇔ −log₂ p ≤ −log₂ minP: bins past that one hold no survivor (the top id always
    // survives; +1 bin of margin for rounding). Not with top-p, whose base needs the whole top-k.
    const bMin = Math.max(0, Math.min(NBINS - 1, Math.floor(-Math.log2(minP) * BINS_PER_OCTAVE) + 1));
    last = Math.min(last, bMin);
  }
  let n = 0;
  for (let b = 0; b <= last; b++) n += count[b]!;
  const vals = new Float64Array(n);
  let j = 0;
  for (let i = 0; i < V; i++) if (bin[i]! <= last) vals[j++] = probs[i]!;
  vals.sort(); // ascending: read from the end for p desc
  const at = (pos: number) => vals[n - 1 - pos]!; // pos-th value in (p desc) order

  let len = n; // kept prefix length, in (p desc) positions
  let base = total;
  if (topK) {
    len = Math.min(topK, n);
    base = 0;
    for (let q = 0; q < len; q++) base += at(q);
  }
  if (topP < 1) {
    let acc = 0;
    let keep = 0;
    while (keep < len && acc < topP * base) acc += at(keep++);
    if (acc < topP * base && n < V && !topK) return sampleTokenFullSort(logits, o, u); // histogram margin too thin
    len = Math.max(1, keep);
  }
  if (minP > 0) {
    let keep = 0;
    while (keep < len && at(keep) >= minP) keep++;
    len = Math.max(1, keep);
  }
  let sum = 0;
  for (let q = 0; q < len; q++) sum += at(q);
  let r = u * sum;
  let pos = len - 1;
  for (let q = 0; q < len; q++) {
    r -= at(q);
    if (r <= 0) {
      pos = q;
      break;
    }
  }
  // position → id: the (pos − first position of its value)-th id with that p, in id order
  const v = at(pos);
  let first = pos;
  while (first > 0 && at(first - 1) === v) first--;
  let rank = pos - first;
  for (let i = 0; i < V; i++) if (probs[i] === v && rank-- === 0) return i;
  throw new Error('sampleTokenU: lost the sampled value (a bug)');
}
