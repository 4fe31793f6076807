/**
 * A pool of sandbox workers with a kill switch. Calls are routed to the worker that holds the
 * environment (loads go to the least busy worker whose memory budget has room for the new
 * environment's limit). Calls for one worker queue on the pool's side and go to it in batches —
 * several sessions' steps in one message — sent whenever the worker is down to its last call, so
 * it never waits for work; it runs them in order and replies to each as it finishes. A call's
 * watchdog (its own limit plus a grace period) counts from when the worker starts it: when its
 * batch is sent to an idle worker, else when the call before it answers. Time spent queued behind
 * a neighbour never counts against it. A worker that does not answer in time (a GC-thrashing
 * allocation, a long native loop, a crashed worker) is terminated and replaced, and the caller gets
 * a typed error. Environments on other workers are untouched; those on the replaced worker fail
 * with an error that names the cause. The checker runs here, call by call, so every one of its
 * calls has that watchdog too. A worker starts when the first load is routed to its slot, not
 * with the pool. Pure: the factory that makes workers comes from the platform.
 */
import {
  SandboxMemoryError,
  SandboxTimeoutError,
  SpadeError,
  WorkerCrashedError,
  deserializeError,
  serializeError,
  type SerializedError,
} from '../errors.ts';
import { checkEnv, type CheckOptions, type CheckReport, type EnvRunner } from '../env/checker.ts';
import type { LoadedEnv, ResetResult, StepResult } from '../env/contract.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES, type SandboxLimits } from '../env/limits.ts';
import type { CallBatch, SandboxCall, SandboxReply } from './worker_api.ts';

/** A call without its sequence number (the pool numbers them per worker). */
type Call = SandboxCall extends infer C ? (C extends SandboxCall ? Omit<C, 'seq'> : never) : never;

/**
 * Most calls in one message: at the 64 KiB action limit a batch stays under 4 MiB, and the
 * sessions one worker holds (48 at the default memory limit) fit in one batch.
 */
const BATCH_MAX = 64;

export interface WorkerHandle {
  /** Send calls; the worker runs them in order and answers each with a SandboxReply as it finishes. */
  post(batch: CallBatch): void;
  /** Set the listener for the worker's replies (once, before the first post). */
  onReplies(listener: (msg: SandboxReply) => void): void;
  terminate(): unknown;
  /** Calls `listener` once if the worker dies on its own (a crash, an error at start-up). */
  onDeath?(listener: (err: Error) => void): void;
}

/** A call queued for a worker or in flight on it. */
interface Pending {
  call: SandboxCall;
  /** Its limit plus the grace period: how long the worker may take once it starts it. */
  budgetMs: number;
  limitMs: number;
  what: string;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

interface Slot {
  /** No worker yet: it starts when the first load is routed to this slot (startSlot). */
  cold: boolean;
  handle: WorkerHandle;
  /** Resolves once the worker answers a ping (its QuickJS module is compiled); rejects if it never does. */
  ready: Promise<void>;
  isReady: boolean;
  /** The start-up timer, cleared when the ping settles, the worker dies, or the pool terminates. */
  startTimer: ReturnType<typeof setTimeout> | undefined;
  /** Rejects (with the cause) when this generation of the worker ends. */
  ended: Promise<never>;
  end: (err: Error) => void;
  generation: number;
  /** Calls not yet sent, and calls sent in order (the first is the one the worker is running). */
  queue: Pending[];
  inflight: Pending[];
  /** Calls routed here while the worker starts, waiting for it before they queue. */
  waiting: number;
  /** The start-up ping is queued or in flight (busy() does not count it as work); false once it answered or failed. */
  pinging: boolean;
  /** When (performance.now()) the worker started inflight[0]. */
  startedAt: number;
  /** The watchdog: one timer per worker, for the call it is running (it re-arms when it fires early). */
  watchdog: ReturnType<typeof setTimeout> | undefined;
  watchdogAt: number;
  flushQueued: boolean;
  nextSeq: number;
  /** Environments loaded and not yet disposed. */
  live: number;
  /** The memory limits of those environments, added up (a worker's budget is MODULE_BUDGET_BYTES). */
  reserved: number;
}

interface PoolEnv {
  slot: number;
  generation: number;
  inner: string;
  limits: SandboxLimits;
}

export interface PoolOptions {
  /** Workers at most; each starts when the first load is routed to its slot (a slot never used starts none). */
  size?: number;
  /** Extra time beyond a call's own limit before the worker is killed. */
  graceMs?: number;
  /** Budget for a whole checker run (each of its calls also has its own watchdog). */
  checkMs?: number;
  /** How long a new worker may take to start (load and compile QuickJS) before it counts as crashed. */
  startMs?: number;
}

/** An error after which the environment is gone: a watchdog kill, a crashed worker, a restarted module. */
function isSandboxLoss(err: unknown): err is SpadeError {
  if (err instanceof WorkerCrashedError) return true;
  if (!(err instanceof SpadeError)) return false;
  return err.data.killed === true || err.data.restarted === true || err.data.lost === true;
}

export class SandboxPool implements EnvRunner {
  private readonly slots: Slot[];
  private readonly envs = new Map<string, PoolEnv>();
  /** Why each slot's generations ended: causes[slot][generation]. */
  private readonly causes: string[][];
  private nextId = 1;
  private closed = false;
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
    // a good environment checks in well under a second; this bounds one that is slow on purpose
    this.checkMs = opts.checkMs ?? 20_000;
    this.startMs = opts.startMs ?? 60_000;
    const n = Math.max(1, opts.size ?? 1);
    this.causes = Array.from({ length: n }, () => []);
    // cold slots: a worker costs a thread, a QuickJS instance and its warm-up, so none starts before
    // a load needs it (a run of one environment on a pool of 4 starts one)
    this.slots = Array.from({ length: n }, coldSlot);
  }

