/**
 * The Lab's pre-registered comparison, pure: per-seed runs of the arms in, the figures and the
 * success criterion out (docs/lab.md). Used by `spade lab compare` and the Lab panel alike, so
 * both print the same numbers.
 *
 *   arm          a designer, and for the learned designer its reward (ARMS): `learnability` is the
 *                learned designer on 4p̂(1 − p̂), `regret` the same on the method's paper_blend
 *   gain         mean of the last two probes minus the probe before training (cycle 0), per seed;
 *                the same over the probe's hardest half
 *   comparison   SPADE's designer minus each baseline (pre-registered: random and fixed): the paired
 *                gain differences over seeds, their mean, 95% t-interval and share of seeds positive;
 *                it passes when the mean is > 0.10, the interval's lower end is > 0 and ≥ 80% of seeds
 *                are positive
 *   headroom     the scripted frontier minus random, the same figures: what a curriculum can do here
 *   success      every comparison passes (the first two pre-registrations also asked the mechanism
 *                checks: median regret > 0 and ≥ 2 distinct levels a cycle)
 *   sentence     what happened, in one plain sentence, before any interval
 */
import type { Estimator } from '../config.ts';
import { mean } from '../spade/estimators.ts';
import type { DesignerKind } from './lab.ts';

/** One arm on one seed: what the comparison reads. */
export interface SeedRun {
  seed: number;
  /** The arm's name (ARMS; the first two pre-registrations: regret, random, fixed, control). */
  designer: string;
  /** Probe mean return, cycle 0 (before training) then one per cycle (null: that cycle was not probed). */
  curve: (number | null)[];
  /** The same over the probe's hardest half (absent in the first two pre-registrations' runs). */
  hardCurve?: (number | null)[];
  /** The probe per stage of the space, cycle 0 then one per cycle. */
  stages?: (number[] | null)[];
  /** The mean designed level's place in the space (0–1), per cycle. */
  level?: (number | null)[];
  /** The median regret of each cycle's designs. */
  medianRegret: number[];
  /** Distinct valid levels designed in each cycle. */
  distinctLevels: number[];
  /** Optimiser steps over the run, per role. */
  steps?: { agent: number; designer: number };
  /** The agent's steps its spike guard skipped (`--skip-spikes`; absent with the guard off or none skipped). */
  skippedSteps?: number;
  /** The agent's optimiser steps so far, cycle 0 (0) then after each cycle (for the comparison at equal steps). */
  stepsCurve?: number[];
  /** The agent's unhinted plays over the run (the sample budget; every arm of a comparison has the same). */
  plays?: number;
  /** The highest rung the probe won at least half the time (−1: none), cycle 0 then one per cycle. */
  topRung?: (number | null)[];
  seconds: number;
}

/** The arms: a designer, and the learned designer's reward. */
export const ARMS: Record<string, { designer: DesignerKind; estimator?: Estimator; steps?: true; about: string }> = {
  learnability: {
    designer: 'learned',
    estimator: 'learnability',
    about: 'a tiny model trained to design, rewarded by learnability 4p(1 − p)',
  },
  regret: {
    designer: 'learned',
    estimator: 'paper_blend',
    about: "the same model rewarded by the method's paper_blend (plateau and regret)",
  },
  alpha: {
    designer: 'learned',
    estimator: 'alpha_curriculum',
    about: "the same model rewarded by GenEnv's α-curriculum exp(−10(p − ½)²) (a pilot's second reward)",
  },
  'learnability-steps': {
    designer: 'learned',
    estimator: 'learnability',
    steps: true,
    about: 'learnability’s designer writing a step from the frontier rung (two below to two above), not a rung',
  },
  'azr-steps': {
    designer: 'learned',
    estimator: 'azr_learnability',
    steps: true,
    about:
      "the step-writing designer rewarded by Absolute Zero's proposer reward 1 − p when 0 < p < 1 (a pilot's reward)",
  },
  'untrained-steps': {
    designer: 'untrained',
    estimator: 'learnability',
    steps: true,
    about: 'the untrained designer writing steps from the frontier rung, as learnability-steps does',
  },
  untrained: {
    designer: 'untrained',
    estimator: 'learnability',
    about: 'the same designer model, prompt, buffer and edit slot, never trained (the method’s ablation)',
  },
  scripted: { designer: 'scripted', about: 'scripted: memory plus one-knob moves (pre-registration 3’s “control”)' },
  gated: { designer: 'gated', about: 'scripted: a mastery-gated ladder replaying lower rungs (the headroom)' },
  sfl: { designer: 'sfl', about: 'scripted, SFL-style: replays the most learnable levels, edits one knob up' },
  frontier: { designer: 'sfl', about: 'scripted: replays the most learnable levels, edits one knob up (now sfl)' },
  ladder: { designer: 'ladder', about: 'scripted: the levels easiest first, a few cycles each' },
  random: { designer: 'random', about: 'uniform levels' },
  fixed: {
    designer: 'fixed',
    about: 'one level: the top rung on the climb; elsewhere a medium level not in the probe',
  },
  control: { designer: 'scripted', about: 'scripted: memory plus random edits (now named scripted)' },
};

