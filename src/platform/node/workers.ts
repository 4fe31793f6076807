/**
 * Spawn one of our workers/ modules under Node's worker_threads, with the tsx loader so the
 * TypeScript source runs as is.
 */
import { Worker } from 'node:worker_threads';

/**
 * What a worker needs to run a .ts entry: the TypeScript loader the entry point registered
 * (bin/ts_loader.js sets SPADE_TS_LOADER to its URL; the test runner sets it too). Unset: the
 * process runs without one, and so do its workers.
 */
const loaderArgs = (): string[] => (process.env.SPADE_TS_LOADER ? ['--import', process.env.SPADE_TS_LOADER] : []);

/** `workerData` is cloned into the worker (a WebAssembly.Module is shared, not copied). */
export function spawnNodeWorker(entry: URL, workerData?: unknown): Worker {
  return new Worker(entry, { execArgv: loaderArgs(), workerData });
}
