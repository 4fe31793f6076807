/**
 * Generation on the engine: prefill, then one decode step per token with the KV cache, streaming
 * each new id (or, with `stepsPerReadback` K > 1, K steps per read-back, the ids staying on the
 * device in between). Sampling (temperature, top-k, top-p, min-p; temperature 0 is greedy) follows
 * sample.ts and runs on the model's backend (`Ops.sample`: on the GPU only the id is read back);
 * its uniform comes from an explicit seeded Rng, one draw per sampled token.
 * Optional, for training: `logitBias` (V,) is added to every row before sampling (a
 * vocabulary constraint of the policy: −1e9 on disallowed ids), and `logprobs` collects log π(id)
 * of each sampled id under log_softmax((logits + bias) / T) (T = 1 when greedy), before the
 * top-k/top-p/min-p filters — computed on the device from the logits already there and read back
 * once at the end (no extra forward, no extra sync per token).
 */
import { createRng, type Rng } from '../../core/rng.ts';
import type { LlamaModel } from './model.ts';
import { argmax, checkSampleOptions, sampleTokenU, type SampleOptions } from '../kernels/sample_cpu.ts';

export type { SampleOptions } from '../kernels/sample_cpu.ts';

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
  /** Added to each row of logits before sampling (V,): 0 for allowed ids, −1e9 for the rest. */
  logitBias?: Float32Array;
  /** Filled with log π_old of each sampled id (see the header); one entry per id returned. */
  logprobs?: number[];
  /**
   * Decode steps recorded and submitted together before one read-back of their ids (default 1).
   * Each step's sampled id stays on the backend as the next step's embedding input; stop ids and
   * maxNew are applied on read-back, ids sampled past a stop are discarded. The same ids for every
   * value. With noCache or logprobs (which need every id on the host), and on the CPU backend,
   * steps go one at a time.
   */
  stepsPerReadback?: number;
}

const ONE = new Float32Array([1]);

export async function generate<X>(model: LlamaModel<X>, prompt: number[], o: GenerateOptions): Promise<number[]> {
  if (prompt.length === 0) throw new RangeError('generate: the prompt has no tokens');
  checkSampleOptions(o);
  const rng = createRng(o.seed ?? 0);
  const ops = model.ops;
  const out: number[] = [];
  const cache = o.noCache ? undefined : model.newCache();
  let next = prompt;
  const bias = o.logitBias ? ops.upload([o.logitBias.length], o.logitBias) : undefined;
  let lpStore: X | undefined; // (steps,) log-probs of the sampled ids, read once at the end
  // the CPU backend reads nothing back: one step at a time there
  const perReadback =
    o.noCache || o.logprobs || ops.device === 'cpu' ? 1 : Math.max(1, Math.floor(o.stepsPerReadback ?? 1));
  const biased = (logits: X) => {
    if (!bias) return logits;
    const b = ops.addBias(logits, bias);
    ops.free(logits);
    return b;
  };
  try {
    // several steps per read-back: ids stay on the backend; the block's first step takes `next` from the host
    while (perReadback > 1 && out.length < o.maxNew && !o.signal?.aborted) {
      const n = Math.min(perReadback, o.maxNew - out.length);
      const rand = ops.upload(
        [n],
        Float32Array.from({ length: n }, () => (o.temperature > 0 ? rng.next() : 0)),
      );
      const ids = ops.idTensor(n);
      for (let j = 0; j < n; j++) {
        const input = j === 0 ? next : { tensor: ids, offset: j - 1, count: 1 };
        const logits = biased(model.forward(input, { cache, lastOnly: true }).logits);
        ops.sampleInto(logits, o, rand, j, ids, j);
        ops.free(logits);
      }
      const got = await ops.readIdTensor(ids); // one submission of the K steps, one read-back
      ops.free(rand, ids);
      const stop = got.findIndex((id) => o.stopIds?.includes(id));
      for (const id of stop < 0 ? got : got.slice(0, stop + 1)) {
        out.push(id);
        o.onToken?.(id);
      }
      if (stop >= 0) return out;
      next = [got[n - 1]!];
    }
    for (let step = 0; perReadback === 1 && step < o.maxNew; step++) {
      if (o.signal?.aborted) break;
      const input = o.noCache ? [...prompt, ...out] : next;
      const logits = biased(model.forward(input, { cache, lastOnly: true }).logits);
      // the host draws the uniform (none when greedy), the backend samples: on the GPU only the id comes back
      const id = (await ops.sample(logits, o, [o.temperature > 0 ? rng.next() : 0]))[0]!;
      if (o.logprobs) {
        const z = o.temperature > 0 && o.temperature !== 1 ? ops.scale(logits, 1 / o.temperature) : logits;
        const r = ops.nll(z, [id], ONE);
        lpStore = ops.appendRows(lpStore, step, r.logprobs);
        ops.free(r.loss, r.logprobs, r.lse);
        if (z !== logits) ops.free(z);
      }
      ops.free(logits);
      ops.flush();
      out.push(id);
      o.onToken?.(id);
      if (o.stopIds?.includes(id)) break;
      next = [id];
    }
    if (o.logprobs && lpStore) {
      ops.flush();
      const lp = await ops.read(lpStore);
      for (let i = 0; i < out.length; i++) o.logprobs.push(lp[i]!);
    }
  } finally {
    if (cache) model.freeCache(cache);
    if (bias) ops.free(bias);
    if (lpStore) ops.free(lpStore);
    ops.flush();
  }
  return out;
}
