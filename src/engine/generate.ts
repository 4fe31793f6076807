/**
 * Sampling and generation on the engine: temperature and top-p with an explicit
 * seeded Rng (temperature 0 is greedy), prefill then one decode step per token
 * with the KV cache, streaming each new id.
 */
import { createRng, type Rng } from '../core/rng.ts';
import type { LlamaModel } from './model.ts';

export interface SampleOptions {
  temperature: number;
  topP?: number;
}

/** Pick the next id from one row of logits. Temperature 0 → argmax (lowest id on ties). */
export function sampleToken(logits: Float32Array, o: SampleOptions, rng: Rng): number {
  if (!(o.temperature > 0)) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
    return best;
  }
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const probs = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += probs[i] = Math.exp((logits[i]! - max) / o.temperature);
  const topP = o.topP ?? 1;
  let order: number[];
  if (topP < 1) {
    order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]! || a - b);
    let acc = 0;
    let keep = 0;
    while (keep < order.length && acc < topP * sum) acc += probs[order[keep++]!]!;
    order = order.slice(0, Math.max(1, keep));
    sum = order.reduce((s, i) => s + probs[i]!, 0);
  } else order = Array.from(probs.keys());
  let r = rng.next() * sum;
  for (const i of order) {
    r -= probs[i]!;
    if (r <= 0) return i;
  }
  return order[order.length - 1]!;
}

export interface GenerateOptions extends SampleOptions {
  maxNew: number;
  seed?: number;
  /** Stop (after emitting) when one of these ids is produced. */
  stopIds?: number[];
  /** Recompute the whole sequence every step instead of using the KV cache (for tests). */
  noCache?: boolean;
  onToken?: (id: number) => void;
  signal?: AbortSignal;
}

export async function generate<X>(model: LlamaModel<X>, prompt: number[], o: GenerateOptions): Promise<number[]> {
  if (prompt.length === 0) throw new RangeError('generate: the prompt has no tokens');
  const rng = createRng(o.seed ?? 0);
  const ops = model.ops;
  const out: number[] = [];
  const cache = o.noCache ? undefined : model.newCache();
  let next = prompt;
  try {
    for (let step = 0; step < o.maxNew; step++) {
      if (o.signal?.aborted) break;
      const input = o.noCache ? [...prompt, ...out] : next;
      const { logits } = model.forward(input, { cache, lastOnly: true });
      const row = await ops.read(logits);
      ops.free(logits);
      ops.flush();
      const id = sampleToken(row, o, rng);
      out.push(id);
      o.onToken?.(id);
      if (o.stopIds?.includes(id)) break;
      next = [id];
    }
  } finally {
    if (cache) {
      model.freeCache(cache);
      ops.flush();
    }
  }
  return out;
}
