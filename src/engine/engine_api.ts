/**
 * What the engine worker exposes (workers/engine.worker.ts), also usable in-process: load a
 * checkpoint (Hugging Face URL, picked files, files in memory, or a fresh tiny random model built
 * here), chat with it (streaming through a callback; every reply carries its token ids and
 * log π_old), count prompt tokens exactly, manage the LoRA adapter (init, PEFT import/export), and
 * train it token-exactly: one clipped-GRPO optimiser step per `trainGrpo` call on the sampled ids
 * (train.ts), with AdamW's state exported and imported for resuming. The model lives on this
 * thread's GPU device.
 */
import type { ChatMessage, ChatOptions, ChatResult } from '../core/llm/chat_model.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import { acquireGpu } from './runtime/device.ts';
import {
  BlobModelFiles,
  huggingFaceFiles,
  loadCheckpoint,
  MemoryModelFiles,
  planWeights,
  type WeightPlan,
  type BlobFile,
  type LoadProgress,
  type ModelFileCache,
  type ModelFiles,
} from './io/load.ts';
import { paramCount, type Architecture } from './io/config.ts';
import { initCheckpointFiles, initConfig } from './io/init_checkpoint.ts';
import type { WeightFormat } from './io/pack.ts';
import { exportPeft, importPeft, type LoraModule } from './io/peft.ts';
import type { KvFormat } from './model/kv_pages.ts';
import { LocalChatModel, releaseDecodeMemory, schedulerFor } from './model/local_model.ts';
import { LlamaModel } from './model/model.ts';
import { GpuOps } from './ops/ops.ts';
import { Engine, type Tensor } from './runtime/runtime.ts';
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
  /** How the frozen base is stored on the GPU, and the bytes it takes there. */
  weights: WeightFormat;
  weightBytes: number;
  /** How the decode KV cache stores k and v. */
  kvFormat: KvFormat;
  adapter: { r: number; alpha: number; targets: string[] } | null;
}

