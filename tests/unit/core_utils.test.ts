// Core utilities: seeded RNG, errors across a boundary, config validation messages, URL state.
import { describe, expect, it } from 'vitest';
import { DEFAULTS, parseConfig, validateConfig } from '../../src/core/config.ts';
import {
  ConfigError,
  deserializeError,
  EnvContractError,
  SandboxTimeoutError,
  serializeError,
} from '../../src/core/errors.ts';
import { createRng, hashSeed } from '../../src/core/rng.ts';
import { formatUrlState, parseUrlState, URL_DEFAULTS } from '../../src/core/url_state.ts';

describe('rng', () => {
  it('is deterministic per seed and differs across seeds', () => {
    const a = createRng(42),
      b = createRng(42),
      c = createRng(43);
    const xs = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });
  it('int() is roughly uniform and in range', () => {
    const r = createRng(7);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 40000; i++) counts[r.int(4)]!++;
    for (const n of counts) expect(Math.abs(n - 10000)).toBeLessThan(400);
    expect(() => r.int(0)).toThrow(RangeError);
  });
  it('shuffle/sample keep elements, fork is independent and reproducible', () => {
    const r = createRng(1);
    const s = r.shuffle([1, 2, 3, 4, 5]);
    expect([...s].sort()).toEqual([1, 2, 3, 4, 5]);
    expect(createRng(1).sample([1, 2, 3, 4, 5], 3)).toHaveLength(3);
    expect(createRng(5).fork().next()).toBe(createRng(5).fork().next());
    expect(() => createRng(NaN)).toThrow('seed must be a finite number, got NaN');
    expect(hashSeed('abc')).toBe(hashSeed('abc'));
    expect(hashSeed('abc')).not.toBe(hashSeed('abd'));
  });
});

describe('errors across a boundary', () => {
  it('keeps class, message and data through structured clone', () => {
    const err = new SandboxTimeoutError('step() ran past 250 ms', { limitMs: 250 });
    const wire = structuredClone(serializeError(err));
    const back = deserializeError(wire);
    expect(back).toBeInstanceOf(SandboxTimeoutError);
    expect(back.name).toBe('SandboxTimeoutError');
    expect(back.message).toBe('step() ran past 250 ms');
    expect((back as SandboxTimeoutError).data).toEqual({ limitMs: 250 });
  });
  it('handles plain errors, non-errors and unknown names', () => {
    expect(serializeError(new TypeError('x'))).toEqual({ name: 'TypeError', message: 'x', data: {} });
    expect(serializeError('boom')).toEqual({ name: 'Error', message: 'boom', data: {} });
    const u = deserializeError({ name: 'WeirdError', message: 'm', data: {} });
    expect(u.name).toBe('WeirdError');
    expect(deserializeError(serializeError(new EnvContractError('bad')))).toBeInstanceOf(EnvContractError);
  });
});

describe('config', () => {
  it('accepts a partial config over the defaults', () => {
    const r = validateConfig({ seed: 9, setting: 'tool_use' });
    expect(r).toEqual({ ok: true, config: { ...DEFAULTS, seed: 9, setting: 'tool_use' } });
  });
  it('lists every problem with an exact message', () => {
    const r = validateConfig({
      seed: -1,
      setting: 'chess',
      playsPerEnv: 2.5,
      maxTurns: '3',
      bogus: 1,
      designerTemperature: Infinity,
    });
    expect(r).toEqual({
      ok: false,
      issues: [
        'seed must be between 0 and 4294967295; got -1',
        'setting must be one of games, tool_use; got "chess"',
        'playsPerEnv must be a whole number; got 2.5',
        'maxTurns must be a number; got "3"',
        `unknown setting "bogus"; known settings: ${Object.keys(DEFAULTS).join(', ')}`,
        'designerTemperature must be a number; got Infinity',
      ],
    });
    expect(validateConfig([])).toEqual({
      ok: false,
      issues: ['config must be an object of settings, e.g. {"seed": 1}'],
    });
  });
  it('parseConfig throws a ConfigError carrying the issues', () => {
    try {
      parseConfig({ playsPerEnv: 17 });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).message).toBe('Invalid config: playsPerEnv must be between 1 and 16; got 17');
      expect((e as ConfigError).data).toEqual({ issues: ['playsPerEnv must be between 1 and 16; got 17'] });
    }
  });
  it('uses the recipe defaults', () => {
    expect(DEFAULTS).toMatchObject({
      skillsPerCycle: 3,
      playsPerEnv: 4,
      repairTurns: 1,
      memoryCapacity: 200,
      sandboxStackKiB: 256,
      stepTimeoutMs: 250,
    });
  });
});

describe('url state', () => {
  it('round-trips and leaves defaults out', () => {
    expect(formatUrlState(URL_DEFAULTS)).toBe('');
    const s = {
      ...URL_DEFAULTS,
      panel: 'memory' as const,
      config: { ...URL_DEFAULTS.config, seed: 5, setting: 'tool_use' as const },
    };
    const text = formatUrlState(s);
    expect(text).toBe('panel=memory&seed=5&setting=tool_use');
    expect(parseUrlState(`#${text}`)).toEqual({ state: s, warnings: [] });
  });
  it('drops bad values with warnings, never throws', () => {
    const { state, warnings } = parseUrlState('#panel=%3Cscript%3E&seed=abc&estimator=paired&theme=neon');
    expect(state.panel).toBe('run');
    expect(state.config.seed).toBe(1);
    expect(state.config.estimator).toBe('paired');
    expect(warnings).toEqual([
      'unknown panel "<script>" in the link; showing "run"',
      'unknown theme "neon" in the link; using "system"',
      'ignored from the link: seed must be a number; got "abc"',
    ]);
  });
});

describe('error names survive minification', () => {
  it('reads names from the prototype, not the (renamable) class name', async () => {
    const { ConfigError: C } = await import('../../src/core/errors.ts');
    const renamed = { [`x${'y'}`]: class extends C {} }; // a subclass the bundler might name anything
    expect(new C('m').name).toBe('ConfigError');
    expect(Object.getOwnPropertyDescriptor(C.prototype, 'name')?.value).toBe('ConfigError');
    expect(new renamed.xy('m').name).toBe('ConfigError');
  });
});
