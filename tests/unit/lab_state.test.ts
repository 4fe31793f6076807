// The Lab panel's pure parts (src/state/lab.svelte.ts): its settings in the link (the app's one link
// parser, core/url_state.ts, over the Lab's schema, core/lab/settings.ts: bad values are dropped
// with a warning, the old designer name `regret` read as `learned`) and the comparison it shows (the
// rows of its runs judged by core/lab/compare.ts as `spade lab compare` judges them, screened-out
// seeds left out).
import { describe, expect, it } from 'vitest';
import { compareRuns, PRE_REGISTERED_SPEC } from '../../src/core/lab/compare.ts';
import { clampLabChoices } from '../../src/core/lab/settings.ts';
import { CHAIN_SPACE, spaceChance } from '../../src/core/lab/spaces.ts';
import { formatUrlState, parseUrlState, URL_DEFAULTS } from '../../src/core/url_state.ts';
import { compareResult, LAB_DEFAULTS, LabState, rowsToRuns, type CompareRow } from '../../src/state/lab.svelte.ts';

describe('lab URL fields', () => {
  it('round-trips the settings, leaving defaults out, and ignores other fields', () => {
    const s = {
      ...LAB_DEFAULTS,
      seed: 3,
      cycles: 2,
      designer: 'fixed' as const,
      estimator: 'paper_blend' as const,
      levels: 2,
      plays: 1,
      seeds: 3,
    };
    const hash = formatUrlState({ ...URL_DEFAULTS, lab: s }, LAB_DEFAULTS);
    expect(hash).toBe('lab.seed=3&lab.cycles=2&lab.designer=fixed&lab.est=paper_blend&lab.K=2&lab.N=1&lab.S=3');
    const { fields, problems } = parseUrlState(`#panel=lab&seed=9&${hash}`);
    expect(fields.lab).toEqual({
      seed: 3,
      cycles: 2,
      designer: 'fixed',
      estimator: 'paper_blend',
      levels: 2,
      plays: 1,
      seeds: 3,
    });
    expect(fields.config).toEqual({ seed: 9 });
    expect(problems).toEqual([]);
    expect(formatUrlState({ ...URL_DEFAULTS, lab: LAB_DEFAULTS }, LAB_DEFAULTS)).toBe('');
    // with no defaults to compare with, every Lab setting is written, none dropped
    const all = parseUrlState(formatUrlState({ ...URL_DEFAULTS, lab: LAB_DEFAULTS }));
    expect(all.fields.lab).toEqual(LAB_DEFAULTS);
    // a link from before the rename still opens: `regret` is the learned designer's old name
    expect(parseUrlState('#lab.designer=regret').fields.lab).toEqual({ designer: 'learned' });
  });

  it('drops bad values with a warning each, keeping the good ones', () => {
    const lab = new LabState();
    lab.applyHash('#lab.seed=abc&lab.K=99&lab.designer=oracle&lab.N=2&lab.cycles=&seed=x');
    expect(lab.settings).toEqual({ ...LAB_DEFAULTS, plays: 2 });
    // in schema order; the app's own `seed=x` is the app's notice, not the Lab's
    expect(lab.warnings).toEqual([
      'ignored from the link: lab.seed must be a number; got "abc"',
      'ignored from the link: lab.cycles must be a number; got ""',
      'ignored from the link: lab.designer must be one of learned, untrained, scripted, gated, sfl, ladder, random, fixed; got "oracle"',
      'ignored from the link: lab.K must be between 1 and 8; got 99',
    ]);
    expect(formatUrlState({ ...URL_DEFAULTS, lab: lab.linkChoices() }, LAB_DEFAULTS)).toBe('lab.N=2');
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
  const row = (seed: number, designer: string, last: number, status: CompareRow['status'] = 'done'): CompareRow => ({
    seed,
    designer,
    curve: [0.05, last / 2, last, last],
    hardCurve: [0, last / 4, last / 2, last / 2],
    stages: [
      [0.1, 0, 0, 0],
      [0.5, 0.2, 0, 0],
      [0.9, 0.5, 0.2, 0.1],
      [0.9, 0.6, 0.2, 0.1],
    ],
    level: [0.2, 0.3, 0.4],
    medianRegret: [0.5, 0.4, 0.3],
    distinctLevels: [3, 3, 2],
    steps: { agent: 30, designer: 5 },
    status,
  });
  const rows = (lastDone = true) =>
    [1, 2, 3].flatMap((seed) =>
      PRE_REGISTERED_SPEC.arms.map((d, i) =>
        row(
          seed,
          d,
          d === 'learnability' ? 0.6 + seed / 100 : 0.1 + i / 100,
          lastDone || d !== 'control' ? 'done' : 'running',
        ),
      ),
    );

  it('waits for every run, then judges them exactly as `spade lab compare`', () => {
    expect(compareResult(rows(false))).toBeNull();
    expect(compareResult([])).toBeNull();
    const r = compareResult(rows())!;
    const chance = spaceChance(CHAIN_SPACE);
    expect(r).toEqual(compareRuns(rowsToRuns(rows()), chance, PRE_REGISTERED_SPEC));
    expect(r.seeds).toEqual([1, 2, 3]);
    expect(r.spadeDesigner).toBe('learnability');
    const random = PRE_REGISTERED_SPEC.arms.indexOf('random');
    expect(r.comparisons['learnability-random']!.diffs.map((x) => +x.toFixed(6))).toEqual(
      [1, 2, 3].map((s) => +(0.6 + s / 100 - (0.1 + random / 100)).toFixed(6)),
    );
    expect(r.gain.random!.steps).toEqual({ agent: 30, designer: 5 });
    expect(r.success).toBe(true);
    expect(r.sentence).toMatch(/The learned designer helped/);
  });

  it('a screened-out seed counts as finished and is left out of the judgement', () => {
    const withScreened = [
      ...rows(),
      ...PRE_REGISTERED_SPEC.arms.map((d) => ({ ...row(4, d, 0), status: 'screened' as const })),
    ];
    const r = compareResult(withScreened, [{ seed: 4, level: 'F2 L0 A0 D0', wins: 0, plays: 64, pass: false }])!;
    expect(r.seeds).toEqual([1, 2, 3]);
  });
});
