/**
 * The QuickJS sandbox host: loads environment code into its own QuickJS runtime
 * (one per live environment), calls reset/step/solution under time, memory and
 * stack limits, and validates everything that crosses back to the host. Every
 * failure becomes a typed error whose message a user — or a Designer model — can
 * act on. Pure: runs in a Web Worker, a worker_thread, or in-process in tests.
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
 * Memory: this QuickJS build cannot see allocation sizes (no malloc_usable_size in WASM), so
 * the runtime's own memory limit counts 8 bytes per allocation and never stops a big one. The
 * host enforces the limit itself, at no cost while nothing is allocated (heap.ts): a growth of
 * the WASM heap during a run that would take it past the running environment's limit is refused
 * inside the allocation (the guest gets "out of memory", however slow the machine), and the
 * runtime is measured (QuickJS's memory report) only when a cheap signal says it may have grown —
 * the heap grew during its run, its live allocation count rose by MEASURE_AFTER_ALLOCATIONS, or it
 * has run MEASURE_AFTER_GUEST_MS since the last measurement — and every MEMORY_CHECK_MS inside a
 * long run. A module (one WASM heap, 2 GiB at most) takes environments only while their limits fit
 * MODULE_BUDGET_BYTES in all, so none can starve its neighbours.
 *
 * A step is one guest call with one string in and one out (ffi_call.ts: the FFI with buffers reused
 * per context): the action as is, or as JSON text when it holds a NUL or a surrogate (so every
 * character arrives as sent: screen.ts); the 5-tuple back as one JSON array built in the guest, which
 * the host parses and validates in one pass.
 *
 * Hangs that QuickJS's interrupt handler cannot stop (some allocation patterns
 * thrash the GC for seconds; a long native loop) are the pool's job: it terminates the worker.
 */
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten-core';
import { DEFAULTS } from '../config.ts';
import {
  EnvContractError,
  SandboxMemoryError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SpadeError,
  deserializeError,
  serializeError,
} from '../errors.ts';
import type { LoadedEnv, ResetResult, StepResult, ToolSchema } from '../env/contract.ts';
import prelude from './prelude.guest.js?raw';
import { oneArgCall, type OneArgCall } from './ffi_call.ts';
import { allocationCounter, newWatchedModule, type WatchedModule } from './heap.ts';
import { checkAction, checkObservation, checkSource } from './screen.ts';

export { DEFAULT_LIMITS, limitsFromConfig, type SandboxLimits } from '../env/limits.ts';
export { envClassNames, nestingDepth } from './screen.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES, type SandboxLimits } from '../env/limits.ts';

/** An action the guest can take as a plain string: no NUL, no surrogate (paired or not). */
const RAW_SAFE = /^[^\0\ud800-\udfff]*$/;
/** Time to read a thrown value (its getters, Proxy traps, toString) once the call itself has ended. */
const READ_ERROR_MS = 100;
/** While guest code runs, its memory is measured at most this often (a report costs ~0.1 ms). */
const MEMORY_CHECK_MS = 10;
/**
 * Guest time (summed over runs) after which the runtime is measured again: a report costs
 * 0.05-0.1 ms on a small runtime, so this keeps it near 1% of the guest's own time, and at memory
 * speeds (~10 GB/s) 5 ms of guest time can add tens of MiB at most before it is measured.
 */
const MEASURE_AFTER_GUEST_MS = 5;
/**
 * Live allocations the runtime may add between two measurements: many small objects (QuickJS
 * objects are 50-100 bytes) are measured after ~1 MiB, sooner than the guest-time signal would.
 */
const MEASURE_AFTER_ALLOCATIONS = 10_000;
/**
 * Emscripten grows the heap by more than an allocation asks for (up to 20% of the heap, at most
 * 96 MiB): that slack is not charged to the environment whose allocation caused the growth.
 */
const overgrowth = (heapBytes: number): number => Math.min(heapBytes * 0.2, 96 * 2 ** 20);

