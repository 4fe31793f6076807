/**
 * The engine as one interface, `EngineApi`, and its one implementation, in-process: load a
 * checkpoint (Hugging Face URL, picked files, files in memory, a directory through the platform's
 * reader, or a fresh tiny random model built here) onto the GPU or the CPU references; chat with it
 * (streaming through a callback; every reply carries its token ids and log π_old) and count prompt
 * tokens exactly; decode token ids directly (one prompt or a batch) and read logits; manage the LoRA
 * adapter (init, PEFT in and out); train it token-exactly (one clipped-GRPO optimiser step per
 * `trainGrpo` call, train.ts) with AdamW's state out and in for resuming; check the device; report
 * the decode scheduler's counters.
 *
 * The app runs this in workers/engine.worker.ts and reaches it through comlink (a
 * `Comlink.Remote<EngineApi>` is an EngineApi: every method is async); the CLI (`spade run
 * --backend local`, `--train`, `spade engine`, `spade gpu`) calls it in-process. Both talk to the
 * model through EngineChatModel (engine_chat_model.ts), so they exercise the same wiring. Code
 * outside src/engine imports it through the front door, engine_api.ts.
 */
import { SCHEDULER_DEFAULTS } from '../core/defaults.ts';
import { EngineStateError, ModelLoadError } from '../core/errors.ts';
import type { ChatMessage, ChatOptions, ChatResult } from '../core/llm/chat_model.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import { paramCount, type Architecture } from './io/config.ts';
import { initCheckpointFiles, initConfig } from './io/init_checkpoint.ts';
import { loadCheckpoint, loadPeftAdapter, planWeights, type LoadProgress } from './io/load.ts';
import {
  BlobModelFiles,
  huggingFaceFiles,
  MemoryModelFiles,
  type BlobFile,
  type ModelFileCache,
  type ModelFiles,
} from './io/model_files.ts';
import type { WeightFormat } from './io/pack.ts';
import { exportPeft, importPeft, type LoraModule } from './io/peft.ts';
import { DecodeScheduler, type SchedulerStats } from './model/batch.ts';
import { generate } from './model/generate.ts';
import type { KvFormat } from './model/kv_pages.ts';
import { LocalChatModel, releaseDecodeMemory, schedulerFor } from './model/local_model.ts';
import { LlamaModel } from './model/model.ts';
import { CpuOps, GpuOps, type Ops } from './ops/ops.ts';
import { gpuSelfCheck } from './ops/self_check.ts';
import { acquireGpu, type GpuContext, type GpuReport } from './runtime/device.ts';
import { Engine } from './runtime/runtime.ts';
import type { SampleOptions } from './kernels/sample_cpu.ts';
import {
  decodeTrainerState,
  encodeTrainerState,
  LoraTrainer,
  type GrpoSample,
  type StepStats,
  type TrainOptions,
} from './train/train.ts';

export type ModelSource =
  | { kind: 'hf'; repo: string; revision?: string }
  | { kind: 'files'; files: BlobFile[] }
  | { kind: 'memory'; files: Map<string, Uint8Array> }
  /** A checkpoint (or adapter) directory, read by EngineOptions.openDir (Node: platform/node/model_files.ts). */
  | { kind: 'dir'; path: string }
  | ({ kind: 'fresh' } & FreshModel);

/** A tiny random-initialised checkpoint built in memory (io/init_checkpoint.ts): no download. */
export interface FreshModel {
  arch: Architecture;
  layers: number;
  hidden: number;
  seed: number;
}

/** The name a fresh model is shown (and its saved training found) under: its shape and seed say which. */
export const freshModelName = (f: FreshModel): string => `fresh-${f.arch}-${f.layers}L-${f.hidden}h-seed${f.seed}`;

export interface ModelSummary {
  name: string;
  architecture: string;
  params: number;
  layers: number;
  hidden: number;
  vocab: number;
  contextWindow: number;
  bytes: number;
  /** How the frozen base is stored on the device, and the bytes it takes there. */
  weights: WeightFormat;
  weightBytes: number;
  /** How the decode KV cache stores k and v. */
  kvFormat: KvFormat;
  /** Ids that end a reply (config.json's eos_token_id). */
  eosTokenIds: number[];
  /** Whether the checkpoint's tokenizer was loaded (chat and countTokens need it). */
  chat: boolean;
  adapter: { r: number; alpha: number; targets: string[] } | null;
}

