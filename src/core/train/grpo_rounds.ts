/**
 * When and on what the policy trains during a run — the pure part of closed-loop self-play.
 *
 * - A role can be trained only if the model that samples it is the model being trained (the
 *   local engine): `closedLoopProblems` names every role that breaks this, with the fix.
 * - After cycle c, the agent trains on the unhinted episodes of cycle c, and the designer on
 *   the first attempts of cycle c − designerLag (the reference delays the designer's update by a
 *   regeneration interval; 0 trains both on the same cycle). A lagged design's reward is
 *   recomputed over its window (`windowedDesignerAdvantages`): every unhinted play of its
 *   environment, the envReuse rounds' replays included, so the lag buys a better estimate.
 * - `trainSteps: minibatches`: each role's samples are cut into minibatches of at most
 *   `minibatchTokens` tokens and the whole batch is passed over `trainEpochs` times in a seeded
 *   order; the clipped ratio keeps the passes after the first on-policy enough (PPO-style).
 *   `trainSteps: batch` (the reference): one optimiser step per role per rollout batch. Roles
 *   never share a step: the objective's token-level mean would otherwise let long designs drown
 *   the agent's turns.
 */
import type { Config } from '../config.ts';
import type { ChatModel, ModelRole } from '../llm/chat_model.ts';
import type { Rng } from '../rng.ts';
import { cycleEnvRewardScale, designerAdvantages, estimate, rawDesignReward } from '../spade/estimators.ts';
import type { ArchiveRecord, RolloutRecord } from '../spade/run_store.ts';
import { agentTokenSamples, designerTokenSamples, type TokenSample } from './grpo.ts';

/** Roles whose samples train the policy (hints are written by the same model but not trained, as in the paper). */
const TRAINED_ROLES: readonly ModelRole[] = ['designer', 'agent'];

/**
 * Why training would change nothing, per role: the role samples from a model that is not the
 * one being trained. Empty when the loop is closed.
 */
export function closedLoopProblems(
  models: Record<ModelRole, Pick<ChatModel, 'backend' | 'model' | 'capabilities'>>,
): string[] {
  return TRAINED_ROLES.filter((r) => !models[r].capabilities.trainable).map(
    (r) =>
      `The ${r} samples from ${models[r].backend}:${models[r].model}, which training does not change. Choose our engine (local) for the ${r}, or turn training off.`,
  );
}

export interface CycleData {
  cycle: number;
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  /** The unhinted replays of the cycle's environments in its envReuse rounds (training only). */
  reuse?: RolloutRecord[];
}

/** The knobs the designer's window reads. */
export type WindowConfig = Pick<
  Config,
  'estimator' | 'envRewardScaleMode' | 'envRewardScale' | 'envRewardScaleCap' | 'envReuse'
>;

/**
 * The designer advantages of one cycle's designs recomputed over their window: each scored
 * design's estimator value with the win-rate terms (plateau, variance, learnability) over every
 * unhinted return of its environment — the cycle's plays and `reuse` replays — and the regret
 * kept matched-timing (the cycle's hinted minus unhinted plays, measured together). Then centred
 * within each skill and scaled as at the cycle's end (the scale from the cycle's own plays). A
 * skill with one design keeps the centre the loop used (its running baseline).
 * `learning_potential` keeps its cycle-time value: its slow EMA is the run's, not the window's.
 */
function windowedDesignerAdvantages(d: CycleData, cfg: WindowConfig): (number | null)[] {
  const returns = new Map<number, number[]>();
  for (const r of [...d.rollouts, ...(d.reuse ?? [])])
    if (!r.hinted) returns.set(r.index, [...(returns.get(r.index) ?? []), r.return]);
  const raws = d.archive.map((a) => {
    const windowed =
      a.stats && cfg.estimator !== 'learning_potential'
        ? estimate(cfg.estimator, {
            noHint: a.stats.noHint,
            withHint: a.stats.withHint,
            window: returns.get(a.index) ?? a.stats.noHint,
          })
        : (a.stats?.raw ?? null);
    return rawDesignReward({
      firstAttemptValid: a.firstAttemptValid,
      timedOut: Boolean(a.stats?.timedOut || a.firstAttemptCrashed),
      scoredRaw: windowed,
      modelFailed: a.rawReward == null,
    });
  });
  const scale = cycleEnvRewardScale(cfg, d.rollouts, raws.filter((r) => r !== null).length);
  // a skill with a single design was centred on its running baseline: keep that centre
  const centre = new Map<string, number>();
  d.archive.forEach((a) => {
    if (a.rawReward != null && a.designerAdvantage != null && scale > 0)
      centre.set(a.skill, a.rawReward - a.designerAdvantage / scale);
  });
  return designerAdvantages(
    d.archive.map((a, i) => ({ skill: a.skill, raw: raws[i]! })),
    scale,
    Object.fromEntries(centre),
  ).advantages;
}

/**
 * The samples one update uses after cycle `cycle`, from the cycles seen so far. With `window`
 * (the run's config) the lagged designs' advantages are recomputed over their window.
 */
