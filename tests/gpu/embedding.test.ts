// embedding (row gather) on the software adapter against the CPU reference.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { embedding, embeddingCpu } from '../../src/engine/kernels/embedding.ts';
import { packF16 } from '../../src/engine/kernels/matmul.ts';
import { f16ToF32 } from '../../src/engine/io/float16.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('embedding (CPU)', () => {
  it('gathers rows and zeroes out-of-range ids', () => {
    const table = new Float32Array([1, 2, 3, 4, 5, 6]); // (3, 2)
    expect(Array.from(embeddingCpu(table, 3, 2, new Uint32Array([2, 0, 7])))).toEqual([5, 6, 1, 2, 0, 0]);
  });
});

describe.skipIf(!ctx)(`embedding on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    [1, 1, 1],
    [50, 7, 13],
    [300, 64, 33],
    [1000, 5, 257],
  ])('gathers exactly (V=%i, C=%i, T=%i)', async (v, c, t) => {
    const rng = createRng(v + c + t);
    const table = randomArray(v * c, v * c);
    const ids = new Uint32Array(t).map(() => rng.int(v));
    if (t > 2) ids[t - 1] = v - 1;
    const e = new Engine(gpu);
    const y = embedding(e, e.tensor([v, c], table), e.tensor([t], ids));
    expect(y.shape).toEqual([t, c]);
    expect(await e.read(y)).toEqual(embeddingCpu(table, v, c, ids));
  });

  it('gives zero rows for ids ≥ V', async () => {
    const table = randomArray(12, 3);
    const ids = new Uint32Array([1, 4, 0xffffffff, 2]);
    const e = new Engine(gpu);
    expect(await e.read(embedding(e, e.tensor([4, 3], table), e.tensor([4], ids)))).toEqual(
      embeddingCpu(table, 4, 3, ids),
    );
  });

  it.runIf(gpu.report.features.shaderF16)('reads an f16 table', async () => {
    const [v, c] = [20, 9];
    const table = randomArray(v * c, 5);
    const ids = new Uint32Array([3, 19, 0, 7]);
    const e = new Engine(gpu);
    const y = embedding(e, e.tensor([v, c], packF16(table), 'f16'), e.tensor([4], ids));
    expect(await e.read(y)).toEqual(embeddingCpu(f16ToF32(packF16(table).subarray(0, v * c)), v, c, ids));
  });

  it.skipIf(gpu.report.features.shaderF16)('refuses an f16 table without shader-f16', () => {
    const e = new Engine(gpu);
    expect(() => embedding(e, e.tensor([2, 2], new Uint16Array(4), 'f16'), e.tensor([1]))).toThrow(/shader-f16/);
  });
});
