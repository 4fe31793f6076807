// The Lab panel's pure parts (src/state/lab.svelte.ts): its settings in the link (the app's one link
// parser, core/url_state.ts, over the lab's schema, core/micro/settings.ts: bad values are dropped
// with a warning) and the comparison it shows (the rows of its runs judged by core/micro/compare.ts,
// as `spade micro compare` judges them).
import { describe, expect, it } from 'vitest';
import { compareRuns } from '../../src/core/micro/compare.ts';
import { DESIGNERS } from '../../src/core/micro/lab.ts';
import { clampLabChoices } from '../../src/core/micro/settings.ts';
import { formatLabLink, parseUrlState } from '../../src/core/url_state.ts';
import {
  compareResult,
  LAB_DEFAULTS,
  LabState,
  PROBE_CHANCE,
  rowsToRuns,
  type CompareRow,
} from '../../src/state/lab.svelte.ts';

describe('lab URL fields', () => {
  it('round-trips the settings, leaving defaults out, and ignores other fields', () => {
    const s = {
      seed: 3,
      cycles: 2,
      designer: 'fixed' as const,
      levels: 2,
      plays: 1,
      probePlays: LAB_DEFAULTS.probePlays,
      seeds: 3,
    };
    const hash = formatLabLink(s, LAB_DEFAULTS);
    expect(hash).toBe('lab.seed=3&lab.cycles=2&lab.designer=fixed&lab.K=2&lab.N=1&lab.S=3');
    const { fields, problems } = parseUrlState(`#panel=lab&seed=9&${hash}`);
    expect(fields.lab).toEqual({ seed: 3, cycles: 2, designer: 'fixed', levels: 2, plays: 1, seeds: 3 });
    expect(fields.config).toEqual({ seed: 9 });
    expect(problems).toEqual([]);
    expect(formatLabLink(LAB_DEFAULTS, LAB_DEFAULTS)).toBe('');
  });

  it('drops bad values with a warning each, keeping the good ones', () => {
    const lab = new LabState();
    lab.applyHash('#lab.seed=abc&lab.K=99&lab.designer=oracle&lab.N=2&lab.cycles=&seed=x');
    expect(lab.settings).toEqual({ ...LAB_DEFAULTS, plays: 2 });
    // in schema order; the app's own `seed=x` is the app's notice, not the Lab's
    expect(lab.warnings).toEqual([
      'ignored from the link: lab.seed must be a whole number from 0 to 2147483647',
      'ignored from the link: lab.cycles must be a whole number from 1 to 200',
      'ignored from the link: lab.designer must be one of regret, random, fixed, control',
      'ignored from the link: lab.K must be a whole number from 1 to 8',
    ]);
    expect(lab.hash()).toBe('lab.N=2');
  });

  it('cleans typed-in values into bounds', () => {
    expect(clampLabChoices({ ...LAB_DEFAULTS, levels: 50, plays: 0, cycles: 2.6 }, LAB_DEFAULTS)).toMatchObject({
      levels: 8,
      plays: 1,
      cycles: 3,
    });
  });
});

describe('compare designers: what the panel shows', () => {
  const row = (seed: number, designer: (typeof DESIGNERS)[number], last: number, done = true): CompareRow => ({
    seed,
    designer,
    curve: [0.05, last / 2, last, last],
    medianRegret: [0.5, 0.4, 0.3],
    distinctLevels: [3, 3, 2],
    status: done ? 'done' : 'running',
  });
  const rows = (done = true) =>
    [1, 2, 3].flatMap((seed) =>
      DESIGNERS.map((d, i) => row(seed, d, d === 'regret' ? 0.6 + seed / 100 : 0.1 + i / 100, done || d !== 'control')),
    );

  it('waits for every run, then judges them exactly as `spade micro compare`', () => {
    expect(compareResult(rows(false))).toBeNull();
    expect(compareResult([])).toBeNull();
    const r = compareResult(rows())!;
    expect(r).toEqual(compareRuns(rowsToRuns(rows()), PROBE_CHANCE));
    expect(r.seeds).toEqual([1, 2, 3]);
    expect(r.chance).toBeCloseTo(PROBE_CHANCE, 12);
    expect(r.comparisons['regret-random'].diffs.map((x) => +x.toFixed(6))).toEqual([0.5, 0.51, 0.52]); // (0.6 + s/100) − (0.1 + 1/100)
    expect(r.success).toBe(true);
    expect(r.verdict).toMatch(/^Positive on 3 seeds: regret-random gain 0\.51 \[/);
  });
});
