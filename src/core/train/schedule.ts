/**
 * When and on what the policy trains during a run — the pure part of closed-loop self-play.
 *
 * - A role can be trained only if the model that samples it is the model being trained (the
 *   local engine): `closedLoopProblems` names every role that breaks this, with the fix.
 * - After cycle c, the agent trains on the unhinted episodes of cycle c, and the designer on
 *   the first attempts of cycle c − designerLag (the paper lets the designer's update lag the
 *   agent's by a few steps; 0 trains both on the same cycle).
 * - Each role's samples are cut into minibatches of at most `minibatchTokens` tokens (a
 *   memory budget: a minibatch is one forward/backward on the engine) and the whole batch is
 *   passed over `trainEpochs` times in a seeded order; the clipped ratio keeps the passes
 *   after the first on-policy enough (PPO-style). Roles never share a minibatch: the
 *   objective's token-level mean would otherwise let long designs drown the agent's turns.
 */
import type { Config } from '../config.ts';
import type { ChatModel, ModelRole } from '../llm/chat_model.ts';
import type { Rng } from '../rng.ts';
import type { ArchiveRecord, RolloutRecord } from '../spade/run_store.ts';
import { agentTokenSamples, designerTokenSamples, type TokenSample } from './grpo.ts';

/** Roles whose samples train the policy (hints are written by the same model but not trained, as in the paper). */
export const TRAINED_ROLES: readonly ModelRole[] = ['designer', 'agent'];

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
}

/** The samples one update uses after cycle `cycle`, from the cycles seen so far. */
export function cycleBatch(
  history: readonly CycleData[],
  cycle: number,
  designerLag: number,
): { agent: TokenSample[]; designer: TokenSample[] } {
  const at = (c: number) => history.find((h) => h.cycle === c);
  const now = at(cycle);
  const lagged = at(cycle - designerLag);
  return {
    agent: now ? agentTokenSamples(now.rollouts) : [],
    designer: lagged ? designerTokenSamples(lagged.archive) : [],
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
  tokens: number;
  ms: number;
}

/** The engine side of an update: one clipped-objective step on a minibatch. */
export interface PolicyTrainer {
  step(minibatch: TokenSample[]): Promise<Omit<UpdateStats, 'role'>>;
}

/** One training round after a cycle: both roles' minibatches, agent first. */
export async function trainRound(
  trainer: PolicyTrainer,
  batch: { agent: TokenSample[]; designer: TokenSample[] },
  cfg: Pick<Config, 'minibatchTokens' | 'trainEpochs'>,
  rng: Rng,
  onStep?: (s: UpdateStats) => void,
): Promise<UpdateStats[]> {
  const stats: UpdateStats[] = [];
  for (const role of ['agent', 'designer'] as const) {
    for (const mb of minibatches(batch[role], cfg.minibatchTokens, cfg.trainEpochs, rng)) {
      const s = { role, ...(await trainer.step(mb)) };
      stats.push(s);
      onStep?.(s);
    }
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
