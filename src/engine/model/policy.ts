/**
 * What "the policy" means for sampling and for training, in one place so that both use the same
 * distribution: π(· | context) = softmax((logits + bias) / T), where T is the sampling
 * temperature (1 when greedy) and `bias` is a vocabulary constraint — 0 on allowed ids, −1e9 on
 * the rest (−1e9 rather than −Infinity: exp underflows to exactly 0 and no kernel sees inf − inf).
 * The sampler's top-k/top-p/min-p truncation is not part of π (vLLM reports the same log-probs).
 */

/** Added to a disallowed id's logit. */
const MASKED_LOGIT = -1e9;

/** The additive logit bias (V,) that allows only `allowed` (undefined: no constraint). */
export function allowedTokenBias(vocab: number, allowed: readonly number[] | undefined): Float32Array | undefined {
  if (!allowed) return undefined;
  if (allowed.length === 0) throw new RangeError('allowedTokens is empty: list at least one token id');
  const bias = new Float32Array(vocab).fill(MASKED_LOGIT);
  for (const id of allowed) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new RangeError(`allowedTokens: ${id} is not a token id of this model (0 ≤ id < ${vocab})`);
    bias[id] = 0;
  }
  return bias;
}

/** The temperature that defines π for a call: T itself, or 1 for greedy decoding (T = 0). */
export function policyTemperature(t: number | undefined): number {
  return t !== undefined && t > 0 ? t : 1;
}
