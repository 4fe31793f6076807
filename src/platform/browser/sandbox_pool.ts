/** A SandboxPool of Web Workers running workers/sandbox.worker.ts. */
import * as Comlink from 'comlink';
import '../rpc.ts'; // installs the error transfer handler on this side too
import { SandboxPool, type PoolOptions, type WorkerHandle } from '../../core/sandbox/pool.ts';
import type { SandboxWorkerApi } from '../../core/sandbox/worker_api.ts';

export function createBrowserSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const worker = new Worker(new URL('../../../workers/sandbox.worker.ts', import.meta.url), {
      type: 'module',
      name: 'spade-sandbox',
    });
    const api = Comlink.wrap<SandboxWorkerApi>(worker) as unknown as WorkerHandle['api'];
    return {
      api,
      terminate: () => worker.terminate(),
      onDeath(listener) {
        // a script that fails to load or throws at top level: fail the waiting calls now, not at the time-out
        worker.addEventListener(
          'error',
          (ev) => listener(new Error(ev.message || 'the sandbox worker failed to start')),
          {
            once: true,
          },
        );
      },
    };
  }, opts);
}
