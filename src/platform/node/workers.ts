/**
 * Spawn one of our workers/ modules under Node's worker_threads, with the tsx
 * loader so the TypeScript source runs as is, and wrap it with comlink.
 */
import { Worker } from 'node:worker_threads';
import { Comlink, nodeEndpoint } from '../rpc.ts';

/**
 * What a worker needs to run a .ts entry: the TypeScript loader the entry point registered
 * (bin/ts_loader.js sets SPADE_TS_LOADER to its URL; the test runner sets it too). Unset: the
 * process runs without one, and so do its workers.
 */
const loaderArgs = (): string[] => (process.env.SPADE_TS_LOADER ? ['--import', process.env.SPADE_TS_LOADER] : []);

export interface NodeWorkerHandle<T> {
  api: Comlink.Remote<T>;
  worker: Worker;
  terminate(): Promise<void>;
}

export function spawnNodeWorker<T>(entry: URL): NodeWorkerHandle<T> {
  const worker = new Worker(entry, { execArgv: loaderArgs() });
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
