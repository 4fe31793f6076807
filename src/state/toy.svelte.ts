/**
 * The toy learning demo, as a rune class: the first screen's "no download" start. One click makes a
 * tiny fresh model in a worker (workers/toy.worker.ts: `spade train toy`'s toyTrain on the CPU
 * references), which plays "Lucky Digit" and is trained by GRPO on its own plays, update by update;
 * the page shows the phase, the updates done, the elapsed time and an estimate of the time left, the
 * return curve, and at the end a one-line verdict read from that curve (core/train/toy_verdict.ts).
 * Cancel terminates the worker at once; the verdict then judges the updates that finished.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import { serializeError } from '../core/errors.ts';
import { toyVerdict, type ToyVerdict } from '../core/train/toy_verdict.ts';
import type { ToyUpdate } from '../engine/engine_api.ts';
import type { ToyWorkerApi } from '../../workers/toy.worker.ts';

/** As `spade train toy`: seed 1, 8 updates of 2 groups × 8 plays. */
const TOY_SEED = 1;
export const TOY_UPDATES = 8;
export const TOY_PLAYS = 16;

export type ToyStatus = 'idle' | 'running' | 'done' | 'cancelled' | 'error';

/**
 * Seconds left: the updates still to run times the wall time of a recent update — the median of the
 * last (up to) three gaps between updates' arrivals, `arrivals` being the seconds since start at
 * which each update arrived. Later updates are faster than the first (it also makes the model and
 * warms up; a group whose plays all won is not trained), so a mean over all of them ran about twice
 * too high. With one update done, its own arrival time; null before.
 */
export function toySecondsLeft(arrivals: number[], updates: number): number | null {
  if (!arrivals.length) return null;
  const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
  const recent = gaps.slice(-3).sort((a, b) => a - b);
  const perUpdate = recent.length ? recent[Math.floor(recent.length / 2)]! : arrivals[0]!;
  return perUpdate * Math.max(0, updates - arrivals.length);
}

export class ToyDemoState {
  status = $state<ToyStatus>('idle');
  curve = $state<ToyUpdate[]>([]);
  verdict = $state<ToyVerdict | null>(null);
  error = $state<string | null>(null);
  /** Seconds since start, ticking while it runs (so the status never sits still). */
  elapsed = $state(0);
  /** Seconds since start at which each update arrived (the page's clock, as the elapsed time shown). */
  private arrivals = $state<number[]>([]);
  secondsLeft = $derived(toySecondsLeft(this.arrivals, TOY_UPDATES));
  private worker: Worker | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private t0 = 0;

  /** What is happening now, in words. */
  phase = $derived(
    this.status !== 'running'
      ? ''
      : this.curve.length === 0
        ? `making a tiny fresh model (2 layers, hidden 32) and playing update 1 of ${TOY_UPDATES}`
        : `update ${this.curve.length + 1} of ${TOY_UPDATES}: ${TOY_PLAYS} plays, then a GRPO step`,
  );

  /** Start a fresh run (a running one is stopped first). */
  async start(): Promise<void> {
    this.stopWorker();
    this.curve = [];
    this.arrivals = [];
    this.verdict = null;
    this.error = null;
    this.status = 'running';
    this.t0 = performance.now();
    this.elapsed = 0;
    this.timer = setInterval(() => (this.elapsed = (performance.now() - this.t0) / 1000), 500);
    const worker = new Worker(new URL('../../workers/toy.worker.ts', import.meta.url), {
      type: 'module',
      name: 'spade-toy',
    });
    this.worker = worker;
    // a worker that fails to start never answers: say so instead of spinning
    worker.addEventListener('error', (e) => {
      if (this.worker !== worker) return;
      this.fail(`The demo's worker failed: ${e.message || 'it could not start'}. Reload the page to try again.`);
    });
    const api = Comlink.wrap<ToyWorkerApi>(worker);
    const onUpdate = Comlink.proxy((u: ToyUpdate) => {
      if (this.worker !== worker) return;
      this.curve = [...this.curve, u];
      this.arrivals = [...this.arrivals, (performance.now() - this.t0) / 1000];
    });
    try {
      await api.run({ seed: TOY_SEED, updates: TOY_UPDATES }, onUpdate);
      if (this.worker !== worker) return; // cancelled or restarted meanwhile
      // the verdict's time is the time the person waited (worker start-up included), as the elapsed time shown
      this.finish('done', (performance.now() - this.t0) / 1000, true);
    } catch (err) {
      if (this.worker === worker) this.fail(serializeError(err).message);
    }
  }

  /** Stop now; the verdict judges the updates that finished. */
  cancel(): void {
    if (this.status !== 'running') return;
    this.finish('cancelled', (performance.now() - this.t0) / 1000, false);
  }

  private finish(status: ToyStatus, seconds: number, complete: boolean) {
    this.stopWorker();
    this.elapsed = seconds;
    this.status = status;
    this.verdict = toyVerdict(this.curve, seconds, complete);
  }

  private fail(message: string) {
    this.stopWorker();
    this.status = 'error';
    this.error = message;
    this.verdict = { learned: false, text: `It did not run: ${message}` };
  }

  private stopWorker() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.worker?.terminate();
    this.worker = null;
  }
}
