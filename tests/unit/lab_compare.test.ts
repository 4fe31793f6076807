// The Lab's pre-registered comparison (src/core/lab/compare.ts): gain (with unprobed cycles), the
// 95% t-interval, the criterion computed from per-seed runs of any arms (a clear win, a noisy tie, a
// loss, the headroom pair, screened-out seeds), the plain sentence, the first two pre-registrations'
// measured results (measured.json), and the `spade lab compare` command end to end — a small
// seeded smoke whose last line is the JSON object (spadeDesigner, gain[arm].perSeed for every arm),
// the same on a second run, and --combine of two outputs.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  compareRuns,
  gain,
  markdownReport,
  PRE_REGISTERED_SPEC,
  ROUND4_ARMS,
  ROUND4_SPEC,
  ROUND5_SPEC,
  SPEC_1,
  tInterval,
  type CompareSpec,
  type SeedRun,
} from '../../src/core/lab/compare.ts';
import { MEASURED } from '../../src/core/lab/measured.ts';
import { CHAIN_SPACE, GRID_SPACE, SPACE, spaceChance } from '../../src/core/lab/spaces.ts';

const run = (seed: number, designer: string, curve: (number | null)[], o: Partial<SeedRun> = {}): SeedRun => ({
  seed,
  designer,
  curve,
  medianRegret: [0.5, 0.5],
  distinctLevels: [3, 4],
  seconds: 1,
  ...o,
});

const SPEC: CompareSpec = {
  arms: ['learnability', 'frontier', 'random', 'fixed'],
  spade: 'learnability',
  baselines: ['random', 'fixed'],
  headroom: ['frontier', 'random'],
  mechanismInSuccess: false,
};

describe('the comparison, pure', () => {
  it('gain is the mean of the last two probes minus cycle 0, skipping unprobed cycles', () => {
    expect(gain([0.1, 0.2, 0.4, 0.6])).toBeCloseTo(0.4, 12);
    expect(gain([0.1, 0.3])).toBeCloseTo(0.2, 12);
    expect(gain([0.1])).toBe(0);
    expect(gain([0.1, null, null, 0.3, null, 0.5, 0.7])).toBeCloseTo(0.5, 12);
  });

  it('the t-interval uses Student t quantiles', () => {
    const i = tInterval([1, 2, 3, 4]); // mean 2.5, sd 1.291, t(0.975, 3) = 3.182
    expect(i.mean).toBe(2.5);
    expect(i.hi - i.mean).toBeCloseTo((3.182 * 1.2909944) / 2, 4);
    expect(tInterval([1])).toMatchObject({ n: 1, lo: -Infinity, hi: Infinity });
  });

  const seeds = [1, 2, 3, 4, 5];
  const build = (spadeGain: (s: number) => number, frontier = 0.05, o: Partial<SeedRun> = {}) =>
    seeds.flatMap((s) =>
      SPEC.arms.map((d) => {
        const g = d === 'learnability' ? spadeGain(s) : d === 'frontier' ? frontier + s / 100 : 0.05;
        return run(s, d, [0, null, g, g], { steps: { agent: d === 'fixed' ? 40 : 80, designer: 10 }, ...o });
      }),
    );

  it('passes a clear, consistent win; says so plainly; reports every arm, the headroom and the steps', () => {
    const win = compareRuns(
      build((s) => 0.3 + s / 100, 0.4),
      0.01,
      SPEC,
    );
    expect(win.seeds).toEqual(seeds);
    expect(win.spadeDesigner).toBe('learnability');
    expect(Object.keys(win.gain)).toEqual(SPEC.arms);
    expect(win.gain.fixed!.perSeed).toHaveLength(5);
    expect(win.gain.fixed!.steps).toEqual({ agent: 40, designer: 10 });
    expect(win.comparisons['learnability-random']).toMatchObject({ positiveShare: 1, pass: true });
    expect(win.comparisons['learnability-fixed']!.interval.mean).toBeCloseTo(0.28, 12);
    expect(win.headroom!.interval.mean).toBeCloseTo(0.38, 12);
    expect(win.comparisons['frontier-random']).toBe(win.headroom);
    expect(win.success).toBe(true);
    expect(win.sentence).toMatch(/^A scripted curriculum \(frontier\) helped: .* The learned designer helped:/);
  });

  it('fails a noisy tie and a loss, with a plain sentence first; screened-out seeds are left out', () => {
    const tie = compareRuns(
      build((s) => (s % 2 ? 0.35 : -0.25)),
      0.01,
      SPEC,
    );
    expect(tie.comparisons['learnability-random']!.pass).toBe(false);
    expect(tie.success).toBe(false);
    expect(tie.sentence).toMatch(/did not help more than random levels/);
    expect(tie.verdict).toMatch(
      /^Not detectable at this budget \(5 seeds\): learnability did not clearly beat random;/,
    );
    const loss = compareRuns(
      build(() => -0.2),
      0.01,
      SPEC,
    );
    expect(loss.sentence).toMatch(/did worse than random levels/);
    const screened = compareRuns(
      build(() => 0.3),
      0.01,
      SPEC,
      [2, 4],
    );
    expect(screened.seeds).toEqual([1, 3, 5]);
    // a seed missing an arm is left out
    expect(compareRuns([...build(() => 0.3), run(9, 'learnability', [0, 1, 1])], 0, SPEC).seeds).toEqual(seeds);
  });

  it('the pre-registered spec names SPADE’s designer and judges it against random and fixed, frontier − random as headroom', () => {
    expect(PRE_REGISTERED_SPEC.spade).toBe('learnability');
    expect(PRE_REGISTERED_SPEC.baselines).toEqual(['random', 'fixed']);
    expect(PRE_REGISTERED_SPEC.headroom).toEqual(['frontier', 'random']);
    expect(PRE_REGISTERED_SPEC.arms).toEqual(expect.arrayContaining(['learnability', 'frontier', 'random', 'fixed']));
  });
});

