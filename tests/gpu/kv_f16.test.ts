// The f16 KV format on the software adapter: rope_append packs k and v as f16 pairs (the words read
// back equal float16.ts's round-to-nearest-even of the f32 values, ties included, and the CPU
// reference's), attention_paged reads them (the CPU reference on the same f16 values within 1e-5,
// the f32 stores within 1e-3), copyRows moves f16 rows within a store (copy-on-write), and the tiny
// models run on it: paged steps' logits equal the CPU backend's f16 steps (and move from the f32
// ones by ~1e-4), greedy tokens of f16 vs f32 KV over 32 steps, the stores' bytes halved, and the
// engine API's load option.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { createEngineApi } from '../../src/engine/engine_api.ts';
import { sharedNodeGpu } from '../../src/platform/node/gpu.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { attentionPaged, attentionPagedCpu, packPagedIndex } from '../../src/engine/kernels/attention_paged.ts';
import { ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import { ropeAppendCpu } from '../../src/engine/kernels/rope_append.ts';
import { f16ToF32, f32ToF16 } from '../../src/engine/io/float16.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { KvPages, type KvFormat, type PagedBatch, type StepItem } from '../../src/engine/model/kv_pages.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type Ops } from '../../src/engine/ops/ops.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { pagedFixture } from '../helpers/paged_fixture.ts';
import { tinyCheckpointFiles, type TinyVariant } from '../helpers/tiny_checkpoint.ts';
import { randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/** The f16 bit patterns of f16 values held as f32 (what a packed store holds, word half by word half). */
const bits = (x: Float32Array) => Array.from(f32ToF16(x));

async function tinyModel<X>(variant: TinyVariant, ops: Ops<X>) {
  const ck = tinyCheckpointFiles(variant, 'f32', 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  return new LlamaModel<X>(loaded.config, ops, loaded.weights);
}

const ids = (n: number, seed: number) => {
  const rng = createRng(seed);
  return Array.from({ length: n }, () => rng.int(256));
};

describe.skipIf(!ctx)(`the f16 KV format on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    { D: 16, norm: false },
    { D: 130, norm: true }, // 65 words per head: an invocation packs two words
  ])('ropeAppend D=$D norm=$norm packs k and v as f16 words rounded as the CPU reference', async ({ D, norm }) => {
    const Hq = 4;
    const Hkv = 2;
    const N = 5;
    const rows = 8;
    const rng = createRng(D);
    const width = (Hq + 2 * Hkv) * D;
    const freqs = ropeFrequencies({ headDim: D, theta: 1e4 });
    const qkv = randomArray(N * width, rng, -3, 3);
    // v columns of row 0: exact ties between two f16 values (1 + (2k + 1)·2⁻¹¹), to even either way
    for (let i = 0; i < 2 * D; i++) qkv[(Hq + Hkv) * D + i] = (i % 2 ? -1 : 1) * (1 + (2 * i + 1) * 2 ** -11);
    // and past f16's range: clamped to ±65504 (pack2x16float's result is undefined there)
    qkv[(Hq + Hkv) * D + 2 * D - 2] = 1e6;
    qkv[(Hq + Hkv) * D + 2 * D - 1] = -1e6;
    const qNorm = randomArray(D, rng, 0.5, 1.5);
    const kNorm = randomArray(D, rng, 0.5, 1.5);
    const b: PagedBatch = {
      pageSize: 4,
      maxPages: 1,
      pos: Uint32Array.from([0, 7, 1, 300, 4000]),
      dest: Uint32Array.from([6, 0, 3, 7, 1]),
      seq: new Uint32Array(N),
      pages: new Uint32Array(1),
    };
    const o = norm ? { qNorm, kNorm, eps: 1e-6 } : {};
    const e = new Engine(gpu);
    const ops = new GpuOps(e);
    const run = async (kv: KvFormat) => {
      const [k, v] = [ops.kvStore([rows, Hkv, D], kv), ops.kvStore([rows, Hkv, D], kv)];
      const t = (shape: number[], x: Float32Array) => ops.upload(shape, x);
      const q = ops.ropeAppend(t([N, width], qkv), t([D / 2], freqs), k, v, b, {
        Hq,
        Hkv,
        ...(norm ? { qNorm: t([D], qNorm), kNorm: t([D], kNorm), eps: 1e-6 } : {}),
      });
      return { q: await ops.read(q), k: await ops.read(k), v: await ops.read(v), bytes: ops.bytes(k) };
    };
    const g16 = await run('f16');
    const g32 = await run('f32');
    expect(g16.bytes).toBe(g32.bytes / 2);
    expect(g16.q).toEqual(g32.q); // q never goes through the stores
    // the GPU's packing is float16.ts's rounding of its own f32 results, bit for bit
    expect(bits(g16.k)).toEqual(Array.from(f32ToF16(g32.k)));
    const clamped = g32.v.map((x) => Math.min(65504, Math.max(-65504, x)));
    expect(bits(g16.v)).toEqual(Array.from(f32ToF16(clamped)));
    // and the CPU reference's f16 stores: v (copied) bit for bit, k too (its f32 values agree here)
    const [ck, cv] = [new Float32Array(rows * Hkv * D), new Float32Array(rows * Hkv * D)];
    ropeAppendCpu(qkv, freqs, ck, cv, b, { N, Hq, Hkv, D }, o, 'f16');
    expect(bits(g16.v)).toEqual(bits(cv));
    const kDiffer = bits(g16.k).filter((h, i) => h !== f32ToF16(ck)[i]).length;
    console.log(`ropeAppend D=${D}: ${kDiffer} of ${ck.length} k values differ from the CPU's f16 bits`);
    expect(kDiffer).toBe(0);
    // the ties went to even: 1 + 2⁻¹¹ → 1, 1 + 3·2⁻¹¹ → 1 + 2⁻⁹ (row 0 writes store row 6)
    const v0 = g16.v.subarray(6 * Hkv * D);
    expect([v0[0], v0[1], v0[2], v0[3]]).toEqual([1, -(1 + 2 ** -9), 1 + 2 ** -9, -(1 + 2 ** -8)]);
    expect([v0[2 * D - 2], v0[2 * D - 1]]).toEqual([65504, -65504]);
  });

  // the single pass (groups of 7: Qwen2.5-0.5B; 1: MHA) and the split path
  it.each([
    { Hq: 14, Hkv: 2, D: 64, splitKeys: undefined },
    { Hq: 14, Hkv: 2, D: 64, splitKeys: 32 },
    { Hq: 3, Hkv: 3, D: 130, splitKeys: 50 },
  ])('attentionPaged Hq=$Hq Hkv=$Hkv D=$D splitKeys=$splitKeys on f16 stores', async (c) => {
    const { Hq, Hkv, D } = c;
    const f = pagedFixture({ lengths: [150, 3], pageSize: 8, Hkv, D, spare: 2, seed: Hq + D });
    const rowsOf: [number, number][] = [
      [0, 149],
      [1, 2],
      [0, 63],
      [1, 0],
    ];
    const b = f.batch(rowsOf);
    const N = rowsOf.length;
    const q = randomArray(N * Hq * D, Hq * D, -3, 3);
    const e = new Engine(gpu);
    const rows = f.kStore.length / (Hkv * D);
    const { data, ...offsets } = packPagedIndex(b);
    const idx = { tensor: e.tensor([data.length], data), ...offsets };
    const run = async (k: Float32Array | Uint16Array, v: Float32Array | Uint16Array, dtype: 'f32' | 'f16') =>
      e.read(
        attentionPaged(
          e,
          e.tensor([N, Hq, D], q),
          e.tensor([rows, Hkv, D], k, dtype),
          e.tensor([rows, Hkv, D], v, dtype),
          b,
          idx,
          { splitKeys: c.splitKeys },
        ),
      );
    const k16 = f32ToF16(f.kStore);
    const v16 = f32ToF16(f.vStore);
    const out16 = await run(k16, v16, 'f16');
    const out32 = await run(f.kStore, f.vStore, 'f32');
    // the CPU reference on the same f16 values (widened), and the f32 stores
    const want16 = attentionPagedCpu(q, f16ToF32(k16), f16ToF32(v16), b, { N, Hq, Hkv, D });
    const errCpu = relError(out16, want16, 1);
    const errF32 = relError(out16, out32, 1);
    console.log(
      `attentionPaged f16 Hq=${Hq} D=${D} splitKeys=${c.splitKeys}: vs CPU f16 ${errCpu.toExponential(2)}, vs f32 stores ${errF32.toExponential(2)}`,
    );
    expect(errCpu).toBeLessThan(1e-5);
    expect(errF32).toBeLessThan(1e-3);
  });

  it('the tiny model decodes greedily with f16 KV: tokens vs f32 KV, and the CPU f16 decode', async () => {
    const P = ids(12, 3);
    const steps = 32;
    const decode = async <X>(ops: Ops<X>, kv: KvFormat) => {
      const m = await tinyModel('qwen2', ops);
      const s = new DecodeScheduler(m, { kvFormat: kv });
      const out = await s.generate(P, { maxNew: steps, temperature: 0 });
      const stats = s.stats();
      s.dispose();
      return { out, stats };
    };
    const g32 = await decode(new GpuOps(new Engine(gpu)), 'f32');
    const g16 = await decode(new GpuOps(new Engine(gpu)), 'f16');
    const c16 = await decode(new CpuOps(), 'f16');
    let agree = 0;
    while (agree < steps && g16.out[agree] === g32.out[agree]) agree++;
    const same = g16.out.filter((t, i) => t === g32.out[i]).length;
    console.log(
      `tiny qwen2, greedy ${steps} steps: f16 KV agrees with f32 KV on the first ${agree} tokens (${same} of ${steps} in place)`,
    );
    expect(g16.out).toHaveLength(steps);
    expect(g16.out).toEqual(c16.out); // the same rounding on both backends
    expect(agree).toBeGreaterThanOrEqual(24);
    expect(g16.stats.kvFormat).toBe('f16');
    expect(g16.stats.kvBytes).toBe(g32.stats.kvBytes / 2);
  });

  it('copyRows within one f16 store moves whole rows (the copy-on-write of kv_pages.ts)', async () => {
    const e = new Engine(gpu);
    const ops = new GpuOps(e);
    const [rows, Hkv, D] = [8, 2, 6];
    const data = f16ToF32(f32ToF16(randomArray(rows * Hkv * D, 11)));
    const store = e.tensor([rows, Hkv, D], f32ToF16(data), 'f16');
    ops.copyRows(store, 1, store, 5, 2);
    const want = data.slice();
    want.copyWithin(5 * Hkv * D, 1 * Hkv * D, 3 * Hkv * D);
    expect(await ops.read(store)).toEqual(want);
  });

  // logits are what f16 rounding moves (the tiny models' greedy tokens are nearly all certain):
  // the GPU's f16 steps equal the CPU's (same rounding) as closely as f32 steps do, differ from the
  // f32 steps by a small non-zero amount, and a fork into a shared, partly filled page (copied
  // within the store, copy-on-write) keeps them equal
  it.each(['qwen2', 'qwen3'] as const)('%s: paged steps on f16 stores equal the CPU f16 reference', async (v) => {
    const A = ids(20, 5);
    const steps = async <X>(ops: Ops<X>, kvFormat: KvFormat) => {
      const m = await tinyModel(v, ops);
      const kv = new KvPages(ops, { layers: m.cfg.numLayers, Hkv: m.cfg.numKvHeads, D: m.cfg.headDim }, { kvFormat });
      const a = kv.newSeq();
      const logits: Float32Array[] = [];
      const step = async (items: StepItem[]) => {
        const x = m.step(kv, items);
        logits.push(await ops.read(x));
        ops.free(x);
      };
      await step([{ seq: a, ids: A }]);
      const b = kv.fork(a, 19); // page 1 shared with 3 rows filled: b's first write copies it first
      await step([
        { seq: a, ids: [7] },
        { seq: b, ids: [9, 4] },
      ]);
      for (let t = 2; t < 6; t++)
        await step([
          { seq: a, ids: [(t * 31) % 256] },
          { seq: b, ids: [(t * 17) % 256] },
        ]);
      kv.dispose();
      return logits;
    };
    const g16 = await steps(new GpuOps(new Engine(gpu)), 'f16');
    const g32 = await steps(new GpuOps(new Engine(gpu)), 'f32');
    const c16 = await steps(new CpuOps(), 'f16');
    const c32 = await steps(new CpuOps(), 'f32');
    const worst = (x: Float32Array[], y: Float32Array[]) => Math.max(...x.map((l, i) => relError(l, y[i]!, 1)));
    const err = { gpuCpu16: worst(g16, c16), gpuCpu32: worst(g32, c32), f16F32: worst(g16, g32) };
    console.log(
      `${v} steps: rel. error GPU vs CPU f16 ${err.gpuCpu16.toExponential(2)} (f32 ${err.gpuCpu32.toExponential(2)}), f16 vs f32 KV ${err.f16F32.toExponential(2)}`,
    );
    expect(err.gpuCpu16).toBeLessThan(1e-5);
    expect(err.f16F32).toBeGreaterThan(0);
    expect(err.f16F32).toBeLessThan(1e-2);
  });

  it('the engine API loads with kvFormat f16: chats decode on f16 stores, and a later load resets to f32', async () => {
    const api = createEngineApi({ sharedDevice: sharedNodeGpu });
    const files = tinyCheckpointFiles('llama', 'f32', 5).files;
    await api.load({ kind: 'memory', files }, undefined, { kvFormat: 'f16' });
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const r = await api.chat(messages, { max_tokens: 4, temperature: 0 });
    expect(r.usage.completionTokens).toBeGreaterThan(0);
    const s16 = await api.decodeStats();
    expect(s16.kvFormat).toBe('f16');
    expect(s16.kvBytes).toBeGreaterThan(0);
    await api.load({ kind: 'memory', files });
    await api.chat(messages, { max_tokens: 4, temperature: 0 });
    const s32 = await api.decodeStats();
    expect(s32.kvFormat).toBe('f32');
    expect(s32.kvBytes).toBe(2 * s16.kvBytes);
  });
});
