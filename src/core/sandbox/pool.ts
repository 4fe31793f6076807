/**
 * A pool of sandbox workers with a kill switch. Calls are routed to the worker
 * that holds the environment (loads go to the least busy one). Each call races a
 * watchdog of its own limit plus a grace period: a worker that does not answer in
 * time (a GC-thrashing allocation, a crashed worker) is terminated and replaced,
 * and the caller gets a typed error. Other environments on other workers are
 * untouched; those on the replaced worker must be loaded again.
 * Pure: the factory that makes workers comes from the platform (browser or Node).
 */
import { SandboxTimeoutError, WorkerCrashedError } from '../errors.ts';
import type { CheckOptions, CheckReport, EnvRunner } from '../env/checker.ts';
import type { LoadedEnv, ResetResult, StepResult } from '../env/contract.ts';
import { DEFAULT_LIMITS, type SandboxLimits } from './limits.ts';
import type { SandboxWorkerApi } from './worker_api.ts';

type Promised<T> = {
  [K in keyof T]: T[K] extends (...a: infer A) => infer R ? (...a: A) => Promise<Awaited<R>> : never;
};

export interface WorkerHandle {
  api: Promised<SandboxWorkerApi>;
  terminate(): unknown;
}

interface Slot {
  handle: WorkerHandle;
  /** Resolves once the worker answers a ping (its QuickJS module is compiled); rejects if it never does. */
  ready: Promise<void>;
  generation: number;
  /** Calls in flight. */
  busy: number;
  /** Environments loaded and not yet disposed. */
  live: number;
}

interface PoolEnv {
  slot: number;
  generation: number;
  inner: string;
  limits: SandboxLimits;
}

export interface PoolOptions {
  size?: number;
  /** Extra time beyond a call's own limit before the worker is killed. */
  graceMs?: number;
  /** Watchdog for a whole checker run. */
  checkMs?: number;
  /** How long a new worker may take to start (load and compile QuickJS) before it counts as crashed. */
  startMs?: number;
}

export class SandboxPool implements EnvRunner {
  private readonly slots: Slot[];
  private readonly envs = new Map<string, PoolEnv>();
  private nextId = 1;
  readonly graceMs: number;
  readonly checkMs: number;
  readonly startMs: number;
  /** Workers terminated by the watchdog since the pool started. */
  kills = 0;

  constructor(
    private readonly factory: () => WorkerHandle,
    opts: PoolOptions = {},
  ) {
    this.graceMs = opts.graceMs ?? 1500;
    this.checkMs = opts.checkMs ?? 60_000;
    this.startMs = opts.startMs ?? 60_000;
    this.slots = Array.from({ length: Math.max(1, opts.size ?? 1) }, () => {
      const handle = factory();
      return { handle, ready: this.started(handle), generation: 0, busy: 0, live: 0 };
    });
  }

  /** Resolves when a new worker answers a ping: start-up is not charged to the first call's time limit. */
  private started(handle: WorkerHandle): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ready = Promise.race([
      handle.api.ping().then(() => undefined),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new WorkerCrashedError(
                `The sandbox worker did not start within ${this.startMs / 1000} s. Reload the page.`,
              ),
            ),
          this.startMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    ready.catch(() => undefined); // reported to the first caller, not as an unhandled rejection
    return ready;
  }

  get size(): number {
    return this.slots.length;
  }

  async load(code: string, maxTurns?: number, limits: SandboxLimits = DEFAULT_LIMITS): Promise<LoadedEnv> {
    const slot = this.leastBusy();
    const generation = this.slots[slot]!.generation;
    const info = await this.guard(
      slot,
      (api) => api.load(code, maxTurns, limits),
      limits.loadMs,
      'loading the environment',
    );
    const id = `p${this.nextId++}`;
    this.envs.set(id, { slot, generation, inner: info.id, limits });
    if (this.slots[slot]!.generation === generation) this.slots[slot]!.live++;
    return { ...info, id };
  }

  async reset(id: string, seed: number): Promise<ResetResult> {
    const e = this.env(id);
    return this.guard(e.slot, (api) => api.reset(e.inner, seed), e.limits.resetMs, 'reset()');
  }

  async step(id: string, action: string): Promise<StepResult> {
    const e = this.env(id);
    return this.guard(e.slot, (api) => api.step(e.inner, action), e.limits.stepMs, 'step()');
  }

  async solution(id: string): Promise<string[]> {
    const e = this.env(id);
    return this.guard(e.slot, (api) => api.solution(e.inner), e.limits.resetMs, 'solution()');
  }

  async dispose(id: string): Promise<void> {
    const e = this.envs.get(id);
    if (!e) return;
    this.envs.delete(id);
    if (this.slots[e.slot]!.generation !== e.generation) return;
    this.slots[e.slot]!.live--;
    await this.guard(e.slot, (api) => api.dispose(e.inner), e.limits.stepMs, 'close()');
  }

  /** Run the full checker inside a worker (one message). */
  async check(code: string, opts: CheckOptions = {}): Promise<CheckReport> {
    return this.guard(this.leastBusy(), (api) => api.check(code, opts), this.checkMs, 'the checker');
  }

  async terminate(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.handle.terminate()));
    this.envs.clear();
  }

  // --- internals ----------------------------------------------------------------------------

  private env(id: string): PoolEnv {
    const e = this.envs.get(id);
    if (!e) throw new WorkerCrashedError(`No live environment "${id}" in the sandbox pool; load it again.`);
    if (this.slots[e.slot]!.generation !== e.generation) {
      this.envs.delete(id);
      throw new WorkerCrashedError(`Environment "${id}" was lost when its sandbox worker was replaced; load it again.`);
    }
    return e;
  }

  /** The slot with the fewest calls in flight, then the fewest live environments. */
  private leastBusy(): number {
    const load = (s: Slot) => s.busy * 1e6 + s.live;
    let best = 0;
    for (let i = 1; i < this.slots.length; i++) if (load(this.slots[i]!) < load(this.slots[best]!)) best = i;
    return best;
  }

  private async guard<T>(
    slotIndex: number,
    call: (api: WorkerHandle['api']) => Promise<T>,
    limitMs: number,
    what: string,
  ): Promise<T> {
    const slot = this.slots[slotIndex]!;
    try {
      await slot.ready;
    } catch (err) {
      // a worker that never started is replaced, so later calls do not keep landing on it
      this.replace(slotIndex, slot.generation);
      throw err;
    }
    const generation = slot.generation;
    const budget = limitMs + this.graceMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.replace(slotIndex, generation);
        reject(
          new SandboxTimeoutError(
            `${what} did not return within ${budget} ms, so its sandbox worker was stopped and replaced. ` +
              'Look for endless loops or allocations that keep growing.',
            { limitMs, budgetMs: budget },
          ),
        );
      }, budget);
    });
    slot.busy++;
    try {
      return await Promise.race([call(slot.handle.api), watchdog]);
    } finally {
      clearTimeout(timer);
      if (slot.generation === generation) slot.busy--;
    }
  }

  private replace(slotIndex: number, generation: number): void {
    const slot = this.slots[slotIndex]!;
    if (slot.generation !== generation) return; // already replaced
    this.kills++;
    const old = slot.handle;
    slot.handle = this.factory();
    slot.ready = this.started(slot.handle);
    slot.generation++;
    slot.busy = 0;
    slot.live = 0;
    try {
      void Promise.resolve(old.terminate()).catch(() => undefined);
    } catch {
      /* a dead worker may throw on terminate */
    }
  }
}
