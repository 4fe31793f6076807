/**
 * The toy learning demo's worker (the first screen's "no download" start): engine/tiny/toy_train.ts's
 * toyTrain — the `spade train toy` proof — off the page, on the engine's CPU references (CpuOps, as
 * the CLI runs it by default) and the in-process QuickJS sandbox. A tiny fresh model is made from the
 * seed on the spot, plays "Lucky Digit" 16 times per update and is trained by GRPO on its own plays;
 * each update's row streams to the page through a comlink proxy callback, so the same seed prints the
 * CLI's numbers. To stop a run, the page terminates this worker.
 * Created by `new Worker(new URL('../../workers/toy.worker.ts', import.meta.url), { type: 'module' })`.
 */
import { toyTrain, type ToyUpdate } from '../src/engine/engine_api.ts';
import { exposeApi } from '../src/platform/rpc.ts';

export interface ToyRunOptions {
  seed: number;
  updates: number;
}

export interface ToyWorkerApi {
  /** Train the toy for `updates` updates; `onUpdate` gets each update's row as it ends. */
  run(o: ToyRunOptions, onUpdate: (u: ToyUpdate) => void): Promise<{ updates: number; seconds: number }>;
}

const api: ToyWorkerApi = {
  async run(o, onUpdate) {
    const r = await toyTrain({
      seed: o.seed,
      updates: o.updates,
      onUpdate: (u) => void Promise.resolve(onUpdate(u)).catch(() => undefined),
    });
    return { updates: r.updates, seconds: r.seconds };
  },
};

exposeApi(api);
