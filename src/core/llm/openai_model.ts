/**
 * The `openai` backend: any OpenAI-compatible chat-completions server (vLLM,
 * SGLang, llama.cpp server, Ollama, OpenAI itself) through the official SDK.
 * Bounded concurrency, and the SDK's retries with exponential backoff on
 * 408/409/429/5xx and timeouts. Works in Node (CLI) and in the browser (the key
 * then stays in that browser; the UI says so).
 *
 * Every call streams from the server (onToken or not) and reads the reply itself, so every call is
 * bounded the same way (ModelLimits): a total time-out, an idle time-out between streamed lines, and a
 * cap on the reply's length (the rest is cut off with finishReason 'length' and the request aborted).
 * The reply ends at the first chunk with a finish_reason (after a short grace for the usage chunk) or
 * at `[DONE]`, whichever comes first; a stream left open after that is closed, not waited on. An error
 * sent with HTTP 200 (an `error` object as the JSON body or as an SSE event) is a ModelCallError with
 * the server's message, never an empty reply.
 *
 * Hostile or broken servers are bounded too, each with a ModelCallError (kind 'too_large', data.limit
 * naming the bound; all scale with maxReplyChars): one line without a line break, one SSE event (its
 * characters and its `data:` lines: an event never ended by a blank line is not kept whole), the whole
 * streamed body, and the log-probs kept. Every field the call reads (choices[0].delta.content or
 * .message.content, finish_reason, logprobs, usage) is type-checked: null is empty, as the protocol
 * allows; any other wrong type is a ModelCallError (kind 'bad_reply', data.field naming the field).
 *
 * Context window: probe() (called by the CLI and the app before a run, and lazily before the first
 * call) reads `GET {baseURL}/models` and takes `max_model_len` (vLLM, SGLang) or `context_length` of
 * the entry whose id is the model; a declared `contextWindow` caps it; with neither, 4096
 * (DEFAULT_CONTEXT_WINDOW says why). Thinking: with `thinking: 'off'` every request carries
 * `chat_template_kwargs: {enable_thinking: false}` (Qwen3's switch in vLLM, SGLang, llama.cpp server;
 * other templates ignore it); a server that rejects the field gets requests without it from then on.
 * Think blocks are stripped from every reply (thinking.ts).
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { abortError, ModelCallError } from '../errors.ts';
import { Limiter } from '../limiter.ts';
import type {
  ChatMessage,
  ChatModel,
  ChatOptions,
  ChatResult,
  FinishReason,
  ModelCapabilities,
  ModelLimits,
  TokenLogprob,
} from './chat_model.ts';
import { modelLimits, throwIfAborted } from './chat_model.ts';
import { stripThinking, type Thinking } from './thinking.ts';

export interface OpenAIConfig extends Partial<ModelLimits> {
  /** e.g. http://127.0.0.1:8000/v1 (vLLM), http://127.0.0.1:11434/v1 (Ollama) */
  baseURL: string;
  model: string;
  apiKey?: string;
  /**
   * A cap of this client's own on requests in flight. Unset by default: a run's `concurrency` (its one
   * budget of chats in flight, core/spade/loop.ts) already bounds them, for this backend as for every
   * other, so a server sees up to `concurrency` requests and never more. Set it only where no such
   * budget exists (a caller of its own that must spare a small server).
   */
  maxConcurrency?: number;
  /** Retries on 408/409/429/5xx and timeouts, with exponential backoff (default 3). */
  maxRetries?: number;
  /** Per-attempt wait for the reply's headers, ms (default 120 s: a slow server's queue). */
  timeoutMs?: number;
  /**
   * Declared context window: used when the server does not report one (llama.cpp, Ollama), and a cap
   * on the one it reports. Default DEFAULT_CONTEXT_WINDOW.
   */
  contextWindow?: number;
  /** 'off' (default) sends chat_template_kwargs {enable_thinking: false}; 'on' sends nothing. */
  thinking?: Thinking;
  /** Whether the server returns log-probs (vLLM and OpenAI do; llama.cpp and Ollama vary). */
  logprobs?: boolean;
  fetch?: typeof fetch;
}

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  content_filter: 'stop',
};