describe('the pass rule, hand-computed at n = 5 and n = 10: each clause alone decides a case', () => {
  // Two arms: on seed i the learned arm gains d_i (curve 0, d_i, d_i) and random gains 0 (curve
  // 0, 0, 0), so the per-seed differences are the d_i exactly. The rule (CRITERIA): mean > 0.10,
  // the 95% t-interval's lower end > 0, and ≥ 80% of the differences > 0. The interval is
  // mean ± t(0.975, n − 1)·s/√n with s² = Σ(d − mean)²/(n − 1); t(0.975, 4) = 2.776 and
  // t(0.975, 9) = 2.262 (Student's table).
  const PAIR: CompareSpec = {
    arms: ['learnability', 'random'],
    spade: 'learnability',
    baselines: ['random'],
    headroom: null,
    mechanismInSuccess: false,
  };
  const judge = (diffs: number[]) => {
    const runs = diffs.flatMap((d, i) => [run(i + 1, 'learnability', [0, d, d]), run(i + 1, 'random', [0, 0, 0])]);
    const r = compareRuns(runs, 0, PAIR);
    const c = r.comparisons['learnability-random']!;
    expect(c.diffs).toEqual(diffs);
    expect(r.success).toBe(c.pass); // the one baseline decides success
    return c;
  };

  it('the t quantile at df = 4 and df = 9: the interval half-width over s/√n', () => {
    // n = 5: 0.8, 0.05 ×4 — mean 0.2, s/√5 = √(0.45/4/5) = 0.15 (below)
    const five = tInterval([0.8, 0.05, 0.05, 0.05, 0.05]);
    expect((five.hi - five.mean) / 0.15).toBeCloseTo(2.776, 9);
    expect((five.mean - five.lo) / 0.15).toBeCloseTo(2.776, 9);
    // n = 10: 1.05, 0.05 ×9 — mean 0.15, s/√10 = √(0.9/9/10) = 0.1 (below)
    const ten = tInterval([1.05, ...Array<number>(9).fill(0.05)]);
    expect((ten.hi - ten.mean) / 0.1).toBeCloseTo(2.262, 9);
    expect(ten.n).toBe(10);
  });

  it('n = 5: the margin met and every seed positive, but the interval reaches below 0 — fails on the lower bound alone', () => {
    // d = 0.8, 0.05, 0.05, 0.05, 0.05: mean = 1.0/5 = 0.2 (> 0.10); deviations 0.6, −0.15 ×4,
    // Σ² = 0.36 + 4·0.0225 = 0.45, s² = 0.45/4 = 0.1125, s/√5 = √0.0225 = 0.15,
    // half-width 2.776·0.15 = 0.4164: [0.2 − 0.4164, 0.2 + 0.4164] = [−0.2164, 0.6164]; 5 of 5 positive
    const c = judge([0.8, 0.05, 0.05, 0.05, 0.05]);
    expect(c.interval.mean).toBeCloseTo(0.2, 12);
    expect(c.interval.lo).toBeCloseTo(-0.2164, 12);
    expect(c.interval.hi).toBeCloseTo(0.6164, 12);
    expect(c.positiveShare).toBe(1);
    expect(c.pass).toBe(false);
  });

  it('n = 5: exactly 80% positive, the margin and the bound met — passes (the share is ≥, not >)', () => {
    // d = 0.3 ×4, 0: mean = 1.2/5 = 0.24; deviations 0.06 ×4, −0.24, Σ² = 4·0.0036 + 0.0576 = 0.072,
    // s² = 0.018, s/√5 = √0.0036 = 0.06, half-width 2.776·0.06 = 0.16656: [0.07344, 0.40656]; 4 of 5 positive
    const c = judge([0.3, 0.3, 0.3, 0.3, 0]);
    expect(c.interval.mean).toBeCloseTo(0.24, 12);
    expect(c.interval.lo).toBeCloseTo(0.07344, 12);
    expect(c.interval.hi).toBeCloseTo(0.40656, 12);
    expect(c.positiveShare).toBe(0.8);
    expect(c.pass).toBe(true);
    // (at n = 5 the share clause cannot fail alone: with 3 of 5 positive the best case, three equal
    // and two 0, has mean/(s/√5) = √(0.6·4/0.4) = √6 ≈ 2.449 < 2.776, so the bound fails too — n = 10 below)
  });

  it('n = 5: the bound and every seed positive, but the mean short of 0.10 — fails on the margin alone', () => {
    // d = 0.1 ×4, 0.05: mean = 0.45/5 = 0.09; deviations 0.01 ×4, −0.04, Σ² = 0.0004 + 0.0016 = 0.002,
    // s² = 0.0005, s/√5 = √0.0001 = 0.01, half-width 0.02776: [0.06224, 0.11776]; 5 of 5 positive
    const c = judge([0.1, 0.1, 0.1, 0.1, 0.05]);
    expect(c.interval.mean).toBeCloseTo(0.09, 12);
    expect(c.interval.lo).toBeCloseTo(0.06224, 12);
    expect(c.positiveShare).toBe(1);
    expect(c.pass).toBe(false);
  });

  it('n = 10: the margin met and every seed positive, but the interval reaches below 0 — fails on the lower bound alone', () => {
    // d = 1.05, 0.05 ×9: mean = 1.5/10 = 0.15; deviations 0.9, −0.1 ×9, Σ² = 0.81 + 9·0.01 = 0.9,
    // s² = 0.9/9 = 0.1, s/√10 = √0.01 = 0.1, half-width 2.262·0.1 = 0.2262: [−0.0762, 0.3762]; 10 of 10 positive
    const c = judge([1.05, ...Array<number>(9).fill(0.05)]);
    expect(c.interval.mean).toBeCloseTo(0.15, 12);
    expect(c.interval.lo).toBeCloseTo(-0.0762, 12);
    expect(c.interval.hi).toBeCloseTo(0.3762, 12);
    expect(c.positiveShare).toBe(1);
    expect(c.pass).toBe(false);
  });

  it('n = 10: the margin and the bound met, but only 70% of seeds positive — fails on the share alone', () => {
    // d = 0.4, 0.3 ×5, 0.2, 0, 0, −0.1: mean = 2.0/10 = 0.2; deviations 0.2, 0.1 ×5, 0, −0.2, −0.2, −0.3,
    // Σ² = 0.04 + 0.05 + 0 + 0.04 + 0.04 + 0.09 = 0.26, s² = 0.26/9 = 0.028889, s/√10 = √0.0028889 = 0.053748,
    // half-width 2.262·0.053748 = 0.121579: [0.078421, 0.321579]; 7 of 10 positive (0 is not positive)
    const c = judge([0.4, 0.3, 0.3, 0.3, 0.3, 0.3, 0.2, 0, 0, -0.1]);
    expect(c.interval.mean).toBeCloseTo(0.2, 12);
    expect(c.interval.lo).toBeCloseTo(0.078421, 6);
    expect(c.interval.hi).toBeCloseTo(0.321579, 6);
    expect(c.interval.lo).toBeGreaterThan(0);
    expect(c.positiveShare).toBe(0.7);
    expect(c.pass).toBe(false);
  });

  it('n = 10: exactly 80% positive, the margin and the bound met — passes', () => {
    // d = 0.3 ×8, 0, 0: mean = 2.4/10 = 0.24; deviations 0.06 ×8, −0.24 ×2, Σ² = 8·0.0036 + 2·0.0576 = 0.144,
    // s² = 0.016, s/√10 = √0.0016 = 0.04, half-width 2.262·0.04 = 0.09048: [0.14952, 0.33048]; 8 of 10 positive
    const c = judge([...Array<number>(8).fill(0.3), 0, 0]);
    expect(c.interval.mean).toBeCloseTo(0.24, 12);
    expect(c.interval.lo).toBeCloseTo(0.14952, 12);
    expect(c.interval.hi).toBeCloseTo(0.33048, 12);
    expect(c.positiveShare).toBe(0.8);
    expect(c.pass).toBe(true);
  });
});

