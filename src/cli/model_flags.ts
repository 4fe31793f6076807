/**
 * `--backend openai|replay|local` and its flags → the ChatModel that plays every role. Shared by
 * `spade run` and `spade chat`; its own module so `cmd_models.ts` need not import `cmd_run.ts`.
 */
import { readFile } from 'node:fs/promises';
import { UsageError } from '../core/errors.ts';
import { modelLimits, type ChatModel, type ModelLimits } from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import { ReplayChatModel } from '../core/llm/replay.ts';
import { flag, intFlag, type Args } from './args.ts';

/** Build the model for all three roles from the flags; `limits` bound each call (from the run's config). */
export async function modelFromFlags(a: Args, limits: ModelLimits = modelLimits()): Promise<ChatModel> {
  const backend = flag(a, 'backend');
  if (backend === 'openai') {
    const baseURL = flag(a, 'base-url');
    const model = flag(a, 'model');
    if (!baseURL || !model) throw new UsageError('--backend openai needs --base-url URL and --model NAME');
    return new OpenAIChatModel({
      baseURL,
      model,
      apiKey: flag(a, 'api-key') ?? process.env.OPENAI_API_KEY,
      maxConcurrency: intFlag(a, 'max-concurrency', 4),
      ...limits,
    });
  }
  if (backend === 'replay') {
    const file = flag(a, 'replay');
    if (!file) throw new UsageError('--backend replay needs --replay FILE (a transcript recorded with --record)');
    return new ReplayChatModel(await readFile(file, 'utf8'), { tokensPerSecond: intFlag(a, 'tokens-per-second', 0) });
  }
  if (backend === 'local') {
    const dir = flag(a, 'model-dir');
    if (!dir)
      throw new UsageError(
        '--backend local needs --model-dir DIR (a Hugging Face checkpoint directory with tokenizer.json)',
      );
    const { loadLocalChatModel } = await import('./cmd_engine.ts');
    return loadLocalChatModel(dir, flag(a, 'adapter'), flag(a, 'device') ?? 'gpu');
  }
  throw new UsageError(`--backend must be openai, replay or local${backend ? `; got "${backend}"` : ''}`);
}
