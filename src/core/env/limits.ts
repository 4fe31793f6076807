/** Sandbox limits, from the config's schema-listed knobs (kept apart from the QuickJS host so the page can import them cheaply). */
import { DEFAULTS, type Config } from '../config.ts';

export interface SandboxLimits {
  memoryBytes: number;
  stackBytes: number;
  loadMs: number;
  resetMs: number;
  stepMs: number;
  maxCodeBytes: number;
  maxObservationBytes: number;
  /** Longest action (UTF-16 units) passed to step(); longer ones are refused on the host. */
  maxActionChars: number;
}

/**
 * Deepest bracket nesting accepted in environment code and in actions, checked on the host before
 * QuickJS parses either. QuickJS's parser (and JSON.parse) recurse on the host's native stack, which
 * its own stack limit does not see: `[[[…` 800 deep in source, or a `<tool_call>` argument ~12,800
 * deep, overflowed a 1 MiB Node stack and took the whole WASM module down. 100 is 4-8× below
 * the smallest depth measured to fail, and far above what real code nests (rarely 20).
 */
export const MAX_NESTING = 100;

export function limitsFromConfig(
  c: Pick<
    Config,
    | 'sandboxMemoryMiB'
    | 'sandboxStackKiB'
    | 'resetTimeoutMs'
    | 'stepTimeoutMs'
    | 'maxCodeKiB'
    | 'maxObservationKiB'
    | 'maxActionKiB'
  >,
): SandboxLimits {
  return {
    memoryBytes: c.sandboxMemoryMiB * 2 ** 20,
    stackBytes: Math.min(c.sandboxStackKiB, 256) * 1024, // > 256 KiB can overflow the host stack
    loadMs: c.resetTimeoutMs,
    resetMs: c.resetTimeoutMs,
    stepMs: c.stepTimeoutMs,
    maxCodeBytes: c.maxCodeKiB * 1024,
    maxObservationBytes: c.maxObservationKiB * 1024,
    maxActionChars: c.maxActionKiB * 1024,
  };
}

export const DEFAULT_LIMITS: SandboxLimits = limitsFromConfig(DEFAULTS);

/**
 * What the memory limits of the environments in one QuickJS module (one WASM heap, which grows
 * to 2 GiB at most) may add up to: the rest is left for the runtimes' own overhead and for
 * overshoot between two measurements. A module refuses an environment that would pass it.
 */
export const MODULE_BUDGET_BYTES = 1536 * 2 ** 20;
