/**
 * ChatModel: the only thing the SPADE loop talks to. Backends (webllm, openai,
 * local engine, replay) implement it and declare their capabilities instead of
 * letting callers guess. Messages follow the OpenAI chat format, tools included.
 */
import type { ToolSchema } from '../env/contract.ts';
import { abortError } from '../errors.ts';

export type Role = 'system' | 'user' | 'assistant' | 'tool';

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

/** Throws an AbortError-like DOMException if the signal is aborted. */
export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/** Wraps a model and counts its calls, completion tokens and the wall time spent in them. */
export class MeteredChatModel implements ChatModel {
  calls = 0;
  tokens = 0;
  ms = 0;
  constructor(private readonly inner: ChatModel) {}
  get backend(): string {
    return this.inner.backend;
  }
  get model(): string {
    return this.inner.model;
  }
  get capabilities(): ModelCapabilities {
    return this.inner.capabilities;
  }
  async chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult> {
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