export interface CompareSpec {
  /** The arms (every seed needs all of them), in display order. */
  arms: string[];
  /** SPADE's designer: the arm the criterion is about. */
  spade: string;
  /** The arms it must beat. */
  baselines: string[];
  /** The headroom pair [scripted, baseline] reported beside it, or null. */
  headroom: [string, string] | null;
  /** Whether the mechanism checks are part of success (the first two pre-registrations). */
  mechanismInSuccess: boolean;
  /**
   * What a gain is read from: the probe's mean (the first three pre-registrations) or its top half
   * (`hardCurve`; round 4 on the climb: top-half success, the primary measure). Absent: the mean.
   */
  metric?: 'mean' | 'topHalf';
  /**
   * The run settings pre-registered with it, where they differ from the Lab's defaults (round 4: the
   * climb's 400 cycles, 32 probe plays a rung, a probe every 40 cycles). `spade lab compare` runs them
   * unless a flag names another value.
   */
  run?: { cycles: number; probePlays: number; probeEvery: number };
  /**
   * The success rule, where it is not the first three pre-registrations' (beat every baseline by more
   * than CRITERIA.minGainDiff, the interval above 0, ≥ 80% of seeds positive). Round 4's (issue #39):
   * SPADE's designer beats `mustBeat` by more than `margin` (the interval above 0, ≥ 80% of seeds
   * positive), its mean gain is at least `ofScripted.share` of the scripted arm's, and the headroom
   * pair passes by `headroomMargin`; the other baselines are reported with their intervals.
   */
  rule?: {
    margin: number;
    mustBeat: string[];
    ofScripted: { arm: string; share: number } | null;
    headroomMargin: number;
  };
}

/** The first two pre-registrations' comparison (the grid space; docs/lab.md). */
export const SPEC_1: CompareSpec = {
  arms: ['regret', 'random', 'fixed', 'control'],
  spade: 'regret',
  baselines: ['random', 'fixed'],
  headroom: null,
  mechanismInSuccess: true,
};

/** The third pre-registration's comparison (the chain space; docs/lab.md). */
export const PRE_REGISTERED_ARMS = ['learnability', 'regret', 'frontier', 'ladder', 'random', 'fixed', 'control'];
export const PRE_REGISTERED_SPEC: CompareSpec = {
  arms: PRE_REGISTERED_ARMS,
  spade: 'learnability',
  baselines: ['random', 'fixed'],
  headroom: ['frontier', 'random'],
  mechanismInSuccess: false,
};

/**
 * Round 4's arms on the climb (docs/lab.md, "Round 4"): SPADE's designer (learnability), the same
 * designer never trained, the scripted rule, the gated ladder (the headroom), SFL, random and fixed.
 */
export const ROUND4_ARMS = ['learnability', 'untrained', 'scripted', 'gated', 'sfl', 'random', 'fixed'];
export const ROUND4_SPEC: CompareSpec = {
  arms: ROUND4_ARMS,
  spade: 'learnability',
  baselines: ['random', 'untrained', 'fixed'],
  headroom: ['gated', 'random'],
  mechanismInSuccess: false,
  metric: 'topHalf',
  run: { cycles: 400, probePlays: 32, probeEvery: 40 },
  rule: { margin: 0.15, mustBeat: ['random'], ofScripted: { arm: 'gated', share: 0.8 }, headroomMargin: 0.2 },
};