export interface EngineLoadOptions {
  /** How the frozen base is stored (default f32, the reference; io/pack.ts). */
  weights?: WeightFormat;
  /** How the decode KV cache stores k and v (default f32; f16 halves it, see kv_pages.ts). */
  kvFormat?: KvFormat;
  /**
   * Load tokenizer.json and the chat template (default true, and then a checkpoint without them is
   * refused). false: token ids only (logits, decode, training), as `spade engine` reads checkpoints.
   */
  tokenizer?: boolean;
}

/** Token-id decoding (`spade engine generate`): sampling per prompt, prompt i with seed + i. */
export interface DecodeOptions extends SampleOptions {
  maxNew: number;
  /** Prompt i samples with seed + i (default 0). */
  seed?: number;
  /** Ids that end a prompt's output (default: the model's end-of-sequence ids). */
  stopIds?: number[];
  /** Most prompts decoded in one step (default 16). */
  maxBatch?: number;
  /** Decode steps per read-back of the ids (default 1; the same tokens for every value). */
  stepsPerReadback?: number;
}

/** The decode scheduler's batch limit and counters, and its KV cache's format and bytes (batch.ts). */
export type DecodeStats = SchedulerStats & { maxBatch: number };

/** What `selfCheck` found: the device, and the add kernel against its CPU reference. */
export interface SelfCheck {
  device: 'gpu' | 'cpu';
  /** The adapter (null on the CPU references). */
  report: GpuReport | null;
  ok: boolean;
  maxAbsError: number;
}

/**
 * The engine's one interface. Every method is async, so the in-process engine and a comlink
 * proxy of it are interchangeable. Callbacks (onProgress, onToken) must be comlink proxies when
 * the engine is in a worker.
 */
export interface EngineApi {
  /** config.json only: the device bytes each weight format would take, before downloading the weights. */
  plan(source: ModelSource): Promise<{ bytes: Record<WeightFormat, number>; params: number }>;
  /** Load a checkpoint (the previous model, adapter, optimiser and KV cache are freed first). */
  load(source: ModelSource, onProgress?: (p: LoadProgress) => void, o?: EngineLoadOptions): Promise<ModelSummary>;
  /** The loaded model, or null before any load. */
  summary(): Promise<ModelSummary | null>;
  /** A reply with its token ids and log π_old (`tokens`); `thinking` is config.thinking; `callId` names it for abort(). */
  chat(
    messages: ChatMessage[],
    options?: Omit<ChatOptions, 'signal' | 'onToken'>,
    onToken?: (delta: string) => void,
    thinking?: Thinking,
    callId?: number,
  ): Promise<ChatResult>;
  /** Stop the chat with this call id, or every chat in flight (each ends with an AbortError). */
  abort(callId?: number): Promise<void>;
  /** Exact prompt tokens of messages (the ids chat() would feed), for the context budget. */
  countTokens(messages: ChatMessage[], thinking?: Thinking): Promise<number>;
  /** Token ids in, token ids out: one prompt with generate(), several as one batch of the scheduler. */
  decode(prompts: number[][], o: DecodeOptions): Promise<number[][]>;
  /** The logits of the last position (or of every position with `all`), one row each. */
  logits(ids: number[], o?: { all?: boolean }): Promise<Float32Array[]>;
  /** Decode up to `n` chats in one step (the run's budget of chats in flight); kept for a model loaded later. */
  setDecodeBatch(n: number): Promise<void>;
  /** The loaded model's decode scheduler: batch limit, counters, KV format and bytes. */
  decodeStats(): Promise<DecodeStats>;
  /** Give the idle decode KV cache back (a training round's forward passes need the memory). */
  releaseDecodeMemory(): Promise<void>;
  /** A new LoRA adapter (B = 0: the model is unchanged until it trains). */
  initLora(r: number, alpha: number, targets: LoraModule[], seed?: number): Promise<ModelSummary>;
  /** A PEFT adapter from its two files' contents. */
  importAdapter(configJson: string, weights: Uint8Array): Promise<ModelSummary>;
  /** A PEFT adapter from a source holding adapter_config.json and adapter_model.safetensors. */
  loadAdapter(source: ModelSource): Promise<ModelSummary>;
  /** The adapter in PEFT format. */
  exportAdapter(): Promise<{ configJson: string; weights: Uint8Array }>;
  /**
   * log π_old of each sample's trained tokens under the current adapter (no gradient): a training
   * round takes them before its first trainGrpo step and sends them back as learnerLogprobs (TIS).
   */
  learnerLogprobs(samples: GrpoSample[], o?: TrainOptions): Promise<number[][]>;
  /**
   * One clipped-GRPO optimiser step on one minibatch of token-exact samples; `o` (the run's trainLr,
   * clipLow, clipHigh, klCoef, maxGradNorm, minibatchTokens, tisCap) applies from this step on.
   */
  trainGrpo(samples: GrpoSample[], o?: TrainOptions): Promise<StepStats>;
  /**
   * AdamW's moments and step as one safetensors file (train.ts encodeTrainerState): zeros and step
   * 0 before the adapter's first step; null when there is no adapter.
   */
  exportState(): Promise<Uint8Array | null>;
  /** Restore exportState()'s bytes (the adapter must already be in place). */
  importState(bytes: Uint8Array, o?: TrainOptions): Promise<void>;
  /** The device and the add kernel against its CPU reference (`spade gpu`, the WebGPU chip). */
  selfCheck(): Promise<SelfCheck>;
  /** Free the model, its adapter, optimiser and KV cache, and the device. */
  unload(): Promise<void>;
}

