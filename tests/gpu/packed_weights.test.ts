// Packed base weights on WebGPU: each packed kernel (matvec_packed, matmul_packed both ways,
// embedding_packed) in bf16 / f16 / q4 against its CPU reference (dequantise, then the f32
// reference); the whole model in bf16 against f32 on a bf16 checkpoint, q4 against the CPU
// dequantised reference (logits, greedy tokens), LoRA gradients through a packed base, and the
// GPU bytes against weightBytes(config).
import { describe, expect, it } from 'vitest';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { packWeight, weightBytes, type WeightFormat } from '../../src/engine/io/pack.ts';
import { hfTensorSpecs } from '../../src/engine/io/config.ts';
import { embeddingPacked, embeddingPackedCpu } from '../../src/engine/kernels/embedding_packed.ts';
import { matmulPacked, matmulPackedCpu } from '../../src/engine/kernels/matmul_packed.ts';
import { matvecPacked, matvecPackedCpu } from '../../src/engine/kernels/matvec_packed.ts';
import { uploadPacked } from '../../src/engine/kernels/packed_weight.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { TINY_VARIANTS, tinyCheckpointFiles, type TinyDType, type TinyVariant } from '../helpers/tiny_checkpoint.ts';
import { expectClose, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';
import { ALL_TARGETS, loraGradients } from './lora_gradients.ts';

const { ctx, reason } = await tryGpu();
const FORMATS = ['bf16', 'f16', 'q4'] as const;
const IDS = [5, 17, 99, 3, 250, 42, 7, 1, 64];

/** max|a − b| / max|b|. */
const maxRel = (a: Float32Array, b: Float32Array) => relError(a, b, 1);

async function load(variant: TinyVariant, dtype: TinyDType) {
  const ck = tinyCheckpointFiles(variant, dtype, 0, { tokenizer: false });
  return loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
}

describe.skipIf(!ctx)(`packed kernels on WebGPU vs CPU references ${reason}`, () => {
  it.each(FORMATS.flatMap((f) => [[f, 1, 37, 64] as const, [f, 5, 70, 96] as const, [f, 8, 33, 256] as const]))(
    'matvec_packed %s M=%i N=%i K=%i',
    async (format, m, n, k) => {
      const e = new Engine(ctx!);
      const x = randomArray(m * k, 1);
      const p = packWeight(randomArray(n * k, 2, -0.5, 0.5), n, k, format);
      const got = await e.read(matvecPacked(e, e.tensor([m, k], x), uploadPacked(e, p), { alpha: 0.5 }));
      expectClose(got, matvecPackedCpu(x, p, m, 0.5), 1e-5, 1e-2);
      // accumulate onto an existing out
      const base = randomArray(m * n, 3);
      const out = e.tensor([m, n], base);
      const acc = await e.read(
        matvecPacked(e, e.tensor([m, k], x), uploadPacked(e, p), { out, accumulate: true, alpha: 2 }),
      );
      const prod = matvecPackedCpu(x, p, m, 2);
      expectClose(
        acc,
        base.map((b, i) => b + prod[i]!),
        1e-5,
        1e-2,
      );
    },
  );

  it.each(FORMATS.flatMap((f) => [[f, 13, 40, 64] as const, [f, 70, 96, 32] as const]))(
    'matmul_packed %s forward x·Wᵀ: M=%i N=%i K=%i',
    async (format, m, n, k) => {
      const e = new Engine(ctx!);
      const a = randomArray(m * k, 4);
      const p = packWeight(randomArray(n * k, 5), n, k, format);
      const got = await e.read(matmulPacked(e, e.tensor([m, k], a), uploadPacked(e, p), { transB: true, alpha: 1.5 }));
      expectClose(got, matmulPackedCpu(a, m, p, { transB: true, alpha: 1.5 }), 1e-5, 1e-2);
    },
  );

  it.each(FORMATS.flatMap((f) => [[f, 13, 64, 40] as const, [f, 9, 32, 96] as const]))(
    'matmul_packed %s input gradient dy·W (W stored (K, N) packed along N): M=%i N=%i K=%i',
    async (format, m, n, k) => {
      const e = new Engine(ctx!);
      const dy = randomArray(m * k, 6);
      const p = packWeight(randomArray(k * n, 7), k, n, format);
      const base = randomArray(m * n, 8);
      const out = e.tensor([m, n], base);
      const got = await e.read(matmulPacked(e, e.tensor([m, k], dy), uploadPacked(e, p), { out, accumulate: true }));
      const prod = matmulPackedCpu(dy, m, p);
      expectClose(
        got,
        base.map((b, i) => b + prod[i]!),
        1e-5,
        1e-2,
      );
    },
  );

  it.each(FORMATS)('embedding_packed %s gathers rows (an id ≥ V gives zeros)', async (format) => {
    const e = new Engine(ctx!);
    const v = 50;
    const c = 64;
    const p = packWeight(randomArray(v * c, 9), v, c, format);
    const ids = Uint32Array.of(3, 49, 0, 50, 17, 3);
    const got = await e.read(embeddingPacked(e, uploadPacked(e, p), e.tensor([ids.length], ids)));
    const want = embeddingPackedCpu(p, ids);
    expect(Array.from(got)).toEqual(Array.from(want)); // a gather: exact
    expect(Array.from(want.subarray(3 * c, 4 * c))).toEqual(new Array(c).fill(0));
  });
});

describe.skipIf(!ctx)(`the model with packed base weights on WebGPU ${reason}`, () => {
  const gpuModel = (l: Awaited<ReturnType<typeof load>>, weights: WeightFormat) =>
    new LlamaModel<Tensor>(l.config, new GpuOps(new Engine(ctx!)), l.weights, { weights });
  const cpuModel = (l: Awaited<ReturnType<typeof load>>, weights: WeightFormat) =>
    new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights, { weights });

  it.each(TINY_VARIANTS)('%s (bf16 checkpoint): bf16 logits equal f32 logits within 1e-5', async (variant) => {
    const l = await load(variant, 'bf16');
    const f32 = gpuModel(l, 'f32');
    const bf16 = gpuModel(l, 'bf16');
    const want = await f32.ops.read(f32.forward(IDS).logits);
    const got = await bf16.ops.read(bf16.forward(IDS).logits);
    expect(maxRel(got, want)).toBeLessThan(1e-5);
    // decode steps (matvec_packed) too
    expect(await generate(bf16, IDS, { maxNew: 6, temperature: 0 })).toEqual(
      await generate(f32, IDS, { maxNew: 6, temperature: 0 }),
    );
  });

  it.each(TINY_VARIANTS)(
    '%s: q4 logits within 1e-4 of the CPU dequantised reference; greedy tokens equal',
    async (variant) => {
      const l = await load(variant, 'f32');
      const gpu = gpuModel(l, 'q4');
      const cpu = cpuModel(l, 'q4');
      const want = cpu.forward(IDS).logits.data;
      const got = await gpu.ops.read(gpu.forward(IDS).logits);
      expect(maxRel(got, want)).toBeLessThan(1e-4);
      // and q4 really is not the f32 model (the quantisation is applied)
      expect(maxRel(want, cpuModel(l, 'f32').forward(IDS).logits.data)).toBeGreaterThan(1e-3);
      const g = await generate(gpu, IDS, { maxNew: 8, temperature: 0 });
      expect(g).toEqual(await generate(cpu, IDS, { maxNew: 8, temperature: 0 }));
      expect(g).toEqual(await generate(gpu, IDS, { maxNew: 8, temperature: 0, noCache: true }));
    },
  );

  it.each(['bf16', 'q4'] as const)('LoRA gradients through a %s base agree with the CPU backward', async (format) => {
    const l = await load('qwen3', 'bf16');
    const cpu = cpuModel(l, format);
    const gpu = gpuModel(l, format);
    const { want, got } = await loraGradients(cpu, gpu, IDS);
    expect(want.size).toBe(2 * 2 * ALL_TARGETS.length);
    for (const [k, g] of want) expect(maxRel(got.get(k)!, g), k).toBeLessThan(1e-3);
  });

  it.each(['f32', ...FORMATS] as const)(
    '%s: the GPU holds weightBytes(config) (+ ≤ 16 B per tensor)',
    async (format) => {
      const l = await load('llama3', 'bf16');
      const m = gpuModel(l, format);
      const want = weightBytes(l.config, format);
      expect(m.weightBytes).toBeGreaterThanOrEqual(want);
      expect(m.weightBytes).toBeLessThanOrEqual(want + 16 * hfTensorSpecs(l.config).length);
      if (format !== 'f32') expect(m.weightBytes).toBeLessThan(weightBytes(l.config, 'f32') * 0.55);
    },
  );
});
