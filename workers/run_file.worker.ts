/**
 * The run file worker: parses and checks a run file's bytes (core/spade/run_file.ts) off the page,
 * so opening a large or hostile file never freezes the tab; the page ends the worker on a cancel or
 * a time-out. Errors keep their class (RunFileError) across the boundary (rpc.ts). Created by
 * `new Worker(new URL('../../workers/run_file.worker.ts', import.meta.url), { type: 'module' })`.
 */
import { parseRunFileBytes, type RunFile } from '../src/core/spade/run_file.ts';
import { exposeApi } from '../src/platform/rpc.ts';

export interface RunFileWorkerApi {
  parse(bytes: Uint8Array): RunFile;
}

const api: RunFileWorkerApi = { parse: (bytes) => parseRunFileBytes(bytes) };

exposeApi(api);