/**
 * Pre-registration 5's comparison on the climb (docs/lab.md): SPADE's designer writing steps from the
 * frontier (learnability-steps), the same never trained, the gated ladder and random levels; round 4's
 * settings and rule, learnability-steps − untrained-steps reported beside it.
 */
export const ROUND5_ARMS = ['learnability-steps', 'untrained-steps', 'gated', 'random'];
export const ROUND5_SPEC: CompareSpec = {
  ...ROUND4_SPEC,
  arms: ROUND5_ARMS,
  spade: 'learnability-steps',
  baselines: ['random', 'untrained-steps'],
};

/** A space's comparison by default: round 4's on the climb, pre-registration 3's elsewhere. */
export const compareSpecOf = (space: string): CompareSpec => (space === 'climb' ? ROUND4_SPEC : PRE_REGISTERED_SPEC);

/** The top-half success counted as reaching the ladder's top, for plays- and steps-to-target. */
export const TARGET = 0.5;

export interface Interval {
  n: number;
  mean: number;
  lo: number;
  hi: number;
}

interface PairComparison {
  /** The two arms: `arm`'s gain minus `other`'s (arm names hold "-", so a pair's key cannot be split to find them). */
  arm: string;
  other: string;
  /** Per seed (in seed order): the arm's gain minus the other's. */
  diffs: number[];
  interval: Interval;
  positiveShare: number;
  /** The mean the difference had to exceed (CRITERIA.minGainDiff, or the spec's rule). */
  margin: number;
  pass: boolean;
}

interface ArmFigures {
  perSeed: number[];
  interval: Interval;
  /** The gain over the probe's hardest half, when the runs have it. */
  hardHalf: { perSeed: number[]; interval: Interval } | null;
  /** Mean optimiser steps per run, per role, when the runs have them. */
  steps: { agent: number; designer: number } | null;
}

/** A pair in words: "learnability-steps − random". */
export const pairName = (c: Pick<PairComparison, 'arm' | 'other'>) => `${c.arm} − ${c.other}`;

