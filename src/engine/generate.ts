/**
 * Generation on the engine: prefill, then one decode step per token with the KV cache, streaming
 * each new id. Sampling (temperature, top-k, top-p, min-p; temperature 0 is greedy) follows
 * sample.ts and runs on the model's backend (`Ops.sample`: on the GPU only the id is read back);
 * its uniform comes from an explicit seeded Rng, one draw per sampled token.
 */
import { createRng, type Rng } from '../core/rng.ts';
import type { LlamaModel } from './model.ts';
import { argmax, checkSampleOptions, sampleTokenU, type SampleOptions } from './sample.ts';

export type { SampleOptions } from './sample.ts';

/** Pick the next id from one row of logits on the CPU. Temperature 0 → argmax (lowest id on ties), no draw. */
export function sampleToken(logits: Float32Array, o: SampleOptions, rng: Rng): number {
  return o.temperature > 0 ? sampleTokenU(logits, o, rng.next()) : argmax(logits);
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
  checkSampleOptions(o);
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
      // the host draws the uniform (none when greedy), the backend samples: on the GPU only the id comes back
      const [id] = await ops.sample(logits, o, [o.temperature > 0 ? rng.next() : 0]);
      ops.free(logits);
      ops.flush();
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
