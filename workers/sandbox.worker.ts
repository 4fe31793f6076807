/**
 * The sandbox worker: runs generated environment code in QuickJS, off the page.
 * Browser: `new Worker(new URL('./sandbox.worker.ts', import.meta.url), {type: 'module'})`.
 * Node: worker_threads with the tsx loader (src/platform/node/workers.ts).
 * The API lives in src/core/sandbox/worker_api.ts (pure, testable in-process).
 */
import { createSandboxWorkerApi } from '../src/core/sandbox/worker_api.ts';
import { exposeApi } from '../src/platform/rpc.ts';

exposeApi(createSandboxWorkerApi());
