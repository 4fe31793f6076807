// The Lab's settings table (src/core/lab/settings.ts: every setting with its range, default and
// reason, the defaults the command's own; the `browser` preset, each difference with its reason) and the app's one
// link parser (src/core/url_state.ts): each part of a link round-trips, and hostile links — huge,
// malformed, repeated or unknown keys, out-of-range lab values — come back as typed problems, never
// as a throw, with nothing wrong applied.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_LINK_CHARS } from '../../src/core/env/envset.ts';
import { LAB_LOOP_DEFAULTS, PRE_REGISTERED_CYCLES } from '../../src/core/lab/lab.ts';
import {
  clampLabChoices,
  LAB_KEYS,
  LAB_PRESET_NAMES,
  LAB_PRESETS,
  LAB_SCHEMA,
  labDefaults,
  parseLabField,
  type LabChoices,
} from '../../src/core/lab/settings.ts';
import { createRng } from '../../src/core/rng.ts';
import {
  formatUrlState,
  MAX_HASH_CHARS,
  MAX_LINK_KEYS,
  MAX_SETTING_CHARS,
  parseUrlState,
  URL_DEFAULTS,
  type LinkProblem,
} from '../../src/core/url_state.ts';
import { LAB_DEFAULTS } from '../../src/state/lab.svelte.ts';

const valid = (k: (typeof LAB_KEYS)[number], v: unknown) => parseLabField(k, String(v)).ok;

describe('the lab settings table', () => {
  it('gives every setting a reason, a link key and a default it accepts', () => {
    expect(LAB_KEYS).toEqual([
      'seed',
      'cycles',
      'designer',
      'estimator',
      'space',
      'levels',
      'plays',
      'probePlays',
      'curriculum',
      'who',
      'seeds',
    ]);
    for (const k of LAB_KEYS) {
      const f = LAB_SCHEMA[k];
      expect(f.why.length, k).toBeGreaterThan(20);
      expect(f.url, k).toMatch(/^lab\.[A-Za-z]+$/);
      expect(valid(k, f.default), k).toBe(true);
    }
    expect(new Set(LAB_KEYS.map((k) => LAB_SCHEMA[k].url)).size).toBe(LAB_KEYS.length);
  });

  it('keeps the pre-registered settings as its defaults (docs/lab.md), the ones the Lab itself uses', () => {
    expect(labDefaults()).toEqual({
      seed: 1,
      cycles: PRE_REGISTERED_CYCLES,
      designer: 'learned',
      estimator: 'learnability',
      space: 'chain',
      levels: 4,
      plays: 8,
      probePlays: 16,
      curriculum: '',
      who: '',
      seeds: 10,
    });
    for (const k of ['seed', 'designer', 'estimator', 'space', 'levels', 'plays', 'probePlays'] as const)
      expect(LAB_SCHEMA[k].default, k).toBe(LAB_LOOP_DEFAULTS[k]);
  });

  it('one source: the command and the panel start from the same settings; the browser preset changes only the seeds it compares', () => {
    expect(labDefaults('browser')).toEqual({ ...labDefaults(), seeds: 1 });
    expect(LAB_DEFAULTS).toEqual(labDefaults('browser'));
    for (const name of LAB_PRESET_NAMES)
      for (const [k, e] of Object.entries(LAB_PRESETS[name]) as [keyof LabChoices, { value: unknown; why: string }][]) {
        expect(valid(k, e.value), `${name}.${k}`).toBe(true);
        expect(e.value, `${name}.${k} differs from the default`).not.toBe(LAB_SCHEMA[k].default);
        expect(e.why.length, `${name}.${k}`).toBeGreaterThan(20);
      }
  });

  it('`spade lab` starts one run from the Lab’s defaults (seed, designer), the flags over it, and shows them in its help', async () => {
    const { main } = await import('../../src/cli/spade.ts');
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    const argv = ['lab', '--cycles', '1', '--levels', '2', '--plays', '1', '--probe-plays', '1', '--json'];
    const code = await main(argv, io);
    expect(code, lines.join('\n')).toBe(0);
    const summary = JSON.parse(lines.at(-1)!) as { seed: number; designer: string; space: string; cycles: number };
    expect(summary).toMatchObject({
      seed: LAB_DEFAULTS.seed,
      designer: LAB_DEFAULTS.designer,
      space: 'chain',
      cycles: 1,
    });
    lines.length = 0;
    expect(await main(['lab', '--help'], io)).toBe(0);
    const help = lines.join('\n');
    expect(help).toContain(`(default: ${LAB_DEFAULTS.seed})`);
    expect(help).toContain(`(default: ${LAB_DEFAULTS.cycles})`);
    expect(help).toContain(`(default: ${LAB_DEFAULTS.designer})`);
  }, 60_000);

  it('clamps typed-in values into the ranges of the table, and replaces what is no number', () => {
    const typed = { ...LAB_DEFAULTS, seed: -5, cycles: 1e9, levels: Number.NaN, designer: 'oracle' } as never;
    expect(clampLabChoices(typed, LAB_DEFAULTS)).toEqual({
      ...LAB_DEFAULTS,
      seed: 0,
      cycles: LAB_SCHEMA.cycles.max,
      levels: LAB_DEFAULTS.levels,
      designer: LAB_DEFAULTS.designer,
    });
  });
});

