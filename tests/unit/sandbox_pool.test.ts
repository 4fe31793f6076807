// The sandbox worker pool under Node worker_threads: typed errors across the boundary, the
// watchdog kill switch for hangs QuickJS cannot interrupt, the checker run call by call under it,
// timers that never outlive the pool, and environments lost with a worker failing with the cause.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { SandboxMemoryError, SandboxTimeoutError, WorkerCrashedError } from '../../src/core/errors.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { SandboxPool, type WorkerHandle } from '../../src/core/sandbox/pool.ts';
import { CHECK_NAMES, type CheckReport } from '../../src/core/env/checker.ts';
import { validate } from '../../src/cli/cmd_env.ts';
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

/** A worker stand-in: `hang` names calls that never answer; `die()` reports a crash. */
function fakeWorkers(opts: { ping?: 'hang'; hang?: string[] } = {}) {
  const made: { die(err: Error): void; terminated: boolean }[] = [];
  const factory = (): WorkerHandle => {
    let listener: ((err: Error) => void) | undefined;
    const never = new Promise<never>(() => undefined);
    const answer = <T>(name: string, value: T): Promise<T> =>
      opts.hang?.includes(name) ? never : Promise.resolve(value);
    const w = { die: (err: Error) => listener?.(err), terminated: false };
    made.push(w);
    let n = 0;
    return {
      api: {
        ping: () => (opts.ping === 'hang' ? never : Promise.resolve('pong')),
        load: () => answer('load', { id: `e${++n}`, className: 'FakeEnv', setting: 'games' as const, tools: [] }),
        reset: () => answer('reset', ['o', {}] as [string, Record<string, unknown>]),
        step: () =>
          answer('step', ['o', 0, false, false, {}] as [string, number, boolean, boolean, Record<string, unknown>]),
        solution: () => answer('solution', ['a']),
        dispose: () => answer('dispose', undefined),
        liveCount: () => Promise.resolve(0),
      },
      terminate: () => {
        w.terminated = true;
      },
      onDeath: (l) => (listener = l),
    };
  };
  return { factory, made };
}

describe('sandbox pool timers and lost environments', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('terminate() clears the start-up timer of a worker that never answered', async () => {
    vi.useFakeTimers();
    const pool = new SandboxPool(fakeWorkers({ ping: 'hang' }).factory, { startMs: 60_000 });
    expect(vi.getTimerCount()).toBe(1);
    await pool.terminate();
    expect(vi.getTimerCount()).toBe(0); // nothing keeps the CLI alive for a minute
  });

  it('a worker that dies at start-up fails the waiting call at once, with the cause', async () => {
    vi.useFakeTimers();
    const { factory, made } = fakeWorkers({ ping: 'hang' });
    const pool = new SandboxPool(factory, { startMs: 60_000 });
    const call = pool.load('class AEnv {}').catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10);
    made[0]!.die(new Error('Cannot find module'));
    const err = await call; // no timer advanced: the death itself rejected it
    expect(err).toBeInstanceOf(WorkerCrashedError);
    expect((err as Error).message).toMatch(/its worker died \(Cannot find module\)/);
    expect(made[0]!.terminated).toBe(true);
    await pool.terminate();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('after a watchdog kill, siblings on that worker fail naming the cause, and terminate() leaves no timer', async () => {
    vi.useFakeTimers();
    const { factory, made } = fakeWorkers({ hang: ['reset'] });
    const pool = new SandboxPool(factory, { size: 1, graceMs: 500 });
    const a = await pool.load('class AEnv {}');
    const b = await pool.load('class BEnv {}');
    const hung = pool.reset(a.id, 0).catch((e: unknown) => e);
    const inFlight = pool.reset(b.id, 0).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(DEFAULT_LIMITS.resetMs + 500);
    const err = await hung;
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect((err as SandboxTimeoutError).data.killed).toBe(true);
    expect(made[0]!.terminated).toBe(true);
    // the sibling's call in flight and its later calls both name what happened
    expect(((await inFlight) as Error).message).toMatch(
      /replaced because reset\(\) of p1 did not return within 1500 ms/,
    );
    await expect(pool.step(b.id, 'x')).rejects.toThrow(
      /"p2" was lost when its sandbox worker was replaced because reset\(\) of p1 did not return within 1500 ms/,
    );
    await pool.terminate();
    expect(vi.getTimerCount()).toBe(0);
    await expect(pool.load('class CEnv {}')).rejects.toThrow(/shut down/);
  });
});

describe('checker and validate against hostile programs (findings 1 and 10)', () => {
  const pool = createNodeSandboxPool({ size: 1, graceMs: 500 });
  afterAll(() => pool.terminate());
  // a native loop QuickJS cannot interrupt: only the watchdog stops it
  const NATIVE_HANG = `class HangEnv { reset() { return [String([].concat(Array(2 ** 32 - 1)).length), {}]; }
    step() { return ['o', 0, true, false, {}]; } solution() { return ['a', 'b']; } }`;

  it('check() rejects with the watchdog error and the partial report; the pool serves the next program', async () => {
    const err = await pool.check(NATIVE_HANG).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect((err as SandboxTimeoutError).data.killed).toBe(true);
    const report = (err as SandboxTimeoutError).data.report as CheckReport;
    expect(report.checks.map((c) => [c.name, c.ok])).toEqual([
      ['loads', true],
      ['reset', false],
    ]);
    expect((await pool.check(FAKE_ENV)).ok).toBe(true);
  });

  it('check() reports a hostile thrown value as a failed check, without waiting for a watchdog', async () => {
    const finding1 = HOSTILE.find((h) => h.name.startsWith('inherited toJSON'))!;
    const report = await pool.check(finding1.code);
    expect(report.ok).toBe(false);
    expect(report.checks[0]!.message).toMatch(/Error while loading the environment code: x/);
  });

  it('spade validate gives per-file results after a watchdog kill and exits 1 with a JSON report', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-validate-'));
    const files = {
      hang: NATIVE_HANG,
      tojson: HOSTILE[HOSTILE.findIndex((h) => h.name.startsWith('inherited toJSON'))]!.code,
      good: FAKE_ENV,
    };
    for (const [name, code] of Object.entries(files)) await writeFile(join(dir, `${name}.js`), code);
    const lines: string[] = [];
    const io = { out: (s: string) => lines.push(s), err: (s: string) => lines.push(s) } as unknown as Parameters<
      typeof validate
    >[1];
    const code = await validate(['--json', ...Object.keys(files).map((n) => join(dir, `${n}.js`))], io);
    expect(code).toBe(1);
    const out = JSON.parse(lines[lines.length - 1]!) as {
      ok: boolean;
      files: { ok: boolean; error?: { name: string } }[];
    };
    expect(out.ok).toBe(false);
    expect(out.files.map((f) => [f.ok, f.error?.name])).toEqual([
      [false, 'SandboxTimeoutError'],
      [false, undefined],
      [true, undefined],
    ]);
    await rm(dir, { recursive: true });
  });
});
