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
import { createRng, type Rng } from '../../src/core/rng.ts';
import { hfTensorSpecs, modelConfigToHf, type ModelConfig, type TensorSpec } from '../../src/engine/io/config.ts';
import {
  SINGLE_FILE,
  writeSafetensors,
  writeShardedSafetensors,
  type SafetensorsDType,
  type TensorToWrite,
} from '../../src/engine/io/safetensors.ts';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../../src/engine/io/float16.ts';
import { writeModelFiles } from '../../src/platform/node/model_files.ts';

export type TinyVariant = 'llama' | 'llama3' | 'qwen2' | 'qwen3';
export const TINY_VARIANTS: readonly TinyVariant[] = ['llama', 'llama3', 'qwen2', 'qwen3'];
export type TinyDType = 'f32' | 'f16' | 'bf16';

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

const STORED: Record<TinyDType, SafetensorsDType> = { f32: 'F32', f16: 'F16', bf16: 'BF16' };
const TORCH: Record<TinyDType, string> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };

/** Round f32 values to what the stored dtype keeps. */
export function roundTo(dtype: TinyDType, x: Float32Array): Float32Array {
  if (dtype === 'f32') return x;
  return dtype === 'bf16' ? bf16ToF32(f32ToBf16(x)) : f16ToF32(f32ToF16(x));
}

function values(spec: TensorSpec, rng: Rng): Float32Array {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  const u = () => rng.next() * 2 - 1;
  switch (spec.role) {
    case 'input_norm':
    case 'post_attention_norm':
    case 'final_norm':
    case 'q_norm':
    case 'k_norm':
      for (let i = 0; i < n; i++) out[i] = 1 + 0.1 * u();
      break;
    case 'q_bias':
    case 'k_bias':
    case 'v_bias':
    case 'o_bias':
      for (let i = 0; i < n; i++) out[i] = 0.1 * u();
      break;
    case 'embed':
      for (let i = 0; i < n; i++) out[i] = u();
      break;
    default: {
      const scale = 1 / Math.sqrt(spec.shape[1]!); // (out, in)
      for (let i = 0; i < n; i++) out[i] = scale * u();
    }
  }
  return out;
}

export interface TinyTensor {
  shape: number[];
  data: Float32Array;
}

/** The checkpoint's tensors (already rounded to `dtype`), in hfTensorSpecs order. */
export function tinyTensors(variant: TinyVariant, dtype: TinyDType = 'f32', seed = 0, config = tinyConfig(variant)) {
  const rng = createRng(seed);
  const out = new Map<string, TinyTensor>();
  for (const spec of hfTensorSpecs(config))
    out.set(spec.name, { shape: spec.shape, data: roundTo(dtype, values(spec, rng)) });
  return out;
}

/** GPT-2's byte → printable-character table, used by byte-level BPE vocabularies. */
function byteChars(): string[] {
  const bs: number[] = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++)
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  const table = new Array<string>(256);
  bs.forEach((b, i) => (table[b] = String.fromCodePoint(cs[i]!)));
  return table;
}

export const TINY_CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** tokenizer.json and tokenizer_config.json of the tiny byte-level tokenizer (ids 0..255 = bytes). */
export function tinyTokenizerFiles(): {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
} {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, i) => (vocab[c] = i));
  const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
  const added = specials.map((content, i) => ({
    id: 256 + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
  const addedDecoder: Record<string, unknown> = {};
  for (const a of added) addedDecoder[String(a.id)] = { ...a, id: undefined };
  const tokenizerConfig = {
    added_tokens_decoder: addedDecoder,
    bos_token: null,
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    chat_template: TINY_CHAT_TEMPLATE,
    clean_up_tokenization_spaces: false,
    model_max_length: 128,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  return { tokenizerJson, tokenizerConfig };
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

const text = (v: unknown) => new TextEncoder().encode(JSON.stringify(v, null, 2) + '\n');

/** The checkpoint's files in memory. */
export function tinyCheckpointFiles(
  variant: TinyVariant,
  dtype: TinyDType = 'f32',
  seed = 0,
  opts: TinyCheckpointOptions = {},
): TinyCheckpoint {
  const config = { ...tinyConfig(variant), dtype: TORCH[dtype] };
  const hfConfig = modelConfigToHf(config);
  const tensors = tinyTensors(variant, dtype, seed, config);
  const toWrite = new Map<string, TensorToWrite>();
  for (const [name, t] of tensors) toWrite.set(name, { dtype: STORED[dtype], shape: t.shape, data: t.data });
  const files = new Map<string, Uint8Array>([['config.json', text(hfConfig)]]);
  const metadata = { format: 'pt' };
  if (opts.sharded) {
    const max = typeof opts.sharded === 'number' ? opts.sharded : 16 * 1024;
    for (const [name, bytes] of writeShardedSafetensors(toWrite, max, metadata).files) files.set(name, bytes);
  } else files.set(SINGLE_FILE, writeSafetensors(toWrite, metadata));
  if (opts.tokenizer ?? true) {
    const { tokenizerJson, tokenizerConfig } = tinyTokenizerFiles();
    files.set('tokenizer.json', text(tokenizerJson));
    files.set('tokenizer_config.json', text(tokenizerConfig));
  }
  return { config, hfConfig, tensors, files };
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
