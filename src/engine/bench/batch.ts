/**
 * Batched decoding for `spade bench engine`: aggregate decode tokens/s of the
 * DecodeScheduler (batch.ts) at several batch sizes on one model, and the speed-up over batch 1,
 * all measured in one run. Prefill is taken out by difference: each batch size decodes n₁ and then
 * n₂ tokens per sequence from the same prompts, and only the extra n₂ − n₁ steps are timed.
 * benchBatchMultiStep: the scheduler's host time per generated token with one read-back per decode
 * step against K steps per read-back (stepsPerReadback), at one batch size, in the same run.
 * benchStepTemplate: the scheduler's host time per decode step with the engine's bind-group cache
 * off and on (Engine.bindGroupCache), alternating in the same run; benchStepRecording: the host time
 * of recording and submitting a step of as many dispatches as a Qwen2.5-0.5B decode step, off and on.
 */
import { createRng } from '../../core/rng.ts';
import type { ModelConfig } from '../io/config.ts';
import type { WeightFormat } from '../io/pack.ts';
import { addInPlace } from '../kernels/elementwise.ts';
import { DecodeScheduler } from '../model/batch.ts';
import { LlamaModel } from '../model/model.ts';
import { GpuOps } from '../ops/ops.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { randomWeights } from './model.ts';
import { timeReadBacks, type MultiStepBench } from './multistep.ts';

export interface BatchDecodeRow {
  batch: number;
  /** Generated tokens per second over all sequences of the batch (decode steps only). */
  tokensPerSec: number;
  /** tokensPerSec ÷ the batch-1 figure of the same run. */
  speedup: number;
}

export async function benchBatchDecode(
  e: Engine,
  cfg: ModelConfig,
  opts: { batches?: number[]; tokens?: number; weights?: WeightFormat; promptLen?: number } = {},
): Promise<BatchDecodeRow[]> {
  const batches = opts.batches ?? [1, 8, 16];
  const tokens = opts.tokens ?? 16;
  const promptLen = opts.promptLen ?? 16;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg), { weights: opts.weights ?? 'f32' });
  const rng = createRng(3);
  const prompts = Array.from({ length: Math.max(...batches) }, () =>
    Array.from({ length: promptLen }, () => rng.int(cfg.vocabSize)),
  );
  const rows: BatchDecodeRow[] = [];
  try {
    for (const batch of batches) {
      const scheduler = new DecodeScheduler(model, { maxBatch: batch });
      // sampled like the loop's roles (temperature 0.6, top_p 0.95), no stop ids: every row decodes `maxNew`
      const run = async (maxNew: number) => {
        const t0 = performance.now();
        await Promise.all(
          prompts
            .slice(0, batch)
            .map((p, i) => scheduler.generate(p, { maxNew, temperature: 0.6, topP: 0.95, seed: i })),
        );
        return performance.now() - t0;
      };
      await run(2); // warm-up: pipelines, pools
      const short = await run(2);
      const long = await run(2 + tokens);
      const tokensPerSec = (batch * tokens) / (Math.max(1e-3, long - short) / 1000);
      rows.push({ batch, tokensPerSec, speedup: 0 });
    }
  } finally {
    model.dispose();
    e.flush();
    e.trim();
  }
  const base = rows.find((r) => r.batch === 1)?.tokensPerSec ?? rows[0]!.tokensPerSec;
  for (const r of rows) r.speedup = r.tokensPerSec / base;
  return rows;
}

/** benchMultiStepDecode's figures for the scheduler at `batch` sequences. */
interface BatchMultiStepBench extends MultiStepBench {
  batch: number;
}

/**
 * DecodeScheduler at `batch` sequences (sampled as the loop's roles: temperature 0.6, top_p 0.95,
 * no stop ids), one read-back per step (K = 1) against `k` steps per read-back, alternating; the
 * prefill is taken out by difference (2 and 2 + tokens tokens per sequence), best of `reps`.
 * @public (knip: called from a script for docs/benchmarks.md's multi-step figures, not by `spade bench`)
 */