export interface EngineOptions {
  /** Where downloads are cached (the browser's Cache API: platform/browser/model_cache.ts). */
  cache?: ModelFileCache;
  /** The WebGPU entry point (navigator.gpu by default; Node passes the `webgpu` package's). */
  gpu?: GPU;
  /**
   * A device shared with the thread's other users (Node: platform/node/gpu.ts sharedNodeGpu), asked
   * for whenever the engine has none or its last was lost, and never destroyed by it: its compiled
   * pipelines serve every engine on it. Without it the engine acquires a device of its own from `gpu`
   * and destroys it on unload.
   */
  sharedDevice?: () => Promise<GpuContext>;
  /**
   * 'gpu' (default): kernels on a WebGPU device. 'cpu': the kernels' CPU references (tests, small
   * models, machines without a GPU); the same numbers within float tolerance, far slower on real models.
   */
  device?: 'gpu' | 'cpu';
  /** Reads a `dir` source (Node's platform/node/model_files.ts); without it a `dir` source is refused. */
  openDir?: (path: string) => ModelFiles;
}

const noModel = () => new EngineStateError('No model is loaded in the engine; load one in the Training panel first.');
const noAdapter = (what: string) => new EngineStateError(`Start an adapter ("New adapter") before ${what}.`);

/** The last part of a path, for a directory model's name. */
const lastPart = (path: string) =>
  path
    .replace(/[\\/]+$/, '')
    .split(/[\\/]/)
    .pop() || path;

/**
 * The kernels on a GPU device, or their CPU references: what the Lab's and the toy's small models
 * (lab/) are built on, outside the EngineApi's one loaded model.
 */
export function computeOps(device: GpuContext | 'cpu'): Ops<unknown> {
  return (device === 'cpu' ? new CpuOps() : new GpuOps(new Engine(device))) as Ops<unknown>;
}

/** The engine in this thread; see the header and EngineApi. */
export function createEngineApi(opts: EngineOptions = {}): EngineApi {
  return new InProcessEngine(opts);
}

