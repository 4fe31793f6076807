/**
 * The `local` ChatModel backend: our engine (model.ts) with a Hugging Face tokenizer
 * and chat template. Streaming, per-token log-probs, and trainable (its LoRA adapter
 * is what GRPO updates). Runs in Node (CLI, tests) and in workers/engine.worker.ts.
 * countTokens gives exact prompt sizes (the same template and tokenizer as chat) for the budgeter;
 * `thinking` 'off' (default, config.thinking) renders the template with `enable_thinking: false`
 * (Qwen3's switch; other templates ignore the variable). Replies are not stripped of think blocks
 * here: the text must stay the generated tokens, which training reads back.
 *
 * Token-exact replies: every result carries `tokens` — the prompt ids fed, the ids
 * sampled and log π_old of each under the sampling policy (policy.ts: log_softmax((logits + bias)
 * / T), before top-p). A conversation stays one token sequence: when the messages extend an
 * earlier call's messages + its reply (the agent loop appends the reply and the next observation),
 * the prompt is that call's exact ids (prompt + sampled completion) + the encoding of the template
 * text that follows the reply — found by rendering the messages with a sentinel in place of the
 * reply, so a template that renders old turns differently (Qwen3 drops their think blocks) still
 * extends the ids the model really saw; the reply is never re-tokenised. `allowedTokens`
 * constrains the policy's vocabulary (sampling here, and the trainer's log-softmax, same bias).
 * Concurrent chats on one model are decoded together by its DecodeScheduler (batch.ts):
 * one step serves every active reply, and a prompt that extends a cached one (the next turn of an
 * episode, another play of the same environment) reuses its KV cache.
 */
import {
  throwIfAborted,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
  type ModelCapabilities,
} from '../../core/llm/chat_model.ts';
import type { Thinking } from '../../core/llm/thinking.ts';
import { LOCAL_CHAT_DEFAULTS } from '../../core/defaults.ts';
import { DecodeScheduler } from './batch.ts';
import type { TextTokenizer } from '../io/tokenizer.ts';
import type { LlamaModel } from './model.ts';
import { allowedTokenBias } from './policy.ts';

export interface LocalModelOptions {
  /** Only these ids can be sampled (a logit mask; the trainer must use the same list). */
  allowedTokens?: number[];
}

/**
 * One scheduler per engine model: every LocalChatModel over the same LlamaModel (the designer and
 * the agent roles share one) feeds the same batch, so concurrent chats share decode steps.
 */
const schedulers = new WeakMap<object, DecodeScheduler<unknown>>();
export function schedulerFor<X>(llm: LlamaModel<X>): DecodeScheduler<X> {
  let s = schedulers.get(llm) as DecodeScheduler<X> | undefined;
  if (!s) {
    s = new DecodeScheduler(llm);
    schedulers.set(llm, s as DecodeScheduler<unknown>);
  }
  return s;
}

/** Length of the longest tail of text that is a proper prefix of one of the stop strings. */
function stopPrefix(text: string, stops: string[]): number {
  let best = 0;
  for (const s of stops)
    for (let k = Math.min(s.length - 1, text.length); k > best; k--)
      if (text.endsWith(s.slice(0, k))) {
        best = k;
        break;
      }
  return best;
}

/** Give the KV cache of an idle model's scheduler back (before a training step: see releaseIdle). */
export function releaseDecodeMemory<X>(llm: LlamaModel<X>): boolean {
  return schedulers.get(llm)?.releaseIdle() ?? false;
}

/** Earlier calls remembered for continuation (messages + reply → ids); 256 covers a cycle's parallel plays. */
const CONTINUATIONS = 256;
/** Stands in for a reply while rendering what follows it (no template trims or splits it). */
const SENTINEL = '\u0000spade-reply\u0000';

interface Seen {
  messages: { role: string; content: string }[];
  reply: string;
  /** prompt + completion ids, as fed and sampled. */
  ids: number[];
  /** Text of the completion's last id when it is an end-of-sequence id (the template's closing may start with it). */
  eosText: string | null;
}

export class LocalChatModel<X> implements ChatModel {
  readonly backend = 'local';
  readonly capabilities: ModelCapabilities;
  /** config.thinking: 'off' renders the chat template with enable_thinking: false. */
  thinking: Thinking = 'off';
  /** The vocabulary mask of allowedTokens as a logit bias (V,), or undefined. */
  readonly logitBias: Float32Array | undefined;
  /** Earlier calls, most recent last. */
  private readonly seen: Seen[] = [];

  constructor(
    readonly model: string,
    readonly llm: LlamaModel<X>,
    readonly tokenizer: TextTokenizer,
    readonly options: LocalModelOptions = {},
  ) {
    this.logitBias = allowedTokenBias(llm.cfg.vocabSize, options.allowedTokens);
    this.capabilities = {
      streaming: true,
      logprobs: true,
      trainable: true,
      contextWindow: Math.min(llm.cfg.maxPositionEmbeddings, 32768),
    };
  }

  /** The chat template's text for messages (generation prompt added). */
  private render(messages: { role: string; content: string }[]): string {
    return this.tokenizer.applyChatTemplate(
      messages.map((m) => ({ role: m.role, content: m.content })),
      { addGenerationPrompt: true, ...(this.thinking === 'off' ? { extra: { enable_thinking: false } } : {}) },
    );
  }

