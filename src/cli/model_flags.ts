/**
 * `--backend openai|replay|local` and its flags → the ChatModel that plays every role. Shared by
 * `spade run` and `spade chat`; its own module so `cmd_models.ts` need not import `cmd_run.ts`.
 *
 * openai: `--base-url URL --model NAME [--api-key K] [--context-window N]`; the
 * model is probed (GET /models) before it is returned, so its context window is known before the
 * first call is budgeted. `--context-window` is for servers that do not report one (llama.cpp,
 * Ollama) and caps one that does.
 */
import { readUserFile } from '../platform/node/regular_file.ts';
import { UsageError } from '../core/errors.ts';
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
 * Build the model for all three roles from the flags; `limits` bound each call and `thinking` is the
 * run's config.thinking (both from the run's config).
 */
export async function modelFromFlags(
  a: Args,
  limits: ModelLimits = modelLimits(),
  thinking: Thinking = 'off',
): Promise<ChatModel> {
  const backend = flag(a, 'backend');
  if (backend === 'openai') {
    const baseURL = flag(a, 'base-url');
    const model = flag(a, 'model');
    if (!baseURL || !model) throw new UsageError('--backend openai needs --base-url URL and --model NAME');
    const window = a.flags.has('context-window') ? intFlag(a, 'context-window', 0) : undefined;
    if (window !== undefined && (window < 512 || window > 10_000_000))
      throw new UsageError(`--context-window must be between 512 and 10000000 tokens; got ${window}`);
    const m = new OpenAIChatModel({
      baseURL,
      model,
      apiKey: flag(a, 'api-key') ?? process.env.OPENAI_API_KEY,
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
