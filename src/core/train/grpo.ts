/**
 * GRPO, the pure part: from the loop's records to training samples with advantages, per role.
 *
 * Token-exact samples (what trains): the local backend records, with every reply, the prompt
 * ids it fed, the ids it sampled and their log-probs under the sampling policy. An agent
 * episode is ONE sample — the whole multi-turn conversation as one id sequence, with the
 * agent's own tokens marked (observations and prompts are context only) — whose advantage is
 * its return z-scored over the unhinted plays of the same environment (hinted plays are not
 * trained). A design is one sample — the designer's first attempt — whose advantage is the
 * designer advantage the loop computed (centred within the skill, times the role scale).
 * The trainer recomputes log-probs on exactly these ids: once per training round with the
 * current adapter before the round's first step (the learner's π_old, which the clipped ratio
 * is taken against), and truncated importance sampling (TIS) weighs each token by the
 * sampler/learner ratio min(exp(log π_old,learner − log π_sampler), C) (`tisWeight`, `tisStats`;
 * docs/training.md). Replies without token records (other backends) are never trained:
 * re-tokenised text could differ from what was sampled.
 */
import { FAILED_PLAY_RETURN, groupAdvantages, playFailed } from '../spade/estimators.ts';
import type { ArchiveRecord, RolloutRecord } from '../spade/run_store.ts';
import { extendTrace, type TokenTrace } from '../llm/token_trace.ts';

export { extendTrace, type TokenTrace } from '../llm/token_trace.ts';

export interface TokenSample extends TokenTrace {
  role: 'designer' | 'agent';
  advantage: number;
  /** Which record it came from ("cycle:index" or "cycle:index:play"). */
  key: string;
}

/**
 * Agent samples: one per unhinted episode that has a token trace, advantage = its return
 * z-scored over the unhinted plays of its environment, a failed play counted at −1 (groups where
 * every play scored the same carry no signal and are left out).
 */
export function agentTokenSamples(rollouts: RolloutRecord[]): TokenSample[] {
  const groups = new Map<string, RolloutRecord[]>();
  for (const r of rollouts) {
    if (r.hinted) continue;
    const key = `${r.cycle}:${r.index}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const out: TokenSample[] = [];
  for (const [key, group] of groups) {
    // a failed play (a model call or the sandbox broke) stays in its group at FAILED_PLAY_RETURN, as
    // the reference scores it; records from before that rule stored 0, so the return is read here
    const adv = groupAdvantages(group.map((r) => (playFailed(r) ? FAILED_PLAY_RETURN : r.return)));
    group.forEach((ep, j) => {
      if (!ep.trace || Math.abs(adv[j]!) < 1e-9) return;
      out.push({ role: 'agent', ...ep.trace, advantage: adv[j]!, key: `${key}:${ep.play}` });
    });
  }
  return out;
}

/** Designer samples: each design's first attempt with a token trace and a non-zero designer advantage. */
export function designerTokenSamples(archive: ArchiveRecord[]): TokenSample[] {
  const out: TokenSample[] = [];
  for (const a of archive) {
    const first = a.attempts[0];
    const adv = a.designerAdvantage;
    if (!first?.tokens || adv == null || Math.abs(adv) < 1e-9) continue;
    const trace = extendTrace(null, first.tokens);
    if (trace) out.push({ role: 'designer', ...trace, advantage: adv, key: `${a.cycle}:${a.index}` });
  }
  return out;
}

/** |log π_learner − log π_sampler| is clamped to this before exp: a stale token's ratio stays finite. */
const MAX_TIS_LOG_RATIO = 20;

/** The sampler/learner ratio exp(log π_old,learner − log π_sampler) of one token, before truncation. */
export function tisRatio(learner: number, sampler: number): number {
  return Math.exp(Math.max(-MAX_TIS_LOG_RATIO, Math.min(MAX_TIS_LOG_RATIO, learner - sampler)));
}

/** A token's TIS weight from its ratio: min(ratio, cap), a constant of the round (no gradient); cap 0: TIS off, 1. */
export function tisWeight(ratio: number, cap: number): number {
  return cap > 0 ? Math.min(ratio, cap) : 1;
}

/** Each token's ratio tisRatio(learner, sampler) (the same trained tokens, in order). */
export function tisRatios(learner: readonly number[], sampler: readonly number[]): number[] {
  if (learner.length !== sampler.length)
    throw new RangeError(`${learner.length} learner log-probs for ${sampler.length} sampled tokens`);
  return learner.map((l, i) => tisRatio(l, sampler[i]!));
}

/** The sampler/learner ratios of a set of trained tokens, before truncation. */
export interface TisStats {
  /** Mean ratio exp(log π_old,learner − log π_sampler) (1: the sampler was the learner). */
  tisMean: number;
  /** Largest ratio. */
  tisMax: number;
  /** Share of tokens whose ratio exceeded the cap (their weight is the cap). */
  tisTruncated: number;
  /** Tokens counted. */
  tisTokens: number;
}

/** TIS figures of the ratios of some samples' tokens (tisRatios) under `cap`; null: no tokens. */
export function tisStats(ratios: readonly (readonly number[])[], cap: number): TisStats | null {
  let n = 0;
  let sum = 0;
  let max = 0;
  let over = 0;
  for (const rs of ratios)
    for (const r of rs) {
      n++;
      sum += r;
      max = Math.max(max, r);
      if (cap > 0 && r > cap) over++;
    }
  return n ? { tisMean: sum / n, tisMax: max, tisTruncated: over / n, tisTokens: n } : null;
}

/** Several sets' TIS figures as one (means weighted by tokens); null when none has tokens. */
export function mergeTisStats(parts: readonly (TisStats | null | undefined)[]): TisStats | null {
  const xs = parts.filter((p): p is TisStats => !!p && p.tisTokens > 0);
  const n = xs.reduce((a, p) => a + p.tisTokens, 0);
  if (!n) return null;
  return {
    tisMean: xs.reduce((a, p) => a + p.tisMean * p.tisTokens, 0) / n,
    tisMax: Math.max(...xs.map((p) => p.tisMax)),
    tisTruncated: xs.reduce((a, p) => a + p.tisTruncated * p.tisTokens, 0) / n,
    tisTokens: n,
  };
}

/**
 * The learner's π_old for a training round: `compute` (the engine's no-grad forward with the
 * current adapter, before the round's first step) gives each sample's log-probs, returned by
 * sample with the round's TIS figures against the sampler's. cap 0 (TIS off): nothing is
 * computed and the steps take π_old from the sampler.
 */
export async function roundLearnerLogprobs(
  samples: readonly TokenSample[],
  cap: number,
  compute: (samples: TokenSample[]) => Promise<number[][]>,
): Promise<{ learner: Map<TokenSample, number[]>; tis: TisStats | null }> {
  const learner = new Map<TokenSample, number[]>();
  if (cap <= 0 || !samples.length) return { learner, tis: null };
  const lps = await compute([...samples]);
  samples.forEach((s, i) => learner.set(s, lps[i]!));
  return {
    learner,
    tis: tisStats(
      [...learner].map(([s, lp]) => tisRatios(lp, s.logprobs)),
      cap,
    ),
  };
}