interface LiveEnv {
  id: string;
  runtime: QuickJSRuntime;
  context: QuickJSContext;
  api: QuickJSHandle;
  fns: Record<'register' | 'reset' | 'step' | 'stepJson' | 'solution' | 'close' | 'describe', QuickJSHandle>;
  limits: SandboxLimits;
  info: LoadedEnv;
  /** Deadline (performance.now() ms) of the call in flight; the runtime's interrupt handler reads it. */
  deadline: number;
  /** Set by the interrupt handler when it stops the guest: an unforgeable sign of a time-out. */
  interrupted: boolean;
  /** Set when the runtime was found over its memory limit, by a measurement or a refused heap growth. */
  overMemory: boolean;
  /** When (ms) the interrupt handler next measures memory during the run in flight. */
  nextMemoryCheck: number;
  /** Bytes the WASM heap grew during the run in flight: only this env runs, so the growth is its own. */
  grownThisRun: number;
  /** Guest time (ms) and heap growth since the runtime was last measured. */
  guestMsSinceMeasure: number;
  grewSinceMeasure: boolean;
  /** The runtime's live allocation count (null: unreadable in this build) and its value when last measured. */
  allocations: (() => number) | null;
  allocationsAtMeasure: number;
  /** reset() and step()'s path into the guest (null: the public API's, where the internals differ). */
  caller: OneArgCall | null;
  /** Set once the env hit a limit; later calls fail fast with this. */
  dead: SpadeError | null;
  generation: number;
}

/** What the guest threw, as read by the prelude (or by the host, for primitives only). */
interface GuestError {
  name: string;
  message: string;
  where: string;
  /** Known on the host, not claimed by the guest: the interrupt handler fired, or memory ran out. */
  kind?: 'timeout' | 'memory';
}

/** "threw TypeError: x" for errors, "threw a number: 5" / "threw an object: …" for other thrown values. */
function threw(e: { name: string; message: string }): string {
  if (!e.name.startsWith('thrown ')) return `threw ${e.name}: ${e.message}`;
  const what = e.name.slice(7);
  return `threw ${/^[aeiou]/.test(what) ? 'an' : 'a'} ${what}: ${e.message}`;
}

type GuestReply =
  | { ok: true; value: unknown; nonFinite?: unknown }
  | { ok: false; error: { name: string; message: string; stack?: string } };

