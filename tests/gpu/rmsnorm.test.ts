// rmsnorm on the software adapter: GPU vs CPU reference, CPU backward vs finite differences.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { rmsnorm, rmsnormBackward, rmsnormBackwardCpu, rmsnormCpu } from '../../src/engine/kernels/rmsnorm.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { finiteDiff, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('rmsnorm CPU reference', () => {
  it('normalises each row to unit rms before the weight', () => {
    const y = rmsnormCpu(new Float32Array([3, 4, 0, 0]), new Float32Array([1, 2]), 1e-6);
    const r = Math.sqrt(12.5 + 1e-6);
    expect(Array.from(y)).toEqual([3 / r, 8 / r, 0, 0].map(Math.fround));
  });

  it.each([
    [4, 7],
    [3, 16],
  ])('backward (rows=%i, C=%i) matches finite differences of the forward', (rows, c) => {
    const rng = createRng(rows * 100 + c);
    const x = randomArray(rows * c, rng);
    const w = randomArray(c, rng, 0.5, 1.5);
    const r = randomArray(rows * c, rng);
    const eps = 1e-5;
    const { dx, dw } = rmsnormBackwardCpu(x, w, r, eps);
    expect(
      relError(
        dx,
        finiteDiff((xx) => rmsnormCpu(xx, w, eps), x, r),
      ),
    ).toBeLessThan(2e-3);
    expect(
      relError(
        dw,
        finiteDiff((ww) => rmsnormCpu(x, ww, eps), w, r),
      ),
    ).toBeLessThan(2e-3);
  });
});

describe.skipIf(!ctx)(`rmsnorm on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    { shape: [1, 1], c: 1 },
    { shape: [5, 67], c: 67 },
    { shape: [3, 200], c: 200 },
    { shape: [3, 4, 13], c: 13 }, // (T, H, D) per-head q/k norm with a (D,) weight
  ])('forward matches the CPU reference on $shape', async ({ shape, c }) => {
    const rng = createRng(shape.reduce((a, b) => a * b, 7));
    const n = shape.reduce((a, b) => a * b, 1);
    const x = randomArray(n, rng, -3, 3);
    const w = randomArray(c, rng, 0.5, 1.5);
    const e = new Engine(gpu);
    const y = rmsnorm(e, e.tensor(shape, x), e.tensor([c], w), 1e-6);
    expect(y.shape).toEqual(shape);
    expect(relError(await e.read(y), rmsnormCpu(x, w, 1e-6))).toBeLessThan(1e-4);
  });

  it('spreads more than 65535 rows over a 2-D grid', async () => {
    const rows = 65600;
    const rng = createRng(11);
    const x = randomArray(rows * 2, rng);
    const w = new Float32Array([1.5, -0.5]);
    const e = new Engine(gpu);
    const got = await e.read(rmsnorm(e, e.tensor([rows, 2], x), e.tensor([2], w), 1e-5));
    expect(relError(got, rmsnormCpu(x, w, 1e-5))).toBeLessThan(1e-4);
  });

  it.each([
    { shape: [6, 37], c: 37 },
    { shape: [2, 3, 16], c: 16 },
    { shape: [3, 130], c: 130 },
  ])('backward (dx, dw) matches the CPU backward on $shape', async ({ shape, c }) => {
    const rng = createRng(c * 31);
    const n = shape.reduce((a, b) => a * b, 1);
    const x = randomArray(n, rng, -2, 2);
    const w = randomArray(c, rng, 0.5, 1.5);
    const dy = randomArray(n, rng);
    const want = rmsnormBackwardCpu(x, w, dy, 1e-5);
    const e = new Engine(gpu);
    const xt = e.tensor(shape, x);
    const wt = e.tensor([c], w);
    const dyt = e.tensor(shape, dy);
    const full = rmsnormBackward(e, xt, wt, dyt, 1e-5, { weightGrad: true });
    const only = rmsnormBackward(e, xt, wt, dyt, 1e-5);
    expect(only.dw).toBeUndefined();
    expect(full.dx.shape).toEqual(shape);
    expect(relError(await e.read(full.dx), want.dx)).toBeLessThan(1e-4);
    expect(relError(await e.read(full.dw!), want.dw)).toBeLessThan(1e-4);
    expect(relError(await e.read(only.dx), want.dx)).toBeLessThan(1e-4);
  });

  it('rejects a weight that does not divide x', () => {
    const e = new Engine(gpu);
    expect(() => rmsnorm(e, e.tensor([2, 5]), e.tensor([3]), 1e-5)).toThrow(/not a multiple of C=3/);
  });
});
