/**
 * The Lab's fast path (tiny_lm.ts) as a ChatModel: TinyChat, LocalChatModel's contract on TinyLm —
 * ChatML prompts, continuation of an earlier call's ids, a prefix cache of sequences, seeded
 * sampling over the allowed ids and log π of each sampled id — with LocalChatModel's replies and
 * token records over the same LlamaModel (tests/unit/tiny_lm.test.ts compares them).
 */
import { LOCAL_CHAT_DEFAULTS } from '../../core/defaults.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult, ModelCapabilities } from '../../core/llm/chat_model.ts';
import { throwIfAborted } from '../../core/llm/chat_model.ts';
import { createRng } from '../../core/rng.ts';
import { NonFiniteLogitsError } from '../../core/errors.ts';
import type { TextTokenizer } from '../io/tokenizer.ts';
import type { TinyLm, TinySeq } from './tiny_lm.ts';
import { f32 } from './tiny_math.ts';
import { policyLogprobs } from './tiny_train.ts';

/** Sequences kept for prefix reuse (a cycle's plays of one level, and the probe's, fit). */
const PREFIX_SEQS = 64;
/** Earlier calls remembered for continuation (as LocalChatModel's CONTINUATIONS). */
const CONTINUATIONS = 256;

interface Seen {
  messages: { role: string; content: string }[];
  reply: string;
  ids: number[];
}

/**
 * A ChatModel on TinyLm with LocalChatModel's contract for what the Lab asks (ChatML prompts built
 * as the byte tokenizer encodes them, continuation of an earlier call's exact ids, seeded sampling
 * with one uniform per token, the vocabulary constraint, log π of each sampled id): the same replies
 * and token records as LocalChatModel over the same LlamaModel.
 */
export class TinyChat implements ChatModel {
  readonly backend = 'local';
  readonly capabilities: ModelCapabilities;
  private readonly seen: Seen[] = [];
  private cache: TinySeq[] = [];
  private cacheVersion = -1;
  private readonly encoded = new Map<string, number[]>();
  private readonly decoded = new Map<number, string>();
  /** The allowed ids, ascending. */
  readonly allowed: number[];
  /** Counts for the bench: prompt tokens computed and reused from the prefix cache. */
  readonly counts = { computed: 0, reused: 0, calls: 0 };

  constructor(
    readonly model: string,
    readonly lm: TinyLm,
    readonly tokenizer: TextTokenizer,
    allowed: readonly number[],
  ) {
    if (!allowed.length) throw new RangeError('TinyChat: list the allowed ids (the fast path samples among them)');
    this.allowed = [...allowed].sort((a, b) => a - b);
    this.capabilities = {
      streaming: false,
      logprobs: true,
      trainable: true,
      contextWindow: Math.min(lm.cfg.maxPositionEmbeddings, 32768),
    };
  }

  private encode(text: string): number[] {
    let ids = this.encoded.get(text);
    if (!ids) {
      ids = this.tokenizer.encode(text, { addSpecialTokens: false });
      if (this.encoded.size > 4096) this.encoded.clear();
      this.encoded.set(text, ids);
    }
    return ids;
  }

  private decode(id: number): string {
    let s = this.decoded.get(id);
    if (s === undefined) this.decoded.set(id, (s = this.tokenizer.decode([id], { skipSpecialTokens: true })));
    return s;
  }

  /** ChatML (io/init_checkpoint.ts CHATML_TEMPLATE) with the generation prompt, as ids. */
  private render(ms: { role: string; content: string }[]): number[] {
    const out: number[] = [];
    for (const m of ms) out.push(...this.encode(`<|im_start|>${m.role}\n${m.content}<|im_end|>\n`));
    out.push(...this.encode('<|im_start|>assistant\n'));
    return out;
  }

  /** The prompt ids: an earlier call's ids + the template after its reply, else the whole render. */
  promptIds(messages: ChatMessage[]): number[] {
    const ms = messages.map((m) => ({ role: m.role, content: m.content }));
    let best: Seen | undefined;
    const longest = ms.findLastIndex((m) => m.role === 'assistant'); // where the longest continuation's reply is
    for (let i = this.seen.length - 1; i >= 0; i--) {
      const e = this.seen[i]!;
      const n = e.messages.length;
      if (ms.length <= n || (best && best.messages.length >= n)) continue;
      const reply = ms[n]!;
      if (reply.role !== 'assistant' || reply.content !== e.reply) continue;
      if (e.messages.every((m, j) => m.role === ms[j]!.role && m.content === ms[j]!.content)) {
        best = e;
        if (n === longest) break; // none can be longer (and the newest of the longest wins, as before)
      }
    }
    if (!best) return this.render(ms);
    const rest = ms.slice(best.messages.length + 1);
    const tail = [...this.encode('<|im_end|>\n')];
    for (const m of rest) tail.push(...this.encode(`<|im_start|>${m.role}\n${m.content}<|im_end|>\n`));
    tail.push(...this.encode('<|im_start|>assistant\n'));
    return [...best.ids, ...tail];
  }

