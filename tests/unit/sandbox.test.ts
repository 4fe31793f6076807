// The QuickJS sandbox host, in-process: the contract, determinism, hostile programs contained
// with typed, actionable errors, and the next environment unaffected.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';
import { envClassNames } from '../../src/core/sandbox/screen.ts';
import { ESCAPES, FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';
import { extractBoxed } from '../../src/core/env/contract.ts';
import { ActionRejectedError, SpadeError } from '../../src/core/errors.ts';
import { guestReadPrograms } from '../helpers/hostile_gen.ts';

let host: SandboxHost;
beforeAll(async () => {
  host = await SandboxHost.create();
});
afterAll(() => expect(host.liveCount()).toBe(0));

describe('sandbox host', () => {
  it('a new host has run one environment through every call (so its first load compiles nothing) and holds none', async () => {
    const calls = (['load', 'reset', 'step', 'dispose'] as const).map((m) => vi.spyOn(SandboxHost.prototype, m));
    try {
      const h = await SandboxHost.create();
      expect(calls.map((c) => c.mock.calls.length)).toEqual([1, 1, 1, 1]);
      expect([h.liveCount(), h.reservedBytes()]).toEqual([0, 0]);
      const env = await h.load(FAKE_ENV, 12);
      expect(h.reset(env.id, 4)[0]).toContain('Find my number');
      h.dispose(env.id);
    } finally {
      for (const c of calls) c.mockRestore();
    }
  });

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
      const env = await host.load(h.code, 12, { ...DEFAULT_LIMITS, ...h.limits });
      id = env.id;
      host.reset(env.id, 0);
      if (h.phase === 'step' || h.phase === 'close') host.step(env.id, 'anything');
      if (h.phase === 'close') {
        id = undefined;
        host.dispose(env.id); // throws, naming the environment, after freeing it
      }
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

describe('red-team findings (in-process)', () => {
  const probe = (expr: string) =>
    `class ProbeEnv { reset(){ return [String(${expr}), {}]; } step(){ return ['', 0, true, false, {}]; } }`;
  const run = async (code: string, h: SandboxHost = host) => {
    const env = await h.load(code);
    try {
      return h.reset(env.id, 0)[0];
    } finally {
      h.dispose(env.id);
    }
  };

  it('Date is fixed in every reachable form and in UTC, whatever the host time zone', async () => {
    const before = process.env.TZ;
    process.env.TZ = 'Asia/Kolkata'; // +05:30: local-time methods would show it
    const h = await SandboxHost.create();
    try {
      const expr = `[new (Date.prototype.constructor)().getTime(), Reflect.construct(Date, []).getTime(),
        new (class extends Date {})().getTime(), Date(), new Date().getHours(), new Date().getTimezoneOffset(),
        new Date(2020, 0, 1, 12).toISOString(), String(new Date(0)), new Date(0).toLocaleString(),
        new Date(0).toLocaleTimeString(), Date.parse('2020-01-01T00:00:00'), new Date('2020-01-01T00:00:00').getTime(),
        new Date(0).getYear()].join(' | ')`;
      expect(await run(probe(expr), h)).toBe(
        [
          1700000000000,
          1700000000000,
          1700000000000,
          'Tue Nov 14 2023 22:13:20 GMT+0000',
          22,
          0,
          '2020-01-01T12:00:00.000Z',
          'Thu Jan 01 1970 00:00:00 GMT+0000',
          '01/01/1970, 12:00:00 AM',
          '12:00:00 AM',
          Date.UTC(2020, 0, 1),
          Date.UTC(2020, 0, 1),
          70,
        ].join(' | '),
      );
    } finally {
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });

  it('strings that start with \\u0000 and spell NaN or Infinity stay strings', async () => {
    const env = await host.load(`class NulEnv {
      reset(){ return ['\\u0000NaN', { a: '\\u0000Infinity' }]; }
      step(){ return ['\\u0000-Infinity', 0.5, false, false, { b: '\\u0000NaN', c: ['\\u0000Infinity'] }]; } }`);
    expect(host.reset(env.id, 0)).toEqual(['\u0000NaN', { a: '\u0000Infinity' }]);
    expect(host.step(env.id, 'x')).toEqual([
      '\u0000-Infinity',
      0.5,
      false,
      false,
      { b: '\u0000NaN', c: ['\u0000Infinity'] },
    ]);
    host.dispose(env.id);
  });

  it('an action nested thousands deep is refused on the host; the module never restarts', async () => {
    const restarts = host.moduleRestarts;
    const tool = await host.load(`class DeepEnv extends ToolUseEnv {
      static tools = [{ name: 't', description: 'echo', parameters: { type: 'object', properties: {} } }];
      t(args) { return 'got it'; }
      reset() { return this.start('go', ['do it']); } solution() { return ['<answer>x</answer>']; } }`);
    const sibling = await host.load(FAKE_ENV);
    host.reset(tool.id, 0);
    host.reset(sibling.id, 1);
    const deep = `<tool_call>{"name": "t", "arguments": {"a": ${'['.repeat(20000)}1${']'.repeat(20000)}}}</tool_call>`;
    expect(() => host.step(tool.id, deep)).toThrow(ActionRejectedError);
    expect(() => host.step(tool.id, 'x'.repeat(DEFAULT_LIMITS.maxActionChars + 1))).toThrow(/the limit is 65536/);
    expect(host.moduleRestarts).toBe(restarts);
    expect(host.step(tool.id, '<tool_call>{"name": "t", "arguments": {}}</tool_call>')[0]).toContain('got it');
    expect(host.step(sibling.id, '\\boxed{10}')[0]).toMatch(/Found it!|Higher\.|Lower\./);
    host.dispose(tool.id);
    host.dispose(sibling.id);
  });

  it('when the module does restart, its other environments fail naming the cause', async () => {
    const h = await SandboxHost.create();
    const sibling = await h.load(FAKE_ENV);
    // built at run time, so no source check sees it; 100,000 deep overflows a 1 MiB host stack
    const bomb = await h.load(probe(`JSON.parse('['.repeat(100000) + ']'.repeat(100000))`));
    const err = (() => {
      try {
        h.reset(bomb.id, 0);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err?.name).toMatch(/SandboxRuntimeError|SandboxMemoryError/);
    if (h.moduleRestarts > 0) {
      expect(err?.message).toMatch(/faulted during reset \(nesting too deep for the host's stack/);
      expect(() => h.reset(sibling.id, 0)).toThrow(
        new RegExp(`"${sibling.id}" was lost when the sandbox restarted after ${bomb.id} faulted during reset`),
      );
      const next = await h.load(FAKE_ENV);
      expect(h.reset(next.id, 1)[0]).toContain('Find my number');
      h.dispose(next.id);
    }
    h.dispose(bomb.id);
    h.dispose(sibling.id);
    expect(h.liveCount()).toBe(0);
  });

  it('native array loops too long to fit in memory are refused at once', async () => {
    expect(await run(probe(`[1, 2, 3].join('-') + Array(5).fill(0).length`))).toBe('1-2-35');
    const env = await host.load(probe(`Array(2 ** 32 - 1).indexOf(1)`));
    expect(() => host.reset(env.id, 0)).toThrow(/Array\.prototype\.indexOf on a length of 4294967295/);
    host.dispose(env.id);
  });

  it('an action reaches the environment exactly as sent: NUL, other controls and lone surrogates kept', async () => {
    const env = await host.load(`class EchoEnv {
      reset(){ return ['echo', {}]; }
      step(a){ return [a, 0, false, false, { codes: Array.from(a, (c) => c.charCodeAt(0)), boxed: extractBoxed(a) }]; } }`);
    host.reset(env.id, 0);
    for (const action of [
      'abc\0\\boxed{win}',
      '\0',
      'a\x01\x07\x1b[31m\x7f\u2028b',
      'lone \ud800 high, \udfff low',
      'paired \u{1F600} \\boxed{1}',
    ]) {
      const [obs, , , , info] = host.step(env.id, action);
      expect(obs).toBe(action);
      expect(info.codes).toEqual(Array.from(action, (c) => c.charCodeAt(0)));
    }
    expect(host.step(env.id, 'abc\0\\boxed{win}')[4].boxed).toBe('win');
    host.dispose(env.id);
  });

  it('host and guest extractBoxed agree', async () => {
    const inputs = [
      '',
      'no box',
      '\\boxed{3}',
      '\\boxed{ 3 }',
      'a \\boxed{1} then \\boxed{2}',
      '\\boxed{\\frac{1}{2}}',
      '\\boxed{{a}{b}}',
      '\\boxed{unclosed',
      '\\boxed{a} \\boxed{unclosed',
      '\\boxed{}',
      '\\boxed{\u{1F600} é}',
      'boxed{x}',
      '\\boxed {x}',
      '\\boxed{a}}',
      '\\boxed{\\boxed{inner}}',
      '\\boxed{x\ny}',
    ];
    const code = `class BoxEnv { reset(){ return [JSON.stringify(${JSON.stringify(inputs)}.map(extractBoxed)), {}]; } step(){ return ['', 0, true, false, {}]; } }`;
    expect(JSON.parse(await run(code))).toEqual(inputs.map(extractBoxed));
  });
});

describe('no guest code runs outside a deadline', () => {
  it('every value whose reading runs guest code, at every site, is read under a deadline (none runs after)', async () => {
    // between calls the host's deadline is Infinity; the interrupt handler counts (and stops) any
    // guest code it finds running then: getters, toJSON, toString, Proxy traps read by the host
    const h = await SandboxHost.create();
    const limits = { ...DEFAULT_LIMITS, loadMs: 300, resetMs: 150, stepMs: 150 };
    const programs = guestReadPrograms();
    expect(programs.length).toBeGreaterThan(100);
    const untyped: string[] = [];
    let failed = 0;
    for (const p of programs) {
      let id: string | undefined;
      try {
        id = (await h.load(p.code, 12, limits)).id;
        h.reset(id, 0);
        for (const a of p.actions) h.step(id, a);
        h.solution(id);
      } catch (err) {
        failed++;
        if (!(err instanceof SpadeError)) untyped.push(`${p.name}: ${(err as Error).name}`);
      }
      if (id) h.dispose(id);
    }
    expect(untyped).toEqual([]);
    expect(failed).toBeGreaterThan(programs.length / 2); // the thrown and reads families all fail
    expect(h.guestRunsWithoutDeadline).toBe(0);
    expect(h.liveCount()).toBe(0);
  }, 120_000);

  it('finalizer callbacks that loop run inside a call or not at all, never between calls or at dispose', async () => {
    const h = await SandboxHost.create();
    // every step drops 2,000 registered objects; a cleanup callback that ran would loop forever
    const code = `class FinalizerEnv {
      reset() { this.t = 0; this.reg = new FinalizationRegistry(() => { for (;;) {} }); return ['go', {}]; }
      step() { this.t++; for (let i = 0; i < 2000; i++) this.reg.register({ a: new Array(100).fill(i) }, i);
        return ['t' + this.t, 0, this.t >= 5, false, {}]; }
    }`;
    const { id } = await h.load(code);
    h.reset(id, 0);
    const untyped: string[] = [];
    for (let i = 0; i < 5; i++) {
      try {
        h.step(id, 'x');
      } catch (err) {
        if (!(err instanceof SpadeError)) untyped.push(String(err));
      }
    }
    h.dispose(id);
    expect(untyped).toEqual([]);
    expect(h.guestRunsWithoutDeadline).toBe(0);
    expect(h.liveCount()).toBe(0);
  });
});
