// URL state: the schema's `url` column decides which config fields a link carries; parsing keeps
// only fields present and valid, so a rejected value never replaces what the app holds.
import { describe, expect, it } from 'vitest';
import { CONFIG_SCHEMA, DEFAULTS } from '../../src/core/config.ts';
import {
  applyUrlFields,
  configFromLink,
  formatUrlState,
  parseUrlState,
  URL_CONFIG_KEYS,
  URL_DEFAULTS,
  type UrlState,
} from '../../src/core/url_state.ts';

describe('url state', () => {
  it('lists exactly the schema entries with a link key, each under its own name', () => {
    expect(URL_CONFIG_KEYS).toEqual(['preset', 'seed', 'setting', 'difficulty', 'playsPerEnv', 'estimator']);
    for (const [k, field] of Object.entries(CONFIG_SCHEMA)) {
      expect(URL_CONFIG_KEYS.includes(k as never), k).toBe(field.url !== undefined);
      if (field.url !== undefined) expect(field.url, k).toBe(k);
    }
  });

  it('round-trips and leaves defaults out', () => {
    expect(formatUrlState(URL_DEFAULTS)).toBe('');
    const s: UrlState = {
      ...URL_DEFAULTS,
      panel: 'memory',
      config: { ...URL_DEFAULTS.config, seed: 5, setting: 'tool_use' },
    };
    const text = formatUrlState(s);
    expect(text).toBe('panel=memory&seed=5&setting=tool_use');
    const { fields, problems } = parseUrlState(`#${text}`);
    expect(problems).toEqual([]);
    expect(fields).toEqual({ panel: 'memory', config: { seed: 5, setting: 'tool_use' }, lab: {} });
    expect(applyUrlFields(URL_DEFAULTS, fields)).toEqual(s);
  });

  it('returns only fields present and valid, with a warning for each rejected one', () => {
    const { fields, problems } = parseUrlState('#panel=%3Cscript%3E&seed=abc&estimator=paired&theme=neon&maxTurns=3');
    // seed=abc, the panel and the theme are rejected; maxTurns is not a URL field at all
    // toStrictEqual: a rejected field must be absent, not present as undefined (toEqual skips those)
    expect(fields).toStrictEqual({ config: { estimator: 'paired' }, lab: {} });
    expect(problems.map((p) => p.message)).toEqual([
      'ignored from the link: unknown key "maxTurns"',
      'ignored from the link: panel must be one of run, environments, memory, training, lab, models, settings; got "<script>"',
      'ignored from the link: theme must be one of system, light, dark; got "neon"',
      'ignored from the link: seed must be a number; got "abc"',
    ]);
    expect(parseUrlState('#seed=&playsPerEnv=99').fields.config).toStrictEqual({});
    expect(parseUrlState('').fields).toStrictEqual({ config: {}, lab: {} });
  });

  it('keeps a saved seed when the link carries a rejected one', () => {
    const saved: UrlState = {
      panel: 'settings',
      theme: 'dark',
      config: { ...URL_DEFAULTS.config, seed: 42 },
      set: null,
    };
    const next = applyUrlFields(saved, parseUrlState('#seed=abc&theme=neon&panel=nope').fields);
    expect(next).toEqual(saved); // before: the seed became the default (1) because "seed=" was in the hash
    // a valid value does replace it, and only that field changes
    expect(applyUrlFields(saved, parseUrlState('#seed=7').fields)).toEqual({
      ...saved,
      config: { ...saved.config, seed: 7 },
    });
  });

  it('takes a shared set from the hash and drops it when the hash has none', () => {
    const withSet = applyUrlFields(URL_DEFAULTS, parseUrlState('#panel=environments&set=1.abc').fields);
    expect(withSet.set).toBe('1.abc');
    expect(applyUrlFields(withSet, parseUrlState('#panel=environments').fields).set).toBeNull();
  });

  it("carries the preset: a link naming one applies its values, then the link's own fields", () => {
    const paperAt3 = { ...URL_DEFAULTS, config: { ...URL_DEFAULTS.config, preset: 'paper' as const, seed: 3 } };
    const hash = formatUrlState(paperAt3);
    expect(hash).toBe('preset=paper&seed=3');
    const { fields, problems } = parseUrlState(`#${hash}`);
    expect(problems).toEqual([]);
    const cfg = configFromLink({ ...DEFAULTS }, fields);
    // keys the link does not list come from the preset; the link's seed wins
    expect(cfg).toMatchObject({ preset: 'paper', seed: 3, envsPerSkill: 8, playsPerEnv: 16, envReuse: 4 });
    expect(cfg.envRewardScaleMode).toBe('computed');
    // a later field in the link overrides the preset's value; a tool-use link gets tool use's KL
    const over = configFromLink({ ...DEFAULTS }, parseUrlState('#preset=paper&playsPerEnv=4&setting=tool_use').fields);
    expect(over).toMatchObject({ playsPerEnv: 4, klCoef: 0.005, envReuse: 8 });
    // a link without a preset changes only what it sets
    expect(configFromLink({ ...DEFAULTS, envsPerSkill: 5 }, parseUrlState('#seed=9').fields)).toEqual({
      ...DEFAULTS,
      envsPerSkill: 5,
      seed: 9,
    });
  });
});
