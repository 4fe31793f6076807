// The micro lab's pre-registered comparison (src/core/micro/compare.ts): gain, the 95% t-interval,
// the criteria computed from per-seed runs (a clear win, a noisy tie, a collapsed designer), and the
// `spade micro compare` command end to end — a small seeded smoke (one seed, one cycle, few plays)
// whose last line is the JSON object, the same on a second run, and --combine of two outputs.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareRuns, gain, tInterval, type SeedRun } from '../../src/core/micro/compare.ts';
import { DESIGNERS, PROBE_LEVELS, probeChance, type DesignerKind } from '../../src/core/micro/lab.ts';
import { MEASURED, MEASURED_LONGER } from '../../src/core/micro/measured.ts';

const run = (seed: number, designer: DesignerKind, curve: number[], o: Partial<SeedRun> = {}): SeedRun => ({
  seed,
  designer,
  curve,
  medianRegret: [0.5, 0.5],
  distinctLevels: [3, 4],
  seconds: 1,
  ...o,
});

describe('the comparison, pure', () => {
  it('gain is the mean of the last two probes minus cycle 0', () => {
    expect(gain([0.1, 0.2, 0.4, 0.6])).toBeCloseTo(0.4, 12);
    expect(gain([0.1, 0.3])).toBeCloseTo(0.2, 12);
    expect(gain([0.1])).toBe(0);
  });

  it('the t-interval uses Student t quantiles', () => {
    const i = tInterval([1, 2, 3, 4]); // mean 2.5, sd 1.291, t(0.975, 3) = 3.182
    expect(i.mean).toBe(2.5);
    expect(i.hi - i.mean).toBeCloseTo((3.182 * 1.2909944) / 2, 4);
    expect(tInterval([1])).toMatchObject({ n: 1, lo: -Infinity, hi: Infinity });
  });

  it('passes a clear, consistent win and fails a noisy tie, a lost seed share and a collapsed designer', () => {
    const seeds = [1, 2, 3, 4, 5];
    const build = (regretGain: (s: number) => number, o: Partial<SeedRun> = {}) =>
      seeds.flatMap((s) =>
        DESIGNERS.map((d) =>
          d === 'regret' ? run(s, d, [0, regretGain(s), regretGain(s)], o) : run(s, d, [0, 0.05, 0.05]),
        ),
      );
    const win = compareRuns(
      build((s) => 0.3 + s / 100),
      0.01,
    );
    expect(win.seeds).toEqual(seeds);
    expect(win.comparisons['regret-random']).toMatchObject({ positiveShare: 1, pass: true });
    expect(win.comparisons['regret-fixed'].interval.mean).toBeCloseTo(0.28, 12);
    expect(win.success).toBe(true);
    const tie = compareRuns(
      build((s) => (s % 2 ? 0.35 : -0.25)),
      0.01,
    );
    expect(tie.comparisons['regret-random'].pass).toBe(false);
    expect(tie.success).toBe(false);
    expect(tie.verdict).toMatch(/^Not detectable at this budget \(5 seeds\): regret did not clearly beat random;/);
    const collapsed = compareRuns(
      build(() => 0.4, { distinctLevels: [1, 1], medianRegret: [0, -0.1] }),
      0.01,
    );
    expect(collapsed.mechanism).toMatchObject({ distinctLevels: 1, regretPass: false, distinctPass: false });
    expect(collapsed.success).toBe(false);
    expect(collapsed.verdict).toMatch(/the designer collapsed/);
    // a seed missing a designer is left out
    expect(compareRuns([...build(() => 0.3), run(9, 'regret', [0, 1, 1])], 0).seeds).toEqual(seeds);
  });
});

