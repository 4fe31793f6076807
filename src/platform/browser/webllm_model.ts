/**
 * The webllm backend: a ChatModel over @mlc-ai/web-llm running in workers/llm.worker.ts (web-llm's
 * own WebWorkerMLCEngineHandler; its client here is CreateWebWorkerMLCEngine, no comlink).
 *
 *   const model = await WebLlmChatModel.load('Qwen2.5-1.5B-Instruct-q4f16_1-MLC', onProgress, signal);
 *   const reply = await model.chat(messages, { onToken, signal });
 *
 * Loading can be cancelled (the worker is terminated, which frees its GPU memory); a chat call's
 * AbortSignal interrupts generation and the call returns the text so far with finishReason 'abort'.
 * A GPU device lost at any time fails the call in flight, and every later call, with DeviceLostError.
 * Each call is bounded by `limits` (ModelLimits, from the run's config): past the total time-out, or
 * the idle time-out between streamed chunks, generation is interrupted and the call fails with a
 * ModelCallError (data.kind 'timeout'); a reply reaching maxReplyChars is interrupted and returned cut
 * off, with finishReason 'length'.
 * The pure half (catalog, feasibility, custom records, error mapping, progress, the worker's
 * side-channel message) is src/core/llm/webllm/, one module each.
 * Context window: catalog models are loaded with the catalog's window (chatOpts.context_window_size,
 * 8192 for Qwen2.5/Qwen3/Llama 3.2), which capabilities.contextWindow reports. Thinking: with
 * `thinking` 'off' (config.thinking, the default) Qwen3 requests carry web-llm's
 * `extra_body: {enable_thinking: false}`; think blocks are stripped from every reply.
 */
import {
  CreateWebWorkerMLCEngine,
  deleteModelAllInfoInCache,
  functionCallingModelIds,
  hasModelInCache,
  prebuiltAppConfig,
  type AppConfig,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionMessageParam,
  type ChatCompletionMessageToolCall,
  type ChatCompletionRequestBase,
  type ChatCompletionTokenLogprob,
  type ChatCompletionTool,
  type ChatOptions as WebLlmChatOptions,
  type CompletionUsage,
  type LogLevel,
  type ModelRecord,
  type WebWorkerMLCEngine,
} from '@mlc-ai/web-llm';
import {
  modelLimits,
  throwIfAborted,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
  type FinishReason,
  type ModelCapabilities,
  type ModelLimits,
  type TokenLogprob,
} from '../../core/llm/chat_model.ts';
import { isQwen3, stripThinking, type Thinking } from '../../core/llm/thinking.ts';
import { findCatalogEntry, WEBLLM_CATALOG } from '../../core/llm/webllm/catalog.ts';
import type { GpuReportLike } from '../../core/llm/webllm/feasibility.ts';
import { customToModelRecord, type CustomModelRecord } from '../../core/llm/webllm/custom_records.ts';
import { mapWebLlmError } from '../../core/llm/webllm/errors.ts';
import { formatDownloadProgress, type DownloadProgress } from '../../core/llm/webllm/progress.ts';
import { isDeviceLostMessage } from '../../core/llm/webllm/side_channel.ts';
import { abortError, DeviceLostError, ModelCallError, SpadeError, StorageError } from '../../core/errors.ts';

/** What the backend needs of a Worker (a real one fits; tests pass a fake that speaks web-llm's protocol). */
export interface LlmWorkerLike {
  onmessage: ((ev: MessageEvent) => void) | null;
  onerror: ((ev: ErrorEvent) => void) | null;
  postMessage(message: unknown): void;
  terminate(): void;
}

export interface WebLlmLoadOptions {
  /** Validated custom records (validateCustomModel) to offer beside web-llm's prebuilt list. */
  customModels?: CustomModelRecord[];
  /** Defaults to a module Worker running workers/llm.worker.ts. */
  createWorker?: () => LlmWorkerLike;
  /** web-llm's log level in both threads; default 'WARN'. */
  logLevel?: LogLevel;
  /**
   * This adapter (the app's GPU report): an f16 build is refused before any download when it lacks
   * shader-f16, and a failed load is blamed on it where it is the cause.
   */
  adapter?: GpuReportLike;
}