  get size(): number {
    return this.slots.length;
  }

  /** No environment is loaded and no call is queued or in flight. */
  get idle(): boolean {
    return this.envs.size === 0 && this.slots.every((s) => busy(s) === 0);
  }

  /**
   * Load into the least busy worker with room for `limits.memoryBytes`; a worker that refuses
   * for lack of room (SandboxMemoryError, data.workerFull) passes the load to the next. When no
   * worker has room, the error says so.
   */
  async load(code: string, maxTurns?: number, limits: SandboxLimits = DEFAULT_LIMITS): Promise<LoadedEnv> {
    const tried = new Set<number>();
    for (;;) {
      // before a cold slot is started, on every pass (a full worker's refusal was awaited): a pool
      // that was shut down starts no worker
      if (this.closed) throw new WorkerCrashedError('The sandbox pool was shut down.');
      const slot = this.leastBusy(limits.memoryBytes, tried);
      const s = this.slots[slot]!;
      if (s.cold) this.startSlot(slot, 0);
      const generation = s.generation;
      // reserved from the moment the load is queued, so loads sent together spread out
      s.reserved += limits.memoryBytes;
      let info: LoadedEnv;
      try {
        info = await this.call<LoadedEnv>(
          slot,
          { op: 'load', code, maxTurns, limits },
          limits.loadMs,
          'loading the environment',
        );
      } catch (err) {
        if (s.generation === generation) s.reserved -= limits.memoryBytes;
        tried.add(slot);
        if (err instanceof SandboxMemoryError && err.data.workerFull === true && tried.size < this.slots.length)
          continue;
        throw err;
      }
      const id = `p${this.nextId++}`;
      this.envs.set(id, { slot, generation, inner: info.id, limits });
      if (s.generation === generation) s.live++;
      return { ...info, id };
    }
  }

  async reset(id: string, seed: number): Promise<ResetResult> {
    const e = this.env(id);
    return this.call(e.slot, { op: 'reset', id: e.inner, seed }, e.limits.resetMs, `reset() of ${id}`);
  }

  async step(id: string, action: string): Promise<StepResult> {
    const e = this.env(id);
    return this.call(e.slot, { op: 'step', id: e.inner, action }, e.limits.stepMs, `step() of ${id}`);
  }

  async solution(id: string): Promise<string[]> {
    const e = this.env(id);
    return this.call(e.slot, { op: 'solution', id: e.inner }, e.limits.resetMs, `solution() of ${id}`);
  }

  /**
   * Close and free an environment. A close() that throws, runs past its limit or needs the
   * watchdog rejects with that error, naming this environment (data.envId); it is never swallowed.
   */
  async dispose(id: string): Promise<void> {
    const e = this.envs.get(id);
    if (!e) return;
    this.envs.delete(id);
    const slot = this.slots[e.slot]!;
    if (this.closed || slot.generation !== e.generation) return;
    slot.live--;
    slot.reserved -= e.limits.memoryBytes;
    try {
      await this.call(e.slot, { op: 'dispose', id: e.inner }, e.limits.stepMs, `close() of ${id}`);
    } catch (err) {
      const s = serializeError(err);
      throw deserializeError({
        name: s.name,
        message: s.message.replace(`Environment ${e.inner}:`, `Environment ${id}:`),
        data: { ...s.data, envId: id, method: 'close' },
      });
    }
  }

