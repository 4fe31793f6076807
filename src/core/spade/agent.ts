/**
 * The Reasoning Agent's multi-turn loop: observation → model reply → step, until
 * the episode ends, the turn limit is reached or the token budget is spent. The
 * whole reply is the action: the environment extracts \boxed{} or <tool_call>.
 * With a hint, it is appended to the first observation as "\n\nHINT: " + hint.
 */
import type { Setting } from '../config.ts';
import type { EnvRunner } from '../env/checker.ts';
import type { SandboxLimits } from '../env/limits.ts';
import { extractBoxed } from '../env/contract.ts';
import { fitConversation } from '../llm/budget.ts';
import { extendTrace, type TokenTrace } from '../llm/token_trace.ts';
import { roleOptions, type ChatMessage, type ChatModel } from '../llm/chat_model.ts';
import { episodeReturn } from './estimators.ts';
import { agentSystemPrompt, HINT_PREFIX } from './prompts.ts';

export interface Turn {
  action: string;
  observation: string;
  reward: number;
  terminated: boolean;
  truncated: boolean;
  /** The reply had no \boxed{} (games) or no <tool_call>/<answer> (tool use). */
  formatError: boolean;
}

export interface Episode {
  seed: number;
  hinted: boolean;
  firstObservation: string;
  turns: Turn[];
  /** R: last reward clipped to [-1, 1] if terminated, else 0. */
  return: number;
  /** How it ended: terminated, truncated by the env, turn limit, token budget, or an env error. */
  end: 'terminated' | 'truncated' | 'turn_limit' | 'token_budget' | 'context_full' | 'env_error' | 'model_error';
  error?: { name: string; message: string };
  tokens: number;
  /** The largest prompt sent in this episode, in tokens (estimated unless the model counts). */
  maxPromptTokens?: number;
  /** Earlier turns left out of the prompt to fit the context window (at the last call). */
  droppedTurns?: number;
  /**
   * The episode as one token sequence with the agent's own tokens marked, when the backend
   * records tokens (the local engine); null when a turn's prompt did not extend the previous
   * ids (e.g. old turns were dropped to fit the window): such an episode is not trained.
   */
  trace?: TokenTrace | null;
}

/** The fewest reply tokens an agent turn is sent with (a short command fits in 32). */
const MIN_AGENT_REPLY = 32;

export interface EpisodeSpec {
  runner: EnvRunner;
  envId: string;
  setting: Setting;
  model: ChatModel;
  seed: number;
  hint: string | null;
  maxTurns: number;
  tokenBudget: number;
  temperature: number;
  /** Seed for the model's sampling (derived from the run seed). */
  sampleSeed: number;
  signal?: AbortSignal;
  onTurn?: (t: Turn, index: number) => void;
}

/**
 * Games: no \boxed{}. Tool use: no <tool_call> or <answer> with its closing tag somewhere after it
 * (two indexOf scans: a regular expression here went quadratic on a reply of many unclosed tags).
 */
export function isFormatError(setting: Setting, reply: string): boolean {
  if (setting === 'games') return extractBoxed(reply) === null;
  const closed = (open: string, close: string) => {
    const at = reply.indexOf(open);
    return at >= 0 && reply.indexOf(close, at + open.length) >= 0;
  };
  return !closed('<tool_call>', '</tool_call>') && !closed('<answer>', '</answer>');
}

/** An episode that could not start or go on because the environment failed. */
function failedEpisode(seed: number, hinted: boolean, err: unknown): Episode {
  const e = err as Error;
  return {
    seed,
    hinted,
    firstObservation: '',
    turns: [],
    return: 0,
    end: 'env_error',
    error: { name: e?.name ?? 'Error', message: e?.message ?? String(err) },
    tokens: 0,
  };
}