/** Re-send interruptGenerate this often until the call ends: one sent before web-llm starts decoding is reset by it. */
const INTERRUPT_RETRY_MS = 250;
/** After a time-out interrupts generation, how long to wait for web-llm to stop before failing the call anyway. */
const TIMEOUT_GRACE_MS = 5000;
/** How long unload() waits for web-llm to free the GPU before terminating the worker anyway. */
const UNLOAD_GRACE_MS = 3000;

function createLlmWorker(): LlmWorkerLike {
  return new Worker(new URL('../../../workers/llm.worker.ts', import.meta.url), {
    type: 'module',
    name: 'spade-webllm',
  });
}

/** web-llm's prebuilt records plus the custom ones (a custom id replaces nothing: validation forbids catalog ids). */
export function buildAppConfig(customModels: CustomModelRecord[] = []): AppConfig {
  const custom = customModels.map(customToModelRecord);
  const ids = new Set(custom.map((r) => r.model_id));
  return {
    ...prebuiltAppConfig,
    model_list: [...prebuiltAppConfig.model_list.filter((r) => !ids.has(r.model_id)), ...custom],
  };
}

function contextWindowOf(record: ModelRecord): number {
  return findCatalogEntry(record.model_id)?.contextWindow ?? record.overrides?.context_window_size ?? 4096;
}

/** web-llm chatOpts for a record: the catalog's larger window where it differs from the record's. */
function chatOptsFor(record: ModelRecord): WebLlmChatOptions | undefined {
  const window = contextWindowOf(record);
  return window !== record.overrides?.context_window_size ? { context_window_size: window } : undefined;
}

/**
 * Sits between the Worker and web-llm's client: passes web-llm's messages through in order and
 * takes out our device-lost side-channel; turns device loss and worker crashes into `failure`.
 */
class WorkerChannel {
  /** What web-llm's client sees as its worker (web-llm sets `onmessage` on it). */
  readonly port: { onmessage: ((msg: unknown) => void) | null; postMessage: (msg: unknown) => void };
  /** Rejects once, when the device is lost or the worker crashes. Never resolves. */
  readonly failure: Promise<never>;
  lostError: DeviceLostError | null = null;
  fatal: SpadeError | null = null;
  private rejectFailure!: (err: unknown) => void;
  private readonly lostListeners = new Set<(err: DeviceLostError) => void>();

  constructor(
    worker: LlmWorkerLike,
    private readonly modelId: string,
    private phase: 'load' | 'chat' = 'load',
  ) {
    this.failure = new Promise<never>((_, reject) => (this.rejectFailure = reject));
    this.failure.catch(() => {}); // observed through races; never an unhandled rejection
    const port = {
      onmessage: null as ((msg: unknown) => void) | null,
      postMessage: (m: unknown) => worker.postMessage(m),
    };
    this.port = port;
    worker.onmessage = (ev) => {
      const data: unknown = ev.data;
      if (isDeviceLostMessage(data)) {
        const err = mapWebLlmError(`DeviceLostError: ${data.message || data.reason}`, {
          phase: this.phase,
          modelId: this.modelId,
        }) as DeviceLostError;
        Object.assign(err.data, { reason: data.reason });
        this.lostError = err;
        this.fail(err);
        for (const fn of this.lostListeners) fn(err);
        return;
      }
      port.onmessage?.(data);
    };
    worker.onerror = (ev) => {
      ev.preventDefault?.();
      this.fail(
        mapWebLlmError(`WebLLM worker crashed: ${ev.message || 'no message'}`, {
          phase: this.phase,
          modelId: this.modelId,
        }),
      );
    };
  }

