/**
 * What the sandbox worker exposes over comlink: the SandboxHost's calls plus the
 * checker, run next to the host so a full check is one message.
 */
import { checkEnv, type CheckOptions } from '../env/checker.ts';
import { SandboxHost, type SandboxLimits } from './host.ts';

export async function createSandboxWorkerApi() {
  const host = await SandboxHost.create();
  return {
    ping: () => host.ping(),
    load: (code: string, maxTurns?: number, limits?: SandboxLimits) => host.load(code, maxTurns, limits),
    reset: (id: string, seed: number) => host.reset(id, seed),
    step: (id: string, action: string) => host.step(id, action),
    solution: (id: string) => host.solution(id),
    dispose: (id: string) => host.dispose(id),
    check: (code: string, opts?: CheckOptions) => checkEnv(host, code, opts),
    liveCount: () => host.liveCount(),
  };
}

export type SandboxWorkerApi = Awaited<ReturnType<typeof createSandboxWorkerApi>>;
