/**
 * The engine's front door: the one module that code outside src/engine imports (dependency-cruiser enforces it;
 * `spade bench engine` also reaches engine/bench, and tests may reach inside). It holds no code of
 * its own, only what the engine offers:
 *
 * - `EngineApi` (engine.ts), the engine as one interface — load, chat, count tokens, decode token
 *   ids, logits, the LoRA adapter in and out, GRPO steps and the optimiser state, the device
 *   self-check, the decode scheduler's counters — and `createEngineApi`, its one implementation,
 *   in-process. The app runs it in workers/engine.worker.ts behind comlink; the CLI calls it directly
 *   (Node: platform/node/engine.ts adds the directory reader, the `webgpu` package and `--device cpu`).
 * - `EngineChatModel`, the `local` ChatModel over an EngineApi, in-process or through comlink.
 * - the device probe behind the WebGPU chip (acquireGpu, gpuSelfCheck), the model-file types the
 *   platforms implement (ModelFiles, ModelFileCache), the formats and fresh checkpoints `spade
 *   engine` names, and tiny fresh models (engine/tiny/): `createTinyPolicy`, the Lab's one entry (a
 *   policy on a tiny model: chat, trainer, scorer; the Lab's own code is src/lab/ and src/core/lab/,
 *   never here), and the toy demo's `toyTrain` (`computeOps` gives the CLI's toy its device).
 */
export {
  computeOps,
  createEngineApi,
  freshModelName,
  type EngineApi,
  type EngineLoadOptions,
  type FreshModel,
  type ModelSource,
  type ModelSummary,
} from './engine.ts';
export { EngineChatModel, engineCapabilities } from './engine_chat_model.ts';

// the device: the page's WebGPU probe, and Node's device for `spade gpu` and the toy
export { acquireGpu, WEBGPU_HELP, type GpuContext, type GpuReport } from './runtime/device.ts';
export { gpuSelfCheck } from './ops/self_check.ts';
export type { Ops } from './ops/ops.ts';

// model files: what a platform implements to hand the engine a checkpoint (Node's directories, the page's cache)
export {
  checkFileName,
  notFound,
  type FileProgressFn,
  type ModelFileCache,
  type ModelFileInfo,
  type ModelFiles,
} from './io/model_files.ts';
export type { LoadProgress } from './io/load.ts';

// formats and shapes: base weights, the KV cache, LoRA targets, fresh checkpoints (`spade engine init`)
export { parseWeightFormat, type WeightFormat } from './io/pack.ts';
export type { KvFormat } from './model/kv_pages.ts';
export { type LoraModule } from './io/peft.ts';
export { paramCount, type Architecture } from './io/config.ts';
export { initCheckpointFiles, initConfig, type InitDType } from './io/init_checkpoint.ts';

// tiny fresh models (engine/tiny/): the Lab's one entry, a policy on one (createTinyPolicy: the Lab
// itself, its roles and runs, lives in src/lab/ and src/core/lab/), and the toy demo's toyTrain
export { createTinyPolicy, MODEL_PATHS, type ModelPath } from './tiny/tiny_policy.ts';
export { toyTrain, type ToyUpdate } from './tiny/toy_train.ts';