  setPhase(phase: 'load' | 'chat'): void {
    this.phase = phase;
  }

  onLost(fn: (err: DeviceLostError) => void): () => void {
    this.lostListeners.add(fn);
    return () => this.lostListeners.delete(fn);
  }

  private fail(err: SpadeError): void {
    if (this.fatal) return;
    this.fatal = err;
    this.rejectFailure(err);
  }
}

function toWebLlmMessage(m: ChatMessage): ChatCompletionMessageParam {
  switch (m.role) {
    case 'system':
      return { role: 'system', content: m.content };
    case 'user':
      return m.name ? { role: 'user', content: m.content, name: m.name } : { role: 'user', content: m.content };
    case 'assistant':
      return m.name
        ? { role: 'assistant', content: m.content, name: m.name }
        : { role: 'assistant', content: m.content };
    case 'tool':
      return { role: 'tool', content: m.content, tool_call_id: m.tool_call_id ?? '' };
  }
}

/**
 * The web-llm request for a ChatModel call. Streams when the caller wants tokens, except when it also
 * wants log-probs: web-llm's stream drops the log-prob of a token that ends inside a multi-byte
 * character, so log-prob calls run unstreamed (exact list) and hand onToken the whole text at the end.
 * Tool schemas go to web-llm only for its function-calling models; for the others the environment's
 * observation already lists the tools in text, and web-llm would reject the field.
 */
export function buildChatRequest(
  messages: ChatMessage[],
  options: ChatOptions,
  modelId: string,
  thinking: Thinking = 'off',
): ChatCompletionRequestBase {
  const stream = Boolean(options.onToken) && !options.logprobs;
  const req: ChatCompletionRequestBase = { messages: messages.map(toWebLlmMessage), stream };
  if (stream) req.stream_options = { include_usage: true };
  if (options.temperature !== undefined) req.temperature = options.temperature;
  if (options.top_p !== undefined) req.top_p = options.top_p;
  if (options.max_tokens !== undefined) req.max_tokens = options.max_tokens;
  if (options.stop && options.stop.length > 0) req.stop = options.stop;
  if (options.seed !== undefined) req.seed = options.seed;
  if (options.logprobs) req.logprobs = true;
  if (options.tools && options.tools.length > 0 && functionCallingModelIds.includes(modelId)) {
    req.tools = options.tools as ChatCompletionTool[];
  }
  // web-llm's switch; only Qwen3's template knows it (elsewhere it would prefix the reply with an empty block)
  if (thinking === 'off' && isQwen3(modelId)) req.extra_body = { enable_thinking: false };
  return req;
}

function mapFinish(reason: string | null | undefined, aborted: boolean): FinishReason {
  if (reason === 'stop' || reason === 'length' || reason === 'tool_calls' || reason === 'abort') return reason;
  return aborted ? 'abort' : 'stop';
}

function mapLogprobs(content: ChatCompletionTokenLogprob[] | null | undefined): TokenLogprob[] | undefined {
  return content ? content.map((t) => ({ token: t.token, logprob: t.logprob })) : undefined;
}

/** Function-calling models answer with tool_calls; render them as the `<tool_call>` text the environments parse. */
function toolCallsText(calls: ChatCompletionMessageToolCall[]): string {
  return calls
    .map((c) => {
      let args: unknown = c.function.arguments;
      try {
        args = JSON.parse(c.function.arguments);
      } catch {
        // keep the raw string
      }
      return `<tool_call>${JSON.stringify({ name: c.function.name, arguments: args })}</tool_call>`;
    })
    .join('\n');
}

function usageOf(u: CompletionUsage | undefined): ChatResult['usage'] {
  return { promptTokens: u?.prompt_tokens ?? 0, completionTokens: u?.completion_tokens ?? 0 };
}

/** What a call's reader needs of its bounds: restart the idle timer, the cap, and how to stop generation. */
interface ReplyBounds {
  touch: () => void;
  maxChars: number;
  interrupt: () => void;
}

