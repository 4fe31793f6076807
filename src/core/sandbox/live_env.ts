/**
 * One live environment of the sandbox host (host.ts): its own QuickJS runtime and context, made
 * with the environment's limits and an interrupt handler on the deadline of the call in flight,
 * and the metering of its memory.
 *
 * Memory: this QuickJS build cannot see allocation sizes (no malloc_usable_size in WASM), so
 * the runtime's own memory limit counts 8 bytes per allocation and never stops a big one. The
 * host enforces the limit itself, at no cost while nothing is allocated (heap.ts): a growth of
 * the WASM heap during a run that would take it past the running environment's limit is refused
 * inside the allocation (chargeGrowth: the guest gets "out of memory", however slow the machine),
 * and the runtime is measured (QuickJS's memory report) only when a cheap signal says it may have
 * grown — the heap grew during its run, its live allocation count rose by MEASURE_AFTER_ALLOCATIONS,
 * or it has run MEASURE_AFTER_GUEST_MS since the last measurement — and every MEMORY_CHECK_MS inside
 * a long run. A module (one WASM heap, 2 GiB at most) takes environments only while their limits fit
 * MODULE_BUDGET_BYTES in all (host.ts), so none can starve its neighbours.
 *
 * Once the interrupt has fired, the runtime's stack limit drops to nothing (stop), so no async
 * function, promise executor or callback can start and swallow the interrupt again.
 */
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten-core';
import type { SpadeError } from '../errors.ts';
import type { LoadedEnv } from '../env/contract.ts';
import type { SandboxLimits } from '../env/limits.ts';
import { oneArgCall, type OneArgCall } from './ffi_call.ts';
import { allocationCounter } from './heap.ts';

/** While guest code runs, its memory is measured at most this often (a report costs ~0.1 ms). */
export const MEMORY_CHECK_MS = 10;
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

export interface LiveEnv {
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

/**
 * A fresh runtime and context in `module` (whose heap is `memory`) with the limits set and the
 * interrupt handler on the env's deadline. Guest code found running with no deadline is stopped at
 * once and reported to `onRunWithoutDeadline` (a host bug, never expected).
 */
export function newLiveEnv(
  module: QuickJSWASMModule,
  memory: WebAssembly.Memory,
  id: string,
  generation: number,
  limits: SandboxLimits,
  onRunWithoutDeadline: () => void,
): LiveEnv {
  const runtime = module.newRuntime();
  runtime.setMemoryLimit(limits.memoryBytes);
  runtime.setMaxStackSize(limits.stackBytes);
  runtime.setModuleLoader((name) => ({
    error: new Error(`modules are not available in the sandbox (import of "${name}")`),
  }));
  const context = runtime.newContext();
  const env = {
    id,
    runtime,
    context,
    limits,
    dead: null,
    generation,
    deadline: Infinity,
    interrupted: false,
    overMemory: false,
    nextMemoryCheck: 0,
    grownThisRun: 0,
    guestMsSinceMeasure: 0,
    grewSinceMeasure: false,
    allocations: allocationCounter(memory, runtime, limits.memoryBytes),
    allocationsAtMeasure: 0,
    caller: oneArgCall(context),
  } as unknown as LiveEnv; // api, fns and info are set by load() once the prelude has run
  runtime.setInterruptHandler(() => {
    // between calls the deadline is Infinity and no guest code may run (no dump, no getter, no
    // toJSON read by the host): if some does, stop it and count it instead of letting it run
    if (env.deadline === Infinity) {
      onRunWithoutDeadline();
      env.interrupted = true;
      return true;
    }
    const now = performance.now();
    if (env.overMemory || now > env.deadline) return stop(env);
    if (now >= env.nextMemoryCheck) {
      env.nextMemoryCheck = now + MEMORY_CHECK_MS;
      if (overMemoryLimit(env)) return stop(env);
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
function stop(env: LiveEnv): true {
  if (!env.interrupted) {
    env.interrupted = true;
    env.runtime.setMaxStackSize(1);
  }
  return true;
}

/**
 * The heap-growth policy for the environment whose guest code is running (called inside the
 * allocator): the growth is charged to it and refused once it passes the environment's limit plus
 * the allocator's overgrowth. The environment is then marked over its limit, and its run fails
 * with SandboxMemoryError whatever the guest does.
 */
export function chargeGrowth(env: LiveEnv, from: number, to: number): boolean {
  if (!env.overMemory && env.grownThisRun + (to - from) <= env.limits.memoryBytes + overgrowth(from)) {
    env.grownThisRun += to - from;
    env.grewSinceMeasure = true;
    return true;
  }
  env.overMemory = true;
  return false;
}

/**
 * Measure the runtime (QuickJS's own report of the objects it holds) and flag it when over its
 * limit; the signals that call for a measurement start again from here.
 */
export function overMemoryLimit(env: LiveEnv): boolean {
  if (!env.overMemory && usedBytes(env) > env.limits.memoryBytes) env.overMemory = true;
  env.guestMsSinceMeasure = 0;
  env.grewSinceMeasure = false;
  if (env.allocations) env.allocationsAtMeasure = env.allocations();
  return env.overMemory;
}

/** A cheap signal says the runtime may have grown since it was last measured. */
export function dueForMeasure(env: LiveEnv): boolean {
  return (
    env.grewSinceMeasure ||
    env.guestMsSinceMeasure >= MEASURE_AFTER_GUEST_MS ||
    (env.allocations !== null && env.allocations() - env.allocationsAtMeasure >= MEASURE_AFTER_ALLOCATIONS)
  );
}

/** True when the runtime holds more than three quarters of its limit (read from QuickJS's own report). */
export function nearMemoryLimit(env: LiveEnv): boolean {
  return usedBytes(env) > env.limits.memoryBytes * 0.75;
}

/** Bytes the runtime holds, by QuickJS's memory report ("memory used"); 0 if it cannot be read. */
function usedBytes(env: LiveEnv): number {
  try {
    const used = /memory used\s+\d+\s+(\d+)/.exec(env.runtime.dumpMemoryUsage());
    return used ? Number(used[1]) : 0;
  } catch {
    return 0;
  }
}
