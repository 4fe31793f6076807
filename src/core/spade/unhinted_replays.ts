/**
 * Reusing a generation of environments for more agent updates (the paper's `envReuse`: a set of
 * games serves 4 agent steps). After the first update on a cycle's plays, the cycle's valid
 * environments are played again — without the hint, on fresh seeds derived from (seed, cycle,
 * round), by the updated agent — and those episodes are the next update's samples. Hinted plays
 * and the designer are not involved: the designer's reward stays the one measured in the cycle.
 */
import type { Config } from '../config.ts';
import { limitsFromConfig } from '../env/limits.ts';
import type { ChatModel } from '../llm/chat_model.ts';
import { createRng, hashSeed } from '../rng.ts';
import { playFresh } from './agent.ts';
import type { CheckingRunner } from './phases.ts';
import type { PlaysProgress } from './probe.ts';
import type { ArchiveRecord, RolloutRecord } from './run_store.ts';

/**
 * Unhinted plays of every valid, scored, non-blacklisted environment of a cycle, for reuse round
 * `round` (≥ 1); `onProgress` hears of every turn and every finished play.
 */
export async function replayUnhinted(
  runner: CheckingRunner,
  agent: ChatModel,
  archive: ArchiveRecord[],
  cfg: Config,
  round: number,
  signal?: AbortSignal,
  onProgress?: (p: PlaysProgress) => void,
): Promise<RolloutRecord[]> {
  const out: RolloutRecord[] = [];
  const envs = archive.filter((a) => a.valid && a.code && a.stats && !a.stats.timedOut && a.envId);
  const total = envs.length * cfg.playsPerEnv;
  for (const a of envs) {
    if (!a.code || !a.envId) continue;
    const rng = createRng(hashSeed(`${cfg.seed}:reuse:${a.cycle}:${a.index}:${round}`));
    for (let play = 0; play < cfg.playsPerEnv; play++) {
      const seed = rng.int(2 ** 31);
      const at = { total, title: a.title, seed };
      const ep = await playFresh(
        a.code,
        {
          runner,
          setting: cfg.setting,
          model: agent,
          seed,
          hint: null,
          maxTurns: cfg.maxTurns,
          tokenBudget: cfg.agentTokenBudget,
          temperature: cfg.agentTemperature,
          sampleSeed: hashSeed(`${cfg.seed}:reuse-a:${a.cycle}:${a.index}:${round}:${play}`),
          signal,
          onTurn: (_t, i) => onProgress?.({ ...at, done: out.length, turn: i + 1 }),
        },
        limitsFromConfig(cfg),
      );
      out.push({ ...ep, cycle: a.cycle, index: a.index, skill: a.skill, envId: a.envId, play });
      onProgress?.({ ...at, done: out.length, turn: null });
    }
  }
  return out;
}
