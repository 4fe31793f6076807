/**
 * GRPO, the pure part: from the loop's records to chat-format training samples
 * with advantages, per role. Rewards are normalised within each group (one
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
