// The QuickJS sandbox host, in-process: the contract, determinism, hostile programs contained
// with typed, actionable errors, and the next environment unaffected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxHost, envClassNames } from '../../src/core/sandbox/host.ts';
import { ESCAPES, FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';

let host: SandboxHost;
beforeAll(async () => {
  host = await SandboxHost.create();
});
afterAll(() => expect(host.liveCount()).toBe(0));

describe('sandbox host', () => {
  it('loads, resets, steps and solves the fake env', async () => {
    const env = await host.load(FAKE_ENV, 12);
    expect(env).toMatchObject({ className: 'FakeHuntEnv', setting: 'games', tools: [] });
    const [obs, info] = host.reset(env.id, 4);
    expect(obs).toContain('Find my number');
    expect(info).toEqual({ seed: 4 });
    const sol = host.solution(env.id);
    let last;
    for (const a of sol) last = host.step(env.id, a);
    expect(last).toEqual(['Found it!', 1, true, false, {}]);
    host.dispose(env.id);
  });

  it('seeds Math.random per reset: same seed same episode, across instances', async () => {
    const a = await host.load(FAKE_ENV);
    const b = await host.load(FAKE_ENV);
    const sols = [0, 1, 2, 3, 4, 5].map((s) => (host.reset(a.id, s), host.solution(a.id).join()));
    expect(new Set(sols).size).toBeGreaterThan(1);
    for (const s of [0, 1, 2, 3, 4, 5]) {
      host.reset(b.id, s);
      expect(host.solution(b.id).join()).toBe(sols[s]);
    }
    host.dispose(a.id);
    host.dispose(b.id);
  });

  it('finds the last declared Env class', () => {
    expect(envClassNames('class BaseEnv {}\nclass RealEnv extends BaseEnv {}\nconst OtherEnv = class {}')).toEqual([
      'OtherEnv',
      'RealEnv',
      'BaseEnv',
    ]);
    expect(envClassNames('class X extends ToolUseEnv {}')).toEqual([]);
  });

  it.each(ESCAPES)('cannot reach the host: $name', async ({ expr, expect: want }) => {
    const env = await host.load(
      `class ProbeEnv { reset(){ return [${expr}, {}]; } step(){ return ['', 0, true, false, {}]; } }`,
    );
    expect(host.reset(env.id, 0)[0]).toBe(want);
    host.dispose(env.id);
  });

  it('keeps import() inside: it rejects, and the sandbox survives', async () => {
    const env =
      await host.load(`let seen = 'none'; import('fs').then(() => (seen = 'loaded'), (e) => (seen = e.message));
      class ImpEnv { reset(){ return [seen, {}]; } step(){ return ['', 0, true, false, {}]; } }`);
    expect(host.reset(env.id, 0)[0]).toBe('modules are not available in the sandbox (import of "fs")');
    host.dispose(env.id);
  });

  it('runs promise callbacks, and stops an endless chain of them at the time limit', async () => {
    const env = await host.load(`class AsyncEnv {
      reset() { this.log = []; Promise.resolve().then(() => this.log.push('then')); (async () => { await null; this.log.push('await'); })(); return ['r', {}]; }
      step() { return [this.log.join(','), 0, false, false, {}]; } }`);
    host.reset(env.id, 0);
    expect(host.step(env.id, 'x')[0]).toBe('then,await');
    host.dispose(env.id);
    const spin = await host.load(
      `class SpinEnv { reset() { const f = () => Promise.resolve().then(f); f(); return ['r', {}]; } step() { return ['s', 0, false, false, {}]; } }`,
    );
    expect(() => host.reset(spin.id, 0)).toThrow(/reset \(a promise callback\) ran past its \d+ ms limit/);
    host.dispose(spin.id); // may restart the WASM module; must not throw
    const next = await host.load(FAKE_ENV);
    expect(host.reset(next.id, 1)[0]).toContain('Find my number');
    host.dispose(next.id);
  });

  it('is unaffected by a tampered JSON.stringify', async () => {
    const env = await host.load(
      `JSON.stringify = () => 'garbage'; class TEnv { reset(){ return ['fine', {}]; } step(){ return ['s', 0.5, false, false, {}]; } }`,
    );
    expect(host.reset(env.id, 0)).toEqual(['fine', {}]);
    expect(host.step(env.id, 'x')).toEqual(['s', 0.5, false, false, {}]);
    host.dispose(env.id);
  });
});

describe.each(HOSTILE.filter((h) => !h.needsKill))('hostile: $name', (h) => {
  it(`fails with ${h.error}, and the next environment still works`, async () => {
    let err: Error | undefined;
    let id: string | undefined;
    try {
      const env = await host.load(h.code, 12);
      id = env.id;
      host.reset(env.id, 0);
      if (h.phase === 'step') host.step(env.id, 'anything');
    } catch (e) {
      err = e as Error;
    }
    expect(err, 'expected an error').toBeDefined();
    expect(err!.name).toBe(h.error);
    expect(err!.message).toMatch(h.message);
    if (id) {
      // a limit error marks the env dead: later calls fail fast with the same error
      if (/Timeout|Memory/.test(h.error)) expect(() => host.step(id!, 'x')).toThrow(err!.message);
      host.dispose(id);
    }
    const next = await host.load(FAKE_ENV);
    host.reset(next.id, 1);
    expect(host.step(next.id, '\\boxed{10}')[0]).toMatch(/Found it!|Higher\.|Lower\./);
    host.dispose(next.id);
  });
});
