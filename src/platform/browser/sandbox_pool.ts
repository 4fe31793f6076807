/** A SandboxPool of Web Workers running workers/sandbox.worker.ts. */
import { SandboxPool, type PoolOptions } from '../../core/sandbox/pool.ts';
import type { SandboxReply } from '../../core/sandbox/worker_api.ts';

export function createBrowserSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const worker = new Worker(new URL('../../../workers/sandbox.worker.ts', import.meta.url), {
      type: 'module',
      name: 'spade-sandbox',
    });
    return {
      post: (batch) => worker.postMessage(batch),
      onReplies: (listener) =>
        worker.addEventListener('message', (ev: MessageEvent<SandboxReply>) => listener(ev.data)),
      terminate: () => worker.terminate(),
      onDeath(listener) {
        // a script that fails to load or throws at top level: fail the waiting calls now, not at the time-out
        worker.addEventListener(
          'error',
          (ev) => listener(new Error(ev.message || 'the sandbox worker failed to start')),
          { once: true },
        );
      },
    };
  }, opts);
}