export function cycleBatch(
  history: readonly CycleData[],
  cycle: number,
  designerLag: number,
  window?: WindowConfig,
): { agent: TokenSample[]; designer: TokenSample[] } {
  const at = (c: number) => history.find((h) => h.cycle === c);
  const now = at(cycle);
  const lagged = at(cycle - designerLag);
  if (!lagged || !window) {
    return {
      agent: now ? agentTokenSamples(now.rollouts) : [],
      designer: lagged ? designerTokenSamples(lagged.archive) : [],
    };
  }
  const adv = windowedDesignerAdvantages(lagged, window);
  return {
    agent: now ? agentTokenSamples(now.rollouts) : [],
    designer: designerTokenSamples(lagged.archive.map((a, i) => ({ ...a, designerAdvantage: adv[i] }))),
  };
}

const tokensOf = (s: TokenSample) => s.ids.length;

/**
 * Minibatches of one role, each at most `budget` tokens (a sample longer than the budget goes
 * alone), in a seeded order, for `epochs` passes.
 */
export function minibatches(samples: TokenSample[], budget: number, epochs: number, rng: Rng): TokenSample[][] {
  const out: TokenSample[][] = [];
  for (let e = 0; e < epochs; e++) {
    const order = rng.shuffle([...samples]);
    let cur: TokenSample[] = [];
    let n = 0;
    for (const s of order) {
      if (cur.length && n + tokensOf(s) > budget) {
        out.push(cur);
        cur = [];
        n = 0;
      }
      cur.push(s);
      n += tokensOf(s);
    }
    if (cur.length) out.push(cur);
  }
  return out;
}

/** What one optimiser step reports (the engine's trainer fills it). */
export interface UpdateStats {
  role: 'designer' | 'agent';
  loss: number;
  /** Share of trained tokens whose ratio was clipped. */
  clipFraction: number;
  /** Mean of log π_old − log π over the trained tokens (how far the policy moved). */
  approxKl: number;
  /** k3 estimate of KL to the base policy (adapter off), only when klCoef > 0. */
  klToBase?: number;
  gradNorm: number;
  /** The trainer's spike guard skipped the step: no update was made (absent: it was made). */
  skipped?: boolean;
  tokens: number;
  ms: number;
}

/** The engine side of an update: one clipped-objective step on a minibatch. */
export interface PolicyTrainer {
  step(minibatch: TokenSample[]): Promise<Omit<UpdateStats, 'role'>>;
  /** Set the learning rate to `factor` times the one the trainer was made with, from the next step on. */
  scaleLr?(factor: number): void;
}

/** One training round after a cycle: both roles' minibatches (or one step each under `trainSteps: batch`), agent first. */
export async function trainRound(
  trainer: PolicyTrainer,
  batch: { agent: TokenSample[]; designer: TokenSample[] },
  cfg: Pick<Config, 'minibatchTokens' | 'trainEpochs'> & Partial<Pick<Config, 'trainSteps'>>,
  rng: Rng,
  onStep?: (s: UpdateStats, done: number, total: number) => void,
): Promise<UpdateStats[]> {
  const stats: UpdateStats[] = [];
  const whole = cfg.trainSteps === 'batch';
  // every minibatch planned first (agent, then designer: the rng's order), so progress has a total
  const plan = (['agent', 'designer'] as const).flatMap((role) =>
    (whole
      ? minibatches(batch[role], Number.POSITIVE_INFINITY, 1, rng)
      : minibatches(batch[role], cfg.minibatchTokens, cfg.trainEpochs, rng)
    ).map((mb) => ({ role, mb })),
  );
  for (const { role, mb } of plan) {
    const s = { role, ...(await trainer.step(mb)) };
    stats.push(s);
    onStep?.(s, stats.length, plan.length);
  }
  return stats;
}

/**
 * A run's training knobs (config keys) under the names the engine's trainer takes (its
 * TrainOptions): the same object for the CLI and the browser worker.
 */
export function trainerOptions(
  cfg: Pick<Config, 'trainLr' | 'clipLow' | 'clipHigh' | 'klCoef' | 'maxGradNorm' | 'minibatchTokens'>,
) {
  return {
    lr: cfg.trainLr,
    clipLow: cfg.clipLow,
    clipHigh: cfg.clipHigh,
    klCoef: cfg.klCoef,
    maxGradNorm: cfg.maxGradNorm,
    minibatchTokens: cfg.minibatchTokens,
  };
}

/**
 * A token sample as the engine's trainer takes it (its GrpoSample): the recorded log-probs are
 * π_old, defined at the role's sampling temperature.
 */
export function trainerSample(s: TokenSample, cfg: Pick<Config, 'agentTemperature' | 'designerTemperature'>) {
  return {
    ids: s.ids,
    spans: s.spans,
    oldLogprobs: s.logprobs,
    advantage: s.advantage,
    temperature: s.role === 'agent' ? cfg.agentTemperature : cfg.designerTemperature,
  };
}