describe('the link parser: every part round-trips', () => {
  it('config, panel, theme, set, run and lab.* together, as the app writes them', () => {
    const app = {
      panel: 'lab' as const,
      theme: 'dark' as const,
      config: { ...URL_DEFAULTS.config, preset: 'paper' as const, seed: 7, estimator: 'paired' as const },
      set: '1.abc-_XYZ',
    };
    const run = 'https://example.org/runs/a b.json?x=1&run=2#frag';
    const lab: LabChoices = {
      seed: 0,
      cycles: 200,
      designer: 'scripted',
      estimator: 'paper_blend',
      space: 'grid',
      levels: 8,
      plays: 16,
      probePlays: 1,
      curriculum: 'abcd.ooaa',
      who: 'Ana & <b>Ben</b>',
      seeds: 20,
    };
    const hash = `#${formatUrlState({ ...URL_DEFAULTS, ...app, run, lab }, LAB_DEFAULTS)}`;
    const { fields, problems } = parseUrlState(hash);
    expect(problems).toEqual([]);
    expect(fields).toEqual({
      panel: 'lab',
      theme: 'dark',
      config: { preset: 'paper', seed: 7, estimator: 'paired' },
      set: '1.abc-_XYZ',
      run,
      lab,
    });
  });

  it('each lab setting alone, at both ends of its range', () => {
    for (const k of LAB_KEYS) {
      const f = LAB_SCHEMA[k];
      const ends = f.kind === 'enum' ? f.values : f.kind === 'text' ? ['a', 'x'.repeat(f.maxLength)] : [f.min, f.max];
      for (const v of ends) {
        const s = { ...labDefaults(), [k]: v } as LabChoices;
        const { fields, problems } = parseUrlState(formatUrlState({ ...URL_DEFAULTS, lab: s }, labDefaults()));
        expect(problems, `${k}=${v}`).toEqual([]);
        expect({ ...labDefaults(), ...fields.lab }, `${k}=${v}`).toEqual(s);
      }
    }
  });

  it('a data: run link of a few hundred KB, as a self-contained run file is shared', () => {
    const run = `data:application/json;base64,${'A'.repeat(300_000)}`;
    const { fields, problems } = parseUrlState(`#${formatUrlState({ ...URL_DEFAULTS, run })}`);
    expect(problems).toEqual([]);
    expect(fields.run).toBe(run);
  });
});