export function createEngineApi(opts: { cache?: ModelFileCache; gpu?: GPU } = {}) {
  let local: LocalChatModel<Tensor> | null = null;
  let trainer: LoraTrainer<Tensor> | null = null;
  /** One controller per chat in flight, by call id: concurrent chats share the engine's decode steps (batch.ts). */
  const inFlight = new Map<number, AbortController>();
  let anonymous = 0;
  let summary: ModelSummary | null = null;
  /** Most chats decoded in one step, as the run last asked (setDecodeBatch); kept for a model loaded later. */
  let decodeBatch: number | null = null;

  const need = (): LocalChatModel<Tensor> => {
    if (!local) throw new Error('No model is loaded in the engine; load one in the Training panel first.');
    return local;
  };
  const describe = (): ModelSummary | null => {
    if (!local || !summary) return null;
    const l = local.llm.lora;
    return { ...summary, adapter: l ? { r: l.r, alpha: l.alpha, targets: [...l.targets] } : null };
  };

  const open = (source: ModelSource): { files: ModelFiles; name: string } => {
    if (source.kind === 'hf')
      return {
        files: huggingFaceFiles(source.repo, source.revision ?? 'main', { cache: opts.cache }),
        name: source.repo,
      };
    if (source.kind === 'files') {
      const files = new BlobModelFiles(source.files);
      return { files, name: files.label };
    }
    if (source.kind === 'fresh') {
      // transformers' init (std 0.02), f32: the same bytes for the same seed, so a reload rebuilds the same model
      const ck = initCheckpointFiles(initConfig({ arch: source.arch, layers: source.layers, hidden: source.hidden }), {
        seed: source.seed,
      });
      return { files: new MemoryModelFiles(ck.files), name: freshModelName(source) };
    }
    return { files: new MemoryModelFiles(source.files), name: 'in-memory checkpoint' };
  };

  return {
    /** config.json only: the GPU bytes each weight format would take, before downloading the weights. */
    async plan(source: ModelSource): Promise<Omit<WeightPlan, 'config'> & { params: number }> {
      const p = await planWeights(open(source).files);
      return { bytes: p.bytes, params: paramCount(p.config) };
    },

    /**
     * Load a checkpoint; `o.weights` picks the base's storage (default f32, the reference) and
     * `o.kvFormat` the decode KV cache's (default f32; f16 halves it, see kv_pages.ts).
     */
    async load(
      source: ModelSource,
      onProgress?: (p: LoadProgress) => void,
      o: { weights?: WeightFormat; kvFormat?: KvFormat } = {},
    ): Promise<ModelSummary> {
      const { files, name } = open(source);
      const ckpt = await loadCheckpoint(files, { onProgress, weights: o.weights });
      if (!ckpt.tokenizer) throw new Error('The checkpoint has no tokenizer.json; the engine needs it to chat.');
      const ctx = await acquireGpu(opts.gpu);
      if (local) {
        // the previous model's weights, adapter, optimiser moments and KV cache go back and are destroyed
        releaseDecodeMemory(local.llm);
        trainer?.dispose();
        local.llm.dispose();
        local.llm.ops.flush();
        local.llm.ops.trim();
        local = null;
      }
      const llm = new LlamaModel<Tensor>(ckpt.config, new GpuOps(new Engine(ctx)), ckpt.weights, {
        weights: o.weights,
      });
      local = new LocalChatModel(name, llm, ckpt.tokenizer);
      if (decodeBatch !== null) schedulerFor(llm).maxBatch = decodeBatch;
      schedulerFor(llm).kvFormat = o.kvFormat ?? 'f32';
      trainer = null;
      const c = ckpt.config;
      const params = paramCount(c);
      summary = {
        name,
        architecture: c.architecture,
        params,
        layers: c.numLayers,
        hidden: c.hiddenSize,
        vocab: c.vocabSize,
        contextWindow: local.capabilities.contextWindow,
        bytes: ckpt.bytes,
        weights: llm.weightFormat,
        weightBytes: llm.weightBytes,
        kvFormat: o.kvFormat ?? 'f32',
        adapter: null,
      };
      return describe()!;
    },

    summary: describe,

    /** A reply with its token ids and log π_old (`tokens`); `thinking` is config.thinking. */
    async chat(
      messages: ChatMessage[],
      options: Omit<ChatOptions, 'signal' | 'onToken'> = {},
      onToken?: (delta: string) => void,
      thinking: Thinking = 'off',
      callId: number = --anonymous,
    ): Promise<ChatResult> {
      const m = need();
      m.thinking = thinking;
      const ac = new AbortController();
      if (inFlight.has(callId)) throw new RangeError(`chat: call id ${callId} is already in flight`);
      inFlight.set(callId, ac);
      try {
        return await m.chat(messages, { ...options, signal: ac.signal, onToken });
      } finally {
        if (inFlight.get(callId) === ac) inFlight.delete(callId);
      }
    },

    /** Stop the chat with this call id, or every chat in flight (each ends with an AbortError). */
    abort(callId?: number): void {
      if (callId !== undefined) inFlight.get(callId)?.abort();
      else for (const ac of inFlight.values()) ac.abort();
    },

    /** Exact prompt tokens of messages (the ids chat() would feed), for the context budget. */
    countTokens(messages: ChatMessage[], thinking: Thinking = 'off'): Promise<number> {
      const m = need();
      m.thinking = thinking;
      return m.countTokens(messages);
    },

    initLora(r: number, alpha: number, targets: LoraModule[], seed = 0): ModelSummary {
      need().llm.initLora(r, alpha, targets, seed);
      trainer = null;
      return describe()!;
    },

    importAdapter(configJson: string, weights: Uint8Array): ModelSummary {
      const m = need();
      m.llm.setLora(importPeft(JSON.parse(configJson), weights, m.llm.cfg));
      trainer = null;
      return describe()!;
    },

    async exportAdapter(): Promise<{ configJson: string; weights: Uint8Array }> {
      const m = need();
      const a = await m.llm.getLora();
      if (!a) throw new Error('There is no adapter to export; start one with "New adapter" first.');
      const f = exportPeft(a, { baseModel: m.model });
      return { configJson: f.adapterConfigJson, weights: f.weights };
    },

    /**
     * Decode up to `n` chats in one step (the run's budget of chats in flight,
     * `concurrencySizes(concurrency).decodeBatch`); applies to this model and to any loaded later.
     */
    setDecodeBatch(n: number): void {
      if (!(Number.isInteger(n) && n >= 1)) throw new RangeError(`setDecodeBatch: a whole number ≥ 1; got ${n}`);
      decodeBatch = n;
      if (local) schedulerFor(local.llm).maxBatch = n;
    },

    /**
     * The loaded model's decode scheduler: its batch limit and counters (steps, rows, most rows in a
     * step), and its KV cache's format and bytes.
     */
    decodeStats() {
      const sched = schedulerFor(need().llm);
      return { maxBatch: sched.maxBatch, ...sched.stats() };
    },

    /** Give the idle decode KV cache back (a training round's forward passes need the memory). */
    releaseDecodeMemory(): void {
      if (local) releaseDecodeMemory(local.llm);
    },

    /**
     * One clipped-GRPO optimiser step on one minibatch of token-exact samples (ids, spans, old
     * log-probs, advantage, temperature); `o` (the run's trainLr, clipLow, clipHigh, klCoef,
     * maxGradNorm, minibatchTokens) applies from this step on.
     */
    async trainGrpo(samples: GrpoSample[], o: TrainOptions = {}): Promise<StepStats> {
      const m = need();
      if (!m.llm.lora) throw new Error('Start an adapter ("New adapter") before training.');
      releaseDecodeMemory(m.llm); // the KV cache is stale after the step, and the step needs the memory
      trainer ??= new LoraTrainer(m.llm, o);
      Object.assign(trainer.opts, o);
      return trainer.trainStep(samples);
    },

    /**
     * log π_old of each sample's trained tokens under the current adapter (no gradient): a training
     * round takes them before its first trainGrpo step and sends them back as learnerLogprobs (TIS).
     */
    async learnerLogprobs(samples: GrpoSample[], o: TrainOptions = {}): Promise<number[][]> {
      const m = need();
      if (!m.llm.lora) throw new Error('Start an adapter ("New adapter") before training.');
      releaseDecodeMemory(m.llm); // the forward needs the memory the idle KV cache holds
      trainer ??= new LoraTrainer(m.llm, o);
      Object.assign(trainer.opts, o);
      return trainer.learnerLogprobs(samples);
    },

    /** AdamW's moments and step as one safetensors file (train.ts encodeTrainerState); null before any step. */
    async exportState(): Promise<Uint8Array | null> {
      return trainer ? encodeTrainerState(await trainer.exportState()) : null;
    },

    /** Restore exportState()'s bytes (the adapter must already be in place: importAdapter). */
    importState(bytes: Uint8Array, o: TrainOptions = {}): void {
      const m = need();
      if (!m.llm.lora) throw new Error('Import the adapter before its optimiser state.');
      trainer = new LoraTrainer(m.llm, o);
      trainer.importState(decodeTrainerState(bytes));
    },
  };
}

export type EngineApi = ReturnType<typeof createEngineApi>;
