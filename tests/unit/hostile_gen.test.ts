// Generated hostile programs (tests/helpers/hostile_gen.ts) through the real worker pool: each
// ends with a typed error (a SpadeError subclass) for the right cause, none sees the real clock, and
// the pool still serves a good environment afterwards. Nothing here asserts wall time (a loaded
// machine only makes it slower); the figures printed are for information.
import { afterAll, describe, expect, it } from 'vitest';
import { SpadeError } from '../../src/core/errors.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';
import { createNodeSandboxPool } from '../../src/platform/node/sandbox_pool.ts';
import { hostilePrograms } from '../helpers/hostile_gen.ts';

const SEED = 9;
const COUNT = 48;
// short limits keep the run modest: a watchdog kill then lands at ~1 s
const LIMITS = { ...DEFAULT_LIMITS, loadMs: 500, resetMs: 500, stepMs: 200 };

describe('hostile program generator', () => {
  const pool = createNodeSandboxPool({ size: 2, graceMs: 700 });
  afterAll(() => pool.terminate());

  it('makes the same programs from the same seed, each with a fatal family', () => {
    const a = hostilePrograms(SEED, COUNT);
    expect(hostilePrograms(SEED, COUNT)).toEqual(a);
    expect(hostilePrograms(SEED + 1, COUNT)).not.toEqual(a);
    const families = new Set(a.flatMap((p) => p.families));
    for (const f of ['thrown', 'reads', 'nesting', 'native', 'flood', 'tamper', 'clock']) expect(families).toContain(f);
  });

  it(`contains ${COUNT} generated programs, then still serves a good environment`, async () => {
    const programs = hostilePrograms(SEED, COUNT);
    const problems: string[] = [];
    const byClass = new Map<string, number>();
    let slowest = { ms: 0, name: '' };
    for (const p of programs) {
      const t0 = performance.now();
      let outcome: unknown = null;
      let id: string | undefined;
      try {
        const env = await pool.load(p.code, 12, LIMITS);
        id = env.id;
        await pool.reset(id, 0);
        for (const a of p.actions) await pool.step(id, a);
        await pool.solution(id);
      } catch (err) {
        outcome = err;
      }
      if (id) await pool.dispose(id).catch(() => undefined);
      const ms = performance.now() - t0;
      if (ms > slowest.ms) slowest = { ms, name: p.name };
      const name = (outcome as Error | null)?.name ?? 'none';
      if (process.env.HOSTILE_GEN_VERBOSE)
        console.log(`${p.name} → ${name}: ${(outcome as Error)?.message?.slice(0, 160)}`);
      byClass.set(name, (byClass.get(name) ?? 0) + 1);
      if (!(outcome instanceof SpadeError))
        problems.push(`${p.name}: ended with ${name}: ${(outcome as Error)?.message}`);
      else if (/CLOCK LEAK/.test(outcome.message)) problems.push(`${p.name}: ${outcome.message}`);
    }
    console.log(
      `hostile generator (seed ${SEED}): tried ${programs.length}, contained ${programs.length - problems.length}, ` +
        `slowest ${slowest.ms.toFixed(0)} ms (${slowest.name}); watchdog kills ${pool.kills}; ` +
        `errors: ${[...byClass].map(([k, v]) => `${k} ${v}`).join(', ')}`,
    );
    expect(problems).toEqual([]);

    const good = await pool.load(FAKE_ENV);
    await pool.reset(good.id, 3);
    let last;
    for (const a of await pool.solution(good.id)) last = await pool.step(good.id, a);
    expect(last?.[1]).toBe(1);
    await pool.dispose(good.id);
  }, 240_000);

  // the environment classes of the last red-team pass (close() that hangs or throws, a length that changes
  // between reads, async busy loops, info [] from step, memory hogs), each beside a good
  // neighbour on the same worker, which must keep working
  it('contains each close/interrupt/info/memory catalogue entry and memory-hogging neighbours; the good neighbour keeps working', async () => {
    const solo = createNodeSandboxPool({ size: 1, graceMs: 700 });
    const cases = HOSTILE.filter((h) =>
      /^(close\(\)|an async function|a loop of promise executors|promise callbacks|step returns \[\]|a memory hog)/.test(
        h.name,
      ),
    );
    expect(cases.length).toBe(8);
    const problems: string[] = [];
    let slowest = { ms: 0, name: '' };
    let good = await solo.load(FAKE_ENV);
    const goodStillWorks = async (after: string) => {
      try {
        await solo.reset(good.id, 1);
        await solo.step(good.id, '\\boxed{10}');
      } catch (err) {
        problems.push(`the good neighbour failed after ${after}: ${(err as Error).message}`);
      }
    };
    const hog = `class HogEnv { reset() { this.a = []; try { for (;;) this.a.push(new Uint8Array(1 << 20)); } catch (e) {} return [String(this.a.length), {}]; } }`;
    const all = [
      ...cases,
      ...[1, 2, 3].map((i) => ({
        name: `memory hog ${i} grabs the whole module`,
        code: hog,
        phase: 'reset',
        error: 'SandboxMemoryError',
        message: /memory limit/,
        // a minute to run: the heap growth it asks for is refused on memory long before, on any machine
        limits: { resetMs: 60_000 },
        byMemory: true,
      })),
    ];
    try {
      for (const h of all) {
        const t0 = performance.now();
        let outcome: unknown = null;
        let id: string | undefined;
        try {
          id = (await solo.load(h.code, 12, { ...LIMITS, ...h.limits })).id;
          await solo.reset(id, 0);
          if (h.phase !== 'reset') await solo.step(id, 'x');
          const closing = id;
          id = undefined;
          await solo.dispose(closing);
        } catch (err) {
          outcome = err;
        }
        if (id) await solo.dispose(id).catch(() => undefined);
        const ms = performance.now() - t0;
        if (ms > slowest.ms) slowest = { ms, name: h.name };
        const e = outcome as Error | null;
        if (e?.name !== h.error || !h.message.test(e.message))
          problems.push(`${h.name}: ended with ${e?.name}: ${e?.message}`);
        else if ('byMemory' in h && (e as SpadeError).data.kind !== 'memory')
          problems.push(`${h.name}: stopped by ${JSON.stringify((e as SpadeError).data)}, not by its memory limit`);
        // a neighbour lost to a watchdog kill is reloaded; any other failure of it is a problem
        if (e instanceof SpadeError && e.data.killed === true) good = await solo.load(FAKE_ENV);
        else await goodStillWorks(h.name);
      }
      console.log(
        `close/interrupt/info/memory classes: tried ${all.length}, contained ${all.length - problems.length}, ` +
          `slowest ${slowest.ms.toFixed(0)} ms (${slowest.name}); watchdog kills ${solo.kills}`,
      );
      expect(problems).toEqual([]);
    } finally {
      await solo.terminate();
    }
  }, 120_000);
});
