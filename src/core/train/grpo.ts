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
 * The trainer recomputes log-probs on exactly these ids; the ratio to the recorded ones is
 * what the clipped objective uses (docs/training.md). Replies without token records (other
 * backends) are never trained: re-tokenised text could differ from what was sampled.
 */
import { groupAdvantages } from '../spade/estimators.ts';
import type { ArchiveRecord, RolloutRecord } from '../spade/run_store.ts';
import { extendTrace, type TokenTrace } from './trace.ts';

export { extendTrace, type SampledTokens, type TokenTrace } from './trace.ts';

export interface TokenSample extends TokenTrace {
  role: 'designer' | 'agent';
  advantage: number;
  /** Which record it came from ("cycle:index" or "cycle:index:play"). */
  key: string;
}

/**
 * Agent samples: one per unhinted episode that has a token trace, advantage = its return
 * z-scored over the unhinted plays of its environment (groups where every play scored the
 * same carry no signal and are left out).
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
    // a play cut short by a failed model call scored 0 for no fault of the policy: the task was not
    // scored, and its plays are not trained either
    if (group.some((r) => r.end === 'model_error')) continue;
    const adv = groupAdvantages(group.map((r) => r.return));
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
