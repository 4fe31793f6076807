/**
 * The micro lab's pre-registered designer comparison, pure: per-seed runs of the four designers in,
 * the figures and the success criteria out (docs/micro.md, "Pre-registered comparison"). Used by
 * `spade micro compare` and the Lab panel alike, so both print the same numbers.
 *
 *   gain        mean of the last two probes minus the probe before training (cycle 0), per seed
 *   comparison  for regret − random and regret − fixed: the paired gain differences over seeds, their
 *               mean, 95% t-interval and share of seeds positive; it passes when the mean is > 0.10,
 *               the interval's lower end is > 0 and ≥ 80% of seeds are positive
 *   mechanism   the regret designer's median regret per cycle (median over cycles, then over seeds)
 *               is > 0, and it designs ≥ 2 distinct levels per cycle (mean over cycles and seeds)
 *   success     both comparisons and both mechanism checks pass
 */
import { mean } from '../spade/estimators.ts';
import type { DesignerKind } from './lab.ts';

/** One designer on one seed: what the comparison reads. */
export interface SeedRun {
  seed: number;
  designer: DesignerKind;
  /** Probe mean return, cycle 0 (before training) then one per cycle. */
  curve: number[];
  /** The median regret of each cycle's designs. */
  medianRegret: number[];
  /** Distinct valid levels designed in each cycle. */
  distinctLevels: number[];
  seconds: number;
}

export interface Interval {
  n: number;
  mean: number;
  lo: number;
  hi: number;
}

export interface PairComparison {
  /** Per seed (in seed order): regret's gain minus the baseline's. */
  diffs: number[];
  interval: Interval;
  positiveShare: number;
  pass: boolean;
}

export interface CompareResult {
  seeds: number[];
  cycles: number;
  /** The probe's chance level (a uniform random player). */
  chance: number;
  /** Per designer: gain per seed (seed order), and its mean with a 95% t-interval. */
  gain: Record<string, { perSeed: number[]; interval: Interval }>;
  comparisons: { 'regret-random': PairComparison; 'regret-fixed': PairComparison };
  mechanism: { medianRegret: number; distinctLevels: number; regretPass: boolean; distinctPass: boolean };
  success: boolean;
  /** The plain verdict. */
  verdict: string;
}

/** The pre-registered thresholds. */
export const CRITERIA = { minGainDiff: 0.1, minPositiveShare: 0.8, minMedianRegret: 0, minDistinct: 2 } as const;

/** Two-sided 95% Student t quantiles t(0.975, df) for df = 1…30; beyond, 1.96. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** The mean and its 95% t-interval (a single value: an interval of ±Infinity). */
export function tInterval(xs: readonly number[]): Interval {
  const n = xs.length;
  const m = mean([...xs]);
  if (n < 2) return { n, mean: m, lo: -Infinity, hi: Infinity };
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1));
  const half = (T975[n - 2] ?? 1.96) * (sd / Math.sqrt(n));
  return { n, mean: m, lo: m - half, hi: m + half };
}

/** Mean of the last two probes minus the first (cycle 0); with one cycle, that cycle's probe. */
export function gain(curve: readonly number[]): number {
  if (curve.length < 2) return 0;
  const last = curve.length > 2 ? (curve.at(-1)! + curve.at(-2)!) / 2 : curve.at(-1)!;
  return last - curve[0]!;
}

const median = (xs: readonly number[]) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const k = s.length >> 1;
  return s.length % 2 ? s[k]! : (s[k - 1]! + s[k]!) / 2;
};

/** The comparison of per-seed runs (every seed needs all four designers; others are left out). */
export function compareRuns(runs: readonly SeedRun[], chance: number): CompareResult {
  const bySeed = new Map<number, Map<DesignerKind, SeedRun>>();
  for (const r of runs) {
    if (!bySeed.has(r.seed)) bySeed.set(r.seed, new Map());
    bySeed.get(r.seed)!.set(r.designer, r);
  }
  const designers: DesignerKind[] = ['regret', 'random', 'fixed', 'control'];
  const seeds = [...bySeed.keys()].filter((s) => designers.every((d) => bySeed.get(s)!.has(d))).sort((a, b) => a - b);
  const run = (s: number, d: DesignerKind) => bySeed.get(s)!.get(d)!;
  const gains = Object.fromEntries(
    designers.map((d) => {
      const perSeed = seeds.map((s) => gain(run(s, d).curve));
      return [d, { perSeed, interval: tInterval(perSeed) }];
    }),
  );
  const pair = (other: DesignerKind): PairComparison => {
    const diffs = seeds.map((s) => gain(run(s, 'regret').curve) - gain(run(s, other).curve));
    const interval = tInterval(diffs);
    const positiveShare = diffs.length ? diffs.filter((x) => x > 0).length / diffs.length : 0;
    return {
      diffs,
      interval,
      positiveShare,
      pass: interval.mean > CRITERIA.minGainDiff && interval.lo > 0 && positiveShare >= CRITERIA.minPositiveShare,
    };
  };
  const comparisons = { 'regret-random': pair('random'), 'regret-fixed': pair('fixed') };
  const medianRegret = median(seeds.map((s) => median(run(s, 'regret').medianRegret)));
  const distinctLevels = mean(seeds.flatMap((s) => run(s, 'regret').distinctLevels));
  const mechanism = {
    medianRegret,
    distinctLevels,
    regretPass: medianRegret > CRITERIA.minMedianRegret,
    distinctPass: distinctLevels >= CRITERIA.minDistinct,
  };
  const success =
    comparisons['regret-random'].pass &&
    comparisons['regret-fixed'].pass &&
    mechanism.regretPass &&
    mechanism.distinctPass;
  const cycles = seeds.length ? run(seeds[0]!, 'regret').curve.length - 1 : 0;
  return {
    seeds,
    cycles,
    chance,
    gain: gains,
    comparisons,
    mechanism,
    success,
    verdict: verdictText(seeds.length, comparisons, mechanism, success),
  };
}

const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : x > 0 ? '∞' : '−∞');
const interval = (i: Interval) => `${f2(i.mean)} [${f2(i.lo)}, ${f2(i.hi)}]`;

function verdictText(
  n: number,
  c: CompareResult['comparisons'],
  m: CompareResult['mechanism'],
  success: boolean,
): string {
  if (!n) return 'No seed has all four designers yet.';
  const gaps = (['regret-random', 'regret-fixed'] as const)
    .map(
      (k) =>
        `${k} gain ${interval(c[k].interval)} (95% t-interval, ${Math.round(c[k].positiveShare * 100)}% of seeds positive)`,
    )
    .join('; ');
  const mech = `median regret per cycle ${f2(m.medianRegret)}, ${m.distinctLevels.toFixed(1)} distinct levels per cycle`;
  if (success) return `Positive on ${n} seed${n === 1 ? '' : 's'}: ${gaps}; ${mech}.`;
  const failed = [
    !c['regret-random'].pass && 'regret did not clearly beat random',
    !c['regret-fixed'].pass && 'regret did not clearly beat fixed',
    !m.regretPass && 'the hint did not help (median regret ≤ 0)',
    !m.distinctPass && 'the designer collapsed (< 2 distinct levels per cycle)',
  ].filter(Boolean);
  return `Not detectable at this budget (${n} seed${n === 1 ? '' : 's'}): ${failed.join('; ')}. ${gaps}; ${mech}.`;
}