export async function benchBatchMultiStep(
  e: Engine,
  cfg: ModelConfig,
  opts: { batch?: number; k?: number; tokens?: number; promptLen?: number; reps?: number; weights?: WeightFormat } = {},
): Promise<BatchMultiStepBench> {
  const batch = opts.batch ?? 8;
  const k = opts.k ?? 8;
  const tokens = opts.tokens ?? 16;
  const promptLen = opts.promptLen ?? 16;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg), { weights: opts.weights ?? 'f32' });
  const rng = createRng(5);
  const prompts = Array.from({ length: batch }, () => Array.from({ length: promptLen }, () => rng.int(cfg.vocabSize)));
  const reads = timeReadBacks(e);
  const best = new Map([1, k].map((s) => [s, { host: Infinity, wall: Infinity }]));
  const outputs = new Map<number, string>();
  try {
    const run = async (steps: number, maxNew: number) => {
      const scheduler = new DecodeScheduler(model, { maxBatch: batch, stepsPerReadback: steps, prefixCacheTokens: 0 });
      reads.waited = 0;
      const t0 = performance.now();
      const out = await Promise.all(
        prompts.map((p, i) => scheduler.generate(p, { maxNew, temperature: 0.6, topP: 0.95, seed: i })),
      );
      const wall = performance.now() - t0;
      scheduler.dispose();
      return { wall, host: wall - reads.waited, out: JSON.stringify(out) };
    };
    for (const steps of [1, k]) await run(steps, 2 + Math.min(k, tokens)); // warm-up: pipelines, pools
    for (let rep = 0; rep < (opts.reps ?? 2); rep++)
      for (const steps of [1, k]) {
        const short = await run(steps, 2);
        const long = await run(steps, 2 + tokens);
        const b = best.get(steps)!;
        b.wall = Math.min(b.wall, (long.wall - short.wall) / (batch * tokens));
        b.host = Math.min(b.host, (long.host - short.host) / (batch * tokens));
        outputs.set(steps, long.out);
      }
  } finally {
    reads.restore();
    model.dispose();
    e.flush();
    e.trim();
  }
  const one = best.get(1)!;
  const many = best.get(k)!;
  return {
    batch,
    k,
    tokens,
    hostMsPerTokenK1: one.host,
    hostMsPerTokenK: many.host,
    ratio: one.host / many.host,
    wallMsPerTokenK1: one.wall,
    wallMsPerTokenK: many.wall,
    sameTokens: outputs.get(1) === outputs.get(k),
  };
}

/** Host time of a decode step with the engine's bind-group cache off and on (Engine.bindGroupCache), at one batch size. */
export interface StepTemplateBench {
  batch: number;
  /** Host ms per decode step (wall less read-back waits) creating every bind group. */
  hostMsPerStepOff: number;
  /** The same with bind groups reused from the cache. */
  hostMsPerStepOn: number;
  /** hostMsPerStepOff / hostMsPerStepOn */
  ratio: number;
  /** Share of the timed runs' dispatches (prefill included) whose bind group came from the cache (cache on). */
  hitRate: number;
  /** Both settings produced the same tokens. */
  sameTokens: boolean;
}

/**
 * DecodeScheduler at `batch` sequences (sampled as the loop's roles, no stop ids) with the engine's
 * bind-group cache off and on, alternating in the same run: host ms per decode step (a run's wall
 * time less its read-back waits, over its `tokens` steps; the prefill step's recording is included
 * in both settings, not taken out by a difference of two runs, which the software adapter's noise
 * could turn negative), best of `reps`. Leaves the cache as it found it.
 */
