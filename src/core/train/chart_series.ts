/**
 * The Training panel's evidence, the pure part: per-cycle series from a run's archive and metrics
 * (agent return with and without hint, regret, designer reward raw and centred, the share of new
 * environments in the [0.4, 0.6] band and a histogram of their win rates), and per-update series
 * from the trainer's optimiser steps (loss per role, clip fraction, approx KL, gradient norm,
 * tokens/s, and the sampler/learner importance ratios of truncated importance sampling). Pure:
 * the panel only draws what these return.
 */
import type { ArchiveRecord, MetricsRecord } from '../spade/run_store.ts';
import { mean } from '../spade/estimators.ts';
import { mergeTisStats, type TisStats } from './grpo.ts';
import type { UpdateStats } from './grpo_rounds.ts';

/**
 * One optimiser step as the app records it: which cycle's round, which update (1-based) it belongs
 * to; the TIS figures of its tokens when TIS weighted any (engine/train/train.ts StepStats).
 */
export interface StepRecord extends UpdateStats, Partial<TisStats> {
  cycle: number;
  update: number;
}

export interface CycleEvidence {
  cycle: number;
  /** Mean unhinted / hinted episode return over the cycle's scored environments (null: none scored). */
  returnNoHint: number | null;
  returnHinted: number | null;
  regret: number | null;
  designerRaw: number | null;
  designerCentred: number | null;
  inBandShare: number | null;
  /** Scored environments per win-rate bin: [0, .2), [.2, .4), [.4, .6], (.6, .8], (.8, 1]. */
  winRateBins: number[];
}

/** Win-rate bins of the histogram; the middle one is the plateau band [0.4, 0.6] of inBandShare. */
export const WIN_RATE_BINS = ['0–0.2', '0.2–0.4', '0.4–0.6', '0.6–0.8', '0.8–1'] as const;

/** The bin of a win rate: the middle bin is closed on both ends, as the band is. */
export function winRateBin(w: number): number {
  if (w >= 0.4 && w <= 0.6) return 2;
  if (w < 0.2) return 0;
  if (w < 0.4) return 1;
  if (w <= 0.8) return 3;
  return 4;
}

const meanOrNull = (xs: number[]): number | null => (xs.length ? mean(xs) : null);

/** One row per cycle of `metrics`, in their order. */
export function cycleEvidence(archive: readonly ArchiveRecord[], metrics: readonly MetricsRecord[]): CycleEvidence[] {
  return metrics.map((m) => {
    const scored = archive.filter((a) => a.cycle === m.cycle && a.stats);
    const bins = WIN_RATE_BINS.map(() => 0);
    for (const a of scored) bins[winRateBin(a.stats!.winRate)]!++;
    return {
      cycle: m.cycle,
      returnNoHint: meanOrNull(scored.filter((a) => a.stats!.noHint.length).map((a) => mean(a.stats!.noHint))),
      returnHinted: meanOrNull(scored.filter((a) => a.stats!.withHint.length).map((a) => mean(a.stats!.withHint))),
      regret: m.meanRegret,
      designerRaw: m.meanDesignerReward,
      designerCentred: m.meanDesignerAdvantage ?? null,
      inBandShare: m.inBandShare ?? null,
      winRateBins: bins,
    };
  });
}

export interface UpdateEvidence {
  update: number;
  /** The cycle whose round made this update. */
  cycle: number;
  /** Mean loss of the role's steps in this update (null: the role had no samples). */
  agentLoss: number | null;
  designerLoss: number | null;
  clipFraction: number;
  approxKl: number;
  gradNorm: number;
  /** Tokens run through the model per second of training. */
  tokensPerSecond: number;
  steps: number;
  /**
   * Sampler/learner ratio exp(log π_old − log π_sampler) over the update's TIS-weighted tokens: its
   * mean, its largest value and the share truncated at tisCap (null: TIS was off).
   */
  tisMean: number | null;
  tisMax: number | null;
  tisTruncated: number | null;
}

/** The steps grouped by update (means over each update's steps; tokens/s over their total time). */
export function updateEvidence(steps: readonly StepRecord[]): UpdateEvidence[] {
  const by = new Map<number, StepRecord[]>();
  for (const s of steps) by.set(s.update, [...(by.get(s.update) ?? []), s]);
  return [...by.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([update, ss]) => {
      const ms = ss.reduce((t, s) => t + s.ms, 0);
      const tokens = ss.reduce((t, s) => t + s.tokens, 0);
      const tis = mergeTisStats(ss.map((s) => (s.tisTokens ? (s as TisStats) : null)));
      return {
        update,
        cycle: ss[0]!.cycle,
        agentLoss: meanOrNull(ss.filter((s) => s.role === 'agent').map((s) => s.loss)),
        designerLoss: meanOrNull(ss.filter((s) => s.role === 'designer').map((s) => s.loss)),
        clipFraction: mean(ss.map((s) => s.clipFraction)),
        approxKl: mean(ss.map((s) => s.approxKl)),
        gradNorm: mean(ss.map((s) => s.gradNorm)),
        tokensPerSecond: ms > 0 ? (tokens / ms) * 1000 : 0,
        steps: ss.length,
        tisMean: tis?.tisMean ?? null,
        tisMax: tis?.tisMax ?? null,
        tisTruncated: tis?.tisTruncated ?? null,
      };
    });
}