export class InProcessEngine implements EngineApi {
  private llm: LlamaModel<unknown> | null = null;
  /** The chat model over llm (null when loaded without a tokenizer). */
  private local: LocalChatModel<unknown> | null = null;
  private trainer: LoraTrainer<unknown> | null = null;
  private ctx: GpuContext | null = null;
  /** Whether ctx is the engine's own (acquired here, destroyed on unload) or the shared one. */
  private ownsCtx = false;
  /** One controller per chat in flight, by call id: concurrent chats share the engine's decode steps (batch.ts). */
  private readonly inFlight = new Map<number, AbortController>();
  private anonymous = 0;
  private info: Omit<ModelSummary, 'adapter'> | null = null;
  /** Most chats decoded in one step, as the run last asked (setDecodeBatch); kept for a model loaded later. */
  private decodeBatch: number | null = null;

  constructor(private readonly opts: EngineOptions = {}) {}

  /**
   * Start with a model built elsewhere (tests: a toy model with its own tokenizer), as if loaded.
   * Not part of EngineApi: the app and the CLI load through `load`.
   */
  adopt(local: LocalChatModel<unknown>, bytes = 0): this {
    this.llm = local.llm;
    this.local = local;
    this.trainer = null;
    this.info = this.describeModel(local.model, local.llm, bytes, 'f32', true);
    return this;
  }

  private need(): LlamaModel<unknown> {
    if (!this.llm) throw noModel();
    return this.llm;
  }

  private needChat(thinking: Thinking): LocalChatModel<unknown> {
    if (!this.local) {
      if (this.llm)
        throw new EngineStateError('This model was loaded without its tokenizer; load it with the tokenizer to chat.');
      throw noModel();
    }
    this.local.thinking = thinking;
    return this.local;
  }

  private describe(): ModelSummary | null {
    if (!this.llm || !this.info) return null;
    const l = this.llm.lora;
    return { ...this.info, adapter: l ? { r: l.r, alpha: l.alpha, targets: [...l.targets] } : null };
  }

  private describeModel(
    name: string,
    llm: LlamaModel<unknown>,
    bytes: number,
    kvFormat: KvFormat,
    chat: boolean,
  ): Omit<ModelSummary, 'adapter'> {
    const c = llm.cfg;
    return {
      name,
      architecture: c.architecture,
      params: paramCount(c),
      layers: c.numLayers,
      hidden: c.hiddenSize,
      vocab: c.vocabSize,
      // the chat model's window (LocalChatModel.capabilities): the checkpoint's, at most 32k
      contextWindow: Math.min(c.maxPositionEmbeddings, 32768),
      bytes,
      weights: llm.weightFormat,
      weightBytes: llm.weightBytes,
      kvFormat,
      eosTokenIds: [...c.eosTokenIds],
      chat,
    };
  }

  private open(source: ModelSource): { files: ModelFiles; name: string } {
    switch (source.kind) {
      case 'hf':
        return {
          files: huggingFaceFiles(source.repo, source.revision ?? 'main', { cache: this.opts.cache }),
          name: source.repo,
        };
      case 'files': {
        const files = new BlobModelFiles(source.files);
        return { files, name: files.label };
      }
      case 'dir':
        if (!this.opts.openDir)
          throw new ModelLoadError(`A directory (${source.path}) cannot be read here; pick its files instead.`, {
            code: 'unsupported',
          });
        return { files: this.opts.openDir(source.path), name: lastPart(source.path) };
      case 'fresh': {
        // transformers' init (std 0.02), f32: the same bytes for the same seed, so a reload rebuilds the same model
        const ck = initCheckpointFiles(
          initConfig({ arch: source.arch, layers: source.layers, hidden: source.hidden }),
          {
            seed: source.seed,
          },
        );
        return { files: new MemoryModelFiles(ck.files), name: freshModelName(source) };
      }
      case 'memory':
        return { files: new MemoryModelFiles(source.files), name: 'in-memory checkpoint' };
    }
  }

  /** The compute backend: the CPU references, or the GPU device (acquired once, again after a loss). */
  private async ops(): Promise<Ops<unknown>> {
    if (this.opts.device === 'cpu') return computeOps('cpu');
    return computeOps(await this.gpuContext());
  }

  /** The GPU device: the shared one when given, else the engine's own (acquired once, again after a loss). */
  private async gpuContext(): Promise<GpuContext> {
    if (this.ctx && !this.ctx.lostError) return this.ctx;
    this.ownsCtx = !this.opts.sharedDevice;
    this.ctx = await (this.opts.sharedDevice ? this.opts.sharedDevice() : acquireGpu(this.opts.gpu));
    return this.ctx;
  }

