/**
 * The engine in Node: the front door's in-process EngineApi with what Node adds — checkpoint and
 * adapter directories (`{ kind: 'dir', path }`, read by DirModelFiles) and WebGPU through the
 * `webgpu` package, or `device: 'cpu'` for the kernels' CPU references. `spade run --backend local`
 * (and `--train`), `spade chat` and `spade engine` all start the engine here.
 */
import { UsageError } from '../../core/errors.ts';
import type { Thinking } from '../../core/llm/thinking.ts';
import {
  createEngineApi,
  EngineChatModel,
  engineCapabilities,
  type EngineApi,
  type EngineLoadOptions,
} from '../../engine/engine_api.ts';
import { sharedNodeGpu } from './gpu.ts';
import { DirModelFiles } from './model_files.ts';

/** The engine on `device` ('gpu': the `webgpu` package; 'cpu': the CPU references), reading directories. */
export async function nodeEngine(device: string = 'gpu'): Promise<EngineApi> {
  if (device !== 'gpu' && device !== 'cpu') throw new UsageError(`--device must be gpu or cpu; got "${device}"`);
  return createEngineApi({
    device,
    ...(device === 'gpu' ? { sharedDevice: sharedNodeGpu } : {}),
    openDir: (path) => new DirModelFiles(path),
  });
}

/**
 * A checkpoint directory (and optionally a PEFT adapter directory) loaded into a new engine on
 * `device`; `o.tokenizer` false reads token ids only (`spade engine logits|generate`).
 */
export async function loadEngineFromDir(
  dir: string,
  adapterDir: string | undefined,
  device: string,
  o: EngineLoadOptions = {},
): Promise<EngineApi> {
  const engine = await nodeEngine(device);
  try {
    await engine.load({ kind: 'dir', path: dir }, undefined, o);
    if (adapterDir) await engine.loadAdapter({ kind: 'dir', path: adapterDir });
  } catch (err) {
    await engine.unload();
    throw err;
  }
  return engine;
}

/** Our engine as the `local` ChatModel for `spade run` and `spade chat` (the checkpoint needs its tokenizer). */
export async function localChatModel(
  dir: string,
  adapterDir: string | undefined,
  device: string,
  thinking: Thinking = 'off',
): Promise<EngineChatModel> {
  const engine = await loadEngineFromDir(dir, adapterDir, device);
  const s = (await engine.summary())!;
  const chat = new EngineChatModel(engine, s.name, engineCapabilities(s));
  chat.thinking = thinking;
  return chat;
}
