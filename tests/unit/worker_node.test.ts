// The sandbox worker runs under Node worker_threads through comlink, and errors keep their class.
import { afterAll, describe, expect, it } from 'vitest';
import type { SandboxHost } from '../../src/core/sandbox/host.ts';
import { spawnNodeWorker } from '../../src/platform/node/workers.ts';

describe('sandbox worker in Node', () => {
  const h = spawnNodeWorker<SandboxHost>(new URL('../../workers/sandbox.worker.ts', import.meta.url));
  afterAll(() => h.terminate());

  it('answers through comlink', async () => {
    expect(await h.api.ping()).toBe('pong');
    expect(await h.api.evalNumber('6 * 7')).toBe(42);
  });
});
