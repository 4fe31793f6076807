/**
 * Tiny random checkpoints in the Hugging Face layout, for tests (no download needed):
 *
 *   config.json, model.safetensors (or model-0000i-of-0000n.safetensors + index),
 *   tokenizer.json (byte-level BPE: 256 byte tokens + <|endoftext|> <|im_start|> <|im_end|>),
 *   tokenizer_config.json (a ChatML chat template)
 *
 * Variants (all: 2 layers, hidden 32, 4 heads, 2 kv heads, intermediate 64, vocab 272):
 *   llama   plain Llama, head_dim 8, separate lm_head
 *   llama3  llama3 RoPE scaling (factor 8, low 1, high 4, original 32), rope_theta 500000,
 *           tied embeddings, two eos ids
 *   qwen2   q/k/v biases, rope_theta 1e6, separate lm_head
 *   qwen3   q_norm/k_norm, explicit head_dim 16 (≠ hidden/heads), tied embeddings
 *
 * Values are seeded (createRng) and, for bf16/f16, already rounded to the stored precision, so the
 * returned tensors equal what a reader gets back, bit for bit.
 */
import {
  byteTokenizerFiles,
  CHATML_TEMPLATE,
  initCheckpointFiles,
  initTensors,
  roundTo as roundToInit,
  type InitDType,
  type InitTensor,
} from '../../src/engine/io/init_checkpoint.ts';
import type { ModelConfig } from '../../src/engine/io/config.ts';
import { writeModelFiles } from '../../src/platform/node/model_files.ts';

export type TinyVariant = 'llama' | 'llama3' | 'qwen2' | 'qwen3';
export const TINY_VARIANTS: readonly TinyVariant[] = ['llama', 'llama3', 'qwen2', 'qwen3'];
export type TinyDType = InitDType;

/** Ids of the tiny tokenizer's special tokens (after the 256 byte tokens). */
export const TINY_SPECIAL = { endoftext: 256, imStart: 257, imEnd: 258 } as const;
export const TINY_VOCAB = 272;

export function tinyConfig(variant: TinyVariant): ModelConfig {
  const base: ModelConfig = {
    architecture: 'llama',
    vocabSize: TINY_VOCAB,
    hiddenSize: 32,
    intermediateSize: 64,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 8,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    ropeScaling: null,
    tieWordEmbeddings: false,
    qkvBias: false,
    oBias: false,
    qkNorm: false,
    maxPositionEmbeddings: 128,
    bosTokenId: TINY_SPECIAL.endoftext,
    eosTokenIds: [TINY_SPECIAL.imEnd],
    dtype: 'float32',
  };
  switch (variant) {
    case 'llama':
      return base;
    case 'llama3':
      return {
        ...base,
        ropeTheta: 500000,
        ropeScaling: {
          type: 'llama3',
          factor: 8,
          lowFreqFactor: 1,
          highFreqFactor: 4,
          originalMaxPositionEmbeddings: 32,
        },
        tieWordEmbeddings: true,
        eosTokenIds: [TINY_SPECIAL.endoftext, TINY_SPECIAL.imEnd],
      };
    case 'qwen2':
      return { ...base, architecture: 'qwen2', ropeTheta: 1e6, rmsNormEps: 1e-6, qkvBias: true, bosTokenId: null };
    case 'qwen3':
      return {
        ...base,
        architecture: 'qwen3',
        headDim: 16,
        ropeTheta: 1e6,
        rmsNormEps: 1e-6,
        qkNorm: true,
        tieWordEmbeddings: true,
        bosTokenId: null,
      };
  }
}

const TORCH: Record<TinyDType, string> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };

/** Round f32 values to what the stored dtype keeps. */
export function roundTo(dtype: TinyDType, x: Float32Array): Float32Array {
  return roundToInit(dtype, x);
}

export type TinyTensor = InitTensor;

/** The checkpoint's tensors (already rounded to `dtype`), in hfTensorSpecs order. */
export function tinyTensors(variant: TinyVariant, dtype: TinyDType = 'f32', seed = 0, config = tinyConfig(variant)) {
  return initTensors(config, { dtype, seed, scheme: 'uniform' });
}

export const TINY_CHAT_TEMPLATE = CHATML_TEMPLATE;

/** tokenizer.json and tokenizer_config.json of the tiny byte-level tokenizer (ids 0..255 = bytes). */
export function tinyTokenizerFiles() {
  return byteTokenizerFiles(128);
}

export interface TinyCheckpointOptions {
  /** Split the weights into shards of at most this many bytes (true: 16 KiB, several shards). */
  sharded?: boolean | number;
  /** Write tokenizer.json and tokenizer_config.json (default true). */
  tokenizer?: boolean;
}

export interface TinyCheckpoint {
  config: ModelConfig;
  hfConfig: Record<string, unknown>;
  /** The values a reader gets back (rounded to the stored dtype). */
  tensors: Map<string, TinyTensor>;
  /** File name → bytes, as written. */
  files: Map<string, Uint8Array>;
}

/** The checkpoint's files in memory (src/engine/io/init_checkpoint.ts builds them; 'uniform' values). */
export function tinyCheckpointFiles(
  variant: TinyVariant,
  dtype: TinyDType = 'f32',
  seed = 0,
  opts: TinyCheckpointOptions = {},
): TinyCheckpoint {
  const config: ModelConfig = { ...tinyConfig(variant), dtype: TORCH[dtype] };
  return initCheckpointFiles(config, { ...opts, dtype, seed, scheme: 'uniform', generationConfig: false });
}

/** Write a tiny checkpoint under `dir` (created if needed). */
export async function writeTinyCheckpoint(
  dir: string,
  variant: TinyVariant,
  dtype: TinyDType = 'f32',
  seed = 0,
  opts: TinyCheckpointOptions = {},
): Promise<TinyCheckpoint> {
  const ck = tinyCheckpointFiles(variant, dtype, seed, opts);
  await writeModelFiles(dir, ck.files);
  return ck;
}
