// The sandbox worker pool under Node worker_threads: typed errors across the boundary, the
// watchdog kill switch for hangs QuickJS cannot interrupt, and the checker run inside a worker.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxMemoryError, SandboxTimeoutError, WorkerCrashedError } from '../../src/core/errors.ts';
import { DEFAULT_LIMITS } from '../../src/core/sandbox/host.ts';
import { CHECK_NAMES } from '../../src/core/env/checker.ts';
import { createNodeSandboxPool } from '../../src/platform/node/sandbox_pool.ts';
import { FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';

describe('sandbox pool (Node workers)', () => {
  const pool = createNodeSandboxPool({ size: 2, graceMs: 700 });
  afterAll(() => pool.terminate());

  it('keeps error classes across the worker boundary', async () => {
    const bomb = HOSTILE.find((h) => h.name === 'deep recursion')!;
    const env = await pool.load(bomb.code);
    const err = await pool.reset(env.id, 0).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxMemoryError);
    expect((err as Error).message).toMatch(bomb.message);
    await pool.dispose(env.id);
  });

  it('kills and replaces a worker stuck in a GC thrash; environments elsewhere keep working', async () => {
    const thrash = HOSTILE.find((h) => h.needsKill)!;
    const limits = { ...DEFAULT_LIMITS, resetMs: 300 };
    // two loads land on the two workers (least busy first)
    const good = await pool.load(FAKE_ENV);
    const bad = await pool.load(thrash.code, 12, limits);
    await pool.reset(good.id, 3);
    const t0 = performance.now();
    const err = await pool.reset(bad.id, 0).catch((e: unknown) => e);
    const waited = performance.now() - t0;
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toMatch(/SandboxTimeoutError|SandboxMemoryError/);
    expect(waited).toBeLessThan(30_000); // the watchdog fired instead of hanging forever
    if (err instanceof SandboxTimeoutError) {
      expect(err.message).toMatch(/worker was stopped and replaced/);
      expect(pool.kills).toBe(1);
      await expect(pool.step(bad.id, 'x')).rejects.toBeInstanceOf(WorkerCrashedError);
    }
    // the other worker's environment is untouched
    const sol = await pool.solution(good.id);
    let last;
    for (const a of sol) last = await pool.step(good.id, a);
    expect(last?.[1]).toBe(1);
    // and the replaced slot takes new work
    const again = await pool.load(FAKE_ENV);
    expect((await pool.reset(again.id, 1))[0]).toContain('Find my number');
    await pool.dispose(again.id);
    await pool.dispose(good.id);
  });

  it('runs the checker inside a worker', async () => {
    const report = await pool.check(FAKE_ENV, { maxTurns: 12 });
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual([...CHECK_NAMES]);
  });
});