  /** The model, adapter, optimiser moments and KV cache go back and are destroyed. */
  private release(): void {
    if (!this.llm) return;
    releaseDecodeMemory(this.llm);
    this.trainer?.dispose();
    this.llm.dispose();
    this.llm.ops.flush();
    this.llm.ops.trim();
    this.llm = null;
    this.local = null;
    this.trainer = null;
    this.info = null;
  }

  async plan(source: ModelSource) {
    const p = await planWeights(this.open(source).files);
    return { bytes: p.bytes, params: paramCount(p.config) };
  }

  async load(source: ModelSource, onProgress?: (p: LoadProgress) => void, o: EngineLoadOptions = {}) {
    const { files, name } = this.open(source);
    const withTokenizer = o.tokenizer ?? true;
    const ckpt = await loadCheckpoint(files, { onProgress, weights: o.weights, tokenizer: withTokenizer });
    if (withTokenizer && !ckpt.tokenizer)
      throw new ModelLoadError(`${files.label} has no tokenizer.json; the engine needs it to chat.`, {
        code: 'not-found',
        file: 'tokenizer.json',
      });
    const ops = await this.ops();
    this.release();
    const llm = new LlamaModel<unknown>(ckpt.config, ops, ckpt.weights, { weights: o.weights });
    this.llm = llm;
    this.local = ckpt.tokenizer ? new LocalChatModel(name, llm, ckpt.tokenizer) : null;
    const sched = schedulerFor(llm);
    if (this.decodeBatch !== null) sched.maxBatch = this.decodeBatch;
    sched.kvFormat = o.kvFormat ?? 'f32';
    this.info = this.describeModel(name, llm, ckpt.bytes, o.kvFormat ?? 'f32', !!this.local);
    return this.describe()!;
  }

  async summary() {
    return this.describe();
  }

  async chat(
    messages: ChatMessage[],
    options: Omit<ChatOptions, 'signal' | 'onToken'> = {},
    onToken?: (delta: string) => void,
    thinking: Thinking = 'off',
    callId: number = --this.anonymous,
  ): Promise<ChatResult> {
    const m = this.needChat(thinking);
    if (this.inFlight.has(callId)) throw new RangeError(`chat: call id ${callId} is already in flight`);
    const ac = new AbortController();
    this.inFlight.set(callId, ac);
    try {
      return await m.chat(messages, { ...options, signal: ac.signal, onToken });
    } finally {
      if (this.inFlight.get(callId) === ac) this.inFlight.delete(callId);
    }
  }

  async abort(callId?: number) {
    if (callId !== undefined) this.inFlight.get(callId)?.abort();
    else for (const ac of this.inFlight.values()) ac.abort();
  }

  async countTokens(messages: ChatMessage[], thinking: Thinking = 'off') {
    return this.needChat(thinking).countTokens(messages);
  }

  async decode(prompts: number[][], o: DecodeOptions): Promise<number[][]> {
    const llm = this.need();
    const V = llm.cfg.vocabSize;
    for (const p of prompts)
      if (p.length === 0 || p.some((i) => !Number.isInteger(i) || i < 0 || i >= V))
        throw new RangeError(`decode: a prompt needs token ids from 0 to ${V - 1}; got [${p.slice(0, 8).join(',')}]`);
    const { maxBatch, stepsPerReadback, seed = 0, ...sample } = o;
    const per = (i: number) => ({ ...sample, seed: seed + i, stopIds: o.stopIds ?? llm.cfg.eosTokenIds });
    const kvFormat = this.info?.kvFormat ?? 'f32';
    // one prompt with the f32 cache: generate(), the reference path; otherwise the batching scheduler
    if (prompts.length === 1 && kvFormat === 'f32')
      return [await generate(llm, prompts[0]!, { ...per(0), stepsPerReadback })];
    const scheduler = new DecodeScheduler(llm, {
      maxBatch: maxBatch ?? SCHEDULER_DEFAULTS.maxBatch,
      stepsPerReadback,
      kvFormat,
    });
    try {
      return await Promise.all(prompts.map((p, i) => scheduler.generate(p, per(i))));
    } finally {
      scheduler.releaseIdle();
    }
  }

