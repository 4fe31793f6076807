/**
 * The `openai` backend: any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp
 * server, Ollama, OpenAI itself) through the official SDK, with its retries and exponential backoff
 * on 408/409/429/5xx and timeouts. Requests in flight are the run's budget (`concurrency`), not this
 * client's. Works in Node (CLI) and in the browser (the key then stays in that browser; the UI says so).
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
 * Think blocks are stripped from every reply (thinking.ts). The reply is read off the wire by
 * openai_wire.ts (bounded lines, type-checked fields).
 *
 * The SDK itself is imported on the first request (client()), not with this module: the app's first
 * screen does not carry it, and a run without this backend never loads it.
 */
import type OpenAI from 'openai';
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
import {
  finishReason,
  LINE_SLACK_CHARS,
  LOGPROB_CHARS_PER_REPLY_CHAR,
  LOGPROB_ENTRY_CHARS,
  MAX_EVENT_LINES,
  preview,
  readChoice,
  readUsage,
  ReplyReader,
  tooLarge,
  type StopCause,
  type WireChunk,
} from './openai_wire.ts';
import { stripThinking, type Thinking } from './thinking.ts';
import { credentialsInUrlMessage, redactUrlCredentials, urlWithCredentials } from './base_url.ts';

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

/** After the finish_reason chunk, wait at most this long for the usage chunk or [DONE]: servers send both at once. */
const FINISH_GRACE_MS = 1000;

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

export class OpenAIChatModel implements ChatModel {
  readonly backend = 'openai';
  readonly model: string;
  readonly capabilities: ModelCapabilities;
  readonly limits: ModelLimits;
  /** The SDK's client, made on the first request (the SDK's module is loaded then). */
  private clientMade: Promise<OpenAI> | null = null;
  /** The SDK's module once loaded: its error classes name what failed. */
  private sdk: typeof import('openai') | null = null;
  /** The client's own cap (config.maxConcurrency), or null: the caller's budget bounds the calls. */
  private readonly limiter: Limiter | null;

  constructor(readonly config: OpenAIConfig) {
    if (!/^https?:\/\//.test(config.baseURL)) {
      throw new ModelCallError(
        `The base URL must start with http:// or https://, e.g. http://127.0.0.1:8000/v1; got "${redactUrlCredentials(config.baseURL)}".`,
      );
    }
    // credentials in the URL would reach every error message, and so the run's records: refused
    const withCredentials = urlWithCredentials(config.baseURL);
    if (withCredentials)
      throw new ModelCallError(credentialsInUrlMessage(withCredentials, 'the API key'), { kind: 'credentials_in_url' });
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
    this.limiter = config.maxConcurrency === undefined ? null : new Limiter(Math.max(1, config.maxConcurrency));
  }

  /** The SDK's client for this server (its module imported the first time). */
  private client(): Promise<OpenAI> {
    this.clientMade ??= import('openai').then((sdk) => {
      this.sdk = sdk;
      const config = this.config;
      return new sdk.default({
        baseURL: config.baseURL.replace(/\/+$/, ''),
        apiKey: config.apiKey || 'not-needed',
        maxRetries: config.maxRetries ?? 3,
        timeout: config.timeoutMs ?? 120_000,
        dangerouslyAllowBrowser: true,
        ...(config.fetch ? { fetch: config.fetch } : {}),
      });
    });
    // a module that failed to load (offline, or a newer build replaced its chunk) is tried again next call
    this.clientMade.catch(() => (this.clientMade = null));
    return this.clientMade;
  }

  /** Where capabilities.contextWindow came from (after probe(): 'server' when the server reported it). */
  windowSource: WindowSource = 'default';
  /** The window the server reported (after probe()), or null: none reported, or not probed yet. */
  servedWindow: number | null = null;
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
        const page = await (await this.client()).models.list({ timeout: PROBE_TIMEOUT_MS, maxRetries: 0 });
        served = windowFromModelList({ data: page.data }, this.model);
      } catch {
        // no /models (or not reachable yet): keep the declared window; the chat call will say what is wrong
      }
      const window = served !== null ? Math.min(served, declared ?? served) : (declared ?? DEFAULT_CONTEXT_WINDOW);
      this.windowSource =
        served !== null && (declared === undefined || declared >= served)
          ? 'server'
          : declared !== undefined
            ? 'setting'
            : 'default';
      this.servedWindow = served;
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
      const client = await this.client();
      const response = await client.chat.completions.create(body, { signal: ac.signal }).asResponse();
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
    const sdk = this.sdk; // loaded: the SDK's errors come only from calls it made
    if ((sdk && err instanceof sdk.APIUserAbortError) || signal?.aborted)
      return abortError(signal, 'The model call was cancelled.');
    if (sdk && err instanceof sdk.APIConnectionTimeoutError) {
      return new ModelCallError(
        `The server at ${where} did not answer within ${(this.config.timeoutMs ?? 120_000) / 1000} s (after retries). Is it overloaded? Try a smaller max_tokens or a longer timeout.`,
        { kind: 'timeout', timeout: 'headers' },
      );
    }
    if (sdk && err instanceof sdk.APIConnectionError) {
      return new ModelCallError(
        `Could not reach ${where} (${err.message}). Check that the server is running and the URL ends in /v1; in the browser the server must allow CORS.`,
        { kind: 'connection' },
      );
    }
    if (sdk && err instanceof sdk.APIError) {
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
    if (!sdk)
      return new ModelCallError(
        `Could not load the OpenAI client itself (${(err as Error)?.message ?? String(err)}), so ${where} was not called. Reload the page (a newer version may have replaced this one), or check this site's connection.`,
        { kind: 'connection' },
      );
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
