/**
 * The sandbox worker: runs generated environment code in QuickJS, off the page.
 * Browser: `new Worker(new URL('./sandbox.worker.ts', import.meta.url), {type: 'module'})`.
 * Node: worker_threads with the tsx loader (src/platform/node/workers.ts).
 * It speaks the pool's batch protocol (src/core/sandbox/worker_api.ts: batches of calls in,
 * one reply per call out, as each finishes).
 */
import { serveSandbox, type CallBatch, type SandboxReply } from '../src/core/sandbox/worker_api.ts';

interface Port {
  postMessage(msg: SandboxReply): void;
}
const g = globalThis as {
  WorkerGlobalScope?: unknown;
  process?: { getBuiltinModule(id: string): unknown };
} & Port & { addEventListener(type: 'message', fn: (ev: { data: CallBatch }) => void): void };

if (typeof g.WorkerGlobalScope !== 'undefined') {
  const onBatch = serveSandbox((msg) => g.postMessage(msg));
  g.addEventListener('message', (ev) => onBatch(ev.data));
} else {
  // Node worker_threads; getBuiltinModule keeps bundlers from resolving a Node import
  const wt = g.process!.getBuiltinModule('node:worker_threads') as {
    parentPort: (Port & { on(type: 'message', fn: (msg: CallBatch) => void): void }) | null;
  };
  const port = wt.parentPort;
  if (!port) throw new Error('sandbox.worker: not running inside a worker');
  const onBatch = serveSandbox((msg) => port.postMessage(msg));
  port.on('message', onBatch);
}
