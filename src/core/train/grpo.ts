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
 * what the clipped objective uses.
 *
 * Text samples (below, older path): chat-format samples re-tokenised at training time.
 * Rewards are normalised within each group (one
 * environment's plays for the agent; one cycle's designs for the designer) and
 * then across the role's batch, so neither role's scale dominates. Rewards are normalised within each group (one
 * environment's plays for the agent; one cycle's designs for the designer) and
 * then across the role's batch, so neither role's scale dominates.
 *
 * With one gradient step per batch of fresh samples the PPO ratio is 1 and the
 * clip (0.2 / 0.28 in the paper) never binds, so the update is the plain policy
 * gradient −A·∇log π, averaged over each completion's tokens. The KL term (0 for
 * games in the paper) is not used.
 */
import type { ChatMessage } from '../llm/chat_model.ts';
import { agentSystemPrompt } from '../spade/prompts.ts';
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

export interface ChatSample {
  role: 'designer' | 'agent';
  /** The conversation up to the reply being trained. */
  prompt: ChatMessage[];
  /** The model's reply (the tokens that get gradient). */
  completion: string;
  advantage: number;
}

/** Agent samples: every turn of every unhinted play, with its episode's group-normalised advantage. */
export function agentSamples(rollouts: RolloutRecord[], opts: { includeHinted?: boolean } = {}): ChatSample[] {
  const groups = new Map<string, RolloutRecord[]>();
  for (const r of rollouts) {
    if (r.hinted && !opts.includeHinted) continue;
    const key = `${r.cycle}:${r.index}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const out: ChatSample[] = [];
  for (const group of groups.values()) {
    const adv = groupAdvantages(group.map((r) => r.return));
    group.forEach((ep, j) => {
      if (Math.abs(adv[j]!) < 1e-9) return; // no signal: every play scored the same
      const setting = /<tool_call>|<answer>/.test(ep.firstObservation) ? 'tool_use' : 'games';
      const history: ChatMessage[] = [
        { role: 'system', content: agentSystemPrompt(setting) },
        { role: 'user', content: ep.firstObservation },
      ];
      for (const t of ep.turns) {
        out.push({ role: 'agent', prompt: [...history], completion: t.action, advantage: adv[j]! });
        history.push({ role: 'assistant', content: t.action }, { role: 'user', content: t.observation });
      }
    });
  }
  return out;
}

/**
 * Designer samples: each environment's first attempt (only the first is trained on), with the
 * designer reward (already centred per skill) as its advantage. `briefs` holds the designer's
 * first-attempt messages per "cycle:index" (the loop's designer_output event carries them).
 */
export function designerSamples(archive: ArchiveRecord[], briefs: Map<string, ChatMessage[]>): ChatSample[] {
  const out: ChatSample[] = [];
  for (const a of archive) {
    const prompt = briefs.get(`${a.cycle}:${a.index}`);
    const reward = a.stats?.designerReward ?? (a.firstAttemptValid ? null : 0);
    if (!prompt || reward === null || !a.attempts[0]) continue;
    out.push({ role: 'designer', prompt, completion: a.attempts[0].reply, advantage: reward });
  }
  return out;
}

/** Divide a role's advantages by their std (per-role normalisation); zero-variance batches are dropped. */
export function normaliseRole(samples: ChatSample[]): ChatSample[] {
  if (samples.length === 0) return samples;
  const m = samples.reduce((s, x) => s + x.advantage, 0) / samples.length;
  const sd = Math.sqrt(samples.reduce((s, x) => s + (x.advantage - m) ** 2, 0) / samples.length);
  if (sd < 1e-9) return samples.filter((s) => Math.abs(s.advantage) > 1e-9);
  return samples.map((s) => ({ ...s, advantage: s.advantage / sd }));
}
