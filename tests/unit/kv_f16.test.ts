// The f16 KV format on the CPU backend: its byte figures (Qwen2.5-0.5B's layout, 16 sequences of
// 2k tokens: 805 MB in f32, 403 MB in f16) and the stores' bytes halved, the device limit met at
// twice the rows, an odd head dimension refused with a ConfigError, ropeAppend rounding k and v to
// f16 (nearest, ties to even) as the GPU's pack2x16float does, the scheduler's kvFormat, and
// `spade engine generate --kv f16`.
import { describe, expect, it } from 'vitest';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/spade.ts';
import { ConfigError, GpuError } from '../../src/core/errors.ts';
import { QWEN25_05B_CONFIG } from '../../src/engine/bench/model.ts';
import { floatToHalf, halfToFloat } from '../../src/engine/io/float16.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import { ropeAppendCpu } from '../../src/engine/kernels/rope_append.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { KvPages, kvBytesPerToken, PAGE, type PagedBatch } from '../../src/engine/model/kv_pages.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { tinyCheckpointFiles, writeTinyCheckpoint } from '../helpers/tiny_checkpoint.ts';

const layout05b = {
  layers: QWEN25_05B_CONFIG.numLayers,
  Hkv: QWEN25_05B_CONFIG.numKvHeads,
  D: QWEN25_05B_CONFIG.headDim,
};

describe('the f16 KV format: bytes', () => {
  it("halves Qwen2.5-0.5B's KV cache: 16 sequences × 2048 tokens, 805 MB → 403 MB", () => {
    const tokens = 16 * 2048;
    expect(kvBytesPerToken(layout05b, 'f32')).toBe(24 * 2 * 2 * 64 * 4);
    expect(kvBytesPerToken(layout05b, 'f32') * tokens).toBe(805_306_368);
    expect(kvBytesPerToken(layout05b, 'f16') * tokens).toBe(402_653_184);
  });

  it('KvPages: the stores and their byte figure halve in f16', () => {
    const dims = { layers: 2, Hkv: 2, D: 8 };
    const ops = new CpuOps();
    const k32 = new KvPages(ops, dims, { initialPages: 4 });
    const k16 = new KvPages<CpuTensor>(ops, dims, { initialPages: 4, kvFormat: 'f16' });
    expect(k32.kvFormat).toBe('f32');
    expect(k32.bytes).toBe(4 * PAGE * 2 * 2 * 2 * 8 * 4);
    expect(k16.bytes).toBe(k32.bytes / 2);
    expect(k16.k[0]!.kvFormat).toBe('f16');
    expect(k16.k[0]!.shape).toEqual([4 * PAGE, 2, 8]);
  });

  it('the device limit allows twice the rows in f16 (growth is sized by the format)', () => {
    class SmallOps extends CpuOps {
      override readonly maxTensorBytes = 2 * PAGE * 2 * 4; // two pages of (1 head × 2) f32 values per store
    }
    const grow = (kvFormat: 'f32' | 'f16') => {
      const kv = new KvPages(new SmallOps(), { layers: 1, Hkv: 1, D: 2 }, { initialPages: 2, kvFormat });
      kv.prepare([{ seq: kv.newSeq(), ids: new Array<number>(3 * PAGE).fill(1) }]); // 2 → 4 pages
      return kv.capacity;
    };
    expect(grow('f16')).toBe(4);
    expect(() => grow('f32')).toThrow(GpuError);
  });

  it('refuses f16 for an odd head dimension, and an unknown format, with a ConfigError', () => {
    const odd = () => new KvPages(new CpuOps(), { layers: 1, Hkv: 1, D: 5 }, { kvFormat: 'f16' });
    expect(odd).toThrow(ConfigError);
    expect(odd).toThrow(/head dimension.*is 5, odd.*--kv f32/);
    expect(() => new KvPages(new CpuOps(), { layers: 1, Hkv: 1, D: 5 })).not.toThrow(); // f32 takes any D
    const bad = () => new KvPages(new CpuOps(), { layers: 1, Hkv: 1, D: 4 }, { kvFormat: 'bf16' as 'f16' });
    expect(bad).toThrow(ConfigError);
  });
});

