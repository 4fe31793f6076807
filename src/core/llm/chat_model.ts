/**
 * ChatModel: the only thing the SPADE loop talks to. Backends (webllm, openai,
 * local engine, replay) implement it and declare their capabilities instead of
 * letting callers guess: the flags in `capabilities`, and the optional abilities
 * (countTokens, setDecodeBatch) as methods a backend has or lacks. Messages follow
 * the OpenAI chat format, tools included. A model that changes another's calls
 * (counting, recording, capping) is a WrappedChatModel, the one wrapper.
 */
import type { ToolSchema } from '../env/contract.ts';
import { DEFAULTS, type Config } from '../config.ts';
import { abortError } from '../errors.ts';

type Role = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: Role;
  content: string;
  /** For role "tool": the call this answers. */
  tool_call_id?: string;
  name?: string;
}

export interface ChatOptions {
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  stop?: string[];
  seed?: number;
  tools?: ToolSchema[];
  /** Ask for per-token log-probs (honoured only when capabilities.logprobs). */
  logprobs?: boolean;
  signal?: AbortSignal;
  /** Streaming callback: each new piece of text as it arrives. */
  onToken?: (delta: string) => void;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'abort' | 'error';

export interface TokenLogprob {
  token: string;
  logprob: number;
}

export interface ChatResult {
  text: string;
  finishReason: FinishReason;
  usage: { promptTokens: number; completionTokens: number };
  logprobs?: TokenLogprob[];
  /**
   * Token-exact record of the call (the local backend): the prompt ids fed, the ids sampled and
   * log π_old of each under the sampling policy. Training uses exactly these.
   */
  tokens?: { prompt: number[]; completion: number[]; logprobs: number[] };
  /** Wall time of the call, ms. */
  ms: number;
}

export interface ModelCapabilities {
  streaming: boolean;
  logprobs: boolean;
  trainable: boolean;
  /** Context window in tokens. */
  contextWindow: number;
}

export interface ChatModel {
  /** Backend name: "webllm" | "openai" | "local" | "replay" | ... */
  readonly backend: string;
  /** Model identifier within the backend. */
  readonly model: string;
  readonly capabilities: ModelCapabilities;
  chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult>;
  /**
   * Prompt tokens of these messages under the model's own tokenizer and chat template, where
   * the backend has them; absent otherwise (the loop then uses a conservative estimate).
   */
  countTokens?(messages: ChatMessage[]): Promise<number>;
  /**
   * Batched decoding (the local engine's scheduler): decode up to `n` of this model's chats in one
   * step — the run sizes it to its budget of chats in flight. Absent where the backend has no such
   * knob (a server batches on its own).
   */
  setDecodeBatch?(n: number): Promise<void>;
}

/** The three roles of one SPADE model, each with its sampling preset. */
export const ROLES = ['designer', 'hint', 'agent'] as const;
export type ModelRole = (typeof ROLES)[number];

/** Sampling presets per role: designer 0.6 and agent 0.6 as in the paper; hints 0.3 for focus. */
export const ROLE_PRESETS: Record<ModelRole, Pick<ChatOptions, 'temperature' | 'top_p' | 'max_tokens'>> = {
  designer: { temperature: 0.6, top_p: 0.95, max_tokens: 3000 },
  hint: { temperature: 0.3, top_p: 0.95, max_tokens: 200 },
  agent: { temperature: 0.6, top_p: 0.95, max_tokens: 400 },
};

/** Options for a role: the preset, then the caller's overrides. */
export function roleOptions(role: ModelRole, overrides: ChatOptions = {}): ChatOptions {
  return { ...ROLE_PRESETS[role], ...overrides };
}

/** The bounds on one model call (config: modelCallTimeoutS, modelIdleTimeoutS, maxReplyChars). */
export interface ModelLimits {
  /** The whole call, retries included, ms. */
  callTimeoutMs: number;
  /** The longest silence between two streamed pieces (the wait for the first one included), ms. */
  idleTimeoutMs: number;
  /** Reply text beyond this is cut off (finishReason 'length') and the request stopped. */
  maxReplyChars: number;
}

/** The limits from a config (keys missing from an older run's config take their defaults). */
export function modelLimits(
  config: Partial<Pick<Config, 'modelCallTimeoutS' | 'modelIdleTimeoutS' | 'maxReplyChars'>> = {},
): ModelLimits {
  return {
    callTimeoutMs: (config.modelCallTimeoutS ?? DEFAULTS.modelCallTimeoutS) * 1000,
    idleTimeoutMs: (config.modelIdleTimeoutS ?? DEFAULTS.modelIdleTimeoutS) * 1000,
    maxReplyChars: config.maxReplyChars ?? DEFAULTS.maxReplyChars,
  };
}

/** Throws an AbortError-like DOMException if the signal is aborted. */
export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/**
 * The one way to wrap a model: `inner` itself — its backend, model, capabilities and optional
 * abilities (countTokens, setDecodeBatch) passed through — with its chat changed. A one-off change
 * is the `chat` argument (it calls `inner.chat` itself); a wrapper with state of its own (counts, a
 * transcript) extends the class and overrides chat. So no wrapper can drop an ability the
 * interface declares.
 */
export class WrappedChatModel implements ChatModel {
  readonly countTokens?: (messages: ChatMessage[]) => Promise<number>;
  readonly setDecodeBatch?: (n: number) => Promise<void>;
  constructor(
    protected readonly inner: ChatModel,
    private readonly change: ChatModel['chat'] = (messages, options) => inner.chat(messages, options),
  ) {
    if (inner.countTokens) this.countTokens = (m) => inner.countTokens!(m);
    if (inner.setDecodeBatch) this.setDecodeBatch = (n) => inner.setDecodeBatch!(n);
  }
  get backend(): string {
    return this.inner.backend;
  }
  get model(): string {
    return this.inner.model;
  }
  get capabilities(): ModelCapabilities {
    return this.inner.capabilities;
  }
  chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult> {
    return this.change(messages, options);
  }
}

/** Wraps a model and counts its calls, completion tokens and the wall time spent in them. */
export class MeteredChatModel extends WrappedChatModel {
  calls = 0;
  tokens = 0;
  ms = 0;
  override async chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult> {
    const t0 = performance.now();
    try {
      const r = await this.inner.chat(messages, options);
      this.calls++;
      this.tokens += r.usage.completionTokens;
      return r;
    } finally {
      this.ms += performance.now() - t0;
    }
  }
}

export interface CallSpeed {
  tokens: number;
  seconds: number;
  /** 0 when no time was measured (a call that returned at once). */
  tokensPerSecond: number;
}

/**
 * How fast one call generated: its completion tokens over `ms` of wall time. A backend that reports
 * no token count (0) is measured by the streamed pieces instead (one onToken call ≈ one token).
 */
export function callSpeed(result: Pick<ChatResult, 'usage'>, ms: number, streamedPieces = 0): CallSpeed {
  const tokens = result.usage.completionTokens || streamedPieces;
  const seconds = ms / 1000;
  return { tokens, seconds, tokensPerSecond: seconds > 0 ? tokens / seconds : 0 };
}