  /**
   * Run the full checker, each call under its own watchdog, within `checkMs` in all.
   * Resolves with the report when the program was checked (pass or fail, including its own
   * time-outs, memory and runtime errors). Rejects with the error when the check could not
   * finish: a watchdog kill (SandboxTimeoutError, data.killed), the whole budget spent
   * (SandboxTimeoutError, data.killed), a crashed worker (WorkerCrashedError) or a restarted
   * QuickJS module (SandboxRuntimeError, data.restarted / data.lost). The error's data.report
   * holds the checks done so far.
   */
  async check(code: string, opts: CheckOptions = {}): Promise<CheckReport> {
    let fatal: SpadeError | null = null;
    const deadline = Date.now() + this.checkMs;
    const guarded =
      <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
      async (...a: A): Promise<R> => {
        if (fatal) throw fatal;
        if (Date.now() > deadline) {
          fatal = new SandboxTimeoutError(
            `The checker ran past its ${this.checkMs / 1000} s budget. Make reset() and step() fast: each should take milliseconds.`,
            { limitMs: this.checkMs, killed: true },
          );
          throw fatal;
        }
        try {
          return await fn(...a);
        } catch (err) {
          if (isSandboxLoss(err)) fatal ??= err;
          throw err;
        }
      };
    const runner: EnvRunner = {
      load: guarded((c: string, t?: number, l?: SandboxLimits) => this.load(c, t, l)),
      reset: guarded((id: string, seed: number) => this.reset(id, seed)),
      step: guarded((id: string, action: string) => this.step(id, action)),
      solution: guarded((id: string) => this.solution(id)),
      // a failed close() is the checker's to report; one that needed the watchdog also ends the check
      dispose: async (id: string) => {
        try {
          await this.dispose(id);
        } catch (err) {
          if (isSandboxLoss(err)) fatal ??= err;
          throw err;
        }
      },
    };
    const report = await checkEnv(runner, code, opts);
    if (fatal) {
      (fatal as SpadeError).data.report = JSON.parse(JSON.stringify(report)) as unknown;
      throw fatal;
    }
    return report;
  }

  /** Stop every worker and timer now; calls in flight reject with WorkerCrashedError. */
  async terminate(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const stopped = new WorkerCrashedError('The sandbox pool was shut down.');
    const waits: unknown[] = [];
    for (const slot of this.slots) {
      if (slot.cold) continue; // never started: no worker, no timer
      clearTimeout(slot.startTimer);
      clearTimeout(slot.watchdog);
      slot.end(stopped);
      failAll(slot, stopped);
      try {
        waits.push(Promise.resolve(slot.handle.terminate()).catch(() => undefined));
      } catch {
        /* a dead worker may throw on terminate */
      }
    }
    this.envs.clear();
    await Promise.all(waits);
  }

  // --- internals ----------------------------------------------------------------------------

  /** Start a worker in slot `index` as `generation`; its start-up timer and death listener included. */
  private startSlot(index: number, generation: number): void {
    const handle = this.factory();
    const slot = this.slots[index]!;
    slot.cold = false;
    slot.handle = handle;
    slot.generation = generation;
    slot.isReady = false;
    slot.queue = [];
    slot.inflight = [];
    slot.waiting = 0;
    slot.pinging = true;
    slot.startedAt = 0;
    slot.watchdog = undefined;
    slot.watchdogAt = Infinity;
    slot.flushQueued = false;
    slot.nextSeq = 1;
    slot.live = 0;
    slot.reserved = 0;
    slot.ended = new Promise<never>((_, reject) => (slot.end = reject));
    slot.ended.catch(() => undefined); // raced by the start-up; not an unhandled rejection on its own
    handle.onReplies((msg) => {
      if (slot.generation === generation && !this.closed) this.onReplies(index, msg);
    });
    const startedIn = new Promise<never>((_, reject) => {
      slot.startTimer = setTimeout(
        () =>
          reject(
            new WorkerCrashedError(
              `The sandbox worker did not start within ${this.startMs / 1000} s. Reload the page.`,
            ),
          ),
        this.startMs,
      );
    });
    // the ping has no watchdog of its own: the start-up timer is its limit
    const ping = new Promise<void>((resolve, reject) =>
      this.enqueue(
        slot,
        { op: 'ping' },
        Infinity,
        0,
        'starting the sandbox worker',
        () => {
          slot.isReady = true; // only this generation's ping can answer (older replies are dropped)
          slot.pinging = false;
          resolve();
        },
        (err) => {
          if (slot.generation === generation) slot.pinging = false;
          reject(err);
        },
      ),
    );
    slot.ready = Promise.race([ping, startedIn, slot.ended]).finally(() => {
      if (slot.generation === generation) clearTimeout(slot.startTimer);
    });
    slot.ready.then(
      () => {
        if (slot.generation === generation) this.flush(slot);
      },
      () => undefined, // reported to the first caller, not as an unhandled rejection
    );
    this.flush(slot);
    handle.onDeath?.((err) => {
      if (this.closed || slot.generation !== generation) return;
      this.replace(index, generation, `its worker died (${err.message})`);
    });
  }