  async logits(ids: number[], o: { all?: boolean } = {}): Promise<Float32Array[]> {
    const llm = this.need();
    const V = llm.cfg.vocabSize;
    if (ids.length === 0 || ids.some((i) => !Number.isInteger(i) || i < 0 || i >= V))
      throw new RangeError(`logits: token ids from 0 to ${V - 1}, at least one`);
    const { logits } = llm.forward(ids, { lastOnly: !o.all });
    const flat = await llm.ops.read(logits);
    return Array.from({ length: flat.length / V }, (_, t) => flat.slice(t * V, (t + 1) * V));
  }

  async setDecodeBatch(n: number) {
    if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`setDecodeBatch: a whole number ≥ 1; got ${n}`);
    this.decodeBatch = n;
    if (this.llm) schedulerFor(this.llm).maxBatch = n;
  }

  async decodeStats(): Promise<DecodeStats> {
    const sched = schedulerFor(this.need());
    return { maxBatch: sched.maxBatch, ...sched.stats() };
  }

  async releaseDecodeMemory() {
    if (this.llm) releaseDecodeMemory(this.llm);
  }

  async initLora(r: number, alpha: number, targets: LoraModule[], seed = 0) {
    this.need().initLora(r, alpha, targets, seed);
    this.trainer = null;
    return this.describe()!;
  }

  async importAdapter(configJson: string, weights: Uint8Array) {
    const llm = this.need();
    llm.setLora(importPeft(JSON.parse(configJson), weights, llm.cfg));
    this.trainer = null;
    return this.describe()!;
  }

  async loadAdapter(source: ModelSource) {
    const llm = this.need();
    llm.setLora(await loadPeftAdapter(this.open(source).files, { model: llm.cfg }));
    this.trainer = null;
    return this.describe()!;
  }

  async exportAdapter() {
    const llm = this.need();
    const a = await llm.getLora();
    if (!a) throw new EngineStateError('There is no adapter to export; start one with "New adapter" first.');
    const f = exportPeft(a, { baseModel: this.info?.name ?? 'unknown' });
    return { configJson: f.adapterConfigJson, weights: f.weights };
  }

  /** The trainer of the current adapter, with `o` applied from now on. */
  private trainerFor(what: string, o: TrainOptions): LoraTrainer<unknown> {
    const llm = this.need();
    if (!llm.lora) throw noAdapter(what);
    releaseDecodeMemory(llm); // the KV cache is stale after a step, and the forward needs the memory
    this.trainer ??= new LoraTrainer(llm, o);
    Object.assign(this.trainer.opts, o);
    return this.trainer;
  }

  async learnerLogprobs(samples: GrpoSample[], o: TrainOptions = {}) {
    return this.trainerFor('training', o).learnerLogprobs(samples);
  }

  async trainGrpo(samples: GrpoSample[], o: TrainOptions = {}) {
    return this.trainerFor('training', o).trainStep(samples);
  }

  async exportState() {
    if (!this.llm?.lora) return null;
    this.trainer ??= new LoraTrainer(this.llm);
    return encodeTrainerState(await this.trainer.exportState());
  }

  async importState(bytes: Uint8Array, o: TrainOptions = {}) {
    const llm = this.need();
    if (!llm.lora) throw new EngineStateError('Import the adapter before its optimiser state.');
    this.trainer = new LoraTrainer(llm, o);
    this.trainer.importState(decodeTrainerState(bytes));
  }

  async selfCheck(): Promise<SelfCheck> {
    if (this.opts.device === 'cpu') return { device: 'cpu', report: null, ok: true, maxAbsError: 0 };
    const ctx = await this.gpuContext();
    const check = await gpuSelfCheck(ctx);
    return { device: 'gpu', report: ctx.report, ...check };
  }

  async unload() {
    for (const ac of this.inFlight.values()) ac.abort();
    this.release();
    if (this.ownsCtx) this.ctx?.destroy();
    this.ctx = null;
  }
}