/** The prelude lists the top-level slots that held NaN or ±Infinity (JSON has no such numbers). */
function restoreNonFinite(value: unknown, marks: unknown): unknown {
  if (!Array.isArray(value) || !Array.isArray(marks)) return value;
  for (const m of marks as unknown[]) {
    if (!Array.isArray(m) || m.length !== 2) continue;
    const [i, s] = m as [unknown, unknown];
    if (typeof i === 'number' && Number.isInteger(i) && i >= 0 && i < value.length && value[i] === null) {
      if (s === 'NaN' || s === 'Infinity' || s === '-Infinity') value[i] = Number(s);
    }
  }
  return value;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
const isInfo = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

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

  private constructor() {
    this.module = null as unknown as QuickJSWASMModule; // set by create() before any use
    this.memory = null as unknown as WebAssembly.Memory;
  }

  static async create(): Promise<SandboxHost> {
    const host = new SandboxHost();
    host.use(await host.newModule());
    return host;
  }

  private newModule(): Promise<WatchedModule> {
    return newWatchedModule((from, to) => this.allowGrowth(from, to));
  }

  private use(m: WatchedModule): void {
    this.module = m.module;
    this.memory = m.memory;
  }

  /**
   * The heap-growth policy (called inside the allocator): growth outside guest code is the host's
   * own and allowed; growth during a run is charged to the running environment and refused once
   * it passes that environment's limit plus the allocator's overgrowth. The environment is then
   * marked over its limit, and its run fails with SandboxMemoryError whatever the guest does.
   */
  private allowGrowth(from: number, to: number): boolean {
    const env = this.running;
    if (env === null) return true;
    if (!env.overMemory && env.grownThisRun + (to - from) <= env.limits.memoryBytes + overgrowth(from)) {
      env.grownThisRun += to - from;
      env.grewSinceMeasure = true;
      return true;
    }
    env.overMemory = true;
    return false;
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
    const partial = this.newLiveEnv(limits);
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
        const err = this.limitError(partial, e, 'the constructor', limits.loadMs);
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

  /** A fresh runtime and context with the limits set and the interrupt handler on the env's deadline. */
  private newLiveEnv(limits: SandboxLimits): LiveEnv {
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(limits.stackBytes);
    runtime.setModuleLoader((name) => ({
      error: new Error(`modules are not available in the sandbox (import of "${name}")`),
    }));
    const context = runtime.newContext();
    const env = {
      id: `env${this.nextId++}`,
      runtime,
      context,
      limits,
      dead: null,
      generation: this.generation,
      deadline: Infinity,
      interrupted: false,
      overMemory: false,
      nextMemoryCheck: 0,
      grownThisRun: 0,
      guestMsSinceMeasure: 0,
      grewSinceMeasure: false,
      allocations: allocationCounter(this.memory, runtime, limits.memoryBytes),
      allocationsAtMeasure: 0,
      caller: oneArgCall(context),
    } as unknown as LiveEnv; // api, fns and info are set by load() once the prelude has run
    runtime.setInterruptHandler(() => {
      // between calls the deadline is Infinity and no guest code may run (no dump, no getter, no
      // toJSON read by the host): if some does, stop it and count it instead of letting it run
      if (env.deadline === Infinity) {
        this.guestRunsWithoutDeadline++;
        env.interrupted = true;
        return true;
      }
      const now = performance.now();
      if (env.overMemory || now > env.deadline) return this.stop(env);
      if (now >= env.nextMemoryCheck) {
        env.nextMemoryCheck = now + MEMORY_CHECK_MS;
        if (this.overMemoryLimit(env)) return this.stop(env);
      }
      return false;
    });
    return env;
  }

  /**
   * Stop the guest for good: QuickJS turns the interrupt into a rejection inside an async
   * function or a promise executor, so with a stack limit of one byte no new call (and so no new
   * place to swallow it) can start; the guest unwinds and the run fails. The env is dead after.
   */
  private stop(env: LiveEnv): true {
    if (!env.interrupted) {
      env.interrupted = true;
      env.runtime.setMaxStackSize(1);
    }
    return true;
  }

  /**
   * Measure the runtime (QuickJS's own report of the objects it holds) and flag it when over its
   * limit; the signals that call for a measurement start again from here.
   */
  private overMemoryLimit(env: LiveEnv): boolean {
    if (!env.overMemory && this.usedBytes(env) > env.limits.memoryBytes) env.overMemory = true;
    env.guestMsSinceMeasure = 0;
    env.grewSinceMeasure = false;
    if (env.allocations) env.allocationsAtMeasure = env.allocations();
    return env.overMemory;
  }

  /** A cheap signal says the runtime may have grown since it was last measured. */
  private dueForMeasure(env: LiveEnv): boolean {
    return (
      env.grewSinceMeasure ||
      env.guestMsSinceMeasure >= MEASURE_AFTER_GUEST_MS ||
      (env.allocations !== null && env.allocations() - env.allocationsAtMeasure >= MEASURE_AFTER_ALLOCATIONS)
    );
  }

  /** Bytes the runtime holds, by QuickJS's memory report ("memory used"); 0 if it cannot be read. */
  private usedBytes(env: LiveEnv): number {
    try {
      const used = /memory used\s+\d+\s+(\d+)/.exec(env.runtime.dumpMemoryUsage());
      return used ? Number(used[1]) : 0;
    } catch {
      return 0;
    }
  }

  reset(id: string, seed: number): ResetResult {
    const env = this.live(id);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new EnvContractError(`seed must be a whole number in [0, 2^32); got ${seed}`);
    }
    const v = this.invoke(env, 'reset', seed, env.limits.resetMs);
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || !isInfo(v[1])) {
      throw new EnvContractError(
        `reset(seed) must return [observation, info] with a string and an object, e.g. \`return [text, {}];\` — it returned ${describe(v)}${Array.isArray(v) ? ` (${v.map(describe).join(', ')})` : ''}.`,
        { method: 'reset' },
      );
    }
    checkObservation(v[0], env.limits, 'reset');
    return [v[0], v[1]];
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
    if (
      Array.isArray(v) &&
      v.length === 5 &&
      typeof v[0] === 'string' &&
      typeof v[1] === 'number' &&
      v[1] >= -1 &&
      v[1] <= 1 &&
      typeof v[2] === 'boolean' &&
      typeof v[3] === 'boolean' &&
      isInfo(v[4])
    ) {
      checkObservation(v[0], env.limits, 'step');
      return v as StepResult;
    }
    if (!Array.isArray(v) || v.length !== 5) {
      throw new EnvContractError(
        `step(action) must return [observation, reward, terminated, truncated, info]; it returned ${describe(v)}. Every code path must return all five.`,
        { method: 'step' },
      );
    }
    const [obs, reward, terminated, truncated, info] = v as unknown[];
    const problems: string[] = [];
    if (typeof obs !== 'string') problems.push(`observation must be a string, got ${describe(obs)}`);
    if (typeof reward !== 'number' || !Number.isFinite(reward))
      problems.push(`reward must be a finite number, got ${describe(reward)}`);
    else if (reward < -1 || reward > 1) problems.push(`reward must be within [-1, 1], got ${reward}`);
    if (typeof terminated !== 'boolean') problems.push(`terminated must be a boolean, got ${describe(terminated)}`);
    if (typeof truncated !== 'boolean') problems.push(`truncated must be a boolean, got ${describe(truncated)}`);
    if (!isInfo(info)) problems.push(`info must be an object, got ${describe(info)}`);
    if (problems.length) {
      throw new EnvContractError(`step() returned a malformed result: ${problems.join('; ')}.`, {
        method: 'step',
        problems,
      });
    }
    throw new EnvContractError('step() returned a malformed result.', { method: 'step' }); // not reached
  }

  /** The reference solution: a list of actions (a single string becomes a one-item list). */
  solution(id: string): string[] {
    const env = this.live(id);
    const v = this.invoke(env, 'solution', undefined, env.limits.resetMs);
    if (typeof v === 'string') return [v];
    if (!Array.isArray(v) || !v.every((a) => typeof a === 'string')) {
      throw new EnvContractError(
        `solution() must return a list of action strings (e.g. ["\\\\boxed{3}", "\\\\boxed{left}"]); it returned ${describe(v)}.`,
        { method: 'solution' },
      );
    }
    return v as string[];
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
      if (!reply.ok) throw this.limitError(env, guestError(reply.error), method, ms);
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
    if (value instanceof GuestFailure) throw this.limitError(env, value.error, value.method, ms);
    let text: string | null = null;
    try {
      // only a string is read: getString on anything else would run the guest's toString
      if (env.caller?.isString(value) || context.typeof(value) === 'string') text = context.getString(value);
    } finally {
      value.dispose();
    }
    if (text === null || text.length > env.limits.maxObservationBytes * 4 + 65536) {
      throw new EnvContractError(
        `${method}() returned ${text !== null ? 'too much data' : 'something that is not JSON'}; return plain strings, numbers, booleans, arrays and objects.`,
        { method },
      );
    }
    let reply: unknown;
    try {
      reply = JSON.parse(text);
    } catch {
      reply = undefined;
    }
    // step's fast path answers a well-formed 5-tuple bare, as a JSON array; every other reply is a record
    if (Array.isArray(reply)) return { ok: true, value: reply };
    const r = reply as GuestReply | undefined;
    const wellFormed =
      isInfo(r) &&
      (r.ok === true
        ? 'value' in r
        : r.ok === false && isInfo(r.error) && typeof r.error.name === 'string' && typeof r.error.message === 'string');
    if (!wellFormed) {
      throw new EnvContractError(
        `${method}() returned data the host cannot read (were JSON, Object.prototype or Array.prototype changed?). Return plain data and leave built-ins alone.`,
        { method },
      );
    }
    if (r!.ok && r!.nonFinite !== undefined) r!.value = restoreNonFinite(r!.value, r!.nonFinite);
    return r!;
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
    const limit = this.limitError(env, e, value.method, ms);
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
        failure = new GuestFailure(this.stoppedError(env, 'interrupted inside an async function or a promise'), method);
      } else if (env.runtime.hasPendingJob()) {
        // the common case skips this: one cheap check per call
        const jobs = env.runtime.executePendingJobs(-1);
        let e: GuestError | null = null;
        if (jobs.error) {
          e = this.readThrown(env, jobs.error);
          jobs.error.dispose();
        }
        // an interrupted job can end quietly (its promise just rejects), so ask the handler too
        if (!e && (env.interrupted || env.runtime.hasPendingJob())) e = this.stoppedError(env);
        if (e) {
          result.value.dispose();
          failure = new GuestFailure(e, jobMethod);
        }
      }
      env.guestMsSinceMeasure += performance.now() - t0;
      if (env.overMemory || (this.dueForMeasure(env) && this.overMemoryLimit(env))) {
        // over its limit, whatever the guest made of it (an "out of memory" it caught, or any error after)
        if (result.value?.alive) result.value.dispose();
        failure = new GuestFailure(this.stoppedError(env), failure?.method ?? method);
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
    if (env.interrupted) return this.stoppedError(env);
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
      if (env.interrupted) return this.stoppedError(env, 'interrupted while reading the value it threw');
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
    if (name === 'thrown null' && this.nearMemoryLimit(env)) e.kind = 'memory';
    return e;
  }

  /** True when the runtime holds more than three quarters of its limit (read from QuickJS's own report). */
  private nearMemoryLimit(env: LiveEnv): boolean {
    return this.usedBytes(env) > env.limits.memoryBytes * 0.75;
  }

  /** Why the host stopped the guest: over its memory limit, else out of time. */
  private stoppedError(env: LiveEnv, message = 'interrupted'): GuestError {
    if (env.overMemory) return { name: 'InternalError', message: 'out of memory', where: '', kind: 'memory' };
    return { name: 'InternalError', message, where: '', kind: 'timeout' };
  }

  /** Map a guest exception to a typed error; limit errors also mark the env dead. */
  private limitError(env: LiveEnv, e: GuestError, method: string, ms: number): SpadeError {
    let err: SpadeError;
    if (e.kind === 'timeout') {
      err = new SandboxTimeoutError(
        `${method} ran past its ${ms} ms limit and was stopped${e.message === 'interrupted' ? '' : ` (${e.message})`}. Look for loops that never end or work that grows with the input.`,
        { method, limitMs: ms },
      );
    } else if (e.name === 'InternalError' && e.message === 'stack overflow') {
      err = new SandboxMemoryError(
        `${method} overflowed the ${env.limits.stackBytes / 1024} KiB stack (deep or endless recursion). Use a loop instead.`,
        { method, kind: 'stack' },
      );
    } else if (
      e.kind === 'memory' ||
      (e.name === 'InternalError' && (e.message === 'out of memory' || e.message === 'string too long'))
    ) {
      err = new SandboxMemoryError(
        `${method} used more than the ${env.limits.memoryBytes / 2 ** 20} MiB memory limit and was stopped. Keep state small.`,
        { method, kind: 'memory' },
      );
    } else {
      return new SandboxRuntimeError(`${method}() ${threw(e)}`, {
        method,
        name: e.name,
        message: e.message,
        where: e.where,
      });
    }
    env.dead = err;
    return err;
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

/**
 * The error a failed close() of `id` becomes: the same class, its message led by the
 * environment's id (the pool swaps in its own id), data.envId and data.method 'close'.
 */
export function closeFailure(id: string, err: unknown): SpadeError {
  const e = serializeError(
    err instanceof SpadeError ? err : new SandboxRuntimeError(String((err as Error)?.message ?? err)),
  );
  return deserializeError({
    name: e.name,
    message: `Environment ${id}: close() failed: ${e.message} close() must return promptly and never throw; the environment was released anyway.`,
    data: { ...e.data, method: 'close', envId: id },
  }) as SpadeError;
}

/** A guest failure on its way to becoming a typed error. */
class GuestFailure {
  constructor(
    readonly error: GuestError,
    readonly method: string,
  ) {}
}

/** The prelude's record of a thrown value as a GuestError (only its fields: nothing else is taken from the guest). */
const guestError = (e: { name: string; message: string; stack?: unknown }): GuestError => ({
  name: e.name,
  message: e.message,
  where: whereIn(typeof e.stack === 'string' ? e.stack : undefined),
});

/** "env.js:3:14" from a guest stack, or ''. */
const whereIn = (stack: string | undefined): string =>
  typeof stack === 'string' ? (/env\.js:(\d+):(\d+)/.exec(stack)?.[0] ?? '') : '';
