/**
 * The local backend in the browser: a ChatModel over our engine in its worker
 * (workers/engine.worker.ts, reached through comlink). Replies carry `tokens` (the prompt and sampled
 * ids, log π_old), so the run can train on them; prompts are counted exactly by the worker's
 * tokenizer. A call's AbortSignal stops that call only in the worker (each call has its own id).
 */
import * as Comlink from 'comlink';
import '../rpc.ts';
import {
  throwIfAborted,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
  type ModelCapabilities,
} from '../../core/llm/chat_model.ts';
import type { Thinking } from '../../core/llm/thinking.ts';
import type { EngineApi } from '../../engine/engine_api.ts';

/** Names each call (across models: one worker), so aborting one stops only that call in the worker. */
let engineCalls = 0;

export class EngineChatModel implements ChatModel {
  readonly backend = 'local';
  /** config.thinking (the Models panel sets it per run): sent with every call. */
  thinking: Thinking = 'off';
  constructor(
    private readonly api: Comlink.Remote<EngineApi>,
    readonly model: string,
    readonly capabilities: ModelCapabilities,
  ) {}
  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    const { signal, onToken, ...rest } = o;
    throwIfAborted(signal); // a call stopped before it starts never reaches the worker
    const id = ++engineCalls;
    const stop = () => void this.api.abort(id);
    signal?.addEventListener('abort', stop, { once: true });
    try {
      const r = await this.api.chat(messages, rest, onToken ? Comlink.proxy(onToken) : undefined, this.thinking, id);
      return { ...r, ...(r.tokens ? { tokens: r.tokens } : {}) };
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }
  /** Decode up to `n` of this worker's chats in one step (the run's budget of chats in flight). */
  setDecodeBatch(n: number): Promise<void> {
    return this.api.setDecodeBatch(n);
  }
  countTokens(messages: ChatMessage[]): Promise<number> {
    return this.api.countTokens(messages, this.thinking);
  }
}
