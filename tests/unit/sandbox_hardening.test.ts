// Hardening round 3 of the sandbox: a close() that hangs or throws is blamed on its environment
// (host, pool, checker, plays); watchdogs time a call from when its worker starts it, so a good
// environment queued behind a slow legal neighbour succeeds; an interrupt swallowed by an async
// function or a promise executor still stops the call, by QuickJS's own deadline; a memory hog
// cannot starve its neighbours, and a full worker passes new environments to another.
import { afterAll, describe, expect, it, vi } from 'vitest';
import { SandboxMemoryError, SandboxRuntimeError, SandboxTimeoutError, SpadeError } from '../../src/core/errors.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES } from '../../src/core/env/limits.ts';
import { checkEnv } from '../../src/core/env/checker.ts';
import { FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';
import { playFresh } from '../../src/core/spade/agent.ts';
import { ScriptedChatModel } from '../../src/core/llm/scripted_models.ts';
import { createNodeSandboxPool } from '../../src/platform/node/sandbox_pool.ts';

const MiB = 2 ** 20;
const hostile = (prefix: string) => HOSTILE.find((h) => h.name.startsWith(prefix))!;
/** FAKE_ENV with extra methods spliced into its class. */
const fakeWith = (methods: string) => FAKE_ENV.replace(/\n}$/, `\n  ${methods}\n}`);

