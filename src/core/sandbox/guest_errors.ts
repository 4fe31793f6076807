/**
 * What a guest's failure becomes on the host (host.ts): the record of a thrown value (read by the
 * prelude, inside the guest, under a deadline; only its name, message and place are taken), and
 * the typed error it turns into — SandboxTimeoutError, SandboxMemoryError (stack or heap) or
 * SandboxRuntimeError — with a message a user, or a Designer model, can act on.
 */
import {
  SandboxMemoryError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SpadeError,
  deserializeError,
  serializeError,
} from '../errors.ts';
import type { LiveEnv } from './live_env.ts';

/** What the guest threw, as read by the prelude (or by the host, for primitives only). */
export interface GuestError {
  name: string;
  message: string;
  where: string;
  /** Known on the host, not claimed by the guest: the interrupt handler fired, or memory ran out. */
  kind?: 'timeout' | 'memory';
}

/** A guest failure on its way to becoming a typed error. */
export class GuestFailure {
  constructor(
    readonly error: GuestError,
    readonly method: string,
  ) {}
}

/** "threw TypeError: x" for errors, "threw a number: 5" / "threw an object: …" for other thrown values. */
export function threw(e: { name: string; message: string }): string {
  if (!e.name.startsWith('thrown ')) return `threw ${e.name}: ${e.message}`;
  const what = e.name.slice(7);
  return `threw ${/^[aeiou]/.test(what) ? 'an' : 'a'} ${what}: ${e.message}`;
}

/** The prelude's record of a thrown value as a GuestError (only its fields: nothing else is taken from the guest). */
export const guestError = (e: { name: string; message: string; stack?: unknown }): GuestError => ({
  name: e.name,
  message: e.message,
  where: whereIn(typeof e.stack === 'string' ? e.stack : undefined),
});

/** "env.js:3:14" from a guest stack, or ''. */
export const whereIn = (stack: string | undefined): string =>
  typeof stack === 'string' ? (/env\.js:(\d+):(\d+)/.exec(stack)?.[0] ?? '') : '';

/** Why the host stopped the guest: over its memory limit, else out of time. */
export function stoppedError(env: LiveEnv, message = 'interrupted'): GuestError {
  if (env.overMemory) return { name: 'InternalError', message: 'out of memory', where: '', kind: 'memory' };
  return { name: 'InternalError', message, where: '', kind: 'timeout' };
}

/** Map a guest exception to a typed error; limit errors also mark the env dead. */
export function limitError(env: LiveEnv, e: GuestError, method: string, ms: number): SpadeError {
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
