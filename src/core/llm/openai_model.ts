/**
 * The `openai` backend: any OpenAI-compatible chat-completions server (vLLM,
 * SGLang, llama.cpp server, Ollama, OpenAI itself) through the official SDK.
 * Streaming, bounded concurrency, and the SDK's retries with exponential backoff
 * on 408/409/429/5xx and timeouts. Works in Node (CLI) and in the browser (the
 * key then stays in that browser; the UI says so).
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
  TokenLogprob,
} from './chat_model.ts';
import { throwIfAborted } from './chat_model.ts';

export interface OpenAIConfig {
  /** e.g. http://127.0.0.1:8000/v1 (vLLM), http://127.0.0.1:11434/v1 (Ollama) */
  baseURL: string;
  model: string;
  apiKey?: string;
  /** Requests in flight at once (default 4: small servers queue the rest anyway). */
  maxConcurrency?: number;
  /** Retries on 408/409/429/5xx and timeouts, with exponential backoff (default 3). */
  maxRetries?: number;
  /** Per-request timeout, ms (default 120 s: long designer replies on a slow server). */
  timeoutMs?: number;
  /** Declared context window (servers do not report it; default 8192). */
  contextWindow?: number;
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

export class OpenAIChatModel implements ChatModel {
  readonly backend = 'openai';
  readonly model: string;
  readonly capabilities: ModelCapabilities;
  private readonly client: OpenAI;
  private readonly limiter: Limiter;

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
      contextWindow: config.contextWindow ?? 8192,
    };
    this.client = new OpenAI({
      baseURL: config.baseURL.replace(/\/+$/, ''),
      apiKey: config.apiKey || 'not-needed',
      maxRetries: config.maxRetries ?? 3,
      timeout: config.timeoutMs ?? 120_000,
      dangerouslyAllowBrowser: true,
      ...(config.fetch ? { fetch: config.fetch } : {}),
    });
    this.limiter = new Limiter(Math.max(1, config.maxConcurrency ?? 4));
  }

  chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    return this.limiter.run(() => this.call(messages, options));
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
    };
    try {
      if (o.onToken) {
        const stream = await this.client.chat.completions.create(
          { ...body, stream: true, stream_options: { include_usage: true } },
          { signal: o.signal },
        );
        let text = '';
        let finish: FinishReason = 'stop';
        let usage = { promptTokens: 0, completionTokens: 0 };
        const logprobs: TokenLogprob[] = [];
        for await (const chunk of stream) {
          const choice = chunk.choices?.[0];
          const delta = choice?.delta?.content ?? '';
          if (delta) {
            text += delta;
            o.onToken(delta);
          }
          if (choice?.finish_reason) finish = FINISH[choice.finish_reason] ?? 'stop';
          for (const lp of choice?.logprobs?.content ?? []) logprobs.push({ token: lp.token, logprob: lp.logprob });
          if (chunk.usage)
            usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens };
        }
        return { text, finishReason: finish, usage, ...(wantLogprobs ? { logprobs } : {}), ms: performance.now() - t0 };
      }
      const r = await this.client.chat.completions.create({ ...body, stream: false }, { signal: o.signal });
      const choice = r.choices?.[0];
      if (!choice) throw new ModelCallError(`The server at ${this.config.baseURL} returned no choices.`);
      return {
        text: choice.message?.content ?? '',
        finishReason: FINISH[choice.finish_reason ?? 'stop'] ?? 'stop',
        usage: { promptTokens: r.usage?.prompt_tokens ?? 0, completionTokens: r.usage?.completion_tokens ?? 0 },
        ...(wantLogprobs
          ? { logprobs: (choice.logprobs?.content ?? []).map((lp) => ({ token: lp.token, logprob: lp.logprob })) }
          : {}),
        ms: performance.now() - t0,
      };
    } catch (err) {
      throw this.mapError(err, o.signal);
    }
  }

  private mapError(err: unknown, signal?: AbortSignal): Error {
    if (err instanceof APIUserAbortError || signal?.aborted) return abortError(signal, 'The model call was cancelled.');
    const where = this.config.baseURL;
    if (err instanceof APIConnectionTimeoutError) {
      return new ModelCallError(
        `The server at ${where} did not answer within ${(this.config.timeoutMs ?? 120_000) / 1000} s (after retries). Is it overloaded? Try a smaller max_tokens or a longer timeout.`,
        { kind: 'timeout' },
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
    return new ModelCallError(`The call to ${where} failed: ${(err as Error)?.message ?? String(err)}`);
  }
}