/** After the finish_reason chunk, wait at most this long for the usage chunk or [DONE]: servers send both at once. */
const FINISH_GRACE_MS = 1000;
/** A line (or a non-streamed JSON body) may hold this many characters per reply character (escapes, log-probs) ... */
const LINE_CHARS_PER_REPLY_CHAR = 8;
/** ... plus this much (the JSON around one chunk). One SSE event may hold as much as one line. */
const LINE_SLACK_CHARS = 1 << 20;
/** `data:` lines in one SSE event (servers send one; SSE allows several). */
const MAX_EVENT_LINES = 1000;
/** A streamed body may hold this many characters per reply character (one chunk of JSON per token) plus LINE_SLACK_CHARS. */
const BODY_CHARS_PER_REPLY_CHAR = 256;
/** The log-probs kept may total this many characters per reply character, counting LOGPROB_ENTRY_CHARS per entry plus its token. */
const LOGPROB_CHARS_PER_REPLY_CHAR = 16;
const LOGPROB_ENTRY_CHARS = 16;

/** One chat.completion.chunk (or a whole chat.completion when a server does not stream): unchecked until read (readChoice). */
interface WireChunk {
  choices?: unknown;
  usage?: unknown;
  error?: unknown;
}

/** Which size bound a reply broke (ModelCallError data.limit). */
type SizeLimit = 'line' | 'event' | 'event_lines' | 'body' | 'logprobs';

/**
 * The window assumed when the server reports none and none is declared: 4096 tokens. Declaring too
 * much is the costly mistake (vLLM rejects the call with HTTP 400; llama.cpp and Ollama silently cut
 * the prompt's start, i.e. the contract), declaring too little only shortens prompts and replies. 4096
 * is the window of every WebLLM record and llama.cpp server's default `-c`, and the loop's prompts
 * are fitted to it (docs/models.md, "Small models").
 */
export const DEFAULT_CONTEXT_WINDOW = 4096;
/** GET /models is a listing: a server that takes longer than this has no answer worth waiting for. */
const PROBE_TIMEOUT_MS = 10_000;

/** Where the context window came from. */
export type WindowSource = 'server' | 'setting' | 'default';

