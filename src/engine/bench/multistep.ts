/**
 * Multi-step decode benchmark for `spade bench engine` (`multiStepDecode`): generate() on one
 * prompt with one read-back per step (K = 1) against K steps per read-back, in the same run,
 * alternating, on a model with random weights. Reports per generated token the wall time and the
 * host time: the wall time less the time spent awaiting read-backs (Engine.read, which maps the
 * ids once the device has run the steps before it) — what the CPU spends recording, submitting
 * and synchronising. Greedy, no stop ids: both runs make `tokens` tokens.
 */
import { generate } from '../model/generate.ts';
import type { ModelConfig } from '../io/config.ts';
import { randomWeights } from './model.ts';
import { LlamaModel } from '../model/model.ts';
import { GpuOps } from '../ops/ops.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';

export interface MultiStepBench {
  k: number;
  /** Tokens timed per sequence. */
  tokens: number;
  /**
   * Host ms per generated token: the decode steps' wall time less the time spent awaiting
   * read-backs (Engine.read) — what the CPU spends recording, submitting and syncing.
   */
  hostMsPerTokenK1: number;
  hostMsPerTokenK: number;
  /** hostMsPerTokenK1 / hostMsPerTokenK */
  ratio: number;
  wallMsPerTokenK1: number;
  wallMsPerTokenK: number;
  /** Both runs produced the same tokens. */
  sameTokens: boolean;
}

/**
 * Times every read-back of `e` (Engine.read) into `waited` until `restore()`: host time is a
 * run's wall time less that wait.
 */
export function timeReadBacks(e: Engine): { waited: number; restore: () => void } {
  const read = e.read.bind(e);
  const timer = {
    waited: 0,
    restore: () => {
      e.read = read;
    },
  };
  e.read = async (t) => {
    const t0 = performance.now();
    try {
      return await read(t);
    } finally {
      timer.waited += performance.now() - t0;
    }
  };
  return timer;
}

export async function benchMultiStepDecode(
  e: Engine,
  cfg: ModelConfig,
  o: { k?: number; tokens?: number; reps?: number } = {},
): Promise<MultiStepBench> {
  const k = o.k ?? 8;
  const tokens = o.tokens ?? 16;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg));
  const reads = timeReadBacks(e);
  const prompt = [1, 2, 3, 4];
  const best = { 1: { host: Infinity, wall: Infinity }, [k]: { host: Infinity, wall: Infinity } };
  const outputs: Record<number, number[]> = {};
  try {
    for (const steps of [1, k]) await generate(model, prompt, { maxNew: 2, temperature: 0, stepsPerReadback: steps }); // warm-up
    for (let rep = 0; rep < (o.reps ?? 2); rep++)
      for (const steps of [1, k]) {
        reads.waited = 0;
        const t0 = performance.now();
        outputs[steps] = await generate(model, prompt, { maxNew: tokens, temperature: 0, stepsPerReadback: steps });
        const wall = performance.now() - t0;
        const b = best[steps]!;
        b.wall = Math.min(b.wall, wall / tokens);
        b.host = Math.min(b.host, (wall - reads.waited) / tokens);
      }
  } finally {
    reads.restore();
    model.dispose();
  }
  return {
    k,
    tokens,
    hostMsPerTokenK1: best[1]!.host,
    hostMsPerTokenK: best[k]!.host,
    ratio: best[1]!.host / best[k]!.host,
    wallMsPerTokenK1: best[1]!.wall,
    wallMsPerTokenK: best[k]!.wall,
    sameTokens: JSON.stringify(outputs[1]) === JSON.stringify(outputs[k]),
  };
}
