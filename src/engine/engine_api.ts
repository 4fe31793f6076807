/**
 * What the engine worker exposes (workers/engine.worker.ts), also usable in-process: load a
 * checkpoint (Hugging Face URL, picked files, or files in memory), chat with it (streaming through
 * a callback), manage the LoRA adapter (init, PEFT import/export), and train it on chat samples.
 * The model lives on this thread's GPU device.
 */
import type { ChatMessage, ChatOptions, ChatResult } from '../core/llm/chat_model.ts';
import type { ChatSample } from '../core/train/grpo.ts';
import { acquireGpu } from './device.ts';
import {
  BlobModelFiles,
  huggingFaceFiles,
  loadCheckpoint,
  MemoryModelFiles,
  type BlobFile,
  type LoadProgress,
  type ModelFileCache,
  type ModelFiles,
} from './io/load.ts';
import { paramCount } from './io/config.ts';
import { exportPeft, importPeft, type LoraModule } from './io/peft.ts';
import type { TextTokenizer } from './io/tokenizer.ts';
import { LocalChatModel } from './local_model.ts';
import { LlamaModel } from './model.ts';
import { GpuOps } from './ops.ts';
import { Engine, type Tensor } from './runtime.ts';
import { LoraTrainer, type StepStats, type TokenSample, type TrainOptions } from './train.ts';

export type ModelSource =
  | { kind: 'hf'; repo: string; revision?: string }
  | { kind: 'files'; files: BlobFile[] }
  | { kind: 'memory'; files: Map<string, Uint8Array> };

export interface ModelSummary {
  name: string;
  architecture: string;
  params: number;
  layers: number;
  hidden: number;
  vocab: number;
  contextWindow: number;
  bytes: number;
  adapter: { r: number; alpha: number; targets: string[] } | null;
}

/** Tokenise a chat sample: prompt via the chat template, completion + end-of-turn token. */
export function tokenizeSample(tok: TextTokenizer, eos: number[], s: ChatSample): TokenSample {
  const prompt = tok.encodeChat(
    s.prompt.map((m) => ({ role: m.role, content: m.content })),
    { addGenerationPrompt: true },
  );
  const completion = tok.encode(s.completion, { addSpecialTokens: false });
  return {
    ids: [...prompt, ...completion, ...(eos.length ? [eos[0]!] : [])],
    promptLen: prompt.length,
    advantage: s.advantage,
  };
}

export function createEngineApi(opts: { cache?: ModelFileCache; gpu?: GPU } = {}) {
  let local: LocalChatModel<Tensor> | null = null;
  let trainer: LoraTrainer<Tensor> | null = null;
  let abort: AbortController | null = null;
  let summary: ModelSummary | null = null;

  const need = (): LocalChatModel<Tensor> => {
    if (!local) throw new Error('No model is loaded in the engine; load one in the Training panel first.');
    return local;
  };
  const describe = (): ModelSummary | null => {
    if (!local || !summary) return null;
    const l = local.llm.lora;
    return { ...summary, adapter: l ? { r: l.r, alpha: l.alpha, targets: [...l.targets] } : null };
  };

  return {
    async load(source: ModelSource, onProgress?: (p: LoadProgress) => void): Promise<ModelSummary> {
      let files: ModelFiles;
      let name: string;
      if (source.kind === 'hf') {
        files = huggingFaceFiles(source.repo, source.revision ?? 'main', { cache: opts.cache });
        name = source.repo;
      } else if (source.kind === 'files') {
        files = new BlobModelFiles(source.files);
        name = files.label;
      } else {
        files = new MemoryModelFiles(source.files);
        name = 'in-memory checkpoint';
      }
      const ckpt = await loadCheckpoint(files, { onProgress });
      if (!ckpt.tokenizer) throw new Error('The checkpoint has no tokenizer.json; the engine needs it to chat.');
      const ctx = await acquireGpu(opts.gpu);
      const llm = new LlamaModel<Tensor>(ckpt.config, new GpuOps(new Engine(ctx)), ckpt.weights);
      local = new LocalChatModel(name, llm, ckpt.tokenizer);
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
        adapter: null,
      };
      return describe()!;
    },

    summary: describe,

    async chat(
      messages: ChatMessage[],
      options: Omit<ChatOptions, 'signal' | 'onToken'> = {},
      onToken?: (delta: string) => void,
    ): Promise<ChatResult> {
      const m = need();
      abort = new AbortController();
      try {
        return await m.chat(messages, { ...options, signal: abort.signal, onToken });
      } finally {
        abort = null;
      }
    },

    abort(): void {
      abort?.abort();
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

    async trainStep(samples: ChatSample[], o: TrainOptions = {}): Promise<StepStats & { samples: number }> {
      const m = need();
      if (!m.llm.lora) throw new Error('Start an adapter ("New adapter") before training.');
      trainer ??= new LoraTrainer(m.llm, o);
      Object.assign(trainer.opts, o);
      const batch = samples
        .map((s) => tokenizeSample(m.tokenizer, m.llm.cfg.eosTokenIds, s))
        .filter((s) => s.ids.length <= m.capabilities.contextWindow);
      const stats = await trainer.trainStep(batch);
      return { ...stats, samples: batch.length };
    },
  };
}

export type EngineApi = ReturnType<typeof createEngineApi>;