describe('close() is called, and its failures are attributed', () => {
  it('the host frees the env and throws a typed error naming it when close() hangs or throws', async () => {
    const h = await SandboxHost.create();
    for (const [prefix, cls] of [
      ['close() that hangs', SandboxTimeoutError],
      ['close() that throws', SandboxRuntimeError],
    ] as const) {
      const env = await h.load(hostile(prefix).code);
      h.reset(env.id, 0);
      const err = (() => {
        try {
          h.dispose(env.id);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(cls);
      expect((err as SpadeError).message).toMatch(new RegExp(`^Environment ${env.id}: close\\(\\) failed`));
      expect((err as SpadeError).data).toMatchObject({ envId: env.id, method: 'close' });
      expect(h.liveCount()).toBe(0);
    }
    expect(h.moduleRestarts).toBe(0);
  });

  it('the checker fails a close() that hangs or throws; a good close() passes', async () => {
    const h = await SandboxHost.create();
    const hang = await checkEnv(h, fakeWith('close() { for (;;) {} }'));
    expect(hang.ok).toBe(false);
    expect(hang.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['closes']);
    expect(hang.checks.at(-1)!.message).toMatch(
      /SandboxTimeoutError: Environment env\d+: close\(\) failed: close ran past/,
    );
    const thrown = await checkEnv(h, fakeWith(`close() { throw new Error('nope'); }`));
    expect(thrown.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['closes']);
    const good = await checkEnv(h, fakeWith('close() { this.n = 0; return { ignored: true }; }'));
    expect(good.ok).toBe(true);
    expect(h.liveCount()).toBe(0);
  });

  const pool = createNodeSandboxPool({ size: 1, graceMs: 400 });
  afterAll(() => pool.terminate());

  it('through the pool: a hanging close() fails the check; a native one ends it, blamed on the environment', async () => {
    const limits = { ...DEFAULT_LIMITS, stepMs: 150 };
    const report = await pool.check(fakeWith('close() { for (;;) {} }'), { limits });
    expect(report.checks.find((c) => c.name === 'closes')).toMatchObject({ ok: false });
    const native = await pool.check(hostile('close() joins').code, { limits }).catch((e: unknown) => e);
    expect(native).toBeInstanceOf(SandboxTimeoutError);
    expect((native as SpadeError).message).toMatch(/close\(\) of p\d+ did not return within 550 ms/);
    expect((native as SpadeError).data).toMatchObject({ killed: true, method: 'close' });
    expect((await pool.check(FAKE_ENV)).ok).toBe(true);
  });

  it('a play whose close() throws ends as an env error naming the environment', async () => {
    const model = new ScriptedChatModel('a', () => '\\boxed{10}');
    const ep = await playFresh(fakeWith(`close() { throw new Error('nope'); }`), {
      runner: pool,
      setting: 'games',
      model,
      seed: 1,
      hint: null,
      maxTurns: 2,
      tokenBudget: 4096,
      temperature: 0,
      sampleSeed: 1,
    });
    expect(ep.end).toBe('env_error');
    expect(ep.error?.message).toMatch(/^Environment p\d+: close\(\) failed: close\(\) threw Error: nope/);
    expect(ep.turns.length).toBeGreaterThan(0);
  });
});

describe('a watchdog times a call from when its worker starts it', () => {
  const pool = createNodeSandboxPool({ size: 1, graceMs: 300 });
  afterAll(() => pool.terminate());

  it('a good environment queued behind a slow, legal reset of its neighbour succeeds', async () => {
    // The neighbour's reset spins (a counted loop: Date is fixed in the sandbox) within its 20,000 ms
    // limit; so does the good environment's step, within its 10,000 ms. The pool's clock is a fake
    // one, moved on 20,000 ms while the good step waits in the queue behind that reset: far past the
    // step's own budget (10,000 + 300 ms), so measured from the queueing it would have been killed.
    // The workers run on real time; only the pool's watchdog clock is fake.
    const spinning = (name: string) => `let x = 0; for (let i = 0; i < 2e6; i++) x += i; return '${name} ' + (x > 0);`;
    const slow = await pool.load(
      `class SlowEnv { reset() { return [(() => { ${spinning('slow')} })(), {}]; } step() { return ['o', 0, true, false, {}]; } }`,
      12,
      { ...DEFAULT_LIMITS, resetMs: 20_000 },
    );
    const good = await pool.load(
      `class SteadyEnv { reset() { return ['ready', {}]; } step() { return [(() => { ${spinning('good')} })(), 1, true, false, {}]; } }`,
      12,
      { ...DEFAULT_LIMITS, stepMs: 10_000 },
    );
    await pool.reset(good.id, 3);
    const killsBefore = pool.kills;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      let slowDone = false;
      const slowReset = pool.reset(slow.id, 0).finally(() => (slowDone = true));
      const goodStep = pool.step(good.id, 'go');
      await vi.advanceTimersByTimeAsync(20_000);
      // the premise: the pool's clock passed the step's budget while the reset still ran (a spin of
      // 2e6 iterations takes a fair fraction of a second; moving a fake clock, microseconds)
      expect(slowDone).toBe(false);
      expect((await slowReset)[0]).toBe('slow true');
      // The good step starts now, 20,000 ms after it was queued by the pool's clock, and spins. Moving
      // that clock on by less than the step's budget must not fire its watchdog. It does take the
      // clock past the slow reset's deadline (20,000 + 300 ms from the send), where the one timer
      // armed at the send fires while the good step still runs: a watchdog dated from the send
      // (not re-dated when the reset answered) kills the good step there.
      await vi.advanceTimersByTimeAsync(500);
      expect((await goodStep)[0]).toBe('good true');
      expect(pool.kills).toBe(killsBefore);
    } finally {
      vi.useRealTimers();
    }
    await pool.dispose(slow.id);
    await pool.dispose(good.id);
  });
});

describe('an interrupt cannot be swallowed', () => {
  it('in-process: a step whose async function busy-loops fails with SandboxTimeoutError at its limit', async () => {
    const h = await SandboxHost.create();
    const limits = { ...DEFAULT_LIMITS, stepMs: 100 };
    for (const prefix of ['an async function', 'a loop of promise executors', 'promise callbacks']) {
      const env = await h.load(hostile(prefix).code, 12, limits);
      h.reset(env.id, 0);
      // QuickJS's own deadline stops it (no watchdog in-process: were it swallowed, this would hang)
      expect(() => h.step(env.id, 'x'), prefix).toThrow(SandboxTimeoutError);
      h.dispose(env.id);
    }
  });

  it('through the pool: endless loops in promise executors are stopped by QuickJS, not the watchdog', async () => {
    const pool = createNodeSandboxPool({ size: 1, graceMs: 1500 });
    try {
      const env = await pool.load(hostile('a loop of promise executors').code, 12, {
        ...DEFAULT_LIMITS,
        stepMs: 100,
      });
      await pool.reset(env.id, 0);
      const err = await pool.step(env.id, 'x').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SandboxTimeoutError);
      expect((err as SpadeError).data.killed).toBeUndefined();
      expect(pool.kills).toBe(0);
      await pool.dispose(env.id);
    } finally {
      await pool.terminate();
    }
  });
});

describe('one environment cannot starve its neighbours of memory', () => {
  it('a hog that grabs the whole module is stopped, and a good environment beside it still loads', async () => {
    const h = await SandboxHost.create();
    const sibling = await h.load(FAKE_ENV);
    const hog = await h.load(
      `class HogEnv { reset() { this.a = []; try { for (;;) this.a.push(new Uint8Array(1 << 20)); } catch (e) {} return [String(this.a.length), {}]; } }`,
    );
    expect(() => h.reset(hog.id, 0)).toThrow(SandboxMemoryError);
    const good = await h.load(FAKE_ENV); // before the hog is disposed
    expect(h.reset(good.id, 1)[0]).toContain('Find my number');
    expect(h.reset(sibling.id, 2)[0]).toContain('Find my number');
    for (const e of [hog, good, sibling]) h.dispose(e.id);
    expect(h.moduleRestarts).toBe(0);
  }, 30_000);

  it('a hog is stopped by its memory limit, not its time limit: the heap stays near the limit, on any machine', async () => {
    const h = await SandboxHost.create();
    const memory = (h as unknown as { memory: WebAssembly.Memory }).memory;
    const before = memory.buffer.byteLength;
    // a time limit of a minute: if memory did not stop it, time would, far past the test's own timeout
    const limits = { ...DEFAULT_LIMITS, resetMs: 60_000, memoryBytes: 32 * MiB };
    for (const hog of [
      `class HogEnv { reset() { this.a = []; try { for (;;) this.a.push(new Uint8Array(1 << 20)); } catch (e) {} return [String(this.a.length), {}]; } }`,
      `class HogEnv { reset() { this.a = []; for (;;) this.a.push('x'.repeat(1 << 20) + this.a.length); } }`,
      `class HogEnv { reset() { const a = []; for (;;) { try { a.push(new ArrayBuffer(4 << 20)); } catch (e) {} } } }`,
    ]) {
      const env = await h.load(hog, 12, limits);
      const err = (() => {
        try {
          h.reset(env.id, 0);
        } catch (e) {
          return e;
        }
      })();
      expect(err, hog).toBeInstanceOf(SandboxMemoryError);
      expect((err as SpadeError).data.kind, hog).toBe('memory');
      h.dispose(env.id);
    }
    // the refused growth kept the module's heap to the limit and the allocator's slack, not 2 GiB
    expect(memory.buffer.byteLength - before).toBeLessThan(4 * limits.memoryBytes);
    const good = await h.load(FAKE_ENV);
    expect(h.reset(good.id, 1)[0]).toContain('Find my number');
    h.dispose(good.id);
  });

  it('a module refuses an environment its budget has no room for, with a typed error', async () => {
    const h = await SandboxHost.create();
    const big = { ...DEFAULT_LIMITS, memoryBytes: 512 * MiB };
    const ids: string[] = [];
    for (let i = 0; i < MODULE_BUDGET_BYTES / big.memoryBytes; i++) ids.push((await h.load(FAKE_ENV, 12, big)).id);
    const err = await h.load(FAKE_ENV, 12, big).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxMemoryError);
    expect((err as SpadeError).data.workerFull).toBe(true);
    expect((err as Error).message).toMatch(/This sandbox worker is full: its 3 live environments reserve 1536 MiB/);
    for (const id of ids) h.dispose(id);
    expect((await h.load(FAKE_ENV, 12, big)).className).toBe('FakeHuntEnv');
  });

  it('the pool passes a new environment to a worker with room', async () => {
    const pool = createNodeSandboxPool({ size: 2 });
    try {
      const big = { ...DEFAULT_LIMITS, memoryBytes: 512 * MiB };
      const small = { ...DEFAULT_LIMITS, memoryBytes: 4 * MiB };
      // worker A fills with three big environments, worker B holds three small ones
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push((await pool.load(FAKE_ENV, 12, big)).id);
        ids.push((await pool.load(FAKE_ENV, 12, small)).id);
      }
      const more = await pool.load(FAKE_ENV, 12, big);
      expect((await pool.reset(more.id, 0))[0]).toContain('Find my number');
      ids.push((await pool.load(FAKE_ENV, 12, big)).id); // B: 3 × 4 + 2 × 512 MiB of its 1536
      // now neither has room for a big one: the error says so
      const full = await pool.load(FAKE_ENV, 12, big).catch((e: unknown) => e);
      expect(full).toBeInstanceOf(SandboxMemoryError);
      expect((full as SpadeError).data.workerFull).toBe(true);
      for (const id of [...ids, more.id]) await pool.dispose(id);
    } finally {
      await pool.terminate();
    }
  });
});
