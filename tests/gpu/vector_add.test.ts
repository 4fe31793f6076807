// vector_add on the software adapter against its CPU reference; device report and loss.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { DeviceLostError } from '../../src/core/errors.ts';
import type { GpuContext } from '../../src/engine/device.ts';
import { vectorAdd, vectorAddCpu } from '../../src/engine/kernels/vector_add.ts';
import { Engine } from '../../src/engine/runtime.ts';
import { acquireNodeGpu } from '../../src/platform/node/gpu.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`vector_add on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it('reports adapter, features and limits', () => {
    expect(gpu.report.architecture.length).toBeGreaterThan(0);
    expect(typeof gpu.report.features.shaderF16).toBe('boolean');
    expect(gpu.report.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
    expect(gpu.report.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  });

  it.each([1, 63, 64, 65, 1000, 4099])('matches the CPU reference exactly at N=%i', async (n) => {
    const rng = createRng(n);
    const a = new Float32Array(n).map(() => rng.next() * 200 - 100);
    const b = new Float32Array(n).map(() => rng.next() * 2e-3);
    const e = new Engine(gpu);
    expect(await e.read(vectorAdd(e, e.tensor([n], a), e.tensor([n], b)))).toEqual(vectorAddCpu(a, b));
  });

  it('rejects mismatched lengths', async () => {
    const e = new Engine(gpu);
    expect(() => vectorAdd(e, e.tensor([3]), e.tensor([4]))).toThrow(/length mismatch 3 vs 4/);
  });

  it('caches the pipeline per key and constants', async () => {
    const e = new Engine(gpu);
    await e.read(vectorAdd(e, e.tensor([4]), e.tensor([4])));
    const p1 = gpu.pipeline('vector_add', 'unused', { WG: 64 });
    expect(gpu.pipeline('vector_add', 'unused', { WG: 64 })).toBe(p1);
  });
});

describe.skipIf(!ctx)('device loss', () => {
  let own: GpuContext;
  beforeAll(async () => {
    own = await acquireNodeGpu();
  });
  afterAll(() => ctx?.destroy());

  it('destroy() is not reported as a loss, but later use says what happened', async () => {
    const seen: DeviceLostError[] = [];
    own.onLost((e) => seen.push(e));
    own.destroy();
    await own.device.lost;
    expect(seen).toEqual([]);
  });
});
