/**
 * Spawn one of our workers/ modules under Node's worker_threads, with the tsx
 * loader so the TypeScript source runs as is, and wrap it with comlink.
 */
import { Worker } from 'node:worker_threads';
import { Comlink, nodeEndpoint } from '../rpc.ts';

const REGISTER = new URL('../../../scripts/register.js', import.meta.url).href;

export interface NodeWorkerHandle<T> {
  api: Comlink.Remote<T>;
  worker: Worker;
  terminate(): Promise<void>;
}

export function spawnNodeWorker<T>(entry: URL): NodeWorkerHandle<T> {
  const worker = new Worker(entry, { execArgv: ['--import', REGISTER] });
  const api = Comlink.wrap<T>(nodeEndpoint(worker as unknown as Parameters<typeof nodeEndpoint>[0]));
  return {
    api,
    worker,
    async terminate() {
      api[Comlink.releaseProxy]();
      await worker.terminate();
    },
  };
}