  /**
   * Prompt token ids for messages (chat template, generation prompt added). When the messages
   * extend an earlier call's messages + its reply, that call's exact ids + the encoding of the rest.
   */
  promptIds(messages: ChatMessage[]): number[] {
    const ms = messages.map((m) => ({ role: m.role, content: m.content }));
    return this.continued(ms) ?? this.tokenizer.encode(this.render(ms), { addSpecialTokens: false });
  }

  /** The earlier call that `ms` extends (its messages, then its reply as an assistant turn), longest first. */
  private extended(ms: { role: string; content: string }[]): Seen | undefined {
    let best: Seen | undefined;
    for (const e of this.seen) {
      const n = e.messages.length;
      if (ms.length <= n || (best && best.messages.length >= n)) continue;
      const reply = ms[n]!;
      if (reply.role !== 'assistant' || reply.content !== e.reply) continue;
      if (e.messages.every((m, i) => m.role === ms[i]!.role && m.content === ms[i]!.content)) best = e;
    }
    return best;
  }

  /** Earlier ids + the encoding of the template text after the reply; undefined when ms extends no call. */
  private continued(ms: { role: string; content: string }[]): number[] | undefined {
    const base = this.extended(ms);
    if (!base) return undefined;
    const n = base.messages.length;
    const text = this.render(ms.map((m, i) => (i === n ? { ...m, content: SENTINEL } : m)));
    const at = text.indexOf(SENTINEL);
    if (at < 0 || text.indexOf(SENTINEL, at + 1) >= 0) return undefined;
    let rest = text.slice(at + SENTINEL.length);
    if (base.eosText && rest.startsWith(base.eosText)) rest = rest.slice(base.eosText.length);
    return [...base.ids, ...this.tokenizer.encode(rest, { addSpecialTokens: false })];
  }

  private remember(e: Seen): void {
    this.seen.push(e);
    if (this.seen.length > CONTINUATIONS) this.seen.shift();
  }

  /** Exact prompt tokens of messages: the ids chat() would feed the model. */
  countTokens(messages: ChatMessage[]): Promise<number> {
    return Promise.resolve(this.promptIds(messages).length);
  }

  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(o.signal);
    const t0 = performance.now();
    const prompt = this.promptIds(messages);
    const maxNew = Math.max(
      1,
      Math.min(o.max_tokens ?? LOCAL_CHAT_DEFAULTS.maxTokens, this.capabilities.contextWindow - prompt.length),
    );
    const out: number[] = [];
    let emitted = '';
    let stopped = false;
    const stops = o.stop ?? [];
    const temperature = o.temperature ?? LOCAL_CHAT_DEFAULTS.temperature;
    const sampledLogprobs: number[] = [];
    // a stop string ends the request in the scheduler too (it would hold a batch row to maxNew); the
    // caller's abort reaches it through the same controller
    const ac = new AbortController();
    const forward = () => ac.abort();
    o.signal?.addEventListener('abort', forward, { once: true });
    if (o.signal?.aborted) ac.abort();
    await schedulerFor(this.llm)
      .generate(prompt, {
        maxNew,
        temperature,
        logitBias: this.logitBias,
        logprobs: sampledLogprobs,
        topP: o.top_p ?? 1,
        seed: o.seed ?? 0,
        stopIds: this.llm.cfg.eosTokenIds,
        signal: ac.signal,
        onToken: (id) => {
          if (stopped) return;
          out.push(id);
          const text = this.tokenizer.decode(out, { skipSpecialTokens: true });
          const hit = stops.map((s) => text.indexOf(s, Math.max(0, emitted.length - s.length))).filter((i) => i >= 0);
          const end = hit.length ? Math.min(...hit) : text.length;
          if (hit.length) {
            stopped = true;
            ac.abort();
          }
          // hold back a trailing replacement character (the rest of a multi-byte char may follow) and a
          // tail that could be the start of a stop string (the reply must never contain one)
          const safe = stopped ? end : Math.min(text.endsWith('\uFFFD') ? end - 1 : end, end - stopPrefix(text, stops));
          if (safe > emitted.length) {
            o.onToken?.(text.slice(emitted.length, safe));
            emitted = text.slice(0, safe);
          }
        },
      })
      .finally(() => o.signal?.removeEventListener('abort', forward));
    throwIfAborted(o.signal); // a stopped generation is not a reply: never recorded as one
    const text = stopped ? emitted : this.tokenizer.decode(out, { skipSpecialTokens: true });
    if (!stopped && text.length > emitted.length) o.onToken?.(text.slice(emitted.length));
    const ended = out.length > 0 && this.llm.cfg.eosTokenIds.includes(out[out.length - 1]!);
    const result: ChatResult = {
      text,
      finishReason: o.signal?.aborted ? 'abort' : stopped || ended ? 'stop' : out.length >= maxNew ? 'length' : 'stop',
      usage: { promptTokens: prompt.length, completionTokens: out.length },
      tokens: { prompt, completion: [...out], logprobs: sampledLogprobs.slice(0, out.length) },
      ms: 0,
    };
    this.remember({
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      reply: text,
      ids: [...prompt, ...out],
      eosText: ended ? this.tokenizer.decode([out[out.length - 1]!]) : null,
    });
    if (o.logprobs && out.length) {
      const lp = await this.llm.logprobs([...prompt, ...out]);
      const tail = lp.slice(prompt.length - 1);
      result.logprobs = out.map((id, i) => ({ token: this.tokenizer.decode([id]), logprob: tail[i]! }));
    }
    result.ms = performance.now() - t0;
    return result;
  }
}