export interface CompareResult {
  seeds: number[];
  cycles: number;
  /** The probe's chance level (a uniform random player). */
  chance: number;
  spadeDesigner: string;
  arms: string[];
  gain: Record<string, ArmFigures>;
  /** `${spade}-${baseline}` for every baseline, and the headroom pair. */
  comparisons: Record<string, PairComparison>;
  headroom: PairComparison | null;
  /** What the gains read: the probe's mean or its top half (CompareSpec.metric). */
  metric: 'mean' | 'topHalf';
  /**
   * The same gains at an equal number of agent optimiser steps: per seed, every arm's curve cut where
   * its steps pass the fewest any arm of that seed took, of the arms that took any (an arm that never
   * updates is read whole; null when the runs do not record steps).
   */
  gainAtEqualSteps: Record<string, { perSeed: number[]; interval: Interval; steps: number[] }> | null;
  /** Per arm and seed, the plays and agent steps until the metric first reached TARGET (null: never). */
  toTarget: Record<string, { plays: (number | null)[]; steps: (number | null)[] }> | null;
  mechanism: { medianRegret: number; distinctLevels: number; regretPass: boolean; distinctPass: boolean };
  /**
   * Round 4's rule (CompareSpec.rule): SPADE's designer's mean gain over the scripted arm's, and
   * whether it reached the pre-registered share; null under the earlier rules.
   */
  ofScripted: { arm: string; ratio: number; share: number; pass: boolean } | null;
  success: boolean;
  /** What happened, in one plain sentence. */
  sentence: string;
  /** The figures behind it. */
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

/** Mean of the last two probes minus the first (cycle 0); with one cycle probed, that cycle's probe. */
export function gain(curve: readonly (number | null)[]): number {
  const xs = curve.filter((x): x is number => x !== null);
  if (xs.length < 2) return 0;
  const last = xs.length > 2 ? (xs.at(-1)! + xs.at(-2)!) / 2 : xs.at(-1)!;
  return last - xs[0]!;
}

/**
 * Where an arm's agents got to, per stage of the space: the mean over `seeds` of each run's last two
 * probes per stage (the gain's end point), and the same before training; null when the runs have no stages.
 */
export function stageEnds(
  runs: readonly SeedRun[],
  arm: string,
  seeds: readonly number[],
): { before: number[]; after: number[] } | null {
  const rs = seeds.map((s) => runs.find((r) => r.seed === s && r.designer === arm));
  if (!rs.length || rs.some((r) => !r?.stages)) return null;
  const ends = rs.map((r) => {
    const st = r!.stages!.filter((x): x is number[] => x !== null);
    const last = st.slice(-2);
    return { before: st[0]!, after: st[0]!.map((_, i) => mean(last.map((x) => x[i]!))) };
  });
  const avg = (k: 'before' | 'after') => ends[0]![k].map((_, i) => mean(ends.map((e) => e[k][i]!)));
  return { before: avg('before'), after: avg('after') };
}

/** A run's curve for the metric. */
const curveOf = (r: SeedRun, metric: 'mean' | 'topHalf') => (metric === 'topHalf' ? (r.hardCurve ?? r.curve) : r.curve);

/** The curve up to the last cycle whose agent steps are at most `steps` (later cycles unprobed). */
function curveAtSteps(curve: readonly (number | null)[], stepsCurve: readonly number[], steps: number) {
  return curve.map((x, c) => ((stepsCurve[c] ?? Infinity) <= steps ? x : null));
}

/** The first probed cycle at which the curve reaches `target`: its plays (cycle × plays a cycle) and steps; nulls: never. */
function toTargetOf(r: SeedRun, curve: readonly (number | null)[], target = TARGET) {
  const c = curve.findIndex((x) => x !== null && x >= target);
  const cycles = curve.length - 1;
  if (c < 0 || !r.stepsCurve || r.plays === undefined) return { plays: null, steps: null };
  return { plays: cycles ? Math.round((c * r.plays) / cycles) : 0, steps: r.stepsCurve[c] ?? null };
}

const median = (xs: readonly number[]) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const k = s.length >> 1;
  return s.length % 2 ? s[k]! : (s[k - 1]! + s[k]!) / 2;
};

/**
 * The comparison of per-seed runs: seeds that have every arm and are not screened out (others are
 * left out), judged by `spec`.
 */
