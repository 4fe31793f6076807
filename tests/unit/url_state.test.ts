// URL state: the schema's `url` column decides which config fields a link carries; parsing keeps
// only fields present and valid, so a rejected value never replaces what the app holds.
import { describe, expect, it } from 'vitest';
import { CONFIG_SCHEMA } from '../../src/core/config.ts';
import {
  applyUrlFields,
  formatUrlState,
  parseUrlState,
  URL_CONFIG_KEYS,
  URL_DEFAULTS,
  type UrlState,
} from '../../src/core/url_state.ts';

describe('url state', () => {
  it('lists exactly the schema entries marked url: true', () => {
    expect(URL_CONFIG_KEYS).toEqual(['seed', 'setting', 'difficulty', 'playsPerEnv', 'estimator']);
    for (const [k, field] of Object.entries(CONFIG_SCHEMA))
      expect(URL_CONFIG_KEYS.includes(k as never), k).toBe((field as { url?: boolean }).url === true);
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
    const { fields, warnings } = parseUrlState(`#${text}`);
    expect(warnings).toEqual([]);
    expect(fields).toEqual({ panel: 'memory', config: { seed: 5, setting: 'tool_use' } });
    expect(applyUrlFields(URL_DEFAULTS, fields)).toEqual(s);
  });

  it('returns only fields present and valid, with a warning for each rejected one', () => {
    const { fields, warnings } = parseUrlState('#panel=%3Cscript%3E&seed=abc&estimator=paired&theme=neon&maxTurns=3');
    // seed=abc, the panel and the theme are rejected; maxTurns is not a URL field at all
    expect(fields).toEqual({ config: { estimator: 'paired' } });
    expect(warnings).toEqual([
      'unknown panel "<script>" in the link; it was ignored',
      'unknown theme "neon" in the link; it was ignored',
      'ignored from the link: seed must be a number; got "abc"',
    ]);
    expect(parseUrlState('#seed=&playsPerEnv=99').fields.config).toEqual({});
    expect(parseUrlState('').fields).toEqual({ config: {} });
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
});