/** The served window of `model` in a GET /models reply (vLLM, SGLang: max_model_len; others: context_length). */
export function windowFromModelList(list: unknown, model: string): number | null {
  const data = (list as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return null;
  const entry = data.find((e) => (e as { id?: unknown } | null)?.id === model) as Record<string, unknown> | undefined;
  for (const key of ['max_model_len', 'context_length']) {
    const v = entry?.[key];
    if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
  }
  return null;
}

/** Why a call was stopped from our side. */
type StopCause = 'total' | 'idle' | 'grace' | 'capped' | null;

export class OpenAIChatModel implements ChatModel {
  readonly backend = 'openai';
  readonly model: string;
  readonly capabilities: ModelCapabilities;
  readonly limits: ModelLimits;
  private readonly client: OpenAI;
  /** The client's own cap (config.maxConcurrency), or null: the caller's budget bounds the calls. */
  private readonly limiter: Limiter | null;

  constructor(readonly config: OpenAIConfig) {
    if (!/^https?:\/\//.test(config.baseURL)) {
      throw new ModelCallError(
        `The base URL must start with http:// or https://, e.g. http://127.0.0.1:8000/v1; got "${config.baseURL}".`,
      );
    }
    if (!config.model.trim())
      throw new ModelCallError('Name the model to use (the server\'s model id, e.g. "Qwen/Qwen2.5-1.5B-Instruct").');
    this.model = config.model;
    this.capabilities = {
      streaming: true,
      logprobs: config.logprobs ?? false,
      trainable: false,
      contextWindow: config.contextWindow ?? DEFAULT_CONTEXT_WINDOW,
    };
    const d = modelLimits();
    this.limits = {
      callTimeoutMs: config.callTimeoutMs ?? d.callTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs ?? d.idleTimeoutMs,
      maxReplyChars: config.maxReplyChars ?? d.maxReplyChars,
    };
    this.client = new OpenAI({
      baseURL: config.baseURL.replace(/\/+$/, ''),
      apiKey: config.apiKey || 'not-needed',
      maxRetries: config.maxRetries ?? 3,
      timeout: config.timeoutMs ?? 120_000,
      dangerouslyAllowBrowser: true,
      ...(config.fetch ? { fetch: config.fetch } : {}),
    });
    this.limiter = config.maxConcurrency === undefined ? null : new Limiter(Math.max(1, config.maxConcurrency));
  }

  /** Where capabilities.contextWindow came from (after probe(): 'server' when the server reported it). */
  windowSource: WindowSource = 'default';
  private probing: Promise<number> | null = null;
  /** The server answered 400/422 naming chat_template_kwargs: stop sending it. */
  private kwargsRefused = false;

  /**
   * Learn the context window from GET {baseURL}/models (once; later calls share the answer). Never
   * throws: an unreachable server or one without the endpoint leaves the declared or default window.
   */
  probe(): Promise<number> {
    this.probing ??= (async () => {
      const declared = this.config.contextWindow;
      let served: number | null = null;
      try {
        const page = await this.client.models.list({ timeout: PROBE_TIMEOUT_MS, maxRetries: 0 });
        served = windowFromModelList({ data: page.data }, this.model);
      } catch {
        // no /models (or not reachable yet): keep the declared window; the chat call will say what is wrong
      }
      const window = served !== null ? Math.min(served, declared ?? served) : (declared ?? DEFAULT_CONTEXT_WINDOW);
      this.windowSource = served !== null ? 'server' : declared !== undefined ? 'setting' : 'default';
      this.capabilities.contextWindow = window;
      return window;
    })();
    return this.probing;
  }

  chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    const send = async () => {
      await this.probe();
      const kwargs = this.sendsKwargs();
      try {
        return await this.call(messages, options);
      } catch (err) {
        if (!kwargs || !refusesKwargs(err)) throw err;
        this.kwargsRefused = true;
        return this.call(messages, options);
      }
    };
    return this.limiter ? this.limiter.run(send) : send();
  }

  private sendsKwargs(): boolean {
    return (this.config.thinking ?? 'off') === 'off' && !this.kwargsRefused;
  }

  private async call(messages: ChatMessage[], o: ChatOptions): Promise<ChatResult> {
    throwIfAborted(o.signal);
    const t0 = performance.now();
    const wantLogprobs = Boolean(o.logprobs && this.capabilities.logprobs);
    const body = {
      model: this.model,
      messages: messages as OpenAI.Chat.Completions.ChatCompletionMessageParam[],
      ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
      ...(o.top_p !== undefined ? { top_p: o.top_p } : {}),
      ...(o.max_tokens !== undefined ? { max_tokens: o.max_tokens } : {}),
      ...(o.stop?.length ? { stop: o.stop } : {}),
      ...(o.seed !== undefined ? { seed: o.seed } : {}),
      ...(o.tools?.length ? { tools: o.tools as OpenAI.Chat.Completions.ChatCompletionTool[] } : {}),
      ...(wantLogprobs ? { logprobs: true } : {}),
      stream: true as const,
      stream_options: { include_usage: true },
      // not in the SDK's types; it sends extra fields as they are
      ...(this.sendsKwargs() ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    };
    // One controller per call: the caller's signal, both timers and the end of the reply all abort it,
    // which cancels the request (or the retry wait) and closes the connection.
    const ac = new AbortController();
    let cause: StopCause = null;
    const stop = (why: Exclude<StopCause, null>) => {
      cause ??= why;
      ac.abort();
    };
    const onCallerAbort = () => ac.abort(o.signal?.reason);
    o.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const total = setTimeout(() => stop('total'), this.limits.callTimeoutMs);
    // The idle (or grace) deadline moves on every line; its one timer is re-armed only when it fires
    // before the deadline or a nearer deadline comes, so a flood of tiny lines costs no timer each.
    let idle: ReturnType<typeof setTimeout> | undefined;
    let armedAt = 0;
    let idleAt = 0;
    let idleWhy: 'idle' | 'grace' = 'idle';
    const arm = (at: number) => {
      clearTimeout(idle);
      armedAt = at;
      idle = setTimeout(onIdle, Math.max(0, at - performance.now()));
    };
    const onIdle = () => {
      if (performance.now() < idleAt) arm(idleAt);
      else stop(idleWhy);
    };
    const touch = (ms = this.limits.idleTimeoutMs, why: 'idle' | 'grace' = 'idle') => {
      idleAt = performance.now() + ms;
      idleWhy = why;
      if (idle === undefined || idleAt < armedAt) arm(idleAt);
    };
    try {
      // The wait for headers is the SDK's (timeoutMs per attempt, with retries); idle counts from them.
      const response = await this.client.chat.completions.create(body, { signal: ac.signal }).asResponse();
      touch();
      const reader = new ReplyReader(response, ac.signal, this.limits.maxReplyChars, this.config.baseURL, () => cause);
      const isJson = (response.headers.get('content-type') ?? '').includes('application/json');
      const r = isJson
        ? this.fromJson(await reader.all(touch), o, wantLogprobs)
        : await this.fromStream(reader, o, wantLogprobs, touch, stop);
      return { ...r, text: stripThinking(r.text), ms: performance.now() - t0 };
    } catch (err) {
      throw this.mapError(err, o.signal, cause);
    } finally {
      clearTimeout(total);
      clearTimeout(idle);
      o.signal?.removeEventListener('abort', onCallerAbort);
      if (!ac.signal.aborted) ac.abort(); // closes a stream the server left open
    }
  }

  /** Read SSE events until the reply ends, the cap is reached or the stream closes. */
  private async fromStream(
    reader: ReplyReader,
    o: ChatOptions,
    wantLogprobs: boolean,
    touch: (ms?: number, why?: 'idle' | 'grace') => void,
    stop: (why: 'capped') => void,
  ): Promise<Omit<ChatResult, 'ms'>> {
    const max = this.limits.maxReplyChars;
    let text = '';
    let finish: FinishReason | null = null;
    let usage: ChatResult['usage'] | null = null;
    let pieces = 0;
    const logprobs: TokenLogprob[] = [];
    let logprobChars = 0;
    const maxLogprobChars = max * LOGPROB_CHARS_PER_REPLY_CHAR + LINE_SLACK_CHARS;
    const where = this.config.baseURL;
    let data: string[] = [];
    let dataChars = 0;
    let event = '';
    const result = (): Omit<ChatResult, 'ms'> => ({
      text,
      finishReason: finish ?? 'stop',
      // Without a usage chunk, one streamed piece ≈ one token.
      usage: usage ?? { promptTokens: 0, completionTokens: pieces },
      ...(wantLogprobs ? { logprobs } : {}),
    });
    // Returns true when the reply is over.
    const dispatch = (): boolean => {
      const payload = data.join('\n');
      const type = event;
      data = [];
      dataChars = 0;
      event = '';
      if (!payload) return false;
      if (payload === '[DONE]') return true;
      const chunk = this.parseJson(payload);
      if (type === 'error' || (chunk.error !== undefined && chunk.error !== null))
        throw this.serverError(chunk.error ?? chunk);
      const choice = readChoice(chunk, 'delta', wantLogprobs, where);
      const delta = choice?.content ?? '';
      if (delta && finish === null) {
        pieces++;
        const room = max - text.length;
        const piece = delta.length > room ? delta.slice(0, room) : delta;
        text += piece;
        if (piece) o.onToken?.(piece);
        if (delta.length > room) {
          finish = 'length';
          stop('capped');
          return true;
        }
      }
      for (const lp of choice?.logprobs ?? []) {
        logprobChars += LOGPROB_ENTRY_CHARS + lp.token.length;
        if (logprobChars > maxLogprobChars)
          throw tooLarge(
            where,
            'logprobs',
            `more log-probs (choices[0].logprobs.content) than a reply of ${max} characters has`,
          );
        logprobs.push(lp);
      }
      usage = readUsage(chunk.usage, where) ?? usage;
      if (choice?.finishReason && finish === null) {
        finish = finishReason(choice.finishReason);
        touch(Math.min(FINISH_GRACE_MS, this.limits.idleTimeoutMs), 'grace');
      }
      return finish !== null && usage !== null;
    };
    for (;;) {
      // A whole line restarts the idle timer; lines left in the piece already read came at the same time.
      let line: string | null | undefined = reader.buffered();
      if (line === undefined) {
        line = await reader.line();
        if (line === null) break; // the server closed the stream (or the grace after finish_reason ran out)
        if (finish === null) touch();
      }
      if (line === '') {
        if (!data.length)
          event = ''; // an event with no data: nothing to dispatch
        else if (dispatch()) break;
      } else if (line.startsWith('data:')) {
        const d = line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
        data.push(d);
        dataChars += d.length + 1;
        if (dataChars > reader.maxLine)
          throw tooLarge(
            where,
            'event',
            `one SSE event of over ${reader.maxLine} characters (data: lines never ended by a blank line)`,
          );
        if (data.length > MAX_EVENT_LINES)
          throw tooLarge(
            where,
            'event_lines',
            `one SSE event of over ${MAX_EVENT_LINES} data: lines (never ended by a blank line)`,
          );
      } else if (line.startsWith('event:')) event = line.slice(6).trim();
      // comments (":") and other fields (id:, retry:) are ignored
    }
    if (finish === null && data.length) dispatch(); // a last event without its blank line
    return result();
  }

  /** A whole JSON body: a server that ignored stream: true, or an error sent with HTTP 200. */
  private fromJson(raw: string, o: ChatOptions, wantLogprobs: boolean): Omit<ChatResult, 'ms'> {
    const r = this.parseJson(raw);
    if (r.error !== undefined && r.error !== null) throw this.serverError(r.error);
    const choice = readChoice(r, 'message', wantLogprobs, this.config.baseURL);
    if (!choice)
      throw new ModelCallError(`The server at ${this.config.baseURL} returned no choices.`, { kind: 'bad_reply' });
    let text = choice.content;
    let finish = finishReason(choice.finishReason ?? 'stop');
    if (text.length > this.limits.maxReplyChars) {
      text = text.slice(0, this.limits.maxReplyChars);
      finish = 'length';
    }
    if (text) o.onToken?.(text);
    return {
      text,
      finishReason: finish,
      usage: readUsage(r.usage, this.config.baseURL) ?? { promptTokens: 0, completionTokens: 0 },
      ...(wantLogprobs ? { logprobs: choice.logprobs } : {}),
    };
  }

  private parseJson(raw: string): WireChunk {
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      throw new ModelCallError(
        `The server at ${this.config.baseURL} sent a reply that is not JSON: ${JSON.stringify(raw.slice(0, 200))}. Is the URL an OpenAI-compatible /v1 endpoint?`,
        { kind: 'bad_reply' },
      );
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      throw new ModelCallError(
        `The server at ${this.config.baseURL} sent ${JSON.stringify(raw.slice(0, 200))}, not a chat completion.`,
        {
          kind: 'bad_reply',
        },
      );
    return v as WireChunk;
  }

  private serverError(error: unknown): ModelCallError {
    const e = error as { message?: unknown; code?: unknown; type?: unknown } | string | null;
    const message =
      typeof e === 'string' ? e : typeof e?.message === 'string' ? e.message : preview(error ?? null, 300);
    return new ModelCallError(
      `The server at ${this.config.baseURL} answered with an error: ${message.slice(0, 500)}. See the server's logs; check the model name "${this.model}" and the request's size.`,
      { kind: 'server', status: 200, serverMessage: message.slice(0, 2000) },
    );
  }

  private mapError(err: unknown, signal: AbortSignal | undefined, cause: StopCause): Error {
    const where = this.config.baseURL;
    if (cause === 'total') {
      return new ModelCallError(
        `The call to ${where} did not finish within ${this.limits.callTimeoutMs / 1000} s (modelCallTimeoutS), so it was stopped. Raise modelCallTimeoutS for long replies, or lower max_tokens.`,
        { kind: 'timeout', timeout: 'total' },
      );
    }
    if (cause === 'idle') {
      return new ModelCallError(
        `The server at ${where} sent nothing for ${this.limits.idleTimeoutMs / 1000} s (modelIdleTimeoutS) in the middle of a reply, so the call was stopped. Is it overloaded or stuck? Raise modelIdleTimeoutS for a slow server.`,
        { kind: 'timeout', timeout: 'idle' },
      );
    }
    if (err instanceof APIUserAbortError || signal?.aborted) return abortError(signal, 'The model call was cancelled.');
    if (err instanceof APIConnectionTimeoutError) {
      return new ModelCallError(
        `The server at ${where} did not answer within ${(this.config.timeoutMs ?? 120_000) / 1000} s (after retries). Is it overloaded? Try a smaller max_tokens or a longer timeout.`,
        { kind: 'timeout', timeout: 'headers' },
      );
    }
    if (err instanceof APIConnectionError) {
      return new ModelCallError(
        `Could not reach ${where} (${err.message}). Check that the server is running and the URL ends in /v1; in the browser the server must allow CORS.`,
        { kind: 'connection' },
      );
    }
    if (err instanceof APIError) {
      const status = err.status ?? 0;
      const hint =
        status === 401 || status === 403
          ? 'Check the API key.'
          : status === 404
            ? `Check the model name "${this.model}" and that the URL ends in /v1.`
            : status === 429
              ? 'The server is rate-limiting; lower the concurrency or wait.'
              : status >= 500
                ? 'The server failed; see its logs.'
                : 'The request was rejected.';
      return new ModelCallError(`The server at ${where} answered ${status}: ${err.message.slice(0, 300)}. ${hint}`, {
        status,
        kind: 'http',
      });
    }
    if (err instanceof ModelCallError) return err;
    return new ModelCallError(`The call to ${where} failed: ${(err as Error)?.message ?? String(err)}`, {
      kind: 'connection',
    });
  }
}

/** A 400/422 whose message names chat_template_kwargs: a server (or hosted API) that does not take the field. */
function refusesKwargs(err: unknown): boolean {
  const status = (err as ModelCallError | null)?.data?.status;
  return (
    err instanceof ModelCallError &&
    (status === 400 || status === 422) &&
    /chat_template_kwargs/.test(`${err.message} ${String(err.data.serverMessage ?? '')}`)
  );
}

/**
 * Reads a response body as text lines, bounded: a read ends as soon as `signal` aborts (even if the
 * underlying fetch ignores it), and a line longer than the cap, or a body longer than its cap, is an
 * error, not a growing buffer. Lines are found with indexOf from where the last search stopped, so
 * reading is linear in the body.
 */
class ReplyReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array> | null;
  private readonly decoder = new TextDecoder();
  private readonly aborted: Promise<null>;
  /** The last piece read, and where the next line in it starts. */
  private buf = '';
  private pos = 0;
  /** The start of a line that spans pieces. */
  private partial: string[] = [];
  private partialChars = 0;
  private ended = false;
  /** The longest line (and SSE event, and JSON body), characters. */
  readonly maxLine: number;
  /** The longest body, characters, and how much has been read. */
  private readonly maxBody: number;
  private bodyChars = 0;

  constructor(
    response: Response,
    private readonly signal: AbortSignal,
    maxReplyChars: number,
    private readonly where: string,
    private readonly cause: () => StopCause,
  ) {
    this.reader = response.body?.getReader() ?? null;
    this.maxLine = maxReplyChars * LINE_CHARS_PER_REPLY_CHAR + LINE_SLACK_CHARS;
    this.maxBody = maxReplyChars * BODY_CHARS_PER_REPLY_CHAR + LINE_SLACK_CHARS;
    this.aborted = new Promise<null>((resolve) => {
      if (signal.aborted) resolve(null);
      else signal.addEventListener('abort', () => resolve(null), { once: true });
    });
    signal.addEventListener('abort', () => void this.reader?.cancel().catch(() => undefined), { once: true });
  }

  /** The next piece of the body; null at its end or once the call is stopped. */
  private async chunk(): Promise<string | null> {
    if (this.ended || !this.reader) return null;
    // a read the abort itself broke (the SDK's fetch errors its body stream) is the same end as the abort
    const read = this.reader.read().catch((err: unknown) => {
      if (this.signal.aborted) return null;
      throw err;
    });
    const r = await Promise.race([read, this.aborted]);
    if (r === null || this.signal.aborted) return this.end();
    const text = r.done ? this.decoder.decode() : this.decoder.decode(r.value, { stream: true });
    if (r.done) this.ended = true;
    this.bodyChars += text.length;
    if (this.bodyChars > this.maxBody)
      this.fail('body', `over ${this.maxBody} characters in one reply without finishing it`);
    return text;
  }

  private end(): null {
    this.ended = true;
    const c = this.cause();
    if (c === 'grace' || c === 'capped') return null; // our own end of the reply
    throw abortError(this.signal, 'The model call was stopped.'); // time-outs and the caller's abort: mapped by the caller
  }

  /** The next line if the last piece read holds it whole (no waiting), else undefined. */
  buffered(): string | undefined {
    const nl = this.buf.indexOf('\n', this.pos);
    if (nl < 0) return undefined;
    let whole = this.buf.slice(this.pos, nl);
    if (this.partial.length) {
      whole = this.partial.join('') + whole;
      this.partial = [];
      this.partialChars = 0;
    }
    this.pos = nl + 1;
    if (whole.length > this.maxLine) this.tooLong();
    return whole.charCodeAt(whole.length - 1) === 13 ? whole.slice(0, -1) : whole;
  }

  /** The next line without its line break ("\n" or "\r\n"), or null at the end of the body. */
  async line(): Promise<string | null> {
    for (;;) {
      const whole = this.buffered();
      if (whole !== undefined) return whole;
      // No line break in what is left: keep it aside (no re-scan) and read on.
      if (this.pos < this.buf.length) {
        const rest = this.buf.slice(this.pos);
        this.partial.push(rest);
        this.partialChars += rest.length;
        if (this.partialChars > this.maxLine) this.tooLong();
      }
      this.buf = '';
      this.pos = 0;
      const more = await this.chunk();
      if (more === null || (this.ended && more === '')) {
        if (!this.partialChars) return null;
        const last = this.partial.join('');
        this.partial = [];
        this.partialChars = 0;
        return last;
      }
      this.buf = more;
    }
  }

  /** The whole body (a JSON reply), resetting the idle timer on each piece. */
  async all(touch: () => void): Promise<string> {
    const parts: string[] = [];
    let n = 0;
    for (;;) {
      const more = await this.chunk();
      if (more === null) break;
      touch();
      parts.push(more);
      n += more.length;
      if (n > this.maxLine) this.tooLong();
      if (this.ended) break;
    }
    return parts.join('');
  }

  private tooLong(): never {
    this.fail('line', `over ${this.maxLine} characters without a line break (or as one JSON reply)`);
  }

  private fail(limit: SizeLimit, what: string): never {
    void this.reader?.cancel().catch(() => undefined);
    throw tooLarge(this.where, limit, what);
  }
}