export function compareRuns(
  runs: readonly SeedRun[],
  chance: number,
  spec: CompareSpec = SPEC_1,
  screenedOut: readonly number[] = [],
): CompareResult {
  const bySeed = new Map<number, Map<string, SeedRun>>();
  for (const r of runs) {
    if (!bySeed.has(r.seed)) bySeed.set(r.seed, new Map());
    bySeed.get(r.seed)!.set(r.designer, r);
  }
  const seeds = [...bySeed.keys()]
    .filter((s) => !screenedOut.includes(s) && spec.arms.every((d) => bySeed.get(s)!.has(d)))
    .sort((a, b) => a - b);
  const run = (s: number, d: string) => bySeed.get(s)!.get(d)!;
  const metric = spec.metric ?? 'mean';
  const curve = (s: number, d: string) => curveOf(run(s, d), metric);
  const gains = Object.fromEntries(
    spec.arms.map((d): [string, ArmFigures] => {
      const perSeed = seeds.map((s) => gain(curve(s, d)));
      const hard = seeds.every((s) => run(s, d).hardCurve) ? seeds.map((s) => gain(run(s, d).hardCurve!)) : null;
      const steps = seeds.length && seeds.every((s) => run(s, d).steps) ? seeds.map((s) => run(s, d).steps!) : null;
      return [
        d,
        {
          perSeed,
          interval: tInterval(perSeed),
          hardHalf: hard ? { perSeed: hard, interval: tInterval(hard) } : null,
          steps: steps
            ? { agent: mean(steps.map((x) => x.agent)), designer: mean(steps.map((x) => x.designer)) }
            : null,
        },
      ];
    }),
  );
  const withSteps = seeds.length > 0 && seeds.every((s) => spec.arms.every((d) => run(s, d).stepsCurve));
  // the fewest steps of the arms that took any: an arm that never updates (fixed, on the climb's top
  // rung) would otherwise cut every curve at 0; its own curve is whole at any cut
  const fewest = (s: number) => {
    const took = spec.arms.map((d) => run(s, d).stepsCurve!.at(-1)!).filter((x) => x > 0);
    return took.length ? Math.min(...took) : 0;
  };
  const gainAtEqualSteps = withSteps
    ? Object.fromEntries(
        spec.arms.map((d) => {
          const perSeed = seeds.map((s) => gain(curveAtSteps(curve(s, d), run(s, d).stepsCurve!, fewest(s))));
          return [d, { perSeed, interval: tInterval(perSeed), steps: seeds.map(fewest) }];
        }),
      )
    : null;
  const toTarget = withSteps
    ? Object.fromEntries(
        spec.arms.map((d) => {
          const t = seeds.map((s) => toTargetOf(run(s, d), curve(s, d)));
          return [d, { plays: t.map((x) => x.plays), steps: t.map((x) => x.steps) }];
        }),
      )
    : null;
  const rule = spec.rule;
  const pair = (a: string, b: string, margin = rule?.margin ?? CRITERIA.minGainDiff): PairComparison => {
    const diffs = seeds.map((s) => gain(curve(s, a)) - gain(curve(s, b)));
    const interval = tInterval(diffs);
    const positiveShare = diffs.length ? diffs.filter((x) => x > 0).length / diffs.length : 0;
    return {
      arm: a,
      other: b,
      diffs,
      interval,
      positiveShare,
      margin,
      pass: interval.mean > margin && interval.lo > 0 && positiveShare >= CRITERIA.minPositiveShare,
    };
  };
  const comparisons: Record<string, PairComparison> = {};
  for (const b of spec.baselines) comparisons[`${spec.spade}-${b}`] = pair(spec.spade, b);
  const headroom = spec.headroom ? pair(...spec.headroom, rule?.headroomMargin) : null;
  if (spec.headroom && headroom) comparisons[spec.headroom.join('-')] = headroom;
  const medianRegret = median(seeds.map((s) => median(run(s, spec.spade).medianRegret)));
  const distinctLevels = mean(seeds.flatMap((s) => run(s, spec.spade).distinctLevels));
  const mechanism = {
    medianRegret,
    distinctLevels,
    regretPass: medianRegret > CRITERIA.minMedianRegret,
    distinctPass: distinctLevels >= CRITERIA.minDistinct,
  };
  // beating nothing is no success: a comparison with no baseline (a pilot of two designers) cannot pass
  const mustBeat = rule?.mustBeat ?? spec.baselines;
  const beats = mustBeat.length > 0 && mustBeat.every((b) => comparisons[`${spec.spade}-${b}`]?.pass === true);
  // (an arm is not judged against itself: with --spade gated there is no share to ask)
  const scripted =
    rule?.ofScripted && gains[rule.ofScripted.arm] && rule.ofScripted.arm !== spec.spade ? rule.ofScripted : null;
  const ofScripted = scripted
    ? (() => {
        const [mine, theirs] = [gains[spec.spade]!.interval.mean, gains[scripted.arm]!.interval.mean];
        // a scripted arm that gained nothing asks nothing: any gain ≥ 0 is its share
        const ratio = theirs > 0 ? mine / theirs : mine >= 0 ? Infinity : -Infinity;
        return { arm: scripted.arm, ratio, share: scripted.share, pass: ratio >= scripted.share };
      })()
    : null;
  const success =
    seeds.length > 0 &&
    beats &&
    (!rule || ((ofScripted?.pass ?? true) && (headroom?.pass ?? true))) &&
    (!spec.mechanismInSuccess || (mechanism.regretPass && mechanism.distinctPass));
  const cycles = seeds.length ? run(seeds[0]!, spec.spade).curve.length - 1 : 0;
  const result = {
    seeds,
    cycles,
    chance,
    spadeDesigner: spec.spade,
    arms: spec.arms,
    gain: gains,
    comparisons,
    headroom,
    metric,
    gainAtEqualSteps,
    toTarget,
    mechanism,
    ofScripted,
    success,
  };
  return { ...result, sentence: sentenceOf(result, spec), verdict: verdictText(result, spec) };
}

