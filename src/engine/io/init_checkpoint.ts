/**
 * A fresh, randomly initialised checkpoint in the Hugging Face layout, built in memory (pure: it
 * returns file name → bytes; `spade engine init` and the test helper write them):
 *
 *   config.json              LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM
 *   model.safetensors        (or model-0000i-of-0000n.safetensors + index) in f32, bf16 or f16
 *   tokenizer.json           byte-level BPE with no merges: ids 0..255 are the bytes,
 *                            256 <|endoftext|>, 257 <|im_start|>, 258 <|im_end|>
 *   tokenizer_config.json    a ChatML chat template, eos <|im_end|>
 *   generation_config.json   bos/eos ids
 *
 * A model to start from without downloading (the toy proof, and "start from a tiny fresh
 * model" in the app), loadable by io/load.ts and, being the standard layout, by transformers.
 *
 * Two initialisations, both seeded with createRng:
 *   'normal'  (default): transformers' own — every matrix and the embedding N(0, std²) with std =
 *             initializer_range (default 0.02), norms 1, biases 0.
 *   'uniform' the test checkpoints' values (kept bit for bit for the tests that compare backends):
 *             matrices U(−1, 1)/√in, embedding U(−1, 1), norms 1 + 0.1·U(−1, 1), biases 0.1·U(−1, 1).
 * Values are rounded to the stored dtype, so `tensors` equals what a reader gets back.
 */
import { createRng, type Rng } from '../../core/rng.ts';
import { hfTensorSpecs, modelConfigToHf, type Architecture, type ModelConfig, type TensorSpec } from './config.ts';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './float16.ts';
import {
  SINGLE_FILE,
  writeSafetensors,
  writeShardedSafetensors,
  type SafetensorsDType,
  type TensorToWrite,
} from './safetensors.ts';

export type InitDType = 'f32' | 'f16' | 'bf16';
type InitScheme = 'normal' | 'uniform';

/** Ids of the byte-level tokenizer's special tokens (after the 256 byte tokens). */
const BYTE_SPECIAL = { endoftext: 256, imStart: 257, imEnd: 258 } as const;
/** Byte tokens + the three specials. */
const BYTE_VOCAB = 259;

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface InitShape {
  arch: Architecture;
  layers: number;
  hidden: number;
  /** Default: hidden / 16, at least 1 (head_dim 16 — small heads keep a tiny model's attention cheap). */
  heads?: number;
  /** Default: heads / 2 when even (grouped-query attention, as the real models), else heads. */
  kvHeads?: number;
  /** Default: 2 · hidden rounded up to a multiple of 8 (SwiGLU models use about 2.7×; 2× is enough here). */
  intermediate?: number;
  /** Default 2048: the agent's prompts and a few turns fit; RoPE makes any length work. */
  maxPositions?: number;
  /** Default: llama ties nothing, qwen2 nothing, qwen3 ties the embedding (as Qwen3-0.6B). */
  tieEmbeddings?: boolean;
  /** Vocabulary rows (≥ BYTE_VOCAB; extra rows are unused padding, as real checkpoints have). */
  vocab?: number;
}

/** The ModelConfig of a fresh checkpoint; throws a RangeError naming the bad dimension. */
export function initConfig(s: InitShape): ModelConfig {
  const whole = (n: number, what: string) => {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`${what} must be a whole number ≥ 1; got ${n}`);
    return n;
  };
  const layers = whole(s.layers, 'layers');
  const hidden = whole(s.hidden, 'hidden');
  const heads = whole(s.heads ?? Math.max(1, Math.floor(hidden / 16)), 'heads');
  const kvHeads = whole(s.kvHeads ?? (heads % 2 === 0 ? heads / 2 : heads), 'kv-heads');
  if (heads % kvHeads !== 0) throw new RangeError(`heads (${heads}) must be a multiple of kv-heads (${kvHeads})`);
  const headDim = hidden / heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0)
    throw new RangeError(`hidden (${hidden}) / heads (${heads}) must be an even whole number (RoPE rotates pairs)`);
  const vocab = whole(s.vocab ?? BYTE_VOCAB, 'vocab');
  if (vocab < BYTE_VOCAB) throw new RangeError(`vocab must be at least ${BYTE_VOCAB} (256 bytes + 3 special tokens)`);
  const qwen = s.arch !== 'llama';
  return {
    architecture: s.arch,
    vocabSize: vocab,
    hiddenSize: hidden,
    intermediateSize: whole(s.intermediate ?? Math.ceil((2 * hidden) / 8) * 8, 'intermediate'),
    numLayers: layers,
    numHeads: heads,
    numKvHeads: kvHeads,
    headDim,
    rmsNormEps: qwen ? 1e-6 : 1e-5,
    ropeTheta: qwen ? 1e6 : 10000,
    ropeScaling: null,
    tieWordEmbeddings: s.tieEmbeddings ?? s.arch === 'qwen3',
    qkvBias: s.arch === 'qwen2',
    oBias: false,
    qkNorm: s.arch === 'qwen3',
    maxPositionEmbeddings: whole(s.maxPositions ?? 2048, 'max positions'),
    bosTokenId: null,
    eosTokenIds: [BYTE_SPECIAL.imEnd],
    dtype: 'float32',
  };
}

const TORCH: Record<InitDType, string> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };
const STORED: Record<InitDType, SafetensorsDType> = { f32: 'F32', f16: 'F16', bf16: 'BF16' };

