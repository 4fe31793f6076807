/**
 * The `local` ChatModel over the engine's front door (EngineApi, engine.ts): in the browser the
 * engine runs in workers/engine.worker.ts and this talks to it through comlink; in the CLI the same
 * class talks to the engine in-process, so `spade run --backend local` (and `--train`) and the app
 * go through the same calls. Replies carry `tokens` (the prompt and sampled ids, log π_old), so the
 * run can train on them; prompts are counted exactly by the engine's tokenizer. A call's
 * AbortSignal stops that call only (each call has its own id).
 */
import {
  throwIfAborted,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
  type ModelCapabilities,
} from '../core/llm/chat_model.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import type { EngineApi, ModelSummary } from './engine.ts';

/** Names each call (across models: one engine), so aborting one stops only that call. */
let engineCalls = 0;

export interface EngineChatModelOptions {
  /**
   * Wraps the streaming callback for the trip to the engine: Comlink.proxy when the engine is in a
   * worker (a function cannot be cloned); in-process, the callback is passed as it is.
   */
  proxy?: <F extends (delta: string) => void>(f: F) => F;
}

/** What the engine's chat model can do, from the loaded model's summary. */
export function engineCapabilities(s: ModelSummary): ModelCapabilities {
  return { streaming: true, logprobs: true, trainable: true, contextWindow: s.contextWindow };
}

export class EngineChatModel implements ChatModel {
  readonly backend = 'local';
  /** config.thinking (the Models panel, or the run's config in the CLI): sent with every call. */
  thinking: Thinking = 'off';
  readonly capabilities: ModelCapabilities;
  constructor(
    /** The engine this model chats with (and that training, batching and stats go to). */
    readonly engine: EngineApi,
    readonly model: string,
    capabilities: ModelCapabilities,
    private readonly o: EngineChatModelOptions = {},
  ) {
    this.capabilities = capabilities;
  }
  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    const { signal, onToken, ...rest } = o;
    throwIfAborted(signal); // a call stopped before it starts never reaches the engine
    const id = ++engineCalls;
    const stop = () => void this.engine.abort(id);
    signal?.addEventListener('abort', stop, { once: true });
    try {
      const cb = onToken && this.o.proxy ? this.o.proxy(onToken) : onToken;
      const r = await this.engine.chat(messages, rest, cb, this.thinking, id);
      return { ...r, ...(r.tokens ? { tokens: r.tokens } : {}) };
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }
  /** Decode up to `n` of this engine's chats in one step (the run's budget of chats in flight). */
  setDecodeBatch(n: number): Promise<void> {
    return this.engine.setDecodeBatch(n);
  }
  countTokens(messages: ChatMessage[]): Promise<number> {
    return this.engine.countTokens(messages, this.thinking);
  }
}
