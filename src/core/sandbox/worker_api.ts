/**
 * What the sandbox worker exposes over comlink: the SandboxHost's calls. (The checker
 * runs on the pool's side, so each of its calls has the pool's watchdog.) The object is
 * returned synchronously and each call waits for QuickJS to be ready, so the
 * worker can start listening at once: a message sent to a module worker while it
 * is still awaiting at top level can be dropped.
 */
import { SandboxHost, type SandboxLimits } from './host.ts';

export function createSandboxWorkerApi() {
  const ready = SandboxHost.create();
  return {
    ping: async () => (await ready).ping(),
    load: async (code: string, maxTurns?: number, limits?: SandboxLimits) => (await ready).load(code, maxTurns, limits),
    reset: async (id: string, seed: number) => (await ready).reset(id, seed),
    step: async (id: string, action: string) => (await ready).step(id, action),
    solution: async (id: string) => (await ready).solution(id),
    dispose: async (id: string) => (await ready).dispose(id),
    liveCount: async () => (await ready).liveCount(),
  };
}

export type SandboxWorkerApi = ReturnType<typeof createSandboxWorkerApi>;