/** Round f32 values to what the stored dtype keeps. */
export function roundTo(dtype: InitDType, x: Float32Array): Float32Array {
  if (dtype === 'f32') return x;
  return dtype === 'bf16' ? bf16ToF32(f32ToBf16(x)) : f16ToF32(f32ToF16(x));
}

const NORMS = new Set(['input_norm', 'post_attention_norm', 'final_norm', 'q_norm', 'k_norm']);
const BIASES = new Set(['q_bias', 'k_bias', 'v_bias', 'o_bias']);

function uniformValues(spec: TensorSpec, n: number, rng: Rng): Float32Array {
  const out = new Float32Array(n);
  const u = () => rng.next() * 2 - 1;
  if (NORMS.has(spec.role)) for (let i = 0; i < n; i++) out[i] = 1 + 0.1 * u();
  else if (BIASES.has(spec.role)) for (let i = 0; i < n; i++) out[i] = 0.1 * u();
  else if (spec.role === 'embed') for (let i = 0; i < n; i++) out[i] = u();
  else {
    const scale = 1 / Math.sqrt(spec.shape[1]!); // (out, in)
    for (let i = 0; i < n; i++) out[i] = scale * u();
  }
  return out;
}

function normalValues(spec: TensorSpec, n: number, rng: Rng, std: number): Float32Array {
  const out = new Float32Array(n);
  if (NORMS.has(spec.role)) return out.fill(1);
  if (BIASES.has(spec.role)) return out;
  // Box–Muller: two uniforms → two standard normals (1 − u keeps the log finite)
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - rng.next()));
    const t = 2 * Math.PI * rng.next();
    out[i] = std * r * Math.cos(t);
    if (i + 1 < n) out[i + 1] = std * r * Math.sin(t);
  }
  return out;
}

export interface InitTensor {
  shape: number[];
  data: Float32Array;
}

export interface InitValues {
  dtype?: InitDType;
  seed?: number;
  scheme?: InitScheme;
  /** 'normal' only: the standard deviation (transformers' initializer_range, default 0.02). */
  std?: number;
}

/** The checkpoint's tensors (already rounded to `dtype`), in hfTensorSpecs order. */
export function initTensors(config: ModelConfig, o: InitValues = {}): Map<string, InitTensor> {
  const rng = createRng(o.seed ?? 0);
  const dtype = o.dtype ?? 'f32';
  const out = new Map<string, InitTensor>();
  for (const spec of hfTensorSpecs(config)) {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const v = o.scheme === 'uniform' ? uniformValues(spec, n, rng) : normalValues(spec, n, rng, o.std ?? 0.02);
    out.set(spec.name, { shape: spec.shape, data: roundTo(dtype, v) });
  }
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

/** tokenizer.json and tokenizer_config.json of the byte-level tokenizer (ids 0..255 = bytes). */
export function byteTokenizerFiles(maxLength = 2048): {
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
    chat_template: CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    model_max_length: maxLength,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  return { tokenizerJson, tokenizerConfig };
}

export interface InitFileOptions extends InitValues {
  /** Split the weights into shards of at most this many bytes (true: 16 KiB, several shards). */
  sharded?: boolean | number;
  /** Write tokenizer.json and tokenizer_config.json (default true). */
  tokenizer?: boolean;
  /** Write generation_config.json (default true). */
  generationConfig?: boolean;
}

export interface InitCheckpoint {
  config: ModelConfig;
  hfConfig: Record<string, unknown>;
  /** The values a reader gets back (rounded to the stored dtype). */
  tensors: Map<string, InitTensor>;
  /** File name → bytes, as written. */
  files: Map<string, Uint8Array>;
}

const jsonBytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v, null, 2) + '\n');

/** A whole checkpoint for `config` in memory: config, weights, tokenizer, generation config. */
export function initCheckpointFiles(config: ModelConfig, o: InitFileOptions = {}): InitCheckpoint {
  const dtype = o.dtype ?? 'f32';
  const cfg = { ...config, dtype: TORCH[dtype] };
  const hfConfig = modelConfigToHf(cfg);
  const tensors = initTensors(cfg, o);
  const toWrite = new Map<string, TensorToWrite>();
  for (const [name, t] of tensors) toWrite.set(name, { dtype: STORED[dtype], shape: t.shape, data: t.data });
  const files = new Map<string, Uint8Array>([['config.json', jsonBytes(hfConfig)]]);
  const metadata = { format: 'pt' };
  if (o.sharded) {
    const max = typeof o.sharded === 'number' ? o.sharded : 16 * 1024;
    for (const [name, bytes] of writeShardedSafetensors(toWrite, max, metadata).files) files.set(name, bytes);
  } else files.set(SINGLE_FILE, writeSafetensors(toWrite, metadata));
  if (o.tokenizer ?? true) {
    const { tokenizerJson, tokenizerConfig } = byteTokenizerFiles(cfg.maxPositionEmbeddings);
    files.set('tokenizer.json', jsonBytes(tokenizerJson));
    files.set('tokenizer_config.json', jsonBytes(tokenizerConfig));
  }
  if (o.generationConfig ?? true)
    files.set(
      'generation_config.json',
      jsonBytes({
        bos_token_id: cfg.bosTokenId,
        eos_token_id: cfg.eosTokenIds[0],
        pad_token_id: BYTE_SPECIAL.endoftext,
      }),
    );
  return { config: cfg, hfConfig, tensors, files };
}
