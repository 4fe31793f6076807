/**
 * The `replay` backend and the recorder.
 *
 * Transcript format (JSONL, one object per line; docs/models.md):
 *   {"format":"spade-replay","version":1,"backend":"openai","model":"..."}        ← header, first line
 *   {"request":{"messages":[...],"options":{...}},"response":{"text":"...","finishReason":"stop","usage":{...}}}
 * A request is matched by its key (the messages plus the sampling options that
 * change the reply). The k-th identical request gets the k-th recorded reply, so
 * replays are exact and deterministic. Streaming is re-enacted word by word,
 * optionally paced at a given tokens/s (used by `spade bench loop`).
 */
import { ReplayMismatchError } from '../errors.ts';
import { hashSeed } from '../rng.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult, ModelCapabilities } from './chat_model.ts';
import { throwIfAborted, WrappedChatModel } from './chat_model.ts';

const REPLAY_FORMAT = 'spade-replay';

export interface ReplayHeader {
  format: typeof REPLAY_FORMAT;
  version: 1;
  backend: string;
  model: string;
  /** The recorded model's context window: a replay budgets its calls the same way (absent in old files). */
  contextWindow?: number;
  /**
   * The recorded run's settings (a RunSpec, validated by core/spade/run_file.ts parseRunSpec) and
   * cycle count: a replay takes them from here, so it asks exactly the recorded requests.
   */
  run?: { spec: unknown; cycles: number };
}

export interface ReplayEntry {
  request: { messages: ChatMessage[]; options: Record<string, unknown> };
  response: Omit<ChatResult, 'ms'>;
}

/** The options that change a reply; everything else (signal, callbacks) is ignored. */
function keyOptions(o: ChatOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['temperature', 'top_p', 'max_tokens', 'stop', 'seed', 'tools', 'logprobs'] as const) {
    if (o[k] !== undefined) out[k] = o[k];
  }
  return out;
}

function requestKey(messages: ChatMessage[], options: Record<string, unknown>): string {
  const canon = JSON.stringify({
    m: messages.map((m) => [m.role, m.content, m.name ?? null, m.tool_call_id ?? null]),
    o: options,
  });
  return `${hashSeed(canon).toString(36)}.${canon.length.toString(36)}`;
}

export function parseReplay(text: string): { header: ReplayHeader; entries: ReplayEntry[] } {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new ReplayMismatchError('The transcript is empty.');
  let header: ReplayHeader;
  try {
    header = JSON.parse(lines[0]!) as ReplayHeader;
  } catch {
    throw new ReplayMismatchError(
      'Line 1 of the transcript is not JSON; expected the {"format":"spade-replay",...} header.',
    );
  }
  if (header.format !== REPLAY_FORMAT || header.version !== 1) {
    throw new ReplayMismatchError(`Line 1 must be the header {"format":"${REPLAY_FORMAT}","version":1,...}.`);
  }
  const entries = lines.slice(1).map((l, i) => {
    let e: ReplayEntry;
    try {
      e = JSON.parse(l) as ReplayEntry;
    } catch {
      throw new ReplayMismatchError(`Line ${i + 2} of the transcript is not JSON.`);
    }
    if (!Array.isArray(e?.request?.messages) || typeof e?.response?.text !== 'string') {
      throw new ReplayMismatchError(`Line ${i + 2} must have request.messages (array) and response.text (string).`);
    }
    return e;
  });
  return { header, entries };
}

export interface ReplayOptions {
  /** Pace streamed replies at this many tokens (words) per second; 0 = instant. */
  tokensPerSecond?: number;
  contextWindow?: number;
}

export class ReplayChatModel implements ChatModel {
  readonly backend = 'replay';
  readonly model: string;
  readonly capabilities: ModelCapabilities;
  /** The transcript's header line (with the recorded run's settings, when it has them). */
  readonly header: ReplayHeader;
  private readonly queues = new Map<string, Omit<ChatResult, 'ms'>[]>();
  private readonly total: number;

  constructor(
    text: string,
    private readonly opts: ReplayOptions = {},
  ) {
    const { header, entries } = parseReplay(text);
    this.header = header;
    this.model = `${header.backend}:${header.model}`;
    this.total = entries.length;
    this.capabilities = {
      streaming: true,
      logprobs: entries.some((e) => Array.isArray(e.response.logprobs)),
      trainable: false,
      contextWindow: opts.contextWindow ?? header.contextWindow ?? 8192,
    };
    for (const e of entries) {
      const k = requestKey(e.request.messages, e.request.options ?? {});
      const q = this.queues.get(k) ?? [];
      q.push(e.response);
      this.queues.set(k, q);
    }
  }

  /** Replies not yet consumed. */
  remaining(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  async chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(options.signal);
    const t0 = performance.now();
    const k = requestKey(messages, keyOptions(options));
    const r = this.queues.get(k)?.shift();
    if (!r) {
      const last = messages[messages.length - 1];
      throw new ReplayMismatchError(
        `No recorded reply for this request (last ${last?.role ?? '?'} message: ${JSON.stringify((last?.content ?? '').slice(0, 80))}); ` +
          `the transcript has ${this.total} replies, ${this.remaining()} unused. A replay only answers the exact requests it recorded: same prompts, same seeds, same settings.`,
        { key: k },
      );
    }
    if (options.onToken) {
      const pieces = r.text.match(/\s*\S+|\s+$/g) ?? [];
      const delay = this.opts.tokensPerSecond ? 1000 / this.opts.tokensPerSecond : 0;
      for (const p of pieces) {
        throwIfAborted(options.signal);
        if (delay) await new Promise((res) => setTimeout(res, delay));
        options.onToken(p);
      }
    }
    return { ...structuredClone(r), ms: performance.now() - t0 };
  }
}

/** Wraps any model and records every request/response pair in the replay format. */
export class RecordingChatModel extends WrappedChatModel {
  /**
   * Not passed through: a replay of this transcript has no tokenizer and budgets each prompt from
   * the estimate (budget.ts), so the recorded run must too, or its clamped max_tokens (part of each
   * request's key) would not be the ones the replay asks for.
   */
  override readonly countTokens: undefined = undefined;
  readonly entries: ReplayEntry[] = [];
  constructor(
    inner: ChatModel,
    private readonly sink?: (line: string) => void,
    /** The run being recorded (its spec and cycles), written into the header for replays. */
    private readonly run?: ReplayHeader['run'],
  ) {
    super(inner);
    sink?.(JSON.stringify(this.header()));
  }
  header(): ReplayHeader {
    return {
      format: REPLAY_FORMAT,
      version: 1,
      backend: this.inner.backend,
      model: this.inner.model,
      contextWindow: this.inner.capabilities.contextWindow,
      ...(this.run ? { run: this.run } : {}),
    };
  }
  override async chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    const r = await this.inner.chat(messages, options);
    const { ms: _ms, ...response } = r;
    const entry: ReplayEntry = {
      request: { messages: structuredClone(messages), options: keyOptions(options) },
      response,
    };
    this.entries.push(entry);
    this.sink?.(JSON.stringify(entry));
    return r;
  }
  toJsonl(): string {
    return [this.header(), ...this.entries].map((e) => JSON.stringify(e)).join('\n') + '\n';
  }
}
