// An in-process sandbox with the checker beside it: the loop's runner for unit tests (no worker
// pool, so no watchdog — tests that need the kill switch use the Node pool).
import { checkEnv, type CheckOptions } from '../../src/core/env/checker.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import type { CheckingRunner } from '../../src/core/spade/phases.ts';

export function inProcessRunner(): CheckingRunner {
  const api = createSandboxWorkerApi();
  return { ...api, check: (code: string, opts?: CheckOptions) => checkEnv(api, code, opts) };
}