/** A reply over one of its size bounds: what the server sent, and what to do. */
function tooLarge(where: string, limit: SizeLimit, what: string): ModelCallError {
  return new ModelCallError(
    `The server at ${where} sent ${what}; the reply was dropped. Is the URL an OpenAI-compatible /v1 endpoint? Raise maxReplyChars if replies this long are expected (every size bound on a reply scales with it).`,
    { kind: 'too_large', limit },
  );
}

/** A field of the reply with a type the protocol does not allow, named as the server sent it. */
function badField(where: string, field: string, value: unknown, expected: string): ModelCallError {
  return new ModelCallError(
    `The server at ${where} sent ${field} = ${preview(value, 80)}, where the chat-completions protocol has ${expected}; the reply was dropped. Is it an OpenAI-compatible server? See its logs.`,
    { kind: 'bad_reply', field },
  );
}

/** A value from JSON.parse as JSON, cut to `max` characters; one nested too deep to print is described instead. */
function preview(value: unknown, max: number): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? String(value);
  } catch {
    s = `(${Array.isArray(value) ? 'an array' : `a ${typeof value}`} nested too deep to print)`;
  }
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isAbsent = (v: unknown): v is null | undefined => v === null || v === undefined;

/** What a call reads from choices[0] of one chunk or whole reply. */
interface ReadChoice {
  content: string;
  finishReason: string | null;
  logprobs: TokenLogprob[];
}