describe('the link parser: hostile links', () => {
  const codes = (p: LinkProblem[]) => p.map((x) => `${x.code}:${x.scope}:${x.key}`);

  afterEach(() => vi.unstubAllGlobals());

  it('refuses a link past its length whole, before splitting it, saying what to do', () => {
    // the containment: the parser never splits a link past its length into parts (the costly step);
    // counted on URLSearchParams, the one splitter it uses
    let splits = 0;
    vi.stubGlobal(
      'URLSearchParams',
      class extends URLSearchParams {
        constructor(init?: string) {
          super(init);
          splits++;
        }
      },
    );
    parseUrlState('#seed=3');
    expect(splits).toBe(1);
    splits = 0;
    const huge = `#seed=3&run=${'x'.repeat(MAX_HASH_CHARS)}`;
    const { fields, problems } = parseUrlState(huge);
    expect(splits).toBe(0);
    expect(fields).toEqual({ config: {}, lab: {} });
    expect(codes(problems)).toEqual(['too-long:app:null']);
    expect(problems[0]!.message).toMatch(
      /^The link is too long \(2,097,163 characters; a link may have at most 2,097,152\)/,
    );
  });

  it('refuses a link with too many parts whole', () => {
    const many = `#${Array.from({ length: MAX_LINK_KEYS + 1 }, (_, i) => `k${i}=1`).join('&')}`;
    const { fields, problems } = parseUrlState(many);
    expect(fields).toEqual({ config: {}, lab: {} });
    expect(codes(problems)).toEqual(['too-many-keys:app:null']);
  });

  it('drops a value past its length, keeps the rest, and never quotes a long value whole', () => {
    const long = '9'.repeat(MAX_SETTING_CHARS + 1);
    const set = `1.${'a'.repeat(MAX_LINK_CHARS)}`;
    const { fields, problems } = parseUrlState(`#seed=${long}&lab.K=${long}&set=${set}&theme=dark`);
    expect(fields).toEqual({ theme: 'dark', config: {}, lab: {} });
    expect(codes(problems)).toEqual(['too-long:app:seed', 'too-long:lab:lab.K', 'too-long:app:set']);
    expect(problems[0]!.message).toBe('ignored from the link: seed is 101 characters long; it may be at most 100');
    expect(problems[2]!.message).toMatch(/environment set is 60,002 characters; a set link holds at most 60,000/);
    for (const p of problems) expect(p.message.length).toBeLessThan(200);
  });

  it('reports unknown keys, cut short, and applies the known ones', () => {
    const { fields, problems } = parseUrlState(`#lab.X=1&${'z'.repeat(500)}=2&glossary&seed=4`);
    expect(fields.config).toEqual({ seed: 4 });
    expect(codes(problems)).toEqual([
      `unknown-key:app:lab.X`,
      `unknown-key:app:${'z'.repeat(40)}`,
      'unknown-key:app:glossary',
    ]);
    expect(problems[1]!.message).toBe(`ignored from the link: unknown key "${'z'.repeat(40)}…"`);
  });

  it('uses the first of a repeated key and reports the others', () => {
    const { fields, problems } = parseUrlState('#seed=2&seed=3&lab.K=2&lab.K=5&lab.K=99&run=a&run=b');
    expect(fields.config).toEqual({ seed: 2 });
    expect(fields.lab).toEqual({ levels: 2 });
    expect(fields.run).toBe('a');
    expect(codes(problems)).toEqual([
      'duplicate-key:app:seed',
      'duplicate-key:lab:lab.K',
      'duplicate-key:lab:lab.K',
      'duplicate-key:app:run',
    ]);
    expect(problems[1]!.message).toBe('ignored from the link: a second lab.K; the first one was used');
  });

  it('refuses out-of-range and non-integer lab values, naming the range', () => {
    const { fields, problems } = parseUrlState(
      '#lab.K=9&lab.N=0&lab.seed=-1&lab.cycles=2.5&lab.P=1e400&lab.S=&lab.designer=Regret',
    );
    expect(fields.lab).toEqual({});
    expect(problems.every((p) => p.code === 'bad-value' && p.scope === 'lab')).toBe(true);
    expect(problems.map((p) => p.message)).toEqual([
      'ignored from the link: lab.seed must be between 0 and 2147483647; got -1',
      'ignored from the link: lab.cycles must be a whole number; got 2.5',
      'ignored from the link: lab.designer must be one of learned, untrained, scripted, gated, sfl, ladder, random, fixed, hand; got "Regret"',
      'ignored from the link: lab.K must be between 1 and 8; got 9',
      'ignored from the link: lab.N must be between 1 and 16; got 0',
      'ignored from the link: lab.P must be a number; got Infinity',
      'ignored from the link: lab.S must be a number; got ""',
    ]);
  });

  it('survives malformed escapes and random bytes: never throws, every problem typed', () => {
    expect(parseUrlState('#lab.K=%E0%A4%A&panel=%&%%%=&&&=').fields).toEqual({ config: {}, lab: {} });
    const rng = createRng(24);
    const alphabet = 'ab=&%#+ .1-9\u0000\u00e9\ud800lab.Kseedrunset';
    for (let i = 0; i < 300; i++) {
      const text = Array.from({ length: rng.int(81) }, () => alphabet[rng.int(alphabet.length)]).join('');
      const { fields, problems } = parseUrlState(text);
      expect(fields.config).toBeTypeOf('object');
      for (const p of problems) {
        expect(['too-long', 'too-many-keys', 'unknown-key', 'duplicate-key', 'bad-value']).toContain(p.code);
        expect(p.message.length).toBeLessThan(400);
      }
    }
  });
});
