/**
 * Regret and designer-reward estimators: one enum, one dispatcher, pure functions
 * with hand-computed tests (tests/unit/estimators.test.ts). Inputs are episode
 * returns R (clipped to [-1, 1]; 0 when truncated) of the agent's plays without
 * and with the privileged hint, measured in the same cycle ("matched timing").
 */
import type { Config, Estimator } from '../config.ts';

export interface PlayStats {
  /** Returns of the plays without the hint. */
  noHint: number[];
  /** Returns of the plays with the hint (none when the hint could not be written: regret 0). */
  withHint: number[];
  /**
   * Every unhinted return of the environment in the designer's window (its cycle's plays and the
   * envReuse rounds' replays). Win-rate terms read these; the regret stays matched-timing (noHint).
   * Absent: the cycle's plays (noHint).
   */
  window?: number[];
  /** Slow exponential moving average of this skill's win rate (learning potential). */
  emaWinRate?: number;
}

export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const variance = (xs: number[]): number => {
  if (xs.length === 0) return 0;
  const m = mean(xs);
  return mean(xs.map((x) => (x - m) ** 2));
};
const clip = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x));

/** Episode return: the last reward clipped to [-1, 1] if the episode terminated, else 0. */
export function episodeReturn(lastReward: number, terminated: boolean): number {
  return terminated ? clip(lastReward, -1, 1) : 0;
}

/** Share of plays with R > 0. */
export const winRate = (returns: number[]): number =>
  returns.length ? returns.filter((r) => r > 0).length / returns.length : 0;

/** Hint regret: mean return with the hint minus mean return without it; 0 with no hinted plays (the hint failed). */
export const regret = (s: PlayStats): number => (s.withHint.length ? mean(s.withHint) - mean(s.noHint) : 0);

/** The return a failed play scores (model error, sandbox error): it stays in its group, as the reference keeps it. */
export const FAILED_PLAY_RETURN = -1;

/** Whether a play failed (a model call or the sandbox broke) rather than ended in the game. */
export const playFailed = (ep: { end: string }): boolean => ep.end === 'model_error' || ep.end === 'env_error';

/** 1 on [0.4, 0.6], falling linearly to 0 over 0.25 outside the band. */
export function plateau(w: number): number {
  if (w >= 0.4 && w <= 0.6) return 1;
  const d = w < 0.4 ? 0.4 - w : w - 0.6;
  return clip(1 - d / 0.25, 0, 1);
}

/** Raw designer reward for one environment under the chosen estimator. */
export function estimate(estimator: Estimator, s: PlayStats): number {
  const plays = s.window ?? s.noHint;
  const w = winRate(plays);
  switch (estimator) {
    case 'hint_regret':
      return regret(s);
    case 'floored_regret':
      return Math.max(0, regret(s));
    case 'solve_rate_plateau':
      return plateau(w);
    case 'paper_blend':
      return 0.6 * plateau(w) + 0.4 * clip(Math.max(0, regret(s)) / 0.15, 0, 1);
    case 'learning_potential':
      return Math.abs(w - (s.emaWinRate ?? w));
    case 'variance':
      return Math.exp(-((variance(plays) - 0.25) ** 2) / 0.02);
    case 'azr_learnability':
      return w > 0 && w < 1 ? 1 - w : 0;
    case 'paired':
      return s.withHint.length ? Math.max(...s.withHint) - mean(s.noHint) : 0;
    case 'learnability':
      // Sampling For Learnability (Rutherford et al. 2024): highest at p̂ = 1/2, and > 0 from the first win
      return 4 * w * (1 - w);
    case 'alpha_curriculum':
      // GenEnv's α-curriculum reward (Guo et al. 2025): a bell around the target win rate α
      return Math.exp(-ALPHA_CURRICULUM.beta * (w - ALPHA_CURRICULUM.alpha) ** 2);
  }
}

/**
 * The α-curriculum reward's target win rate and sharpness: α = 1/2 as GenEnv aims; β = 10 fixed
 * before its pilot (not tuned), sharper than 4p̂(1 − p̂) — a level won 7 times in 8 earns 0.25 where
 * learnability gives 0.44 — and never 0: a level never (or always) won earns exp(−2.5) = 0.08.
 */
const ALPHA_CURRICULUM = { alpha: 0.5, beta: 10 } as const;

export const ESTIMATOR_INFO: Record<Estimator, string> = {
  paper_blend: 'paper recipe: 0.6·plateau(win rate) + 0.4·clip(regret/0.15, 0, 1)',
  hint_regret: 'mean return with hint − without',
  floored_regret: 'hint regret, floored at 0 (pure-regret ablation)',
  solve_rate_plateau: 'plateau(win rate) only (solve-rate ablation)',
  learning_potential: '|win rate − slow EMA of win rate|',
  variance: 'exp(−(Var(R) − 0.25)² / 0.02): highest when outcomes split evenly',
  azr_learnability: 'AZR: 1 − p̂ when 0 < p̂ < 1, else 0',
  paired: 'PAIRED-style: max hinted return − mean unhinted return',
  learnability:
    'learnability 4·p̂(1 − p̂) of the unhinted win rate: 1 at p̂ = 1/2, 0.44 at 1 win in 8, 0 when never or always won',
  alpha_curriculum:
    "GenEnv's α-curriculum exp(−10·(p̂ − 1/2)²) of the unhinted win rate: 1 at p̂ = 1/2, 0.25 at 1 win in 8, 0.08 when never or always won",
};