/**
 * choices[0] of a chunk (`key` 'delta') or a whole reply ('message'), type-checked: absent or null is
 * empty; any other wrong type is a ModelCallError naming the field. Log-probs are read only when wanted.
 * Null when there is no choice (a usage-only chunk).
 */
function readChoice(
  chunk: WireChunk,
  key: 'delta' | 'message',
  wantLogprobs: boolean,
  where: string,
): ReadChoice | null {
  const choices = chunk.choices;
  if (isAbsent(choices)) return null;
  if (!Array.isArray(choices)) throw badField(where, 'choices', choices, 'an array');
  const c: unknown = choices[0];
  if (isAbsent(c)) return null;
  if (!isRecord(c)) throw badField(where, 'choices[0]', c, 'an object');
  const body = c[key];
  if (!isAbsent(body) && !isRecord(body)) throw badField(where, `choices[0].${key}`, body, 'an object');
  const content = body?.content;
  if (!isAbsent(content) && typeof content !== 'string')
    throw badField(where, `choices[0].${key}.content`, content, 'a string or null');
  const finish = c.finish_reason;
  if (!isAbsent(finish) && typeof finish !== 'string')
    throw badField(where, 'choices[0].finish_reason', finish, 'a string or null');
  return {
    content: content ?? '',
    finishReason: finish ?? null,
    logprobs: wantLogprobs ? readLogprobs(c.logprobs, where) : [],
  };
}

