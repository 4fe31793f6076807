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
}

export function limitsFromConfig(
  c: Pick<
    Config,
    'sandboxMemoryMiB' | 'sandboxStackKiB' | 'resetTimeoutMs' | 'stepTimeoutMs' | 'maxCodeKiB' | 'maxObservationKiB'
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
  };
}

export const DEFAULT_LIMITS: SandboxLimits = limitsFromConfig(DEFAULTS);