const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : x > 0 ? '∞' : '−∞');
const signed = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(2)}`;
const interval = (i: Interval) => `${f2(i.mean)} [${f2(i.lo)}, ${f2(i.hi)}]`;

type Judged = Omit<CompareResult, 'sentence' | 'verdict'>;

/**
 * Whether the seeds' differences vary: with one seed there is no interval, and when every seed's
 * difference is the same (a tiny budget's coarse probe: two seeds at +0.01 each) the t-interval has
 * zero width — no spread to judge it by.
 */
const spread = (p: PairComparison) => p.interval.n >= 2 && p.interval.hi - p.interval.lo > 1e-9;

/**
 * Whether a difference is shown at all: an interval with spread, or — every seed's difference the
 * same — one at least the pre-registered margin (−0.25 on each of 5 seeds is a loss; +0.01 on each
 * of 2 is nothing to claim).
 */
const shown = (p: PairComparison) => spread(p) || (p.interval.n >= 2 && Math.abs(p.interval.mean) >= p.margin);

/**
 * "helped": the pre-registered margin met; "a little": the interval above 0 (and `shown`) but the
 * margin not met; "hurt": the whole interval below 0; else about the same — no difference detected,
 * and the sentence never claims one (#41).
 */
const effect = (p: PairComparison) =>
  p.pass ? 'helped' : !shown(p) ? 'same' : p.interval.lo > 0 ? 'a little' : p.interval.hi < 0 ? 'hurt' : 'same';

/** A difference with its interval, or why it has none. */
const diffText = (p: PairComparison) =>
  spread(p)
    ? `${signed(p.interval.mean)} [${f2(p.interval.lo)}, ${f2(p.interval.hi)}]`
    : p.interval.n < 2
      ? `${signed(p.interval.mean)}, one seed: no interval`
      : `${signed(p.interval.mean)} on every seed, no spread to judge it by`;

/**
 * Why a difference above 0 still did not pass, in words: each criterion it missed — the mean at or
 * under the margin, or too few seeds ahead (a +0.21 mean ahead on 7 of 10 seeds misses the share,
 * not the margin).
 */
const shortfall = (p: PairComparison, n: number) => {
  const out: string[] = [];
  if (!(p.interval.mean > p.margin)) out.push(`short of the pre-registered margin of ${p.margin.toFixed(2)}`);
  if (p.positiveShare < CRITERIA.minPositiveShare)
    out.push(
      `ahead on ${Math.round(p.positiveShare * n)} of ${n} seeds, short of the pre-registered ${Math.round(CRITERIA.minPositiveShare * 100)}%`,
    );
  return out.join(', and ');
};

/** What happened in one plain sentence (the Lab shows it before any interval). */
function sentenceOf(r: Judged, spec: CompareSpec): string {
  if (!r.seeds.length) return 'No seed has every designer yet.';
  const n = r.seeds.length;
  const onWhat = r.metric === 'topHalf' ? 'the probe’s top half' : 'the probe';
  const g = (arm: string) => r.gain[arm]!.interval.mean;
  const learned = spec.spade;
  const vsRandom = r.comparisons[`${learned}-random`];
  const name = learned === 'regret' || learned === 'learnability' ? 'The learned designer' : `The ${learned} designer`;
  let head = '';
  if (r.headroom && spec.headroom) {
    const d = signed(r.headroom.interval.mean);
    const e = effect(r.headroom);
    head =
      e === 'helped'
        ? `A scripted curriculum (${spec.headroom[0]}) helped: its agent gained ${d} more than with random levels. `
        : e === 'a little'
          ? `A scripted curriculum (${spec.headroom[0]}) helped a little: its agent gained ${d} more than with random levels, ${shortfall(r.headroom, n)}. `
          : e === 'hurt'
            ? `Even a scripted curriculum (${spec.headroom[0]}) did worse than random levels (${diffText(r.headroom)}). `
            : `Even a scripted curriculum (${spec.headroom[0]}) did not clearly beat random levels (${diffText(r.headroom)}). `;
  }
  const must = spec.rule?.mustBeat ?? spec.baselines;
  if (r.success)
    return `${head}${name} helped: its agent improved by ${signed(g(learned))} on ${onWhat}, more than with ${must.join(' or ')} levels on ${Math.round(Math.min(...must.map((b) => r.comparisons[`${learned}-${b}`]!.positiveShare)) * n)} of ${n} seeds.`;
  if (!spec.arms.includes('random'))
    return `${head}No arm played random levels, so nothing here says whether ${learned} beat them: the agents’ gains (${spec.arms.map((a) => `${a} ${signed(g(a))}`).join(', ')} on ${onWhat}, ${n} seed${n === 1 ? '' : 's'}).`;
  if (vsRandom?.pass)
    return `${head}${name} beat random levels (${diffText(vsRandom)} on ${onWhat}), but not by the whole pre-registered rule: ${misses(r, spec).join('; ')}.`;
  if (vsRandom && effect(vsRandom) === 'hurt')
    return `${head}${name} did worse than random levels: its agent improved by ${signed(g(learned))}, with random levels by ${signed(g('random'))}.`;
  if (vsRandom && effect(vsRandom) === 'a little')
    return `${head}${name} did better than random levels, not by the pre-registered rule: its agent improved by ${signed(g(learned))}, with random levels by ${signed(g('random'))} — ${diffText(vsRandom)}, ${shortfall(vsRandom, n)} (${n} seeds).`;
  const all = spec.arms.map(g);
  const tiny = Math.max(...all.map(Math.abs)) < 0.05;
  const none = vsRandom ? `no difference was detected (${learned} − random ${diffText(vsRandom)}); ` : '';
  return `${head}${name} did not help more than random levels: ${none}${tiny ? 'no agent learned much at this budget' : 'the agents’ gains'} (${spec.arms.map((a) => `${a} ${signed(g(a))}`).join(', ')} on ${onWhat}, ${n} seed${n === 1 ? '' : 's'}).`;
}

function verdictText(r: Judged, spec: CompareSpec): string {
  const n = r.seeds.length;
  if (!n) return 'No seed has every designer yet.';
  const pairs = Object.values(r.comparisons)
    .map(
      (c) =>
        `${pairName(c)} gain ${interval(c.interval)} (95% t-interval, ${Math.round(c.positiveShare * 100)}% of seeds positive)`,
    )
    .join('; ');
  const m = r.mechanism;
  const mech = `median regret per cycle ${f2(m.medianRegret)}, ${m.distinctLevels.toFixed(1)} distinct levels per cycle`;
  const share = r.ofScripted
    ? `; ${spec.spade} gained ${f2(r.ofScripted.ratio)}× ${r.ofScripted.arm}'s gain (pre-registered: ≥ ${r.ofScripted.share})`
    : '';
  if (r.success) return `Positive on ${n} seed${n === 1 ? '' : 's'}: ${pairs}${share}; ${mech}.`;
  return `Not detectable at this budget (${n} seed${n === 1 ? '' : 's'}): ${misses(r, spec).join('; ')}. ${pairs}${share}; ${mech}.`;
}