/** choices[0].logprobs.content as {token, logprob} entries (absent or null: none). */
function readLogprobs(logprobs: unknown, where: string): TokenLogprob[] {
  if (isAbsent(logprobs)) return [];
  if (!isRecord(logprobs)) throw badField(where, 'choices[0].logprobs', logprobs, 'an object or null');
  const content = logprobs.content;
  if (isAbsent(content)) return [];
  if (!Array.isArray(content)) throw badField(where, 'choices[0].logprobs.content', content, 'an array or null');
  return content.map((lp: unknown, i) => {
    const field = `choices[0].logprobs.content[${i}]`;
    if (!isRecord(lp)) throw badField(where, field, lp, 'an object');
    if (typeof lp.token !== 'string') throw badField(where, `${field}.token`, lp.token, 'a string');
    if (typeof lp.logprob !== 'number') throw badField(where, `${field}.logprob`, lp.logprob, 'a number');
    return { token: lp.token, logprob: lp.logprob };
  });
}

/** The usage object (absent or null: null); a count that is not a whole number ≥ 0 is a ModelCallError. */
function readUsage(usage: unknown, where: string): ChatResult['usage'] | null {
  if (isAbsent(usage)) return null;
  if (!isRecord(usage)) throw badField(where, 'usage', usage, 'an object or null');
  const count = (key: 'prompt_tokens' | 'completion_tokens'): number => {
    const v = usage[key];
    if (isAbsent(v)) return 0;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      throw badField(where, `usage.${key}`, v, 'a whole number ≥ 0');
    return v;
  };
  return { promptTokens: count('prompt_tokens'), completionTokens: count('completion_tokens') };
}

/** finish_reason in our terms; reasons we do not know (and names like "__proto__") are 'stop'. */
function finishReason(reason: string): FinishReason {
  return Object.hasOwn(FINISH, reason) ? FINISH[reason]! : 'stop';
}
