/** A SandboxPool of Node worker_threads running workers/sandbox.worker.ts. */
import { SandboxPool, type PoolOptions, type WorkerHandle } from '../../core/sandbox/pool.ts';
import type { SandboxWorkerApi } from '../../core/sandbox/worker_api.ts';
import { spawnNodeWorker } from './workers.ts';

const ENTRY = new URL('../../../workers/sandbox.worker.ts', import.meta.url);

export function createNodeSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const h = spawnNodeWorker<SandboxWorkerApi>(ENTRY);
    return { api: h.api as unknown as WorkerHandle['api'], terminate: () => h.worker.terminate() };
  }, opts);
}
