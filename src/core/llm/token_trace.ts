/**
 * Token traces: what the local backend recorded when it sampled (prompt ids, sampled ids, their
 * log-probs), and an episode grown turn by turn into one id sequence with the model's own tokens
 * marked. A leaf module (it imports nothing), so the agent, the run store and GRPO can all use it.
 */

/** The ids of one reply as the local backend recorded them at sampling time. */
export interface SampledTokens {
  prompt: number[];
  completion: number[];
  /** log π_old of each completion id under the sampling policy. */
  logprobs: number[];
}

/** One episode (or design) as one id sequence: where the model's own tokens are, and their old log-probs. */
export interface TokenTrace {
  ids: number[];
  /** [start, end) ranges of ids that the model sampled (the tokens that get gradient). */
  spans: [number, number][];
  /** Old log-probs of the span tokens, in order. */
  logprobs: number[];
}

/**
 * Grow an episode's trace by one reply. The reply's prompt must start with the trace so far
 * (the local backend builds each turn's prompt on the previous ids); otherwise the episode is
 * no longer one sequence and null is returned (it is then not trained).
 */
export function extendTrace(trace: TokenTrace | null, t: SampledTokens): TokenTrace | null {
  if (t.completion.length !== t.logprobs.length) return null;
  if (trace) {
    if (t.prompt.length < trace.ids.length) return null;
    for (let i = 0; i < trace.ids.length; i++) if (t.prompt[i] !== trace.ids[i]) return null;
  }
  const start = t.prompt.length;
  return {
    ids: [...t.prompt, ...t.completion],
    spans: [...(trace?.spans ?? []), [start, start + t.completion.length]],
    logprobs: [...(trace?.logprobs ?? []), ...t.logprobs],
  };
}
