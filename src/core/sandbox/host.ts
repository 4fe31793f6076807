/**
 * The QuickJS sandbox host: loads environment code into its own QuickJS runtime
 * (one per live environment), calls reset/step/solution under time, memory and
 * stack limits, and validates everything that crosses back to the host. Every
 * failure becomes a typed error whose message a user — or a Designer model — can
 * act on. Pure: runs in a Web Worker, a worker_thread, or in-process in tests.
 *
 * Its parts: this file (the module and its restarts, the environments' lifecycle, the one path
 * by which guest code runs); live_env.ts (one environment's runtime, its interrupt handler and
 * memory metering); guest_replies.ts (what a call returns, read and held to the contract);
 * guest_errors.ts (what the guest threw, as a typed error); screen.ts (code and actions checked
 * before QuickJS sees them); heap.ts (the WASM heap, watched); ffi_call.ts (the step's hot path).
 *
 * No guest code runs without a deadline: calls, evaluation, promise jobs and the
 * reading of a thrown value (done by the prelude, in the guest, under a deadline of its
 * own) all happen while the interrupt handler is armed. Text that QuickJS would parse
 * on the host's native stack (the code, an action) is bounded here first.
 *
 * Once the interrupt has fired, the runtime's stack limit drops to nothing, so no async
 * function, promise executor or callback can start and swallow the interrupt again: the guest
 * unwinds to the host, and a call whose interrupt fired fails whatever the guest did with it.
 *
 * Memory: the host enforces each environment's limit itself (live_env.ts), and a module (one WASM
 * heap, 2 GiB at most) takes environments only while their limits fit MODULE_BUDGET_BYTES in all,
 * so none can starve its neighbours.
 *
 * A step is one guest call with one string in and one out (ffi_call.ts: the FFI with buffers reused
 * per context): the action as is, or as JSON text when it holds a NUL or a surrogate (so every
 * character arrives as sent: screen.ts); the 5-tuple back as one JSON array built in the guest, which
 * the host parses and validates in one pass (guest_replies.ts).
 *
 * Hangs that QuickJS's interrupt handler cannot stop (some allocation patterns
 * thrash the GC for seconds; a long native loop) are the pool's job: it terminates the worker.
 */
import type { QuickJSHandle, QuickJSWASMModule } from 'quickjs-emscripten-core';
import { DEFAULTS } from '../config.ts';
import { EnvContractError, SandboxMemoryError, SandboxRuntimeError, SpadeError } from '../errors.ts';
import type { LoadedEnv, ResetResult, StepResult, ToolSchema } from '../env/contract.ts';
import prelude from './prelude.guest.js?raw';
import { newWatchedModule, type WatchedModule } from './heap.ts';
import { checkAction, checkSource } from './screen.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES, type SandboxLimits } from '../env/limits.ts';
import {
  closeFailure,
  GuestFailure,
  guestError,
  limitError,
  stoppedError,
  threw,
  whereIn,
  type GuestError,
} from './guest_errors.ts';
import {
  describe,
  isInfo,
  readReply,
  resetResult,
  solutionResult,
  stepResult,
  type GuestReply,
} from './guest_replies.ts';
import {
  chargeGrowth,
  dueForMeasure,
  MEMORY_CHECK_MS,
  nearMemoryLimit,
  newLiveEnv,
  overMemoryLimit,
  type LiveEnv,
} from './live_env.ts';

/** An action the guest can take as a plain string: no NUL, no surrogate (paired or not). */
const RAW_SAFE = /^[^\0\ud800-\udfff]*$/;
/** Time to read a thrown value (its getters, Proxy traps, toString) once the call itself has ended. */
const READ_ERROR_MS = 100;
/**
 * A trivial environment loaded, reset, stepped and closed once by create() (warm()), so the first
 * real load does not pay for compiling QuickJS's WASM, which engines compile lazily, function by
 * function, on first use. Here a first load took 391 ms against 3-4 ms for the next ones (Node,
 * --no-liftoff); on a loaded CI machine, Chromium's first prelude ran past its 1,000 ms limit. A
 * module started after a fault needs none: the engine shares compiled code between instances of the
 * same bytes (a second host's create(), warm-up included, took 47 ms against the first's 1,244).
 */
const WARM_CODE =
  "class WarmEnv { reset() { return ['w', {}]; } step(a) { return [String(a), 0, true, false, {}]; } solution() { return []; } }";
/** The warm-up's limits: its code is ours and tiny, so only a broken module could take this long. */
const WARM_LIMITS: SandboxLimits = { ...DEFAULT_LIMITS, loadMs: 30_000, resetMs: 30_000, stepMs: 30_000 };