describe('the f16 KV format: rounding on the CPU', () => {
  const [Hq, Hkv, D] = [2, 1, 4];
  const b: PagedBatch = {
    pageSize: 4,
    maxPages: 1,
    pos: Uint32Array.from([3]),
    dest: Uint32Array.from([1]),
    seq: new Uint32Array(1),
    pages: new Uint32Array(1),
  };
  const freqs = ropeFrequencies({ headDim: D, theta: 1e4 });
  // q (2 heads) | k | v, v holding ties and values off a tie
  const qkv = Float32Array.from([
    ...[0.1, 0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8],
    ...[0.3, -1.7, 2.9, 0.01],
    ...[1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11 + 2 ** -20), -1e6],
  ]);

  it('ropeAppendCpu rounds the stored k and v to f16 (nearest, ties to even, ±65504 at most); q is unchanged', () => {
    const run = (kv: 'f32' | 'f16') => {
      const k = new Float32Array(4 * Hkv * D);
      const v = new Float32Array(4 * Hkv * D);
      const q = ropeAppendCpu(qkv, freqs, k, v, b, { N: 1, Hq, Hkv, D }, {}, kv);
      return { q, k: k.subarray(D, 2 * D), v: v.subarray(D, 2 * D) };
    };
    const f32 = run('f32');
    const f16 = run('f16');
    expect(f16.q).toEqual(f32.q);
    expect(Array.from(f16.v)).toEqual([1, 1 + 2 ** -9, -(1 + 2 ** -10), -65504]);
    for (let i = 0; i < D; i++) {
      expect(f16.k[i]).toBe(halfToFloat(floatToHalf(f32.k[i]!)));
      expect(Math.abs(f16.k[i]! - f32.k[i]!)).toBeLessThanOrEqual(Math.abs(f32.k[i]!) * 2 ** -11);
    }
    expect(f16.k).not.toEqual(f32.k); // the rotated k values are not f16 values: rounding moved them
  });

  it('CpuOps.ropeAppend rounds into stores made by kvStore(…, "f16"), and refuses mixed formats', () => {
    const ops = new CpuOps();
    const t = (x: Float32Array, shape: number[]) => ops.upload(shape, x);
    const stores = (f: 'f32' | 'f16'): [CpuTensor, CpuTensor] => [
      ops.kvStore([4, Hkv, D], f),
      ops.kvStore([4, Hkv, D], f),
    ];
    const [k16, v16] = stores('f16');
    ops.ropeAppend(t(qkv, [1, qkv.length]), t(freqs, [D / 2]), k16, v16, b, { Hq, Hkv });
    expect(Array.from(v16.data.subarray(D, 2 * D))).toEqual([1, 1 + 2 ** -9, -(1 + 2 ** -10), -65504]);
    const [k32] = stores('f32');
    expect(() => ops.ropeAppend(t(qkv, [1, qkv.length]), t(freqs, [D / 2]), k32, v16, b, { Hq, Hkv })).toThrow(
      TypeError,
    );
  });
});

describe('the f16 KV format: the scheduler', () => {
  it('takes kvFormat from its options or later, frees stores of the other format when idle, and reports bytes', async () => {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const m = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    const s = new DecodeScheduler(m, { kvFormat: 'f16', initialPages: 2 });
    expect(s.stats()).toMatchObject({ kvFormat: 'f16', kvBytes: 0 });
    const a16 = await s.generate([1, 2, 3, 4, 5], { maxNew: 8, temperature: 0 });
    const bytes16 = s.stats().kvBytes;
    expect(bytes16).toBe(2 * PAGE * kvBytesPerToken({ layers: 2, Hkv: 2, D: 8 }, 'f16'));
    s.kvFormat = 'f32'; // idle: the f16 stores go now
    expect(s.stats()).toMatchObject({ kvFormat: 'f32', kvBytes: 0 });
    const a32 = await s.generate([1, 2, 3, 4, 5], { maxNew: 8, temperature: 0 });
    expect(s.stats().kvBytes).toBe(2 * bytes16);
    expect(a16).toEqual(a32);
    const odd = { ...loaded.config, headDim: 7 };
    const mOdd = { ...m, cfg: odd } as unknown as LlamaModel<CpuTensor>;
    expect(() => new DecodeScheduler(mOdd, { kvFormat: 'f16' })).toThrow(ConfigError);
  });
});

describe('spade engine generate --kv', () => {
  async function run(...argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err, json: () => JSON.parse(out[out.length - 1]!) };
  }

  it('decodes with the f16 KV cache (one prompt through the scheduler) and refuses other values', async () => {
    const d = join(await mkdtemp(join(tmpdir(), 'spade-kv-cli-')), 'tiny');
    await writeTinyCheckpoint(d, 'qwen2', 'f32', 3);
    const common = ['engine', 'generate', '--model', d, '--tokens', '1,2,3', '--max-new', '6', '--device', 'cpu'];
    const f16 = await run(...common, '--kv', 'f16', '--json');
    expect(f16.code, f16.err.join('\n')).toBe(0);
    const f32 = await run(...common, '--json');
    expect(f32.code, f32.err.join('\n')).toBe(0);
    expect(f16.json()).toMatchObject({ ok: true, kv: 'f16' });
    expect(f32.json()).toMatchObject({ ok: true, kv: 'f32' });
    expect(f16.json().tokens).toHaveLength(6);
    const bad = await run(...common, '--kv', 'bf16');
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toContain('--kv must be f32 or f16');
  });
});