  private env(id: string): PoolEnv {
    const e = this.envs.get(id);
    if (!e) throw new WorkerCrashedError(`No live environment "${id}" in the sandbox pool; load it again.`);
    if (this.slots[e.slot]!.generation !== e.generation) {
      this.envs.delete(id);
      const cause = this.causes[e.slot]![e.generation] ?? 'it stopped answering';
      throw new WorkerCrashedError(
        `Environment "${id}" was lost when its sandbox worker was replaced because ${cause}; load it again.`,
        { lost: true, cause },
      );
    }
    return e;
  }

  /**
   * The slot with the fewest calls queued or in flight, then the fewest live environments, among
   * those not in `skip` with room for `bytes` more; when none has room, the one with the most room.
   */
  private leastBusy(bytes: number, skip: Set<number>): number {
    const load = (s: Slot) => busy(s) * 1e6 + s.live;
    let best = -1;
    let roomiest = -1;
    for (let i = 0; i < this.slots.length; i++) {
      if (skip.has(i)) continue;
      const s = this.slots[i]!;
      if (roomiest < 0 || s.reserved < this.slots[roomiest]!.reserved) roomiest = i;
      if (s.reserved + bytes > MODULE_BUDGET_BYTES) continue;
      if (best < 0 || load(s) < load(this.slots[best]!)) best = i;
    }
    return best >= 0 ? best : roomiest;
  }

  /** Queue `call` for the worker in `slotIndex` under `limitMs` (plus the grace period) once it starts. */
  private async call<T>(slotIndex: number, call: Call, limitMs: number, what: string): Promise<T> {
    if (this.closed) throw new WorkerCrashedError('The sandbox pool was shut down.');
    const slot = this.slots[slotIndex]!;
    if (!slot.isReady) {
      const generation = slot.generation;
      slot.waiting++;
      try {
        await slot.ready;
      } catch (err) {
        // a worker that never started is replaced, so later calls do not keep landing on it
        this.replace(slotIndex, generation, 'it did not start');
        throw err;
      } finally {
        if (slot.generation === generation) slot.waiting--;
      }
      if (this.closed) throw new WorkerCrashedError('The sandbox pool was shut down.');
      if (slot.generation !== generation)
        throw new WorkerCrashedError(`${what} was lost: its sandbox worker was replaced.`, { lost: true });
    }
    return new Promise<T>((resolve, reject) =>
      this.enqueue(slot, call, limitMs + this.graceMs, limitMs, what, resolve as (v: unknown) => void, reject),
    );
  }

  private enqueue(
    slot: Slot,
    call: Call,
    budgetMs: number,
    limitMs: number,
    what: string,
    resolve: (v: unknown) => void,
    reject: (err: Error) => void,
  ): void {
    slot.queue.push({
      call: { ...call, seq: slot.nextSeq++ } as SandboxCall,
      budgetMs,
      limitMs,
      what,
      resolve,
      reject,
    });
    if (!slot.flushQueued) {
      // calls made in the same turn go in one message
      slot.flushQueued = true;
      queueMicrotask(() => {
        slot.flushQueued = false;
        this.flush(slot);
      });
    }
  }

  /** Send the queued calls when the worker is down to its last call (or idle), so it never waits for work. */
  private flush(slot: Slot): void {
    if (slot.queue.length === 0 || slot.inflight.length > 1 || this.closed) return;
    // before the ping has answered, only the ping goes
    if (!slot.isReady && slot.queue[0]!.call.op !== 'ping') return;
    const batch = slot.queue.splice(0, slot.isReady ? BATCH_MAX : 1);
    const idle = slot.inflight.length === 0;
    for (const p of batch) slot.inflight.push(p);
    if (idle) this.started(slot);
    try {
      slot.handle.post(batch.map((p) => p.call));
    } catch (err) {
      // a worker that cannot take a message is as good as dead
      this.replace(this.slots.indexOf(slot), slot.generation, `it refused a message (${(err as Error).message})`);
    }
  }

