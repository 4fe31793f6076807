/** A SandboxPool of Node worker_threads running workers/sandbox.worker.ts. */
import { SandboxPool, type PoolOptions, type WorkerHandle } from '../../core/sandbox/pool.ts';
import type { SandboxWorkerApi } from '../../core/sandbox/worker_api.ts';
import { spawnNodeWorker } from './workers.ts';

const ENTRY = new URL('../../../workers/sandbox.worker.ts', import.meta.url);

export function createNodeSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const h = spawnNodeWorker<SandboxWorkerApi>(ENTRY);
    let terminating = false;
    return {
      api: h.api as unknown as WorkerHandle['api'],
      terminate: () => {
        terminating = true;
        return h.worker.terminate();
      },
      onDeath(listener) {
        // an error at start-up (or later) and an exit nobody asked for both end the worker
        h.worker.once('error', (err: Error) => listener(err));
        h.worker.once('exit', (code: number) => {
          if (!terminating) listener(new Error(`the worker exited with code ${code}`));
        });
      },
    };
  }, opts);
}
