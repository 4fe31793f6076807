/** A SandboxPool of Node worker_threads running workers/sandbox.worker.ts. */
import { SandboxPool, type PoolOptions } from '../../core/sandbox/pool.ts';
import type { SandboxReply } from '../../core/sandbox/worker_api.ts';
import { spawnNodeWorker } from './workers.ts';

const ENTRY = new URL('../../../workers/sandbox.worker.ts', import.meta.url);

export function createNodeSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const worker = spawnNodeWorker(ENTRY);
    let terminating = false;
    return {
      post: (batch) => worker.postMessage(batch),
      onReplies: (listener) => worker.on('message', (msg: SandboxReply) => listener(msg)),
      terminate: () => {
        terminating = true;
        return worker.terminate();
      },
      onDeath(listener) {
        // an error at start-up (or later) and an exit nobody asked for both end the worker
        worker.once('error', (err: Error) => listener(err));
        worker.once('exit', (code: number) => {
          if (!terminating) listener(new Error(`the worker exited with code ${code}`));
        });
      },
    };
  }, opts);
}
