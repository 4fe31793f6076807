/**
 * Sampling benchmarks for `spade bench engine`: milliseconds per token for top-p sampling of one
 * row at Qwen2.5's 151,936-token vocabulary, three ways — the full-sort CPU reference (what the
 * engine did before), the CPU path without a full sort, and the GPU kernel (one dispatch, one id
 * read back; the logits already on the GPU, as after a decode step).
 * The logits are bell-shaped random values in ±15 (sums of three uniforms), sampled at the role
 * presets' temperature 0.6 and top_p 0.95 (src/core/llm/chat_model.ts).
 */
import { createRng } from '../../core/rng.ts';
import { readIds, sample } from '../kernels/sample.ts';
import type { Engine } from '../runtime/runtime.ts';
import { sampleTokenFullSort, sampleTokenU, type SampleOptions } from '../kernels/sample_cpu.ts';

const QWEN_VOCAB = 151_936;

export interface SamplingBench {
  vocab: number;
  options: SampleOptions;
  cpuFullSortMs: number;
  cpuMs: number;
  gpuMs: number;
}

function logitsRow(v: number, seed: number): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: v }, () => (rng.next() + rng.next() + rng.next() - 1.5) * 10);
}

/** Mean ms per call of `fn` over `reps` calls after one warm-up. */
async function perCall(reps: number, fn: (i: number) => unknown): Promise<number> {
  await fn(-1);
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) await fn(i);
  return (performance.now() - t0) / reps;
}

export async function benchSampling(e: Engine, reps = 10, v = QWEN_VOCAB): Promise<SamplingBench> {
  const options: SampleOptions = { temperature: 0.6, topP: 0.95 };
  const row = logitsRow(v, 11);
  const rng = createRng(12);
  const us = Array.from({ length: reps + 1 }, () => Math.fround(rng.next()));
  const cpuFullSortMs = await perCall(Math.max(1, Math.ceil(reps / 4)), (i) =>
    sampleTokenFullSort(row, options, us[i + 1]!),
  );
  const cpuMs = await perCall(reps, (i) => sampleTokenU(row, options, us[i + 1]!));
  const t = e.tensor([1, v], row);
  const gpuMs = await perCall(reps, (i) => readIds(e, sample(e, t, options, [us[i + 1]!])));
  e.release(t);
  e.flush();
  return { vocab: v, options, cpuFullSortMs, cpuMs, gpuMs };
}