  /** The worker has started inflight[0] now: arm the watchdog for it. */
  private started(slot: Slot): void {
    const head = slot.inflight[0];
    if (!head) {
      clearTimeout(slot.watchdog);
      slot.watchdog = undefined;
      slot.watchdogAt = Infinity;
      return;
    }
    slot.startedAt = performance.now();
    this.armWatchdog(slot, slot.startedAt + head.budgetMs);
  }

  /** One timer per worker: set for `at` unless one already fires sooner (it then re-arms itself). */
  private armWatchdog(slot: Slot, at: number): void {
    if (at === Infinity || (slot.watchdog !== undefined && slot.watchdogAt <= at)) return;
    clearTimeout(slot.watchdog);
    slot.watchdogAt = at;
    const generation = slot.generation;
    slot.watchdog = setTimeout(() => this.watchdogFired(slot, generation), Math.max(0, at - performance.now()));
  }

  private watchdogFired(slot: Slot, generation: number): void {
    slot.watchdog = undefined;
    slot.watchdogAt = Infinity;
    if (slot.generation !== generation || this.closed) return;
    const head = slot.inflight[0];
    if (!head) return;
    const due = slot.startedAt + head.budgetMs;
    if (performance.now() < due) return this.armWatchdog(slot, due);
    head.reject(
      new SandboxTimeoutError(
        `${head.what} did not return within ${head.budgetMs} ms, so its sandbox worker was stopped and replaced. ` +
          'Look for endless loops, long loops inside built-ins, or allocations that keep growing.',
        { limitMs: head.limitMs, budgetMs: head.budgetMs, killed: true },
      ),
    );
    slot.inflight.shift();
    this.replace(this.slots.indexOf(slot), generation, `${head.what} did not return within ${head.budgetMs} ms`);
  }

  private onReplies(slotIndex: number, [seq, ok, value]: SandboxReply): void {
    const slot = this.slots[slotIndex]!;
    const p = slot.inflight[0];
    if (!p || p.call.seq !== seq) {
      this.replace(slotIndex, slot.generation, `it answered call ${seq} out of order`);
      return;
    }
    slot.inflight.shift();
    if (ok) p.resolve(value);
    else p.reject(deserializeError(value as SerializedError));
    this.started(slot); // the next call, if any, starts now
    this.flush(slot);
  }

  /** Replace the worker in `slotIndex` (if still `generation`), failing everything it held with `cause`. */
  private replace(slotIndex: number, generation: number, cause: string): void {
    const slot = this.slots[slotIndex]!;
    if (slot.generation !== generation || this.closed) return; // already replaced, or shutting down
    this.kills++;
    this.causes[slotIndex]![generation] = cause;
    const old = slot.handle;
    clearTimeout(slot.startTimer);
    clearTimeout(slot.watchdog);
    const lost = new WorkerCrashedError(`The sandbox worker was replaced because ${cause}.`, { lost: true, cause });
    slot.end(lost);
    failAll(slot, lost);
    this.startSlot(slotIndex, generation + 1);
    try {
      void Promise.resolve(old.terminate()).catch(() => undefined);
    } catch {
      /* a dead worker may throw on terminate */
    }
  }
}

/** A slot whose worker has not started: nothing queued, nothing live (startSlot sets the rest). */
function coldSlot(): Slot {
  const s = {} as Slot;
  Object.assign(s, {
    cold: true,
    generation: 0,
    queue: [],
    inflight: [],
    waiting: 0,
    pinging: false,
    live: 0,
    reserved: 0,
  });
  return s;
}

/**
 * Calls queued, in flight or waiting for the worker to start (its start-up ping not counted), so
 * loads sent together to a starting pool spread out; 0 for a slot not started.
 */
const busy = (s: Slot): number => s.queue.length + s.inflight.length + s.waiting - (s.pinging ? 1 : 0);

/** Fail every call queued or in flight on a worker that has ended. */
function failAll(slot: Slot, err: Error): void {
  const pending = [...slot.inflight, ...slot.queue];
  slot.inflight = [];
  slot.queue = [];
  for (const p of pending) p.reject(err);
}