/** Each part of the pre-registered rule the result missed, in words. */
function misses(r: Judged, spec: CompareSpec): string[] {
  const m = r.mechanism;
  const s = r.ofScripted;
  return [
    ...(spec.rule?.mustBeat ?? spec.baselines)
      .filter((b) => !r.comparisons[`${spec.spade}-${b}`]?.pass)
      .map((b) => `${spec.spade} did not clearly beat ${b}`),
    ...(s && !s.pass
      ? [`${spec.spade} gained ${f2(s.ratio)}× ${s.arm}'s gain, under the pre-registered ${s.share}×`]
      : []),
    ...(spec.rule && r.headroom && !r.headroom.pass
      ? [`the headroom (${spec.headroom!.join(' − ')}) did not pass its margin of ${r.headroom.margin.toFixed(2)}`]
      : []),
    ...(spec.mechanismInSuccess && !m.regretPass ? ['the hint did not help (median regret ≤ 0)'] : []),
    ...(spec.mechanismInSuccess && !m.distinctPass ? ['the designer collapsed (< 2 distinct levels per cycle)'] : []),
  ];
}

/** The mean of a curve's last two probes (the gain's end point), or null with none. */
const endOf = (curve: readonly (number | null)[]) => {
  const xs = curve.filter((x): x is number => x !== null);
  return xs.length > 2 ? (xs.at(-1)! + xs.at(-2)!) / 2 : (xs.at(-1) ?? null);
};