describe('the measured held-out comparison (what the Lab shows, docs/micro.md)', () => {
  it('is the documented result: not detectable on seeds 11–20', () => {
    const r = compareRuns(MEASURED.runs, probeChance(PROBE_LEVELS));
    expect(r.seeds).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
    expect(r.cycles).toBe(16);
    expect(r.chance).toBeCloseTo(0.046, 3);
    expect(r.comparisons['regret-random'].interval.mean).toBeCloseTo(0.045, 3);
    expect(r.comparisons['regret-random'].positiveShare).toBe(0.6);
    expect(r.comparisons['regret-fixed'].interval.mean).toBeCloseTo(0.031, 3);
    expect(r.comparisons['regret-fixed'].positiveShare).toBe(0.5);
    expect(r.mechanism).toMatchObject({ medianRegret: 1, regretPass: true, distinctPass: true });
    expect(r.success).toBe(false);
    expect(r.verdict).toMatch(/^Not detectable at this budget \(10 seeds\)/);
  });

  it('is the documented second result: not detectable on seeds 21–30 at 24 cycles either', () => {
    const r = compareRuns(MEASURED_LONGER.runs, probeChance(PROBE_LEVELS));
    expect(r.seeds).toEqual([21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
    expect(r.cycles).toBe(24);
    expect(r.comparisons['regret-random'].interval.mean).toBeCloseTo(-0.011, 3);
    expect(r.comparisons['regret-random'].positiveShare).toBe(0.3);
    expect(r.comparisons['regret-fixed'].interval.mean).toBeCloseTo(-0.041, 3);
    expect(r.comparisons['regret-fixed'].positiveShare).toBe(0.2);
    expect(r.success).toBe(false);
  });
});

describe('spade micro compare', () => {
  const smoke = [
    'micro',
    'compare',
    '--seeds',
    '2',
    '--cycles',
    '1',
    '--levels',
    '2',
    '--plays',
    '2',
    '--probe-plays',
    '1',
    '--json',
  ];
  const cli = async (argv: string[]) => {
    const { main } = await import('../../src/cli/spade.ts');
    const lines: string[] = [];
    const code = await main(argv, { out: (l) => lines.push(l), err: (l) => lines.push(l) });
    return { code, lines };
  };

  it('runs the four designers on a seed and ends with one JSON object; the same again; --combine merges outputs', async () => {
    const a = await cli(smoke);
    expect(a.code).toBe(0);
    const out = JSON.parse(a.lines.at(-1)!) as {
      seeds: number[];
      chance: number;
      designers: Record<
        string,
        {
          curves: Record<string, number[]>;
          medianRegret: Record<string, number[]>;
          distinctLevels: Record<string, number[]>;
        }
      >;
      comparisons: Record<string, { diffs: number[] }>;
      mechanism: { medianRegret: number };
      success: boolean;
      runs: SeedRun[];
    };
    expect(out.seeds).toEqual([2]);
    expect(out.chance).toBeGreaterThan(0);
    expect(out.chance).toBeLessThan(0.1);
    for (const d of DESIGNERS) {
      expect(out.designers[d]!.curves['2']).toHaveLength(2);
      expect(out.designers[d]!.medianRegret['2']).toHaveLength(1);
    }
    expect(out.designers.fixed!.distinctLevels['2']).toEqual([1]);
    expect(out.comparisons['regret-random']!.diffs).toHaveLength(1);
    expect(out.success).toBe(false); // one seed: no interval
    const strip = (r: SeedRun[]) => r.map(({ seconds: _, ...rest }) => rest);
    const b = await cli(smoke);
    expect(strip((JSON.parse(b.lines.at(-1)!) as { runs: SeedRun[] }).runs)).toEqual(strip(out.runs));
    // two outputs combined: the same runs, judged together
    const dir = mkdtempSync(join(tmpdir(), 'micro-compare-'));
    const moved = out.runs.map((r) => ({ ...r, seed: 3 }));
    writeFileSync(join(dir, 'a.log'), `seed 2 …\n${a.lines.at(-1)}\n`);
    writeFileSync(join(dir, 'b.log'), JSON.stringify({ runs: moved }));
    const c = await cli(['micro', 'compare', '--combine', join(dir, 'a.log'), join(dir, 'b.log'), '--json']);
    expect((JSON.parse(c.lines.at(-1)!) as { seeds: number[] }).seeds).toEqual([2, 3]);
    const bad = await cli(['micro', 'compare', '--seeds', 'ten']);
    expect(bad.code).toBe(2);
  }, 240_000);
});