  /** A sequence holding the longest cached prefix of `prompt` (at most all but its last token). */
  private admit(prompt: number[]): TinySeq {
    if (this.cacheVersion !== this.lm.llm.adapterVersion) {
      for (const seq of this.cache) this.lm.release(seq);
      this.cache = [];
      this.cacheVersion = this.lm.llm.adapterVersion;
    }
    const cap = prompt.length - 1;
    let best = 0;
    let from = -1;
    for (let c = this.cache.length - 1; c >= 0; c--) {
      const t = this.cache[c]!.tokens;
      const n = Math.min(t.length, cap);
      if (n <= best || t[best] !== prompt[best]) continue; // it cannot match more than `best` tokens
      let i = 0;
      while (i < n && t[i] === prompt[i]) i++;
      if (i > best) [best, from] = [i, c];
    }
    if (from < 0) return this.lm.newSeq();
    const src = this.cache[from]!;
    this.counts.reused += best;
    // the whole cached sequence is the prompt's prefix: extend it in place (it still holds that prefix for others)
    if (best === src.tokens.length) {
      this.cache.splice(from, 1);
      return src;
    }
    return this.lm.fork(src, best);
  }

  private keep(seq: TinySeq): void {
    this.cache.push(seq);
    if (this.cache.length > PREFIX_SEQS) this.lm.release(this.cache.shift()!);
  }

  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(o.signal);
    const t0 = performance.now();
    if ((o.top_p ?? 1) < 1) throw new RangeError('TinyChat: the fast path samples without top-p');
    const prompt = this.promptIds(messages);
    const maxNew = Math.max(
      1,
      Math.min(o.max_tokens ?? LOCAL_CHAT_DEFAULTS.maxTokens, this.capabilities.contextWindow - prompt.length),
    );
    const temperature = o.temperature ?? LOCAL_CHAT_DEFAULTS.temperature;
    const rng = createRng(o.seed ?? 0);
    const stops = this.lm.cfg.eosTokenIds;
    this.counts.calls++;
    const seq = this.admit(prompt);
    const out: number[] = [];
    const logprobs: number[] = [];
    let next = prompt.slice(seq.tokens.length);
    this.counts.computed += next.length;
    while (out.length < maxNew) {
      const hn = this.lm.step([{ seq, ids: next }]);
      const logits = this.lm.logits(hn, this.allowed);
      const u = temperature > 0 ? rng.next() : 0;
      const id = this.sample(logits, temperature, u);
      logprobs.push(this.logprob(logits, id, temperature));
      out.push(id);
      if (stops.includes(id)) break;
      next = [id];
    }
    this.keep(seq);
    const text = out
      .filter((id) => !stops.includes(id))
      .map((id) => this.decode(id))
      .join('');
    const ended = out.length > 0 && stops.includes(out[out.length - 1]!);
    this.seen.push({
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      reply: text,
      ids: [...prompt, ...out],
    });
    if (this.seen.length > CONTINUATIONS) this.seen.shift();
    return {
      text,
      finishReason: ended ? 'stop' : out.length >= maxNew ? 'length' : 'stop',
      usage: { promptTokens: prompt.length, completionTokens: out.length },
      tokens: { prompt, completion: out, logprobs },
      ms: performance.now() - t0,
    };
  }

  /**
   * The token record of `reply` after `messages` as this policy would have written it: its ids and
   * log π under the current adapter at `temperature` (the learned designer's trained edit slot).
   */
  score(
    messages: ChatMessage[],
    reply: string,
    temperature: number,
  ): { ids: number[]; spans: [number, number][]; logprobs: number[] } {
    const prompt = this.promptIds(messages);
    const tail = this.encode(reply);
    const ids = [...prompt, ...tail];
    const positions = tail.map((_, i) => prompt.length - 1 + i);
    return {
      ids,
      spans: [[prompt.length, ids.length]],
      logprobs: policyLogprobs(this.lm, ids, positions, this.allowed, temperature),
    };
  }

  /** sampleTokenU's walk (no filters) over the allowed ids; temperature ≤ 0: argmax. */
  private sample(logits: Float32Array, t: number, u: number): number {
    const ids = this.allowed;
    for (let i = 0; i < logits.length; i++)
      if (logits[i]! - logits[i]! !== 0)
        throw new NonFiniteLogitsError(
          `The tiny model produced a non-finite logit (${logits[i]} for token ${ids[i]})`,
          {
            row: 0,
            id: ids[i]!,
            value: String(logits[i]),
          },
        );
    if (!(t > 0)) {
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
      return ids[best]!;
    }
    let max = -Infinity;
    for (const v of logits) if (v > max) max = v;
    const p = new Float64Array(logits.length);
    let sum = 0;
    for (let i = 0; i < logits.length; i++) sum += p[i] = Math.exp((logits[i]! - max) / t);
    let r = u * sum;
    if (r <= 0) return 0; // the reference's walk stops at id 0 when u·Σ = 0
    for (let i = 0; i < ids.length; i++) {
      r -= p[i]!;
      if (r <= 0) return ids[i]!;
    }
    return this.lm.cfg.vocabSize - 1;
  }

  /** log π(id) under log_softmax(z), z = logits / T (T = 1 when greedy): nllRowCpu's arithmetic, rounded to f32. */
  private logprob(logits: Float32Array, id: number, temperature: number): number {
    const t = temperature > 0 ? temperature : 1;
    const z = t !== 1 ? Float32Array.from(logits, (x) => x * (1 / t)) : logits;
    let m = -Infinity;
    for (let i = 0; i < z.length; i++) m = Math.max(m, z[i]!);
    let s = 0;
    for (let i = 0; i < z.length; i++) s += Math.exp(z[i]! - m);
    const lse = m + Math.log(s);
    return f32(z[this.allowed.indexOf(id)]! - lse);
  }
}