export async function benchStepTemplate(
  e: Engine,
  cfg: ModelConfig,
  opts: { batch?: number; tokens?: number; promptLen?: number; reps?: number } = {},
): Promise<StepTemplateBench> {
  const batch = opts.batch ?? 1;
  const tokens = opts.tokens ?? 8;
  const promptLen = opts.promptLen ?? 16;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg));
  const rng = createRng(7);
  const prompts = Array.from({ length: batch }, () => Array.from({ length: promptLen }, () => rng.int(cfg.vocabSize)));
  const reads = timeReadBacks(e);
  const cacheWas = e.bindGroupCache;
  const best = new Map([false, true].map((on) => [on, Infinity]));
  const outputs = new Map<boolean, string>();
  let hits = 0;
  let dispatches = 0;
  try {
    const run = async (maxNew: number) => {
      const scheduler = new DecodeScheduler(model, { maxBatch: batch, prefixCacheTokens: 0 });
      reads.waited = 0;
      const h0 = e.bindGroupHits;
      const d0 = e.dispatches;
      const t0 = performance.now();
      const out = await Promise.all(
        prompts.map((p, i) => scheduler.generate(p, { maxNew, temperature: 0.6, topP: 0.95, seed: i })),
      );
      const wall = performance.now() - t0;
      scheduler.dispose();
      return { host: wall - reads.waited, out: JSON.stringify(out), h: e.bindGroupHits - h0, d: e.dispatches - d0 };
    };
    for (const on of [false, true]) {
      e.bindGroupCache = on;
      await run(tokens); // warm-up: pipelines, pools, the cache
    }
    // the order swapped every repetition: the garbage of one setting's run is not always collected in the other's
    for (let rep = 0; rep < (opts.reps ?? 3); rep++)
      for (const on of rep % 2 ? [true, false] : [false, true]) {
        e.bindGroupCache = on;
        const r = await run(tokens);
        best.set(on, Math.min(best.get(on)!, r.host / tokens));
        outputs.set(on, r.out);
        if (on) {
          hits += r.h;
          dispatches += r.d;
        }
      }
  } finally {
    e.bindGroupCache = cacheWas;
    reads.restore();
    model.dispose();
    e.flush();
    e.trim();
  }
  const off = best.get(false)!;
  const on = best.get(true)!;
  return {
    batch,
    hostMsPerStepOff: off,
    hostMsPerStepOn: on,
    ratio: off / on,
    hitRate: dispatches > 0 ? hits / dispatches : 0,
    sameTokens: outputs.get(false) === outputs.get(true),
  };
}

/** Host ms to record and submit one step of `dispatches` dispatches with the bind-group cache off and on. */
export interface StepRecordingBench {
  dispatches: number;
  hostMsPerStepOff: number;
  hostMsPerStepOn: number;
  /** hostMsPerStepOff / hostMsPerStepOn */
  ratio: number;
}

/**
 * The recording side of a decode step alone: `dispatches` (default 196, a Qwen2.5-0.5B decode step)
 * in-place adds over a few 64-element tensors (each with its uniform block, as every kernel has),
 * recorded and submitted with the bind-group cache off and on, alternating (the order swapped every
 * repetition); the device's work is awaited outside the timed part, so on a software adapter the
 * figure is not the shared CPU's. Best of `reps`. Leaves the cache as it found it.
 */
export async function benchStepRecording(
  e: Engine,
  o: { dispatches?: number; reps?: number } = {},
): Promise<StepRecordingBench> {
  const dispatches = o.dispatches ?? 196;
  const ts = Array.from({ length: 8 }, () => e.tensor([64], new Float32Array(64)));
  const cacheWas = e.bindGroupCache;
  const best = new Map([false, true].map((on) => [on, Infinity]));
  try {
    const step = async (on: boolean) => {
      e.bindGroupCache = on;
      const t0 = performance.now();
      for (let i = 0; i < dispatches; i++) addInPlace(e, ts[i % 8]!, ts[(i + 1) % 8]!, 0.5);
      e.flush();
      const ms = performance.now() - t0;
      await e.read(ts[0]!);
      return ms;
    };
    for (const on of [false, true]) await step(on); // warm-up: pipelines, the cache
    for (let rep = 0; rep < (o.reps ?? 20); rep++)
      for (const on of rep % 2 ? [true, false] : [false, true]) best.set(on, Math.min(best.get(on)!, await step(on)));
  } finally {
    e.bindGroupCache = cacheWas;
    for (const t of ts) e.release(t);
    e.flush();
  }
  const off = best.get(false)!;
  const on = best.get(true)!;
  return { dispatches, hostMsPerStepOff: off, hostMsPerStepOn: on, ratio: off / on };
}