export class SandboxHost {
  private module: QuickJSWASMModule;
  private memory: WebAssembly.Memory;
  private readonly envs = new Map<string, LiveEnv>();
  private nextId = 1;
  private generation = 0;
  private restarting: Promise<WatchedModule> | null = null;
  /** The environment whose guest code is running (its heap growth is charged to it), or null. */
  private running: LiveEnv | null = null;
  /** Why each generation of the module ended (index: the generation), for the environments it took down. */
  private readonly faults: string[] = [];
  /** How many times the WASM module was discarded and rebuilt after a host-level fault. */
  moduleRestarts = 0;
  /**
   * Times guest code was found running with no deadline (outside runGuest): a host bug, never
   * expected. The interrupt handler stops such code at once, so it cannot hang the host either.
   */
  guestRunsWithoutDeadline = 0;

  private constructor(private readonly compiled: WebAssembly.Module | undefined) {
    this.module = null as unknown as QuickJSWASMModule; // set by create() before any use
    this.memory = null as unknown as WebAssembly.Memory;
  }

  /**
   * A host on a fresh QuickJS module. `opts.compiled`: QuickJS's WASM compiled once by whoever
   * starts the host's worker (see newWatchedModule); this host's module and every restart of it use it.
   */
  static async create(opts: { compiled?: WebAssembly.Module } = {}): Promise<SandboxHost> {
    const host = new SandboxHost(opts.compiled);
    host.use(await host.newModule());
    await host.warm();
    return host;
  }

  /** Run WARM_CODE once on the current module (see WARM_CODE). */
  private async warm(): Promise<void> {
    const { id } = await this.load(WARM_CODE, 1, WARM_LIMITS);
    this.reset(id, 0);
    this.step(id, 'w');
    this.dispose(id);
  }

  private newModule(): Promise<WatchedModule> {
    return newWatchedModule((from, to) => this.allowGrowth(from, to), this.compiled);
  }

  private use(m: WatchedModule): void {
    this.module = m.module;
    this.memory = m.memory;
  }

  /**
   * The heap-growth policy (called inside the allocator): growth outside guest code is the host's
   * own and allowed; growth during a run is charged to the running environment (chargeGrowth).
   */
  private allowGrowth(from: number, to: number): boolean {
    const env = this.running;
    if (env === null) return true;
    return chargeGrowth(env, from, to);
  }

  ping(): string {
    return 'pong';
  }

  /** Environments loaded, not disposed, and not lost to a module restart. */
  liveCount(): number {
    let n = 0;
    for (const e of this.envs.values()) if (e.generation === this.generation) n++;
    return n;
  }

  /** Evaluate environment code and construct its class. Returns its id, class name, setting and tools. */
  async load(code: string, maxTurns = DEFAULTS.maxTurns, limits: SandboxLimits = DEFAULT_LIMITS): Promise<LoadedEnv> {
    if (this.restarting) this.use(await this.restarting);
    this.restarting = null;
    const names = checkSource(code, limits);
    this.checkRoom(limits);
    const partial = newLiveEnv(this.module, this.memory, `env${this.nextId++}`, this.generation, limits, () => {
      this.guestRunsWithoutDeadline++;
    });
    const { context, id } = partial;
    try {
      this.evalOrThrow(partial, prelude, 'prelude.js', limits.loadMs, 'loading the sandbox prelude');
      const api = context.getProp(context.global, '__spade');
      partial.api = api;
      partial.fns = {
        register: context.getProp(api, 'register'),
        reset: context.getProp(api, 'reset'),
        step: context.getProp(api, 'step'),
        solution: context.getProp(api, 'solution'),
        close: context.getProp(api, 'close'),
        stepJson: context.getProp(api, 'stepJson'),
        describe: context.getProp(api, 'describe'),
      };
      this.evalOrThrow(partial, code, 'env.js', limits.loadMs, 'loading the environment code');
      const classes = this.evalHandle(
        partial,
        `[${names.map((n) => `typeof ${n} === 'function' ? ${n} : void 0`).join(', ')}]`,
        limits.loadMs,
        'looking up the environment class',
      );
      const handles = [classes, context.newNumber(maxTurns)];
      let reply: GuestReply;
      try {
        handles.push(
          this.evalHandle(partial, JSON.stringify(names), limits.loadMs, 'looking up the environment class'),
        );
        reply = this.callGuest(
          partial,
          partial.fns.register,
          [handles[2]!, classes, handles[1]!],
          limits.loadMs,
          'constructor',
        );
      } finally {
        if (partial.generation === this.generation) for (const h of handles) if (h.alive) h.dispose();
      }
      if (!reply.ok) {
        const e = guestError(reply.error);
        const err = limitError(partial, e, 'the constructor', limits.loadMs);
        if (!(err instanceof SandboxRuntimeError)) throw err;
        throw new SandboxRuntimeError(
          `The constructor ${threw(e)}. The constructor receives maxTurns and must not throw.`,
          { method: 'constructor', ...e },
        );
      }
      const v = (isInfo(reply.value) ? reply.value : {}) as { className?: unknown; toolUse?: unknown; tools?: unknown };
      partial.info = {
        id,
        className: String(v.className),
        setting: v.toolUse === true ? 'tool_use' : 'games',
        tools: Array.isArray(v.tools) ? (v.tools as ToolSchema[]) : [],
      };
      this.envs.set(id, partial);
      return partial.info;
    } catch (err) {
      if (partial.generation === this.generation) {
        try {
          this.release(partial);
        } catch (fault) {
          // freeing a runtime left mid-job can abort the module (see dispose): restart it, report `err`
          this.hostFault(partial, fault, 'loading the environment');
        }
      }
      throw err;
    }
  }