/** Penalty for an environment whose step() timed out (it is also blacklisted). */
const TIMEOUT_PENALTY = -0.5;

/** The raw reward of a design whose first attempt was invalid (only the first attempt is trained on). */
export const INVALID_REWARD = 0;

/**
 * The raw value one design brings into the centring: the estimator's value when its first
 * attempt was valid and it was scored; 0 for an invalid first attempt; −0.5 when it timed out
 * or broke the checker. null when a model call failed: that is not the design's doing, so it
 * takes no part.
 */
export function rawDesignReward(d: {
  firstAttemptValid: boolean;
  timedOut: boolean;
  scoredRaw: number | null;
  modelFailed: boolean;
}): number | null {
  if (d.timedOut) return TIMEOUT_PENALTY;
  if (d.modelFailed) return null;
  if (!d.firstAttemptValid) return INVALID_REWARD;
  return d.scoredRaw;
}

export interface RewardInput {
  skill: string;
  /** The raw value (rawDesignReward); null takes no part. */
  raw: number | null;
}

/**
 * Weight of a cycle's mean in the per-skill running baseline used when a skill has a single
 * design in the batch (0.3: the last three or four cycles dominate, so the baseline follows
 * the designer as it improves).
 */
const BASELINE_ALPHA = 0.3;

/**
 * Designer advantages for one batch (a cycle), as the method has it: each raw value minus the
 * mean raw value of its skill's group in the batch — invalid designs (0) and time-outs (−0.5)
 * included, so they rank below valid ones — times a fixed role scale (the reference's
 * env-reward scale), never divided by the batch std. A skill with a single design in the batch
 * is centred on that skill's running baseline instead (centring a group of one gives 0: no
 * signal); with no baseline yet, on 0. Returns the advantages and the updated baselines.
 */
export function designerAdvantages(
  batch: RewardInput[],
  scale: number,
  baseline: Readonly<Record<string, number>> = {},
): { advantages: (number | null)[]; baseline: Record<string, number> } {
  const bySkill = new Map<string, number[]>();
  for (const b of batch) if (b.raw !== null) bySkill.set(b.skill, [...(bySkill.get(b.skill) ?? []), b.raw]);
  const next: Record<string, number> = { ...baseline };
  for (const [skill, raws] of bySkill) next[skill] = updateEma(baseline[skill], mean(raws), BASELINE_ALPHA);
  const advantages = batch.map((b) => {
    if (b.raw === null) return null;
    const group = bySkill.get(b.skill)!;
    const centre = group.length > 1 ? mean(group) : (baseline[b.skill] ?? 0);
    return (b.raw - centre) * scale;
  });
  return { advantages, baseline: next };
}

/** The reference's cap on the computed env-reward scale. */
export const ENV_REWARD_SCALE_CAP = 50;

/**
 * The env-reward scale as the reference computes it: agent plays of one step ÷ designs trained ×
 * the steps a generation serves (envReuse), capped — so the few designer samples weigh about as
 * much as the agent plays they cost. 1 when there are no plays or no designs.
 */
export function computedEnvRewardScale(
  agentPlays: number,
  designs: number,
  envReuse: number,
  cap = ENV_REWARD_SCALE_CAP,
): number {
  if (agentPlays <= 0 || designs <= 0) return 1;
  return Math.min(cap, (agentPlays / designs) * envReuse);
}

/**
 * The scale of one cycle's centred designer rewards: envRewardScale when fixed; computed, the
 * agent plays of one step are the cycle's unhinted plays and the designs those entering the centring.
 */
export function cycleEnvRewardScale(
  cfg: Pick<Config, 'envRewardScaleMode' | 'envRewardScale' | 'envRewardScaleCap' | 'envReuse'>,
  rollouts: readonly { hinted: boolean }[],
  designs: number,
): number {
  if (cfg.envRewardScaleMode === 'fixed') return cfg.envRewardScale;
  const plays = rollouts.filter((r) => !r.hinted).length;
  return computedEnvRewardScale(plays, designs, cfg.envReuse, cfg.envRewardScaleCap);
}

/** Slow EMA update for learning potential (alpha 0.05: a few dozen environments of memory). */
export function updateEma(prev: number | undefined, value: number, alpha = 0.05): number {
  return prev === undefined ? value : (1 - alpha) * prev + alpha * value;
}

/**
 * GRPO-style per-role advantages: returns centred on the group mean and divided by
 * the group std (epsilon 1e-6). Used for the agent's plays of one environment.
 */
export function groupAdvantages(returns: number[]): number[] {
  const m = mean(returns);
  const sd = Math.sqrt(variance(returns));
  return returns.map((r) => (r - m) / (sd + 1e-6));
}
