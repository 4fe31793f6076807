/**
 * The sandbox worker's side: a SandboxHost and the message protocol the pool speaks to it.
 *
 * The pool sends batches of calls (several sessions' steps in one message); the worker runs them
 * in order, one at a time, and posts each call's reply as soon as that call has finished, so a
 * reply never waits for the rest of its batch and the pool knows when the next call started
 * (its watchdog times a call from then). A reply is a flat [seq, ok, value or error] (nested
 * records cost ~20% more to clone); errors cross as {name, message, data} and are rebuilt as their
 * own class on the pool's side. The worker starts listening at once and each batch waits
 * for QuickJS to be ready: a message sent to a module worker while it is still awaiting at top
 * level can be dropped.
 *
 * createSandboxWorkerApi is the same host as an in-process EnvRunner (the checker, tests, the Lab).
 */
import { serializeError, type SerializedError } from '../errors.ts';
import type { SandboxLimits } from '../env/limits.ts';
import { SandboxHost } from './host.ts';

/** One call to the worker; `seq` numbers the calls a pool sends to one worker, in order. */
export type SandboxCall = { seq: number } & (
  | { op: 'ping' }
  | { op: 'load'; code: string; maxTurns?: number; limits?: SandboxLimits }
  | { op: 'reset'; id: string; seed: number }
  | { op: 'step'; id: string; action: string }
  | { op: 'solution'; id: string }
  | { op: 'dispose'; id: string }
);

/** What the worker posts, one message per finished call, in call order. */
export type SandboxReply = [seq: number, ok: true, value: unknown] | [seq: number, ok: false, error: SerializedError];

/** What the pool posts: calls to run in order. */
export type CallBatch = SandboxCall[];

function run(host: SandboxHost, c: SandboxCall): unknown {
  switch (c.op) {
    case 'ping':
      return host.ping();
    case 'load':
      return host.load(c.code, c.maxTurns, c.limits);
    case 'reset':
      return host.reset(c.id, c.seed);
    case 'step':
      return host.step(c.id, c.action);
    case 'solution':
      return host.solution(c.id);
    case 'dispose':
      return host.dispose(c.id);
  }
}

/**
 * The worker's message handler: give it every CallBatch received; it calls `post` with each reply.
 * `ready` is the worker's host (created once, at start).
 */
export function serveSandbox(
  post: (msg: SandboxReply) => void,
  ready: Promise<SandboxHost> = SandboxHost.create(),
): (batch: CallBatch) => void {
  let chain: Promise<void> = Promise.resolve();
  const fail = (c: SandboxCall, err: unknown) => post([c.seq, false, serializeError(err)]);
  const runBatch = async (batch: CallBatch) => {
    let host: SandboxHost;
    try {
      host = await ready;
    } catch (err) {
      for (const c of batch) fail(c, err); // QuickJS did not load: every call says why
      return;
    }
    for (const c of batch) {
      let value: unknown;
      try {
        value = run(host, c);
        if (value instanceof Promise) value = await value;
      } catch (err) {
        fail(c, err);
        continue;
      }
      try {
        post([c.seq, true, value]);
      } catch (err) {
        fail(c, err); // a value that cannot be cloned (never expected: replies are parsed JSON)
      }
    }
  };
  return (batch) => {
    chain = chain.then(() => runBatch(batch));
  };
}

/** The host's calls as an in-process EnvRunner; each waits for QuickJS to be ready. */
export function createSandboxWorkerApi() {
  const ready = SandboxHost.create();
  return {
    load: async (code: string, maxTurns?: number, limits?: SandboxLimits) => (await ready).load(code, maxTurns, limits),
    reset: async (id: string, seed: number) => (await ready).reset(id, seed),
    step: async (id: string, action: string) => (await ready).step(id, action),
    solution: async (id: string) => (await ready).solution(id),
    dispose: async (id: string) => (await ready).dispose(id),
  };
}
