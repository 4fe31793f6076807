/**
 * The QuickJS sandbox host: loads environment code into its own QuickJS runtime
 * (one per live environment), calls reset/step/solution under time, memory and
 * stack limits, and validates everything that crosses back to the host. Every
 * failure becomes a typed error whose message a user — or a Designer model — can
 * act on. Pure: runs in a Web Worker, a worker_thread, or in-process in tests.
 *
 * Hangs that QuickJS's interrupt handler cannot stop (some allocation patterns
 * thrash the GC for seconds) are the pool's job: it terminates the worker.
 */
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { DEFAULTS } from '../config.ts';
import {
  EnvContractError,
  SandboxMemoryError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SpadeError,
} from '../errors.ts';
import type { LoadedEnv, ResetResult, StepResult, ToolSchema } from '../env/contract.ts';
import prelude from './prelude.guest.js?raw';

export { DEFAULT_LIMITS, limitsFromConfig, type SandboxLimits } from './limits.ts';
import { DEFAULT_LIMITS, type SandboxLimits } from './limits.ts';

interface LiveEnv {
  id: string;
  runtime: QuickJSRuntime;
  context: QuickJSContext;
  api: QuickJSHandle;
  fns: Record<'reset' | 'step' | 'solution' | 'close', QuickJSHandle>;
  limits: SandboxLimits;
  info: LoadedEnv;
  /** Wall-clock deadline (ms) of the call in flight; the runtime's interrupt handler reads it. */
  deadline: number;
  /** Set once the env hit a limit; later calls fail fast with this. */
  dead: SpadeError | null;
  generation: number;
}

/** "threw TypeError: x" for errors, "threw a number: 5" for other thrown values. */
function threw(e: { name: string; message: string }): string {
  return e.name.startsWith('thrown ') ? `threw a ${e.name.slice(7)}: ${e.message}` : `threw ${e.name}: ${e.message}`;
}

/** The prelude tags NaN/±Infinity as "\u0000NaN" etc.; turn them back into numbers. */
function reviveNonFinite(_key: string, v: unknown): unknown {
  if (typeof v === 'string' && v.charCodeAt(0) === 0) {
    const rest = v.slice(1);
    if (rest === 'NaN' || rest === 'Infinity' || rest === '-Infinity') return Number(rest);
  }
  return v;
}

type GuestReply = { ok: true; value: unknown } | { ok: false; error: { name: string; message: string } };

const utf8 = new TextEncoder();
/** UTF-8 size, encoding only when the string could be over `limit` (3 bytes per UTF-16 unit at most). */
const overLimit = (s: string, limit: number): number =>
  s.length * 3 <= limit ? 0 : utf8.encode(s).length > limit ? utf8.encode(s).length : 0;