export class WebLlmChatModel implements ChatModel {
  readonly backend = 'webllm';
  readonly capabilities: ModelCapabilities;
  /** Bounds on each call (config: modelCallTimeoutS, modelIdleTimeoutS, maxReplyChars); set per run. */
  limits: ModelLimits = modelLimits();
  /** config.thinking; set per run like `limits`. */
  thinking: Thinking = 'off';
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly engine: WebWorkerMLCEngine,
    private readonly channel: WorkerChannel,
    private readonly worker: LlmWorkerLike,
    readonly model: string,
    contextWindow: number,
  ) {
    this.capabilities = { streaming: true, logprobs: true, trainable: false, contextWindow };
  }

  /**
   * Download (or read from the browser cache) and load `modelId` in a fresh worker. `onProgress`
   * receives formatDownloadProgress() of each web-llm report. Aborting `signal` terminates the
   * worker and rejects with the abort reason (an AbortError); finished shards stay cached.
   */
  static async load(
    modelId: string,
    onProgress?: (p: DownloadProgress) => void,
    signal?: AbortSignal,
    options: WebLlmLoadOptions = {},
  ): Promise<WebLlmChatModel> {
    throwIfAborted(signal);
    const appConfig = buildAppConfig(options.customModels);
    const record = appConfig.model_list.find((r) => r.model_id === modelId);
    if (!record) {
      throw mapWebLlmError(`ModelNotFoundError: Cannot find model record in appConfig for ${modelId}.`, {
        phase: 'load',
        modelId,
      });
    }
    const adapterHasShaderF16 = options.adapter?.features.shaderF16;
    if (adapterHasShaderF16 === false && (findCatalogEntry(modelId)?.needsShaderF16 ?? false)) {
      throw mapWebLlmError('ShaderF16SupportError: the adapter lacks shader-f16.', {
        phase: 'load',
        modelId,
        adapterHasShaderF16,
      });
    }
    const worker = (options.createWorker ?? createLlmWorker)();
    const channel = new WorkerChannel(worker, modelId, 'load');
    const startedAt = Date.now();
    const enginePromise = CreateWebWorkerMLCEngine(
      channel.port,
      modelId,
      {
        appConfig,
        logLevel: options.logLevel ?? 'WARN',
        initProgressCallback: (report) => onProgress?.(formatDownloadProgress(report, startedAt, Date.now())),
      },
      chatOptsFor(record),
    );
    enginePromise.catch(() => {}); // lost races are settled below
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(abortError(signal));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    aborted.catch(() => {});
    try {
      const engine = await Promise.race([enginePromise, aborted, channel.failure]);
      channel.setPhase('chat');
      return new WebLlmChatModel(engine, channel, worker, modelId, contextWindowOf(record));
    } catch (err) {
      worker.terminate();
      if (signal?.aborted) throw abortError(signal);
      throw mapWebLlmError(err, { phase: 'load', modelId, adapterHasShaderF16 });
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The DeviceLostError that ended this model, or null while it is healthy. */
  get lost(): DeviceLostError | null {
    return this.channel.lostError;
  }

  /** Called once if the GPU device is lost (the UI offers to reload). Returns an unsubscribe function. */
  onDeviceLost(fn: (err: DeviceLostError) => void): () => void {
    return this.channel.onLost(fn);
  }

  /** Calls run one at a time, in order; a call aborted while waiting never starts. */
  chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    const run = this.queue.then(() => this.runChat(messages, options));
    this.queue = run.catch(() => {});
    return run;
  }

  /** Free the GPU memory and end the worker. The model cannot be used afterwards. */
  async unload(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.channel.fatal) {
      await Promise.race([
        this.engine.unload().catch(() => {}),
        new Promise((resolve) => setTimeout(resolve, UNLOAD_GRACE_MS)),
        this.channel.failure.catch(() => {}),
      ]);
    }
    this.worker.terminate();
  }

  private async runChat(messages: ChatMessage[], options: ChatOptions): Promise<ChatResult> {
    const { signal, onToken } = options;
    throwIfAborted(signal);
    if (this.channel.fatal) throw this.channel.fatal;
    if (this.closed) {
      throw mapWebLlmError('ModelNotLoadedError: the model was unloaded.', { phase: 'chat', modelId: this.model });
    }
    const t0 = performance.now();
    const request = buildChatRequest(messages, options, this.model, this.thinking);
    let retry: ReturnType<typeof setInterval> | undefined;
    const interrupt = () => {
      this.engine.interruptGenerate();
      retry ??= setInterval(() => this.engine.interruptGenerate(), INTERRUPT_RETRY_MS);
    };
    signal?.addEventListener('abort', interrupt, { once: true });
    const limits = this.limits;
    let timedOut: 'total' | 'idle' | null = null;
    let giveUp: ReturnType<typeof setTimeout> | undefined;
    let idle: ReturnType<typeof setTimeout> | undefined;
    let total: ReturnType<typeof setTimeout> | undefined;
    let touch = () => {};
    const timeoutError = () =>
      timedOut === 'total'
        ? new ModelCallError(
            `${this.model} did not finish within ${limits.callTimeoutMs / 1000} s (modelCallTimeoutS), so generation was stopped. Raise modelCallTimeoutS, lower max_tokens, or load a smaller model.`,
            { kind: 'timeout', timeout: 'total' },
          )
        : new ModelCallError(
            `${this.model} produced nothing for ${limits.idleTimeoutMs / 1000} s (modelIdleTimeoutS), so generation was stopped. The GPU may be overloaded; raise modelIdleTimeoutS or load a smaller model.`,
            { kind: 'timeout', timeout: 'idle' },
          );
    // Interrupt, then wait for web-llm to wind down (so the next queued call does not overlap), but not forever.
    const stuck = new Promise<never>((_, reject) => {
      const onTimeout = (kind: 'total' | 'idle') => {
        if (timedOut) return;
        timedOut = kind;
        interrupt();
        giveUp = setTimeout(() => reject(timeoutError()), TIMEOUT_GRACE_MS);
      };
      total = setTimeout(() => onTimeout('total'), limits.callTimeoutMs);
      touch = () => {
        clearTimeout(idle);
        idle = setTimeout(() => onTimeout('idle'), limits.idleTimeoutMs);
      };
    });
    stuck.catch(() => {});
    const bounds: ReplyBounds = { touch: () => touch(), maxChars: limits.maxReplyChars, interrupt };
    try {
      if (request.stream) bounds.touch(); // unstreamed calls show no progress: only the total time-out applies
      const work = request.stream
        ? this.streamed(request, onToken, signal, bounds)
        : this.unstreamed(request, onToken, signal, bounds);
      work.catch(() => {});
      const out = await Promise.race([work, this.channel.failure, stuck]);
      if (timedOut) throw timeoutError();
      return { ...out, text: stripThinking(out.text), ms: performance.now() - t0 };
    } catch (err) {
      if (timedOut && !this.channel.lostError) throw timeoutError();
      throw this.channel.lostError ?? mapWebLlmError(err, { phase: 'chat', modelId: this.model });
    } finally {
      signal?.removeEventListener('abort', interrupt);
      if (retry !== undefined) clearInterval(retry);
      clearTimeout(total);
      clearTimeout(idle);
      clearTimeout(giveUp);
    }
  }

  private async streamed(
    request: ChatCompletionRequestBase,
    onToken: ChatOptions['onToken'],
    signal: AbortSignal | undefined,
    bounds: ReplyBounds,
  ): Promise<Omit<ChatResult, 'ms'>> {
    const stream = await this.engine.chat.completions.create({ ...request, stream: true });
    let text = '';
    let finish: string | null = null;
    let capped = false;
    let usage: CompletionUsage | undefined;
    let toolCalls: ChatCompletionMessageToolCall[] | undefined;
    for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
      bounds.touch();
      const choice = chunk.choices[0];
      if (choice) {
        const delta = choice.delta?.content;
        if (delta && !capped) {
          // Past the cap: interrupt, keep draining the stream (web-llm winds down) but keep nothing more.
          const piece = delta.slice(0, bounds.maxChars - text.length);
          text += piece;
          if (piece) onToken?.(piece);
          if (piece.length < delta.length) {
            capped = true;
            bounds.interrupt();
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
        const calls = choice.delta?.tool_calls;
        if (calls && calls.length > 0) toolCalls = calls as ChatCompletionMessageToolCall[];
      }
      if (chunk.usage) usage = chunk.usage;
    }
    if (toolCalls) text = toolCallsText(toolCalls);
    if (capped || text.length > bounds.maxChars) {
      return { text: text.slice(0, bounds.maxChars), finishReason: 'length', usage: usageOf(usage) };
    }
    return { text, finishReason: mapFinish(finish, signal?.aborted ?? false), usage: usageOf(usage) };
  }

  private async unstreamed(
    request: ChatCompletionRequestBase,
    onToken: ChatOptions['onToken'],
    signal: AbortSignal | undefined,
    bounds: ReplyBounds,
  ): Promise<Omit<ChatResult, 'ms'>> {
    const res = (await this.engine.chat.completions.create({ ...request, stream: false })) as ChatCompletion;
    const choice = res.choices[0];
    const calls = choice?.message.tool_calls;
    const whole = calls && calls.length > 0 ? toolCallsText(calls) : (choice?.message.content ?? '');
    const text = whole.slice(0, bounds.maxChars);
    if (text) onToken?.(text);
    const out: Omit<ChatResult, 'ms'> = {
      text,
      finishReason: text.length < whole.length ? 'length' : mapFinish(choice?.finish_reason, signal?.aborted ?? false),
      usage: usageOf(res.usage),
    };
    const logprobs = request.logprobs ? mapLogprobs(choice?.logprobs?.content) : undefined;
    if (logprobs) out.logprobs = logprobs;
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Cache management (main thread; web-llm keeps weights in the Cache API by default)
// ---------------------------------------------------------------------------------------------

function storageError(action: string, err: unknown): StorageError {
  const msg = err instanceof Error ? err.message : String(err);
  return new StorageError(
    `Could not ${action} the model cache (${msg}). The cache needs a secure page (https or localhost) and site storage allowed.`,
    { cause: msg },
  );
}

/** The ids among `ids` (default: the catalog) whose weights are fully in the browser cache. */
export async function listCachedModels(
  ids: string[] = WEBLLM_CATALOG.map((e) => e.id),
  customModels: CustomModelRecord[] = [],
): Promise<string[]> {
  const appConfig = buildAppConfig(customModels);
  const out: string[] = [];
  try {
    for (const id of ids) if (await hasModelInCache(id, appConfig)) out.push(id);
  } catch (err) {
    throw storageError('read', err);
  }
  return out;
}

/** Delete a model's weights, config and wasm from the browser cache. */
export async function deleteCachedModel(id: string, customModels: CustomModelRecord[] = []): Promise<void> {
  try {
    await deleteModelAllInfoInCache(id, buildAppConfig(customModels));
  } catch (err) {
    throw storageError('delete from', err);
  }
}

export interface StorageInfo {
  usageBytes: number;
  quotaBytes: number;
  freeBytes: number;
}

/** navigator.storage.estimate(), or null where the browser does not offer it. */
export async function storageEstimate(): Promise<StorageInfo | null> {
  const storage = typeof navigator !== 'undefined' ? navigator.storage : undefined;
  if (!storage?.estimate) return null;
  const e = await storage.estimate();
  const usageBytes = e.usage ?? 0;
  const quotaBytes = e.quota ?? 0;
  return { usageBytes, quotaBytes, freeBytes: Math.max(0, quotaBytes - usageBytes) };
}
