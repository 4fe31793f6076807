/** A SandboxPool of Node worker_threads running workers/sandbox.worker.ts. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { SandboxPool, type PoolOptions } from '../../core/sandbox/pool.ts';
import type { SandboxReply } from '../../core/sandbox/worker_api.ts';
import { spawnNodeWorker } from './workers.ts';

const ENTRY = new URL('../../../workers/sandbox.worker.ts', import.meta.url);

let compiled: WebAssembly.Module | undefined;
/**
 * QuickJS's WASM, compiled once per process and handed to every sandbox worker it starts. V8 compiles
 * a module's functions lazily, on first call, into code every instance of that Module shares: a
 * worker given it starts on code the earlier workers already compiled. Each worker compiling its own
 * paid that again whenever no other live worker held it (a start cost about 360 CPU-ms against about
 * 125; docs/benchmarks.md, "Sandbox worker start").
 */
export function quickjsWasm(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(
    readFileSync(createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync/wasm')),
  );
  return compiled;
}

export function createNodeSandboxPool(opts: PoolOptions = {}): SandboxPool {
  return new SandboxPool(() => {
    const worker = spawnNodeWorker(ENTRY, { quickjs: quickjsWasm() });
    let terminating = false;
    return {
      post: (batch) => worker.postMessage(batch),
      onReplies: (listener) => worker.on('message', (msg: SandboxReply) => listener(msg)),
      terminate: () => {
        terminating = true;
        return worker.terminate();
      },
      onDeath(listener) {
        // an error at start-up (or later) and an exit nobody asked for both end the worker
        worker.once('error', (err: Error) => listener(err));
        worker.once('exit', (code: number) => {
          if (!terminating) listener(new Error(`the worker exited with code ${code}`));
        });
      },
    };
  }, opts);
}
