/**
 * The sandbox worker: runs generated environment code in QuickJS, off the page.
 * Browser: `new Worker(new URL('./sandbox.worker.ts', import.meta.url), {type: 'module'})`.
 * Node: worker_threads with the tsx loader (src/platform/node/workers.ts); its workerData may hold
 * `{ quickjs }`, QuickJS's WASM compiled once by the pool (src/platform/node/sandbox_pool.ts).
 * It speaks the pool's batch protocol (src/core/sandbox/worker_api.ts: batches of calls in,
 * one reply per call out, as each finishes).
 */
import { SandboxHost } from '../src/core/sandbox/host.ts';
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
    workerData: { quickjs?: unknown } | undefined;
  };
  const port = wt.parentPort;
  if (!port) throw new Error('sandbox.worker: not running inside a worker');
  const quickjs = wt.workerData?.quickjs;
  const compiled = quickjs instanceof WebAssembly.Module ? quickjs : undefined;
  const onBatch = serveSandbox((msg) => port.postMessage(msg), SandboxHost.create({ compiled }));
  port.on('message', onBatch);
}
