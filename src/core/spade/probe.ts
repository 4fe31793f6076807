/**
 * The probe set: fixed held-out evidence of whether the agent improves. A few seed-library
 * environments of the run's setting, fixed seeds, no hint, greedy decoding (temperature 0:
 * the same policy gives the same transcript, so a change in the probe return is the policy's
 * doing, not sampling noise). Evaluated before training and every `probeEvery` updates.
 */
import type { Config } from '../config.ts';
import { limitsFromConfig } from '../env/limits.ts';
import { SEED_ENVS } from '../env/seeds/index.ts';
import type { CheckingRunner } from './phases.ts';
import { playFresh } from './agent.ts';
import type { ChatModel } from '../llm/chat_model.ts';
import { mean, winRate } from './estimators.ts';

/** Environments per probe (the first of each skill, in the library's order) and seeds per environment. */
const PROBE_ENVS = 3;
const PROBE_SEEDS = [101, 202] as const;

export interface ProbeResult {
  /** Mean episode return over every probe play. */
  meanReturn: number;
  winRate: number;
  perEnv: { id: string; title: string; returns: number[] }[];
}

function probeEnvs(setting: Config['setting']): { id: string; title: string; code: string }[] {
  const seen = new Set<string>();
  return SEED_ENVS.filter((e) => e.setting === setting && !seen.has(e.skill) && seen.add(e.skill))
    .slice(0, PROBE_ENVS)
    .map((e) => ({ id: e.id, title: e.title, code: e.code }));
}

/**
 * Where a series of plays stands (the probe's, a reuse round's replays): `done` of `total` plays
 * finished; the play under way is `title` on `seed`, at `turn` (1-based; null when a play just ended).
 */
export interface PlaysProgress {
  done: number;
  total: number;
  title: string;
  seed: number;
  turn: number | null;
}

/**
 * The probe set's plays, one after another; `onProgress` hears of every turn and every finished play
 * (a probe of a slow model takes minutes, and is never silent).
 */
export async function evaluateProbe(
  runner: CheckingRunner,
  agent: ChatModel,
  cfg: Config,
  signal?: AbortSignal,
  onProgress?: (p: PlaysProgress) => void,
): Promise<ProbeResult> {
  const perEnv: ProbeResult['perEnv'] = [];
  const envs = probeEnvs(cfg.setting);
  const total = envs.length * PROBE_SEEDS.length;
  let done = 0;
  for (const env of envs) {
    const returns: number[] = [];
    for (const seed of PROBE_SEEDS) {
      const at = { total, title: env.title, seed };
      const ep = await playFresh(
        env.code,
        {
          runner,
          setting: cfg.setting,
          model: agent,
          seed,
          hint: null,
          maxTurns: cfg.maxTurns,
          tokenBudget: cfg.agentTokenBudget,
          temperature: 0,
          sampleSeed: seed,
          signal,
          onTurn: (_t, i) => onProgress?.({ ...at, done, turn: i + 1 }),
        },
        limitsFromConfig(cfg),
      );
      returns.push(ep.return);
      onProgress?.({ ...at, done: ++done, turn: null });
    }
    perEnv.push({ id: env.id, title: env.title, returns });
  }
  const all = perEnv.flatMap((e) => e.returns);
  return { meanReturn: mean(all), winRate: winRate(all), perEnv };
}
