/**
 * `--backend openai|replay|local` and its flags → the ChatModel that plays every role. Shared by
 * `spade run` and `spade chat`; its own module so `cmd_models.ts` need not import `cmd_run.ts`.
 *
 * openai: `--base-url URL --model NAME [--api-key K] [--context-window N]`; the
 * model is probed (GET /models) before it is returned, so its context window is known before the
 * first call is budgeted. `--context-window` is for servers that do not report one (llama.cpp,
 * Ollama) and caps one that does. Before any call: a base URL with a user name or password in it is
 * refused (they would be written into the run with every error message), and a missing key is said —
 * refused for a known hosted API (every call would be a 401), a warning for any other host not on
 * this computer or network (core/llm/base_url.ts).
 */
import { readUserFile } from '../platform/node/regular_file.ts';
import { UsageError } from '../core/errors.ts';
import { credentialsInUrlMessage, keyNeed, urlWithCredentials } from '../core/llm/base_url.ts';
import { modelLimits, type ChatModel, type ModelLimits } from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import { ReplayChatModel } from '../core/llm/replay.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import { flag, intFlag, type Args, type Flags } from './args.ts';

/** The flags that choose and reach the model (`spade run`, `spade chat`). */
export const MODEL_FLAGS: Flags = {
  backend: {
    value: 'openai|replay|local',
    help: 'openai: any OpenAI-compatible server (hosted API, Ollama, llama.cpp, vLLM); replay: a recording; local: our engine',
  },
  'base-url': { value: 'URL', help: "openai: the server's /v1 address, e.g. http://127.0.0.1:11434/v1" },
  model: { value: 'NAME', help: "openai: the model's name on that server" },
  'api-key': {
    value: 'KEY',
    help: 'openai: sent as "Authorization: Bearer KEY" (default: $OPENAI_API_KEY; never written to the run)',
  },
  'context-window': { value: 'N', help: "openai: the model's context in tokens, for servers that do not report it" },
  replay: { value: 'FILE', help: 'replay: a transcript recorded with --record' },
  'tokens-per-second': { value: 'N', help: 'replay: stream replies at this pace (0: at once)', default: 0 },
  'model-dir': { value: 'DIR', help: 'local: a Hugging Face checkpoint directory with tokenizer.json' },
  adapter: { value: 'DIR', help: 'local: a LoRA adapter directory to start from' },
  device: { value: 'gpu|cpu', help: "local: WebGPU, or the engine's CPU references", default: 'gpu' },
};

/**
 * The key for `baseURL` (--api-key, else $OPENAI_API_KEY), checked before any call: none for a known
 * hosted API is a usage error; none for another host off this computer and network is a warning.
 */
function apiKeyFor(a: Args, baseURL: string, warn: (line: string) => void): string | undefined {
  const key = flag(a, 'api-key') || process.env.OPENAI_API_KEY || undefined;
  if (key) return key;
  const need = keyNeed(baseURL);
  let host = baseURL;
  try {
    host = new URL(baseURL).host;
  } catch {
    // the constructor says what is wrong with the URL
  }
  if (need === 'required')
    throw new UsageError(
      `no API key for ${host}, which answers nothing without one: set OPENAI_API_KEY or pass --api-key KEY (sent to ${host} only, never written to the run)`,
    );
  if (need === 'likely')
    warn(
      `warning: no API key: set OPENAI_API_KEY or pass --api-key; continuing without one (${host} is not on this computer or network; a server that needs a key answers 401)`,
    );
  return undefined;
}

/**
 * Build the model for all three roles from the flags; `limits` bound each call and `thinking` is the
 * run's config.thinking (both from the run's config); `warn` gets what should be said before the
 * first call (a missing key).
 */
export async function modelFromFlags(
  a: Args,
  limits: ModelLimits = modelLimits(),
  thinking: Thinking = 'off',
  warn: (line: string) => void = () => undefined,
): Promise<ChatModel> {
  const backend = flag(a, 'backend');
  if (backend === 'openai') {
    const baseURL = flag(a, 'base-url');
    const model = flag(a, 'model');
    if (!baseURL || !model) throw new UsageError('--backend openai needs --base-url URL and --model NAME');
    const withCredentials = urlWithCredentials(baseURL);
    if (withCredentials)
      throw new UsageError(
        `--base-url: ${credentialsInUrlMessage(withCredentials, '--api-key KEY or OPENAI_API_KEY')}`,
      );
    if (!/^https?:\/\/[^/]/.test(baseURL))
      throw new UsageError(
        `--base-url must start with http:// or https://, e.g. http://127.0.0.1:8000/v1; got "${baseURL}"`,
      );
    const window = a.flags.has('context-window') ? intFlag(a, 'context-window', 0) : undefined;
    if (window !== undefined && (window < 512 || window > 10_000_000))
      throw new UsageError(`--context-window must be between 512 and 10000000 tokens; got ${window}`);
    const m = new OpenAIChatModel({
      baseURL,
      model,
      apiKey: apiKeyFor(a, baseURL, warn),
      // no cap of the client's own: the run's `concurrency` (--set concurrency=N) is the one budget of
      // chats in flight for every backend, so the server sees up to that many requests and never more
      ...(window !== undefined ? { contextWindow: window } : {}),
      thinking,
      ...limits,
    });
    await m.probe();
    return m;
  }
  if (backend === 'replay') {
    const file = flag(a, 'replay');
    if (!file) throw new UsageError('--backend replay needs --replay FILE (a transcript recorded with --record)');
    return new ReplayChatModel(await readUserFile(file, '--replay'), {
      tokensPerSecond: intFlag(a, 'tokens-per-second', 0),
    });
  }
  if (backend === 'local') {
    const dir = flag(a, 'model-dir');
    if (!dir)
      throw new UsageError(
        '--backend local needs --model-dir DIR (a Hugging Face checkpoint directory with tokenizer.json)',
      );
    // loaded on demand: the engine (and webgpu) stays out of the openai and replay paths
    const { localChatModel } = await import('../platform/node/engine.ts');
    return localChatModel(dir, flag(a, 'adapter'), flag(a, 'device') ?? 'gpu', thinking);
  }
  throw new UsageError(`--backend must be openai, replay or local${backend ? `; got "${backend}"` : ''}`);
}