describe('the measured held-out comparisons (measured.json, what the Lab shows, docs/lab.md)', () => {
  const chance = spaceChance(GRID_SPACE);
  it('is the documented first result: not detectable on seeds 11–20', () => {
    const r = compareRuns(MEASURED.prereg1.runs, chance, SPEC_1);
    expect(r.seeds).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
    expect(r.cycles).toBe(16);
    expect(r.chance).toBeCloseTo(0.046, 3);
    expect(r.comparisons['regret-random']!.interval.mean).toBeCloseTo(0.045, 3);
    expect(r.comparisons['regret-random']!.positiveShare).toBe(0.6);
    expect(r.comparisons['regret-fixed']!.interval.mean).toBeCloseTo(0.031, 3);
    expect(r.comparisons['regret-fixed']!.positiveShare).toBe(0.5);
    expect(r.mechanism).toMatchObject({ medianRegret: 1, regretPass: true, distinctPass: true });
    expect(r.success).toBe(false);
    expect(r.verdict).toMatch(/^Not detectable at this budget \(10 seeds\)/);
  });

  it('is the documented second result: not detectable on seeds 21–30 at 24 cycles either', () => {
    const r = compareRuns(MEASURED.prereg2.runs, chance, SPEC_1);
    expect(r.seeds).toEqual([21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
    expect(r.cycles).toBe(24);
    expect(r.comparisons['regret-random']!.interval.mean).toBeCloseTo(-0.011, 3);
    expect(r.comparisons['regret-random']!.positiveShare).toBe(0.3);
    expect(r.comparisons['regret-fixed']!.interval.mean).toBeCloseTo(-0.041, 3);
    expect(r.comparisons['regret-fixed']!.positiveShare).toBe(0.2);
    expect(r.success).toBe(false);
    expect(r.sentence).toMatch(/^The learned designer did not help more than random levels/);
  });
});

describe('a comparison without random levels (a pilot of two designers)', () => {
  it('is no success and says no arm played random levels instead of judging against them', () => {
    const spec: CompareSpec = { ...SPEC, arms: ['learnability', 'frontier'], baselines: [], headroom: null };
    const runs = [1, 2, 3].flatMap((s) => [run(s, 'learnability', [0, 0.2 + s / 100]), run(s, 'frontier', [0, 0.1])]);
    const r = compareRuns(runs, 0, spec);
    expect(r.success).toBe(false); // nothing to beat is no success
    expect(r.sentence).toBe(
      'No arm played random levels, so nothing here says whether learnability beat them: the agents’ gains (learnability +0.22, frontier +0.10 on the probe, 3 seeds).',
    );
  });
});

describe('the measured third pre-registration (held-out seeds 41–50, run once)', () => {
  it('is the documented result: learnability beat fixed, not random by the margin; the headroom was weaker', () => {
    const m = MEASURED.prereg3!;
    const r = compareRuns(m.runs, spaceChance(CHAIN_SPACE), PRE_REGISTERED_SPEC, m.screenedOut ?? []);
    expect(r.seeds).toEqual([41, 42, 43, 44, 45, 46, 47, 48, 49, 50]);
    expect(m.screenedOut).toEqual([]);
    expect(r.cycles).toBe(40);
    expect(r.spadeDesigner).toBe('learnability');
    expect(r.gain.learnability!.interval.mean).toBeCloseTo(0.182, 3);
    expect(r.gain.random!.interval.mean).toBeCloseTo(0.114, 3);
    expect(r.gain.control!.interval.mean).toBeCloseTo(0.2125, 4);
    expect(r.comparisons['learnability-random']!.interval.mean).toBeCloseTo(0.067, 3);
    expect(r.comparisons['learnability-random']!.interval.lo).toBeGreaterThan(0);
    expect(r.comparisons['learnability-random']!.positiveShare).toBe(0.9);
    expect(r.comparisons['learnability-random']!.pass).toBe(false); // +0.067 < the 0.10 margin
    expect(r.comparisons['learnability-fixed']!.pass).toBe(true);
    expect(r.headroom!.interval.mean).toBeCloseTo(0.052, 3);
    expect(r.headroom!.interval.lo).toBeLessThan(0);
    expect(r.success).toBe(false);
    expect(r.sentence).toMatch(
      /^Even a scripted curriculum \(frontier\) did not clearly beat random levels \(\+0\.05 \[[^\]]+\]\)\. The learned designer did better than random levels, not by the pre-registered rule/,
    );
  });
});

describe('spade lab compare', () => {
  const smoke = [
    'lab',
    'compare',
    '--seeds',
    '2',
    '--cycles',
    '2',
    '--arms',
    'learnability,frontier,random,fixed',
    '--levels',
    '3',
    '--plays',
    '2',
    '--probe-plays',
    '1',
    '--probe-every',
    '2',
    '--json',
  ];
  const cli = async (argv: string[]) => {
    const { main } = await import('../../src/cli/spade.ts');
    const lines: string[] = [];
    const code = await main(argv, { out: (l) => lines.push(l), err: (l) => lines.push(l) });
    return { code, lines };
  };

  it('screens the seed, runs every arm on it and ends with one JSON object; the same again; --combine merges outputs', async () => {
    const a = await cli(smoke);
    expect(a.code).toBe(0);
    const out = JSON.parse(a.lines.at(-1)!) as {
      seeds: number[];
      chance: number;
      spadeDesigner: string;
      gain: Record<string, { perSeed: number[] }>;
      comparisons: Record<string, { diffs: number[] }>;
      screens: { seed: number; pass: boolean }[];
      success: boolean;
      sentence: string;
      runs: SeedRun[];
    };
    expect(out.screens).toMatchObject([{ seed: 2, pass: true }]);
    // the output opens with what it ran, and the last object repeats it
    const opened = a.lines.find((l) => l.startsWith('settings {'))!;
    expect(JSON.parse(opened.slice(9))).toMatchObject({ space: 'chain', cycles: 2, probePlays: 1, probeEvery: 2 });
    expect((out as unknown as { settings: unknown }).settings).toEqual(JSON.parse(opened.slice(9)));
    expect(out.seeds).toEqual([2]);
    expect(out.spadeDesigner).toBe('learnability');
    expect(out.chance).toBeGreaterThan(0);
    expect(out.chance).toBeLessThan(0.1);
    for (const arm of ['learnability', 'frontier', 'random', 'fixed']) expect(out.gain[arm]!.perSeed).toHaveLength(1);
    expect(out.runs.find((r) => r.designer === 'fixed')!.distinctLevels).toEqual([1, 1]);
    expect(out.runs[0]!.curve).toHaveLength(3); // cycle 0, then both cycles (the last two are always probed)
    expect(out.comparisons['learnability-random']!.diffs).toHaveLength(1);
    expect(out.success).toBe(false); // one seed: no interval
    expect(out.sentence.length).toBeGreaterThan(20);
    const strip = (r: SeedRun[]) => r.map(({ seconds: _, ...rest }) => rest);
    const b = await cli(smoke);
    expect(strip((JSON.parse(b.lines.at(-1)!) as { runs: SeedRun[] }).runs)).toEqual(strip(out.runs));
    // two outputs combined: the same runs, judged together
    const dir = mkdtempSync(join(tmpdir(), 'lab-compare-'));
    /** `spade lab compare --combine` of files in `dir`, judged on the smoke's arms. */
    const combine = (...files: string[]) =>
      cli([
        'lab',
        'compare',
        '--arms',
        'learnability,frontier,random,fixed',
        '--combine',
        ...files.map((f) => join(dir, f)),
        '--json',
      ]);
    const moved = out.runs.map((r) => ({ ...r, seed: 3 }));
    const ran = a.lines.find((l) => l.startsWith('settings {'))!;
    writeFileSync(join(dir, 'a.log'), `${ran}\nseed 2 …\n${a.lines.at(-1)}\n`);
    writeFileSync(join(dir, 'b.log'), JSON.stringify({ runs: moved }));
    // (as `spade micro compare`, the older name: the same command)
    const c = await cli([
      'micro',
      'compare',
      '--arms',
      'learnability,frontier,random,fixed',
      '--combine',
      join(dir, 'a.log'),
      join(dir, 'b.log'),
      '--json',
    ]);
    expect((JSON.parse(c.lines.at(-1)!) as { seeds: number[] }).seeds).toEqual([2, 3]);
    // an output run with other settings is not merged with it: the comparison would mix two runs
    writeFileSync(join(dir, 'c.log'), `${ran.replace('"cycles":2', '"cycles":3')}\n${a.lines.at(-1)}\n`);
    const mixed = await cli(['lab', 'compare', '--combine', join(dir, 'a.log'), join(dir, 'c.log'), '--json']);
    expect(mixed.code).toBe(2);
    expect(mixed.lines.join('\n')).toMatch(/a\.log and .*c\.log were run with different settings/);
    // a part restarted: the same seed's arm in two files is kept once when the numbers agree (wall time aside) …
    const again = out.runs.map((r) => `run ${JSON.stringify({ ...r, seconds: r.seconds + 7 })}`);
    writeFileSync(join(dir, 'again.log'), `${opened}\n${again.join('\n')}\n`);
    const twice = await combine('a.log', 'again.log');
    expect(twice.code).toBe(0);
    expect((JSON.parse(twice.lines.at(-1)!) as { runs: SeedRun[] }).runs).toHaveLength(out.runs.length);
    // … and refused when they do not: a deterministic run that differs was run with other code or settings
    const changed = again.map((l, i) => (i === 1 ? l.replace('"curve":[', '"curve":[0.5,') : l));
    writeFileSync(join(dir, 'changed.log'), `${opened}\n${changed.join('\n')}\n`);
    const clash = await combine('a.log', 'changed.log');
    expect(clash.code).toBe(2);
    expect(clash.lines.join('\n')).toMatch(/seed 2's \w+ run differs between .*a\.log and .*changed\.log/);
    // a stopped part restarted with --skip: only the arms its earlier output lacks are run, and together
    // they are the whole run; an earlier output made with other settings is refused
    const firstTwo = out.runs.slice(0, 2).map((r) => `run ${JSON.stringify(r)}`);
    writeFileSync(join(dir, 'part.log'), `${opened}\n${firstTwo.join('\n')}\n`);
    const rest = await cli([...smoke, '--skip', join(dir, 'part.log')]);
    expect(rest.code).toBe(0);
    const restRuns = rest.lines
      .filter((l) => l.startsWith('run {'))
      .map((l) => (JSON.parse(l.slice(4)) as SeedRun).designer);
    expect(restRuns).toEqual(out.runs.slice(2).map((r) => r.designer));
    writeFileSync(join(dir, 'rest.log'), rest.lines.join('\n'));
    const whole = await combine('part.log', 'rest.log');
    expect(strip((JSON.parse(whole.lines.at(-1)!) as { runs: SeedRun[] }).runs)).toEqual(strip(out.runs));
    const otherSkip = await cli([...smoke, '--skip', join(dir, 'c.log')]);
    expect(otherSkip.code).toBe(2);
    expect(otherSkip.lines.join('\n')).toMatch(/--skip: .*c\.log was run with other settings/);
    const bad = await cli(['lab', 'compare', '--seeds', 'ten']);
    expect(bad.code).toBe(2);
    const badArm = await cli(['lab', 'compare', '--seeds', '1', '--arms', 'oracle']);
    expect(badArm.code).toBe(2);
  }, 240_000);

  it("on --space climb runs round 4's pre-registered settings unless a flag names another; elsewhere the Lab's", async () => {
    const { compareSettingsOf, LAB_COMPARE } = await import('../../src/cli/cmd_lab.ts');
    const { parseCommand } = await import('../../src/cli/args.ts');
    const of = (argv: string[]) =>
      compareSettingsOf(parseCommand(LAB_COMPARE, argv, { out: () => {}, err: () => {} })!);
    const climb = of(['--space', 'climb', '--seeds', '71-80']);
    expect(climb.record).toMatchObject({ cycles: 400, probePlays: 32, probeEvery: 40 });
    expect(climb.spec.arms).toEqual(ROUND4_ARMS);
    expect(climb.settings).toMatchObject({ probePlays: 32, probeEvery: 40 });
    const mine = of(['--space', 'climb', '--cycles', '8', '--probe-plays', '4']);
    expect(mine.record).toMatchObject({ cycles: 8, probePlays: 4, probeEvery: 40 });
    const chain = of(['--seeds', '1']);
    expect(chain.record).toMatchObject({ space: 'chain', cycles: 40, probePlays: 16, probeEvery: 5 });
    // pre-registration 5: the step-writing designer's arms and baselines, round 4's settings and rule
    const five = of(['--space', 'climb', '--prereg', '5', '--seeds', '101-110']);
    expect(five.spec).toMatchObject({
      arms: ['learnability-steps', 'untrained-steps', 'gated', 'random'],
      spade: 'learnability-steps',
      baselines: ['random', 'untrained-steps'],
      headroom: ['gated', 'random'],
      rule: ROUND4_SPEC.rule,
    });
    expect(five.record).toEqual(climb.record); // the same settings: its runs combine with round 4's
    expect(() => of(['--space', 'chain', '--prereg', '5', '--seeds', '1'])).toThrow(
      /--prereg 5 is a comparison on --space climb/,
    );
    expect(() => of(['--space', 'climb', '--prereg', '3', '--seeds', '1'])).toThrow(/--prereg must be 4 or 5/);
  });

  it('on --space climb judges round 4 by default: its seven arms, top-half gains, untrained a baseline, gated − random the headroom', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lab-compare-climb-'));
    const lines = [1, 2].flatMap((seed) =>
      ROUND4_SPEC.arms.map(
        (arm, i) =>
          `run ${JSON.stringify(run(seed, arm, [0, 0.5, 0.5], { hardCurve: [0, i / 10, i / 10 + seed / 100], stepsCurve: [0, 5, 10], plays: 64 }))}`,
      ),
    );
    writeFileSync(join(dir, 'climb.log'), lines.join('\n'));
    const c = await cli(['lab', 'compare', '--space', 'climb', '--combine', join(dir, 'climb.log'), '--json']);
    expect(c.code).toBe(0);
    const out = JSON.parse(c.lines.at(-1)!) as {
      arms: string[];
      metric: string;
      comparisons: Record<string, unknown>;
      gain: Record<string, { perSeed: number[] }>;
    };
    expect(out.arms).toEqual(ROUND4_ARMS);
    expect(out.metric).toBe('topHalf');
    expect(Object.keys(out.comparisons)).toEqual([
      'learnability-random',
      'learnability-untrained',
      'learnability-fixed',
      'gated-random',
    ]);
    expect(out.gain.gated!.perSeed[0]).toBeCloseTo(0.3 + 0.01 / 2, 12); // the top half's last two, not the mean's 0.5
  });
});

describe('round 4: top-half gains, the comparison at equal optimiser steps, plays and steps to the target', () => {
  // two arms on one seed, 4 cycles of 10 plays, every cycle probed; the top half (hardCurve) is the metric
  const spec = { ...ROUND4_SPEC, arms: ['learnability', 'random'], baselines: ['random'], headroom: null };
  const fast = run(1, 'learnability', [0.5, 0.5, 0.5, 0.5, 0.5], {
    hardCurve: [0, 0.2, 0.5, 0.6, 0.7],
    stepsCurve: [0, 10, 20, 30, 40],
    plays: 40,
  });
  const slow = run(1, 'random', [0.9, 0.9, 0.9, 0.9, 0.9], {
    hardCurve: [0, 0, 0.1, 0.1, 0.2],
    stepsCurve: [0, 5, 10, 15, 20],
    plays: 40,
  });
  const r = compareRuns([fast, slow], 0, spec);

  it('reads the gain off the top half, not the mean', () => {
    expect(r.metric).toBe('topHalf');
    expect(r.gain.learnability!.perSeed[0]).toBeCloseTo((0.6 + 0.7) / 2, 12);
    expect(r.gain.random!.perSeed[0]).toBeCloseTo((0.1 + 0.2) / 2, 12);
    expect(r.comparisons['learnability-random']!.diffs[0]).toBeCloseTo(0.5, 12);
  });

  it('at equal steps cuts every curve where its steps pass the fewest any arm took (20 here)', () => {
    const eq = r.gainAtEqualSteps!;
    expect(eq.learnability!.steps).toEqual([20]);
    // learnability's probes up to 20 steps: cycles 0-2 → the last two 0.2 and 0.5
    expect(eq.learnability!.perSeed[0]).toBeCloseTo((0.2 + 0.5) / 2, 12);
    expect(eq.random!.perSeed[0]).toBeCloseTo((0.1 + 0.2) / 2, 12);
  });

  it('an arm that never updates (fixed on the top rung: 0 steps) does not cut the others at 0; its own curve is whole', () => {
    const still = run(1, 'fixed', [0, 0, 0, 0, 0], {
      hardCurve: [0, 0, 0, 0, 0.1],
      stepsCurve: [0, 0, 0, 0, 0],
      plays: 40,
    });
    const three = compareRuns([fast, slow, still], 0, { ...spec, arms: ['learnability', 'random', 'fixed'] });
    const eq = three.gainAtEqualSteps!;
    expect(eq.learnability!.steps).toEqual([20]); // random's 20, not fixed's 0
    expect(eq.learnability!.perSeed[0]).toBeCloseTo((0.2 + 0.5) / 2, 12);
    expect(eq.fixed!.perSeed[0]).toBeCloseTo(0.1 / 2, 12);
  });

  it('counts plays and steps to a top-half success of 0.5 (null: never)', () => {
    expect(r.toTarget!.learnability).toEqual({ plays: [20], steps: [20] });
    expect(r.toTarget!.random).toEqual({ plays: [null], steps: [null] });
  });

  it('has neither without the steps (the earlier runs)', () => {
    const old = compareRuns([run(1, 'learnability', [0, 1]), run(1, 'random', [0, 0])], 0, spec);
    expect(old.gainAtEqualSteps).toBeNull();
    expect(old.toTarget).toBeNull();
    expect(old.gain.learnability!.perSeed).toEqual([1]); // no hardCurve: the mean's curve
  });
});

describe("round 4's pre-registered rule: beat random by more than 0.15, at least 0.8 of gated's gain, headroom by 0.2", () => {
  // ten seeds; every arm's top-half gain on seed i is base + wiggle(i) (curve [0, g, g] → gain g)
  const wiggle = (i: number) => (i % 2 ? 0.01 : -0.01); // mean 0 over the ten seeds
  const judge = (gains: Record<string, number>) =>
    compareRuns(
      ROUND4_ARMS.flatMap((arm) =>
        Array.from({ length: 10 }, (_, i) => {
          const g = (gains[arm] ?? 0) + (arm === 'random' ? 0 : wiggle(i));
          return run(71 + i, arm, [0, 0, 0], { hardCurve: [0, g, g] });
        }),
      ),
      0,
      ROUND4_SPEC,
    );

  it('passes when all three hold, and names the share of gated it reached', () => {
    const r = judge({ learnability: 0.45, gated: 0.5, untrained: 0.3, random: 0.05 });
    expect(r.comparisons['learnability-random']!.margin).toBe(0.15);
    expect(r.headroom!.margin).toBe(0.2);
    expect(r.ofScripted).toMatchObject({ arm: 'gated', share: 0.8, pass: true });
    expect(r.ofScripted!.ratio).toBeCloseTo(0.9, 12);
    expect(r.success).toBe(true);
    expect(r.sentence).toMatch(/The learned designer helped: .* more than with random levels on 10 of 10 seeds\.$/);
    // untrained and fixed are reported, not required: learnability − untrained +0.15 fails its margin
    expect(r.comparisons['learnability-untrained']!.pass).toBe(false);
    expect(r.verdict).toMatch(/0\.90× gated's gain \(pre-registered: ≥ 0\.8\)/);
  });

  it('a clear win over random by 0.12 is under the margin of 0.15 (the earlier rule, 0.10, would pass it)', () => {
    const r = judge({ learnability: 0.17, gated: 0.2, random: 0.05 });
    const vs = r.comparisons['learnability-random']!;
    expect(vs.interval.mean).toBeCloseTo(0.12, 12);
    expect(vs.interval.lo).toBeGreaterThan(0);
    expect(vs.positiveShare).toBe(1);
    expect(vs.pass).toBe(false);
    expect(r.success).toBe(false);
    expect(r.verdict).toMatch(/learnability did not clearly beat random/);
  });

  it("beating random is not enough at 0.6 of gated's gain: the sentence says which part was missed", () => {
    const r = judge({ learnability: 0.3, gated: 0.5, random: 0 });
    expect(r.comparisons['learnability-random']!.pass).toBe(true);
    expect(r.ofScripted!.ratio).toBeCloseTo(0.6, 12);
    expect(r.success).toBe(false);
    expect(r.sentence).toMatch(
      /beat random levels \(\+0\.30 .*\), but not by the whole pre-registered rule: learnability gained 0\.60× gated's gain, under the pre-registered 0\.8×\.$/,
    );
  });

  it('a designer that climbed on one seed of three is no detected difference, and the gains are listed as they are', () => {
    const runs = [71, 72, 73].flatMap((seed) =>
      ROUND4_ARMS.map((arm) => {
        const g = arm === 'learnability' ? (seed === 71 ? 0.5 : 0) : arm === 'gated' ? 0.6 : 0;
        return run(seed, arm, [0, 0, 0], { hardCurve: [0, g, g] });
      }),
    );
    const r = compareRuns(runs, 0, ROUND4_SPEC);
    expect(r.comparisons['learnability-random']!.interval.lo).toBeLessThan(0);
    expect(r.sentence).toMatch(/The learned designer did not help more than random levels: no difference was detected/);
    expect(r.sentence).toContain('the agents’ gains (learnability +0.17, untrained +0.00, scripted +0.00, gated +0.60');
    expect(r.sentence).not.toContain('a little');
  });

  it('without headroom (gated − random 0.18 < 0.2) there is no success, even at full share', () => {
    const r = judge({ learnability: 0.18, gated: 0.18, random: 0 });
    expect(r.comparisons['learnability-random']!.pass).toBe(true);
    expect(r.ofScripted!.pass).toBe(true);
    expect(r.headroom!.pass).toBe(false);
    expect(r.success).toBe(false);
    expect(r.verdict).toMatch(/the headroom \(gated − random\) did not pass its margin of 0\.20/);
  });
});

describe('spade lab compare --markdown: the tables a write-up quotes', () => {
  it('per seed and arm the end, the rungs (as lengths), steps and plays; every pair with its interval', () => {
    const spec = { ...ROUND4_SPEC, arms: ['learnability', 'random'], baselines: ['random'], headroom: null };
    const runs = [1, 2].flatMap((seed) => [
      run(seed, 'learnability', [0, 0.5, 0.5], {
        hardCurve: [0, 0.2 + seed / 10, 0.4 + seed / 10],
        topRung: [-1, 6, 5],
        steps: { agent: 10 * seed, designer: 3 },
        stepsCurve: [0, 5, 10 * seed],
        plays: 64,
      }),
      run(seed, 'random', [0, 0.5, 0.5], {
        hardCurve: [0, 0, 0.1],
        topRung: [-1, -1, 0],
        steps: { agent: 5, designer: 0 },
        stepsCurve: [0, 2, 5],
        plays: 64,
      }),
    ]);
    const r = compareRuns(runs, 0, spec);
    const md = markdownReport(r, runs, SPACE.climb.stages).split('\n');
    // seed 1: top half (0.3 + 0.5) / 2 = 0.4; last probe's rung 5 = length 7, best 6 = length 8
    expect(md).toContain('| 1 | 0.400 / length 7, length 8 / 10 / 64 | 0.050 / length 2, length 2 / 5 / 64 |');
    expect(md).toContain('| 2 | 0.500 / length 7, length 8 / 20 / 64 | 0.050 / length 2, length 2 / 5 / 64 |');
    // learnability − random: 0.35 and 0.45, mean 0.4, sd 0.0707, half-width t(0.975, 1) · sd / √2 = 12.706 · 0.05 = 0.635
    expect(md).toContain('| learnability − random | +0.400 [−0.235, +1.035] | 2 of 2 | 0.15 | no |');
    // plays to the target: both learnability seeds reached 0.5 at their last probe, random never did
    expect(md).toContain(
      "| learnability (SPADE's designer) | +0.450 [−0.185, +1.085] | +0.350 [−0.285, +0.985] | 15 | 2 of 2 (median 64 plays, 15 steps) |",
    );
    expect(md.find((l) => l.startsWith('| random |'))).toMatch(/\| 5 \| 0 of 2 \|$/);
    expect(md.at(-1)).toMatch(/^Success: no\. /);
  });

  it('names a pair by its two arms when the arms hold "-" (learnability-steps − untrained-steps, not learnability − steps-…)', () => {
    const runs = [1, 2, 3].flatMap((seed) =>
      ROUND5_SPEC.arms.map((a, i) => run(seed, a, [0, 0.5, 0.5], { hardCurve: [0, i / 10, seed / 10 + i / 10] })),
    );
    const r = compareRuns(runs, 0, ROUND5_SPEC);
    const pair = r.comparisons['learnability-steps-untrained-steps']!;
    expect([pair.arm, pair.other]).toEqual(['learnability-steps', 'untrained-steps']);
    expect(r.headroom!.arm).toBe('gated');
    const md = markdownReport(r, runs, SPACE.climb.stages);
    expect(md).toMatch(/^\| learnability-steps − untrained-steps \| /m);
    expect(md).toMatch(/^\| learnability-steps − random \| /m);
    expect(md).toMatch(/^\| gated − random \(headroom\) \| /m);
    expect(md).not.toContain('learnability − steps');
    expect(r.verdict).toContain('learnability-steps − untrained-steps gain');
  });
});