  /** Memory that the live environments' limits reserve in the current module. */
  reservedBytes(): number {
    let n = 0;
    for (const e of this.envs.values()) if (e.generation === this.generation) n += e.limits.memoryBytes;
    return n;
  }

  /** Refuse a new environment whose limit does not fit the module's budget beside the live ones. */
  private checkRoom(limits: SandboxLimits): void {
    const reserved = this.reservedBytes();
    if (reserved + limits.memoryBytes <= MODULE_BUDGET_BYTES) return;
    const MiB = 2 ** 20;
    throw new SandboxMemoryError(
      `This sandbox worker is full: its ${this.liveCount()} live environments reserve ${Math.round(reserved / MiB)} MiB of its ${MODULE_BUDGET_BYTES / MiB} MiB, and this one needs ${limits.memoryBytes / MiB} MiB. Dispose environments no longer in use, load it in another worker, or lower sandboxMemoryMiB.`,
      { workerFull: true, reservedBytes: reserved, budgetBytes: MODULE_BUDGET_BYTES, neededBytes: limits.memoryBytes },
    );
  }

  reset(id: string, seed: number): ResetResult {
    const env = this.live(id);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new EnvContractError(`seed must be a whole number in [0, 2^32); got ${seed}`);
    }
    return resetResult(this.invoke(env, 'reset', seed, env.limits.resetMs), env.limits);
  }

  step(id: string, action: string): StepResult {
    const env = this.live(id);
    if (typeof action !== 'string') throw new EnvContractError(`action must be a string; got ${describe(action)}`);
    checkAction(action, env.limits);
    // a string crosses into QuickJS as UTF-8 ending at its first NUL (and a lone surrogate has no
    // UTF-8), so such an action goes as JSON text, which carries every UTF-16 unit
    const v = RAW_SAFE.test(action)
      ? this.invoke(env, 'step', action, env.limits.stepMs)
      : this.invoke(env, 'step', JSON.stringify(action), env.limits.stepMs, 'stepJson');
    return stepResult(v, env.limits);
  }

  /** The reference solution: a list of actions (a single string becomes a one-item list). */
  solution(id: string): string[] {
    const env = this.live(id);
    return solutionResult(this.invoke(env, 'solution', undefined, env.limits.resetMs));
  }

  /**
   * Call the environment's close() (under the step limit, unless it already died of a limit),
   * then free its runtime. The runtime is freed whatever close() did; a close() that threw, ran
   * past its limit or broke the sandbox is then thrown, as the same error class naming the
   * environment (data.envId) — never swallowed, so the environment is blamed, not its neighbours.
   */
  dispose(id: string): void {
    const env = this.envs.get(id);
    if (!env) return;
    this.envs.delete(id);
    if (env.generation !== this.generation) return; // released with its module
    let failed: unknown = null;
    if (!env.dead) {
      try {
        this.invoke(env, 'close', undefined, env.limits.stepMs);
      } catch (err) {
        failed = err;
      }
    }
    if (env.generation === this.generation) {
      try {
        this.release(env);
      } catch (err) {
        // Freeing a runtime whose promise jobs were interrupted can abort the WASM module
        // (a QuickJS assertion on leftover objects): start a fresh module, as for any host fault.
        this.hostFault(env, err, 'close');
      }
    }
    if (failed) throw closeFailure(id, failed);
  }

  // --- internals ------------------------------------------------------------------------

  private live(id: string): LiveEnv {
    const env = this.envs.get(id);
    if (!env) throw new EnvContractError(`No live environment "${id}": it was closed or never loaded. Load it again.`);
    if (env.generation !== this.generation) {
      this.envs.delete(id);
      const cause = this.faults[env.generation] ?? 'a fault in the sandbox';
      throw new SandboxRuntimeError(
        `Environment "${id}" was lost when the sandbox restarted after ${cause}. Load it again.`,
        { lost: true, cause },
      );
    }
    if (env.dead) throw env.dead;
    return env;
  }

  /** Call the prelude's entry point `fn` (default: the method's own) for `method`, with one argument or none. */
  private invoke(
    env: LiveEnv,
    method: 'reset' | 'step' | 'solution' | 'close',
    arg: string | number | undefined,
    ms: number,
    fn: keyof LiveEnv['fns'] = method,
  ): unknown {
    const { context } = env;
    const args: QuickJSHandle[] = [];
    if (typeof arg === 'string') args.push(env.caller ? env.caller.newString(arg) : context.newString(arg));
    else if (typeof arg === 'number') args.push(context.newNumber(arg));
    try {
      const reply = this.callGuest(env, env.fns[fn], args, ms, method);
      if (!reply.ok) throw limitError(env, guestError(reply.error), method, ms);
      return reply.value;
    } finally {
      // after a module fault the handles died with their runtime: disposing them would throw
      if (env.generation === this.generation) {
        for (const h of args) if (h.alive) h.dispose();
        // an env stopped over its memory limit gives the heap back now, not at dispose(): its
        // neighbours in this module may run before it is disposed
        if (env.dead instanceof SandboxMemoryError) {
          try {
            this.release(env);
          } catch (err) {
            this.hostFault(env, err, method);
          }
        }
      }
    }
  }

  /** Call a prelude entry point; it answers with a JSON reply built inside the guest. */
  private callGuest(env: LiveEnv, fn: QuickJSHandle, args: QuickJSHandle[], ms: number, method: string): GuestReply {
    const { context } = env;
    const value = this.runGuest(env, ms, method, `${method} (a promise callback)`, () =>
      args.length === 1 && env.caller
        ? env.caller.call(fn, args[0]!)
        : context.callFunction(fn, context.undefined, ...args),
    );
    if (value instanceof GuestFailure) throw limitError(env, value.error, value.method, ms);
    let text: string | null = null;
    try {
      // only a string is read: getString on anything else would run the guest's toString
      if (env.caller?.isString(value) || context.typeof(value) === 'string') text = context.getString(value);
    } finally {
      value.dispose();
    }
    return readReply(text, method, env.limits);
  }

  private evalOrThrow(env: LiveEnv, code: string, filename: string, ms: number, what: string): void {
    this.evalHandle(env, code, ms, what, filename).dispose();
  }

  private evalHandle(env: LiveEnv, code: string, ms: number, what: string, filename = 'host.js'): QuickJSHandle {
    const { context } = env;
    const value = this.runGuest(env, ms, what, `${what} (a promise callback)`, () =>
      context.evalCode(code, filename, { type: 'global' }),
    );
    if (!(value instanceof GuestFailure)) return value;
    const e = value.error;
    const limit = limitError(env, e, value.method, ms);
    if (limit instanceof SandboxRuntimeError) {
      const head = e.name.startsWith('thrown ') ? `${what} ${threw(e)}` : `${e.name} while ${what}: ${e.message}`;
      throw new SandboxRuntimeError(`${head}${e.where ? ` (${e.where})` : ''}`, {
        name: e.name,
        message: e.message,
        where: e.where,
      });
    }
    throw limit;
  }

  /**
   * The one way guest code runs: `start` (a call or an evaluation), then the promise callbacks it
   * queued (`then`, `await`), all under `ms`; a thrown value is read inside the guest under a
   * deadline of its own. Returns the result handle (the caller disposes it) or the failure.
   * A fault of the WASM module itself restarts the module and throws.
   */
  private runGuest(
    env: LiveEnv,
    ms: number,
    method: string,
    jobMethod: string,
    start: () => { value: QuickJSHandle; error?: undefined } | { error: QuickJSHandle; value?: undefined },
  ): QuickJSHandle | GuestFailure {
    env.interrupted = false;
    env.grownThisRun = 0;
    const t0 = performance.now();
    env.deadline = t0 + ms;
    env.nextMemoryCheck = t0 + MEMORY_CHECK_MS;
    this.running = env;
    let result: ReturnType<typeof start> | undefined;
    let failure: GuestFailure | null = null;
    try {
      result = start();
      if (result.error) {
        failure = new GuestFailure(this.readThrown(env, result.error), method);
        result.error.dispose();
      } else if (env.interrupted) {
        // the interrupt fired inside an async function or a promise executor, which turned it
        // into a rejection and carried on: the call still ran past its limit
        result.value.dispose();
        failure = new GuestFailure(stoppedError(env, 'interrupted inside an async function or a promise'), method);
      } else if (env.runtime.hasPendingJob()) {
        // the common case skips this: one cheap check per call
        const jobs = env.runtime.executePendingJobs(-1);
        let e: GuestError | null = null;
        if (jobs.error) {
          e = this.readThrown(env, jobs.error);
          jobs.error.dispose();
        }
        // an interrupted job can end quietly (its promise just rejects), so ask the handler too
        if (!e && (env.interrupted || env.runtime.hasPendingJob())) e = stoppedError(env);
        if (e) {
          result.value.dispose();
          failure = new GuestFailure(e, jobMethod);
        }
      }
      env.guestMsSinceMeasure += performance.now() - t0;
      if (env.overMemory || (dueForMeasure(env) && overMemoryLimit(env))) {
        // over its limit, whatever the guest made of it (an "out of memory" it caught, or any error after)
        if (result.value?.alive) result.value.dispose();
        failure = new GuestFailure(stoppedError(env), failure?.method ?? method);
      }
    } catch (err) {
      if (result?.value?.alive) result.value.dispose();
      throw this.hostFault(env, err, method);
    } finally {
      env.deadline = Infinity;
      this.running = null;
    }
    return failure ?? result.value!;
  }

  /**
   * Read a thrown value without running guest code outside a deadline: after a time-out nothing is
   * read; otherwise the prelude's `describe` reads it inside the guest (getters, Proxy traps and
   * toString included) under READ_ERROR_MS, and the host reads back one string.
   */
  private readThrown(env: LiveEnv, h: QuickJSHandle): GuestError {
    if (env.interrupted) return stoppedError(env);
    const { context } = env;
    if (!env.fns?.describe?.alive) {
      // the prelude itself failed: read primitives only
      const t = context.typeof(h);
      const message = t === 'string' ? context.getString(h).slice(0, 2000) : `a thrown ${t}`;
      return { name: 'Error', message, where: '' };
    }
    env.deadline = performance.now() + READ_ERROR_MS;
    const r = context.callFunction(env.fns.describe, context.undefined, h);
    if (r.error) {
      r.error.dispose();
      if (env.interrupted) return stoppedError(env, 'interrupted while reading the value it threw');
      return { name: 'Error', message: 'an unreadable value was thrown', where: '', kind: 'memory' };
    }
    const text = context.typeof(r.value) === 'string' ? context.getString(r.value) : '';
    r.value.dispose();
    let rec: { name?: unknown; message?: unknown; stack?: unknown } = {};
    try {
      rec = JSON.parse(text) as typeof rec;
    } catch {
      /* unreadable: the defaults below */
    }
    const name = typeof rec?.name === 'string' ? rec.name : 'Error';
    const message = typeof rec?.message === 'string' ? rec.message : 'an unreadable value was thrown';
    const e: GuestError = { name, message, where: whereIn(typeof rec?.stack === 'string' ? rec.stack : '') };
    // QuickJS throws null when it runs out of memory while building an error
    if (name === 'thrown null' && nearMemoryLimit(env)) e.kind = 'memory';
    return e;
  }

  /** A fault outside the guest (the WASM module itself): discard the module and start a fresh one. */
  private hostFault(env: LiveEnv, err: unknown, method: string): SpadeError {
    const raw = (err as Error)?.message ?? String(err);
    const why = /call stack|stack size/i.test(raw) ? `nesting too deep for the host's stack (${raw})` : raw;
    this.faults[this.generation] = `${env.id} faulted during ${method}: ${why}`;
    this.generation++;
    this.moduleRestarts++;
    const stale = [...this.envs.values()];
    for (const e of stale) this.release(e, true);
    if (env && !stale.includes(env)) this.release(env, true);
    this.restarting = this.newModule();
    return new SandboxRuntimeError(
      `The sandbox faulted during ${method} (${why}) and was restarted; every live environment in it must be loaded again.`,
      { method, restarted: true },
    );
  }

  private release(env: LiveEnv, quiet = false): void {
    try {
      if (!quiet) env.caller?.free();
      if (env.fns) for (const h of Object.values(env.fns)) if (h?.alive) h.dispose();
      if (env.api?.alive) env.api.dispose();
      if (env.context?.alive) env.context.dispose();
      if (env.runtime?.alive) env.runtime.dispose();
    } catch (err) {
      if (!quiet) throw err;
    }
  }
}