/**
 * The comparison as Markdown tables, for a write-up (`spade lab compare --markdown`): per seed and
 * arm the metric's end (the mean of the last two probes), the highest rung mastered at the last probe
 * and at any probe (as the space's stage names), agent optimiser steps and unhinted plays; then every
 * pair with its 95% interval and share of seeds positive, and per arm the gain at equal steps and the
 * plays to the target. Numbers only: what they mean is the writer's.
 */
export function markdownReport(r: CompareResult, runs: readonly SeedRun[], stages: readonly string[]): string {
  const f3 = (x: number | null | undefined) => (x === null || x === undefined ? '–' : x.toFixed(3));
  const sg = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(3)}`;
  const iv = (i: Interval) =>
    `${sg(i.mean)} [${Number.isFinite(i.lo) ? sg(i.lo) : '−∞'}, ${Number.isFinite(i.hi) ? sg(i.hi) : '∞'}]`;
  const rung = (x: number | null | undefined) =>
    x === null || x === undefined ? '–' : x < 0 ? 'none' : (stages[x] ?? `rung ${x}`);
  const row = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
  const rule = (n: number) => row(Array.from({ length: n }, () => '---'));
  const find = (s: number, a: string) => runs.find((x) => x.seed === s && x.designer === a)!;
  const metric = r.metric === 'topHalf' ? 'top half' : 'probe mean';
  const out = [
    `Per seed and arm: ${metric} at the end (mean of the last two probes) / highest rung mastered, last probe and best / agent steps / plays.`,
    '',
    row(['seed', ...r.arms]),
    rule(r.arms.length + 1),
    ...r.seeds.map((s) =>
      row([
        s,
        ...r.arms.map((a) => {
          const x = find(s, a);
          const top = (x.topRung ?? []).filter((t): t is number => t !== null);
          return `${f3(endOf(r.metric === 'topHalf' ? (x.hardCurve ?? x.curve) : x.curve))} / ${rung(top.at(-1))}, ${rung(top.length ? Math.max(...top) : null)} / ${x.steps?.agent ?? '–'} / ${x.plays ?? '–'}`;
        }),
      ]),
    ),
    '',
    `Gains (${metric}, end minus cycle 0) over ${r.seeds.length} seeds, 95% t-intervals:`,
    '',
    row(['arm', 'gain at equal plays', 'gain at equal steps', 'mean agent steps', `seeds reaching ${TARGET}`]),
    rule(5),
    ...r.arms.map((a) => {
      const g = r.gain[a]!;
      const eq = r.gainAtEqualSteps?.[a];
      const t = r.toTarget?.[a];
      const plays = t ? t.plays.filter((x): x is number => x !== null) : null;
      const steps = t ? t.steps.filter((x): x is number => x !== null) : [];
      const hit = plays
        ? `${plays.length} of ${r.seeds.length}${plays.length ? ` (median ${Math.round(median(plays))} plays, ${Math.round(median(steps))} steps)` : ''}`
        : '–';
      return row([
        a + (a === r.spadeDesigner ? " (SPADE's designer)" : ''),
        iv(g.interval),
        eq ? iv(eq.interval) : '–',
        g.steps ? g.steps.agent.toFixed(0) : '–',
        hit,
      ]);
    }),
    '',
    row(['pair', 'mean [95% interval]', 'seeds positive', 'margin', 'passes']),
    rule(5),
    ...Object.values(r.comparisons).map((c) =>
      row([
        pairName(c) + (c === r.headroom ? ' (headroom)' : ''),
        iv(c.interval),
        `${Math.round(c.positiveShare * c.diffs.length)} of ${c.diffs.length}`,
        c.margin.toFixed(2),
        c.pass ? 'yes' : 'no',
      ]),
    ),
  ];
  if (r.ofScripted)
    out.push(
      '',
      `${r.spadeDesigner}'s mean gain over ${r.ofScripted.arm}'s: ${Number.isFinite(r.ofScripted.ratio) ? r.ofScripted.ratio.toFixed(2) : '–'} (pre-registered: at least ${r.ofScripted.share}).`,
    );
  out.push('', `Success: ${r.success ? 'yes' : 'no'}. ${r.sentence}`);
  return out.join('\n');
}
