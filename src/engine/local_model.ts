/**
 * The `local` ChatModel backend: our engine (model.ts) with a Hugging Face tokenizer
 * and chat template. Streaming, per-token log-probs, and trainable (its LoRA adapter
 * is what GRPO updates). Runs in Node (CLI, tests) and in workers/engine.worker.ts.
 */
import {
  throwIfAborted,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
  type ModelCapabilities,
} from '../core/llm/chat_model.ts';
import { generate } from './generate.ts';
import type { TextTokenizer } from './io/tokenizer.ts';
import type { LlamaModel } from './model.ts';

export class LocalChatModel<X> implements ChatModel {
  readonly backend = 'local';
  readonly capabilities: ModelCapabilities;

  constructor(
    readonly model: string,
    readonly llm: LlamaModel<X>,
    readonly tokenizer: TextTokenizer,
  ) {
    this.capabilities = {
      streaming: true,
      logprobs: true,
      trainable: true,
      contextWindow: Math.min(llm.cfg.maxPositionEmbeddings, 32768),
    };
  }

  /** Prompt token ids for messages (chat template, generation prompt added). */
  promptIds(messages: ChatMessage[]): number[] {
    return this.tokenizer.encodeChat(
      messages.map((m) => ({ role: m.role, content: m.content })),
      { addGenerationPrompt: true },
    );
  }

  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(o.signal);
    const t0 = performance.now();
    const prompt = this.promptIds(messages);
    const maxNew = Math.max(1, Math.min(o.max_tokens ?? 256, this.capabilities.contextWindow - prompt.length));
    const out: number[] = [];
    let emitted = '';
    let stopped = false;
    const stops = o.stop ?? [];
    await generate(this.llm, prompt, {
      maxNew,
      temperature: o.temperature ?? 0.6,
      topP: o.top_p ?? 1,
      seed: o.seed ?? 0,
      stopIds: this.llm.cfg.eosTokenIds,
      signal: o.signal,
      onToken: (id) => {
        if (stopped) return;
        out.push(id);
        const text = this.tokenizer.decode(out, { skipSpecialTokens: true });
        const hit = stops.map((s) => text.indexOf(s, Math.max(0, emitted.length - s.length))).filter((i) => i >= 0);
        const end = hit.length ? Math.min(...hit) : text.length;
        if (hit.length) stopped = true;
        // hold back a trailing replacement character: the rest of a multi-byte char may follow
        const safe = stopped ? end : text.endsWith('\uFFFD') ? end - 1 : end;
        if (safe > emitted.length) {
          o.onToken?.(text.slice(emitted.length, safe));
          emitted = text.slice(0, safe);
        }
      },
    });
    const text = stopped ? emitted : this.tokenizer.decode(out, { skipSpecialTokens: true });
    if (!stopped && text.length > emitted.length) o.onToken?.(text.slice(emitted.length));
    const ended = out.length > 0 && this.llm.cfg.eosTokenIds.includes(out[out.length - 1]!);
    const result: ChatResult = {
      text,
      finishReason: o.signal?.aborted ? 'abort' : stopped || ended ? 'stop' : out.length >= maxNew ? 'length' : 'stop',
      usage: { promptTokens: prompt.length, completionTokens: out.length },
      ms: 0,
    };
    if (o.logprobs && out.length) {
      const lp = await this.llm.logprobs([...prompt, ...out]);
      const tail = lp.slice(prompt.length - 1);
      result.logprobs = out.map((id, i) => ({ token: this.tokenizer.decode([id]), logprob: tail[i]! }));
    }
    result.ms = performance.now() - t0;
    return result;
  }
}