export async function playEpisode(s: EpisodeSpec): Promise<Episode> {
  let obs0: string;
  try {
    [obs0] = await s.runner.reset(s.envId, s.seed);
  } catch (err) {
    // seeds the checker never tried can still make reset() fail or hang
    return failedEpisode(s.seed, Boolean(s.hint), err);
  }
  const first = s.hint ? `${obs0}${HINT_PREFIX}${s.hint}` : obs0;
  const messages: ChatMessage[] = [
    { role: 'system', content: agentSystemPrompt(s.setting) },
    { role: 'user', content: first },
  ];
  const ep: Episode = {
    seed: s.seed,
    hinted: Boolean(s.hint),
    firstObservation: first,
    turns: [],
    return: 0,
    end: 'turn_limit',
    tokens: 0,
  };
  for (let t = 0; t < s.maxTurns; t++) {
    const left = s.tokenBudget - ep.tokens;
    if (left < MIN_AGENT_REPLY) {
      ep.end = 'token_budget';
      return ep;
    }
    // budget: the system prompt and first observation stay; the oldest turns go first
    let fit;
    try {
      fit = await fitConversation(s.model, messages, Math.min(400, left), MIN_AGENT_REPLY);
    } catch (err) {
      if (s.signal?.aborted || (err as Error)?.name === 'AbortError') throw err;
      ep.end = 'model_error'; // the model's tokenizer failed: not the environment's doing
      ep.error = { name: (err as Error)?.name ?? 'Error', message: (err as Error)?.message ?? String(err) };
      return ep;
    }
    ep.maxPromptTokens = Math.max(ep.maxPromptTokens ?? 0, fit.plan.promptTokens);
    ep.droppedTurns = fit.dropped;
    if (!fit.plan.fits) {
      ep.end = 'context_full';
      return ep;
    }
    let reply;
    try {
      reply = await s.model.chat(
        fit.messages,
        roleOptions('agent', {
          temperature: s.temperature,
          max_tokens: fit.plan.maxTokens,
          seed: s.sampleSeed + t,
          signal: s.signal,
        }),
      );
    } catch (err) {
      // a stop ends the run; any other failure of the model ends this play only
      if (s.signal?.aborted || (err as Error)?.name === 'AbortError') throw err;
      ep.end = 'model_error';
      ep.error = { name: (err as Error)?.name ?? 'Error', message: (err as Error)?.message ?? String(err) };
      return ep;
    }
    ep.tokens += reply.usage.completionTokens || Math.ceil(reply.text.length / 4);
    if (reply.tokens && ep.trace !== null) ep.trace = extendTrace(ep.trace ?? null, reply.tokens);
    let r;
    try {
      r = await s.runner.step(s.envId, reply.text);
    } catch (err) {
      ep.end = 'env_error';
      ep.error = { name: (err as Error).name, message: (err as Error).message };
      return ep;
    }
    const turn: Turn = {
      action: reply.text,
      observation: r[0],
      reward: r[1],
      terminated: r[2],
      truncated: r[3],
      formatError: isFormatError(s.setting, reply.text),
    };
    ep.turns.push(turn);
    s.onTurn?.(turn, t);
    if (r[2] || r[3]) {
      ep.end = r[2] ? 'terminated' : 'truncated';
      ep.return = episodeReturn(r[1], r[2]);
      return ep;
    }
    messages.push({ role: 'assistant', content: reply.text }, { role: 'user', content: r[0] });
  }
  return ep;
}

/**
 * Load `code` in a fresh instance (with the run's sandbox limits), play one episode, dispose the instance. An environment that
 * fails to load or play gives a failed episode; a stop (AbortError) is rethrown. A dispose that fails (the environment's
 * close() threw, hung or needed the watchdog) fails the episode with that error, which names the environment, unless the
 * episode had already failed on its own.
 */
export async function playFresh(code: string, s: Omit<EpisodeSpec, 'envId'>, limits?: SandboxLimits): Promise<Episode> {
  let id: string | null = null;
  let ep: Episode;
  try {
    id = (await s.runner.load(code, s.maxTurns, limits)).id;
    ep = await playEpisode({ ...s, envId: id });
  } catch (err) {
    if (s.signal?.aborted || (err as Error)?.name === 'AbortError') {
      if (id) await Promise.resolve(s.runner.dispose(id)).catch(() => undefined); // the stop is what is reported
      throw err;
    }
    ep = failedEpisode(s.seed, Boolean(s.hint), err);
  }
  if (id) {
    try {
      await s.runner.dispose(id);
    } catch (err) {
      // the turns stay for the record; the episode scores 0 and is not trained on
      if (!ep.error)
        return {
          ...ep,
          ...failedEpisode(s.seed, Boolean(s.hint), err),
          firstObservation: ep.firstObservation,
          turns: ep.turns,
          tokens: ep.tokens,
          trace: null,
        };
    }
  }
  return ep;
}