/** Candidate class names in source order; the last declared is tried first. */
export function envClassNames(code: string): string[] {
  const names: string[] = [];
  for (const m of code.matchAll(
    /\bclass\s+([A-Za-z_$][\w$]*Env)\b|\b(?:const|let|var)\s+([A-Za-z_$][\w$]*Env)\s*=\s*class\b/g,
  )) {
    const n = (m[1] ?? m[2])!;
    if (n !== 'ToolUseEnv' && !names.includes(n)) names.push(n);
  }
  return names.reverse();
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
  private readonly envs = new Map<string, LiveEnv>();
  private nextId = 1;
  private generation = 0;
  private restarting: Promise<QuickJSWASMModule> | null = null;
  /** How many times the WASM module was discarded and rebuilt after a host-level fault. */
  moduleRestarts = 0;

  private constructor(module: QuickJSWASMModule) {
    this.module = module;
  }

  static async create(): Promise<SandboxHost> {
    return new SandboxHost(await newQuickJSWASMModuleFromVariant(variant));
  }

  ping(): string {
    return 'pong';
  }

  liveCount(): number {
    return this.envs.size;
  }

  /** Evaluate environment code and construct its class. Returns its id, class name, setting and tools. */
  async load(code: string, maxTurns = DEFAULTS.maxTurns, limits: SandboxLimits = DEFAULT_LIMITS): Promise<LoadedEnv> {
    if (this.restarting) this.module = await this.restarting;
    this.restarting = null;
    if (typeof code !== 'string' || code.trim() === '') {
      throw new EnvContractError('The environment code is empty. Write a class whose name ends in "Env".');
    }
    const size = overLimit(code, limits.maxCodeBytes);
    if (size > 0) {
      throw new EnvContractError(
        `The environment code is ${Math.ceil(size / 1024)} KiB; the limit is ${limits.maxCodeBytes / 1024} KiB. Shorten it.`,
        { bytes: size },
      );
    }
    const names = envClassNames(code);
    if (names.length === 0) {
      throw new EnvContractError(
        'No environment class found. Define one at top level whose name ends in "Env", e.g. `class MazeEnv { ... }`.',
      );
    }
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(limits.stackBytes);
    runtime.setModuleLoader((name) => ({
      error: new Error(`modules are not available in the sandbox (import of "${name}")`),
    }));
    const context = runtime.newContext();
    const id = `env${this.nextId++}`;
    const partial = {
      id,
      runtime,
      context,
      limits,
      dead: null,
      generation: this.generation,
      deadline: Infinity,
    } as unknown as LiveEnv;
    runtime.setInterruptHandler(() => Date.now() > partial.deadline);
    try {
      this.evalOrThrow(partial, prelude, 'prelude.js', limits.loadMs, 'loading the sandbox prelude');
      const api = context.getProp(context.global, '__spade');
      partial.api = api;
      partial.fns = {
        reset: context.getProp(api, 'reset'),
        step: context.getProp(api, 'step'),
        solution: context.getProp(api, 'solution'),
        close: context.getProp(api, 'close'),
      };
      this.evalOrThrow(partial, code, 'env.js', limits.loadMs, 'loading the environment code');
      const classes = this.evalHandle(
        partial,
        `[${names.map((n) => `typeof ${n} === 'function' ? ${n} : void 0`).join(', ')}]`,
        limits.loadMs,
        'looking up the environment class',
      );
      const namesHandle = this.evalHandle(
        partial,
        JSON.stringify(names),
        limits.loadMs,
        'looking up the environment class',
      );
      const register = context.getProp(api, 'register');
      const maxTurnsHandle = context.newNumber(maxTurns);
      let reply: GuestReply;
      try {
        reply = this.callGuest(partial, register, [namesHandle, classes, maxTurnsHandle], limits.loadMs, 'constructor');
      } finally {
        for (const h of [register, maxTurnsHandle, namesHandle, classes]) h.dispose();
      }
      if (!reply.ok) {
        const err = this.limitError(partial, reply.error, 'the constructor', limits.loadMs);
        if (!(err instanceof SandboxRuntimeError)) throw err;
        throw new SandboxRuntimeError(
          `The constructor ${threw(reply.error)}. The constructor receives maxTurns and must not throw.`,
          { method: 'constructor', ...reply.error },
        );
      }
      const v = reply.value as { className: string; toolUse: boolean; tools: ToolSchema[] };
      partial.info = {
        id,
        className: String(v.className),
        setting: v.toolUse ? 'tool_use' : 'games',
        tools: Array.isArray(v.tools) ? v.tools : [],
      };
      this.envs.set(id, partial);
      return partial.info;
    } catch (err) {
      this.release(partial);
      throw err;
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
    this.checkObservation(env, v[0], 'reset');
    return [v[0], v[1]];
  }

  step(id: string, action: string): StepResult {
    const env = this.live(id);
    if (typeof action !== 'string') throw new EnvContractError(`action must be a string; got ${describe(action)}`);
    const v = this.invoke(env, 'step', action, env.limits.stepMs);
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
    this.checkObservation(env, obs as string, 'step');
    return [
      obs as string,
      reward as number,
      terminated as boolean,
      truncated as boolean,
      info as Record<string, unknown>,
    ];
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

  dispose(id: string): void {
    const env = this.envs.get(id);
    if (!env) return;
    this.envs.delete(id);
    if (!env.dead) {
      try {
        this.invoke(env, 'close', undefined, env.limits.stepMs);
      } catch {
        /* close() is best-effort */
      }
    }
    try {
      this.release(env);
    } catch (err) {
      // Freeing a runtime whose promise jobs were interrupted can abort the WASM module
      // (a QuickJS assertion on leftover objects): start a fresh module, as for any host fault.
      this.hostFault(env, err, 'close');
    }
  }

  // --- internals ------------------------------------------------------------------------

  private live(id: string): LiveEnv {
    const env = this.envs.get(id);
    if (!env) throw new EnvContractError(`No live environment "${id}": it was closed or never loaded. Load it again.`);
    if (env.generation !== this.generation) {
      this.envs.delete(id);
      throw new SandboxRuntimeError(
        `Environment "${id}" was lost when the sandbox restarted after a fault. Load it again.`,
      );
    }
    if (env.dead) throw env.dead;
    return env;
  }

  private checkObservation(env: LiveEnv, obs: string, method: string): void {
    const n = overLimit(obs, env.limits.maxObservationBytes);
    if (n > 0) {
      throw new EnvContractError(
        `${method}() returned a ${Math.ceil(n / 1024)} KiB observation; the limit is ${env.limits.maxObservationBytes / 1024} KiB. Keep observations short.`,
        { method, bytes: n },
      );
    }
  }

  private invoke(
    env: LiveEnv,
    method: 'reset' | 'step' | 'solution' | 'close',
    arg: string | number | undefined,
    ms: number,
  ): unknown {
    const { context } = env;
    const args: QuickJSHandle[] = [];
    if (typeof arg === 'string') args.push(context.newString(arg));
    else if (typeof arg === 'number') args.push(context.newNumber(arg));
    try {
      const reply = this.callGuest(env, env.fns[method], args, ms, method);
      if (!reply.ok) throw this.limitError(env, reply.error, method, ms);
      return reply.value;
    } finally {
      for (const h of args) h.dispose();
    }
  }

  private callGuest(env: LiveEnv, fn: QuickJSHandle, args: QuickJSHandle[], ms: number, method: string): GuestReply {
    const { context } = env;
    env.deadline = Date.now() + ms;
    let result;
    let jobError: { name: string; message: string } | null;
    try {
      result = context.callFunction(fn, context.undefined, ...args);
      jobError = this.runJobs(env);
    } catch (err) {
      throw this.hostFault(env, err, method);
    } finally {
      env.deadline = Infinity;
    }
    if (jobError && !result.error) {
      result.value.dispose();
      throw this.limitError(env, jobError, `${method} (a promise callback)`, ms);
    }
    if (result.error) {
      const e = this.dumpError(context, result.error);
      result.error.dispose();
      throw this.limitError(env, e, method, ms);
    }
    let text: unknown;
    try {
      text = context.getString(result.value);
    } finally {
      result.value.dispose();
    }
    const size = typeof text === 'string' ? text.length : 0;
    if (typeof text !== 'string' || size > env.limits.maxObservationBytes * 4 + 65536) {
      throw new EnvContractError(
        `${method}() returned ${size > 0 ? 'too much data' : 'something that is not JSON'}; return plain strings, numbers, booleans, arrays and objects.`,
        { method },
      );
    }
    let reply: unknown;
    try {
      reply = text.includes('\\u0000') ? JSON.parse(text, reviveNonFinite) : JSON.parse(text);
    } catch {
      reply = undefined;
    }
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
    return r as GuestReply;
  }

  private evalOrThrow(env: LiveEnv, code: string, filename: string, ms: number, what: string): void {
    this.evalHandle(env, code, ms, what, filename).dispose();
  }

  private evalHandle(env: LiveEnv, code: string, ms: number, what: string, filename = 'host.js'): QuickJSHandle {
    const { context } = env;
    env.deadline = Date.now() + ms;
    let result;
    let jobError: { name: string; message: string } | null;
    try {
      result = context.evalCode(code, filename, { type: 'global' });
      jobError = this.runJobs(env);
    } catch (err) {
      throw this.hostFault(env, err, what);
    } finally {
      env.deadline = Infinity;
    }
    if (jobError && !result.error) {
      result.value.dispose();
      throw this.limitError(env, jobError, `${what} (a promise callback)`, ms);
    }
    if (result.error) {
      const e = this.dumpError(context, result.error);
      result.error.dispose();
      const limit = this.limitError(env, e, what, ms);
      if (limit instanceof SandboxRuntimeError) {
        throw new SandboxRuntimeError(`${e.name} while ${what}: ${e.message}${e.where ? ` (${e.where})` : ''}`, {
          ...e,
        });
      }
      throw limit;
    }
    return result.value;
  }

  /**
   * Run the promise callbacks the call queued (`then`, `await`), under the same deadline, so
   * asynchronous environment code behaves as it would in a browser. Returns their first error.
   */
  private runJobs(env: LiveEnv): { name: string; message: string } | null {
    if (!env.runtime.hasPendingJob()) return null; // the common case: one cheap check per call
    const r = env.runtime.executePendingJobs(-1);
    if (r.error) {
      const e = this.dumpError(env.context, r.error);
      r.error.dispose();
      return e;
    }
    // an interrupted job ends quietly (its promise just rejects), so tell by the clock
    if (env.runtime.hasPendingJob() || Date.now() > env.deadline)
      return { name: 'InternalError', message: 'interrupted' };
    return null;
  }

  private dumpError(context: QuickJSContext, h: QuickJSHandle): { name: string; message: string; where: string } {
    try {
      const d = context.dump(h) as unknown;
      if (d && typeof d === 'object') {
        const o = d as { name?: unknown; message?: unknown; stack?: unknown };
        const where = typeof o.stack === 'string' ? (/env\.js:(\d+):(\d+)/.exec(o.stack)?.[0] ?? '') : '';
        return {
          name: typeof o.name === 'string' ? o.name : 'Error',
          message: typeof o.message === 'string' ? o.message : JSON.stringify(d).slice(0, 500),
          where,
        };
      }
      return { name: `thrown ${d === null ? 'null' : typeof d}`, message: String(d).slice(0, 500), where: '' };
    } catch {
      return { name: 'Error', message: 'an unreadable value was thrown', where: '' };
    }
  }

  /** Map a guest exception to a typed error; limit errors also mark the env dead. */
  private limitError(env: LiveEnv, e: { name: string; message: string }, method: string, ms: number): SpadeError {
    let err: SpadeError;
    if (e.name === 'InternalError' && e.message === 'interrupted') {
      err = new SandboxTimeoutError(
        `${method} ran past its ${ms} ms limit and was stopped. Look for loops that never end or work that grows with the input.`,
        { method, limitMs: ms },
      );
    } else if (e.name === 'InternalError' && e.message === 'stack overflow') {
      err = new SandboxMemoryError(
        `${method} overflowed the ${env.limits.stackBytes / 1024} KiB stack (deep or endless recursion). Use a loop instead.`,
        { method, kind: 'stack' },
      );
    } else if (e.name === 'InternalError' && (e.message === 'out of memory' || e.message === 'string too long')) {
      err = new SandboxMemoryError(
        `${method} used more than the ${env.limits.memoryBytes / 2 ** 20} MiB memory limit and was stopped. Keep state small.`,
        { method, kind: 'memory' },
      );
    } else {
      return new SandboxRuntimeError(`${method}() ${threw(e)}`, { method, ...e });
    }
    env.dead = err;
    return err;
  }

  /** A fault outside the guest (the WASM module itself): discard the module and start a fresh one. */
  private hostFault(env: LiveEnv, err: unknown, method: string): SpadeError {
    this.generation++;
    this.moduleRestarts++;
    const stale = [...this.envs.values()];
    this.envs.clear();
    for (const e of stale) this.release(e, true);
    if (env && !stale.includes(env)) this.release(env, true);
    this.restarting = newQuickJSWASMModuleFromVariant(variant);
    return new SandboxRuntimeError(
      `The sandbox faulted during ${method} (${(err as Error)?.message ?? String(err)}) and was restarted; every live environment in it must be loaded again.`,
      { method },
    );
  }

  private release(env: LiveEnv, quiet = false): void {
    try {
      if (env.fns) for (const h of Object.values(env.fns)) if (h?.alive) h.dispose();
      if (env.api?.alive) env.api.dispose();
      if (env.context?.alive) env.context.dispose();
      if (env.runtime?.alive) env.runtime.dispose();
    } catch (err) {
      if (!quiet) throw err;
    }
  }
}
