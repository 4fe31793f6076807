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
import type { SandboxCall, SandboxReply } from '../../src/core/sandbox/worker_api.ts';
import { CHECK_NAMES, type CheckReport } from '../../src/core/env/checker.ts';
import { validate } from '../../src/cli/cmd_env.ts';
import { createNodeSandboxPool, quickjsWasm } from '../../src/platform/node/sandbox_pool.ts';
import { spawnNodeWorker } from '../../src/platform/node/workers.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';
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

  it('kills and replaces a worker stuck in a native loop; environments elsewhere keep working', async () => {
    const nativeLoop = HOSTILE.find((h) => h.needsKill)!;
    const limits = { ...DEFAULT_LIMITS, resetMs: 300 };
    // two loads land on the two workers (least busy first)
    const good = await pool.load(FAKE_ENV);
    const bad = await pool.load(nativeLoop.code, 12, limits);
    await pool.reset(good.id, 3);
    // no time bound: a watchdog that never fired would leave this await hanging, and the test fails at its limit
    const err = await pool.reset(bad.id, 0).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toMatch(/SandboxTimeoutError|SandboxMemoryError/);
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

/**
 * A worker stand-in that runs its calls in order: `hang` names calls that never answer, `takes`
 * how long (timer ms) a call runs before it answers; `die()` reports a crash.
 */
function fakeWorkers(
  opts: { ping?: 'hang'; failPing?: (worker: number) => boolean; hang?: string[]; takes?: Record<string, number> } = {},
) {
  const made: { die(err: Error): void; terminated: boolean; posts: number }[] = [];
  const factory = (): WorkerHandle => {
    let death: ((err: Error) => void) | undefined;
    let reply: ((msg: SandboxReply) => void) | undefined;
    const w = { die: (err: Error) => death?.(err), terminated: false, posts: 0 };
    const index = made.push(w) - 1;
    let n = 0;
    let running: Promise<void> = Promise.resolve(); // a worker runs its calls in order
    let stuck = false; // one that hangs holds up the rest
    const answer = (c: SandboxCall): unknown => {
      if (c.op === 'load') return { id: `e${++n}`, className: 'FakeEnv', setting: 'games', tools: [] };
      if (c.op === 'reset') return ['o', {}];
      if (c.op === 'step') return ['o', 0, false, false, {}];
      if (c.op === 'solution') return ['a'];
      if (c.op === 'ping') return 'pong';
      return undefined;
    };
    return {
      post: (batch) => {
        w.posts++;
        running = running.then(async () => {
          for (const c of batch) {
            if (stuck || (c.op === 'ping' ? opts.ping === 'hang' : opts.hang?.includes(c.op))) {
              stuck = true;
              return;
            }
            const ms = opts.takes?.[c.op] ?? 0;
            if (ms > 0) await new Promise((r) => setTimeout(r, ms));
            if (c.op === 'ping' && opts.failPing?.(index))
              reply?.([c.seq, false, { name: 'Error', message: 'QuickJS did not instantiate', data: {} }]);
            else reply?.([c.seq, true, answer(c)]);
          }
        });
      },
      onReplies: (l) => (reply = l),
      terminate: () => {
        w.terminated = true;
      },
      onDeath: (l) => (death = l),
    };
  };
  return { factory, made };
}

describe("QuickJS's WASM, compiled once per process", () => {
  // a valid WASM module that is not QuickJS: whoever runs it instead of compiling their own fails
  const notQuickjs = new WebAssembly.Module(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));

  it('is one Module for the whole process, and a host runs the module it is given', async () => {
    expect(quickjsWasm()).toBe(quickjsWasm());
    expect(WebAssembly.Module.imports(quickjsWasm()).some((i) => i.kind === 'memory')).toBe(true);
    await expect(SandboxHost.create({ compiled: notQuickjs })).rejects.toThrow();
    // the same environment on a host that compiled QuickJS itself answers the same
    const [shared, own] = [await SandboxHost.create({ compiled: quickjsWasm() }), await SandboxHost.create()];
    const [a, b] = [await shared.load(FAKE_ENV), await own.load(FAKE_ENV)];
    expect(shared.reset(a.id, 3)).toEqual(own.reset(b.id, 3));
    expect(shared.step(a.id, 'x')).toEqual(own.step(b.id, 'x'));
  });

  it('a sandbox worker runs the module in its workerData', async () => {
    const entry = new URL('../../workers/sandbox.worker.ts', import.meta.url);
    const call = async (quickjs: WebAssembly.Module) => {
      const worker = spawnNodeWorker(entry, { quickjs });
      try {
        return await new Promise<SandboxReply>((ok) => {
          worker.once('message', ok);
          worker.postMessage([{ seq: 1, op: 'load', code: FAKE_ENV }] satisfies SandboxCall[]);
        });
      } finally {
        await worker.terminate();
      }
    };
    expect((await call(quickjsWasm()))[1]).toBe(true);
    expect((await call(notQuickjs))[1]).toBe(false); // it did not compile QuickJS on its own
  });
});

describe('sandbox pool timers and lost environments', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends calls made together to a worker in one message, and settles each as its reply comes', async () => {
    const { factory, made } = fakeWorkers({ takes: { step: 5 } });
    const pool = new SandboxPool(factory, { size: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await pool.load('class AEnv {}')).id);
    const before = made[0]!.posts;
    const settled: number[] = [];
    const steps = ids.map((id, i) => pool.step(id, 'x').then(() => settled.push(i)));
    await Promise.all(steps);
    expect(made[0]!.posts - before).toBe(1); // eight sessions' steps, one message
    expect(settled).toEqual([0, 1, 2, 3, 4, 5, 6, 7]); // each settled on its own reply, in order
    await pool.terminate();
  });

  it('a call in a batch is timed from when the worker starts it, not from when the batch was sent', async () => {
    vi.useFakeTimers();
    // each reset runs 1,000 ms of its 1,000 ms limit; the step's budget is 250 + 500 ms
    const { factory, made } = fakeWorkers({ takes: { reset: DEFAULT_LIMITS.resetMs } });
    const pool = new SandboxPool(factory, { size: 1, graceMs: 500 });
    const slow = await pool.load('class SlowEnv {}');
    const good = await pool.load('class GoodEnv {}');
    const calls = Promise.all([pool.reset(slow.id, 0), pool.reset(slow.id, 1), pool.step(good.id, 'x')]);
    await vi.advanceTimersByTimeAsync(2 * DEFAULT_LIMITS.resetMs + 10);
    const [, , step] = await calls; // 2,000 ms after the batch went: the step's own 750 ms began at 2,000
    expect(step[0]).toBe('o');
    expect(pool.kills).toBe(0);
    expect(made).toHaveLength(1);
    await pool.terminate();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('terminate() clears the start-up timer of a worker that never answered', async () => {
    vi.useFakeTimers();
    const pool = new SandboxPool(fakeWorkers({ ping: 'hang' }).factory, { startMs: 60_000 });
    const call = pool.load('class AEnv {}').catch((e: unknown) => e);
    expect(vi.getTimerCount()).toBe(1);
    await pool.terminate();
    expect(vi.getTimerCount()).toBe(0); // nothing keeps the CLI alive for a minute
    expect(await call).toBeInstanceOf(WorkerCrashedError);
  });

  it('starts a worker when a load is first routed to its slot, never before', async () => {
    const { factory, made } = fakeWorkers();
    const pool = new SandboxPool(factory, { size: 4 });
    expect(made).toHaveLength(0);
    expect(pool.idle).toBe(true);
    const a = await pool.load('class AEnv {}');
    expect(made).toHaveLength(1); // a run of one environment on a pool of 4 starts one worker
    await pool.reset(a.id, 1);
    await pool.dispose(a.id);
    await pool.load('class BEnv {}'); // the started worker, now empty, takes it
    expect(made).toHaveLength(1);
    await Promise.all([pool.load('class CEnv {}'), pool.load('class DEnv {}'), pool.load('class EEnv {}')]);
    expect(made).toHaveLength(4); // loads at once spread over the slots, as before
    await pool.terminate();
    expect(made.every((w) => w.terminated)).toBe(true);
    // a pool never used ends with nothing to stop; a load after that is refused and starts no worker
    // (one left running would keep Node alive)
    const unused = new SandboxPool(factory, { size: 2 });
    await unused.terminate();
    await expect(unused.load('class FEnv {}')).rejects.toThrow(/shut down/);
    expect(made).toHaveLength(4);
  });

  it('a replacement whose start-up ping fails counts as idle, not below it, and the next load replaces it', async () => {
    const { factory, made } = fakeWorkers({ failPing: (i) => i === 1 });
    const pool = new SandboxPool(factory, { size: 2 });
    const a = await pool.load('class AEnv {}');
    await pool.dispose(a.id);
    made[0]!.die(new Error('out of memory')); // replaced at once by worker 1, whose ping fails
    await vi.waitFor(() => expect(made[1]?.posts).toBeGreaterThan(0));
    await new Promise((r) => setTimeout(r, 0));
    expect(pool.idle).toBe(true); // nothing loaded, nothing queued: a failed ping is no work, and no less
    // two loads at once: one on the failed worker (its caller told, the worker replaced), one on slot 1
    const [x, y] = await Promise.allSettled([pool.load('class BEnv {}'), pool.load('class CEnv {}')]);
    expect([x.status, y.status].sort()).toEqual(['fulfilled', 'rejected']);
    expect(made).toHaveLength(4); // worker 2 replaced the failed one, worker 3 started slot 1
    await pool.terminate();
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
