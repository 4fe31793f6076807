// rmsnorm on the software adapter: GPU vs CPU reference, CPU backward vs finite differences.
import { describe, expect, it } from 'vitest';
import { createRng, type Rng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/device.ts';
import { rmsnorm, rmsnormBackward, rmsnormBackwardCpu, rmsnormCpu } from '../../src/engine/kernels/rmsnorm.ts';
import { Engine } from '../../src/engine/runtime.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const rand = (rng: Rng, n: number, scale = 1, offset = 0) =>
  new Float32Array(n).map(() => (rng.next() * 2 - 1) * scale + offset);

/** Worst |got - want| / max(|want|, 1% of max|want|); ≤ rtol means close. */
function worstRelErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let scale = 0;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]!));
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const denom = Math.max(Math.abs(want[i]!), 0.01 * scale, 1e-30);
    worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / denom);
  }
  return worst;
}

/** Central finite differences of loss(x) = sum(f(x) * r) with respect to x. */
function finiteDiff(f: (x: Float32Array) => Float32Array, x: Float32Array, r: Float32Array, h = 1e-2): Float64Array {
  const loss = () => f(x).reduce((s, v, i) => s + v * r[i]!, 0);
  const g = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const xi = x[i]!;
    x[i] = xi + h;
    const up = x[i]!;
    const lp = loss();
    x[i] = xi - h;
    const down = x[i]!;
    const lm = loss();
    x[i] = xi;
    g[i] = (lp - lm) / (up - down);
  }
  return g;
}

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
    const x = rand(rng, rows * c);
    const w = rand(rng, c, 0.5, 1);
    const r = rand(rng, rows * c);
    const eps = 1e-5;
    const { dx, dw } = rmsnormBackwardCpu(x, w, r, eps);
    expect(
      worstRelErr(
        dx,
        finiteDiff((xx) => rmsnormCpu(xx, w, eps), x, r),
      ),
    ).toBeLessThan(2e-3);
    expect(
      worstRelErr(
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
    const x = rand(rng, n, 3);
    const w = rand(rng, c, 0.5, 1);
    const e = new Engine(gpu);
    const y = rmsnorm(e, e.tensor(shape, x), e.tensor([c], w), 1e-6);
    expect(y.shape).toEqual(shape);
    expect(worstRelErr(await e.read(y), rmsnormCpu(x, w, 1e-6))).toBeLessThan(1e-4);
  });

  it('spreads more than 65535 rows over a 2-D grid', async () => {
    const rows = 65600;
    const rng = createRng(11);
    const x = rand(rng, rows * 2);
    const w = new Float32Array([1.5, -0.5]);
    const e = new Engine(gpu);
    const got = await e.read(rmsnorm(e, e.tensor([rows, 2], x), e.tensor([2], w), 1e-5));
    expect(worstRelErr(got, rmsnormCpu(x, w, 1e-5))).toBeLessThan(1e-4);
  });

  it.each([
    { shape: [6, 37], c: 37 },
    { shape: [2, 3, 16], c: 16 },
    { shape: [3, 130], c: 130 },
  ])('backward (dx, dw) matches the CPU backward on $shape', async ({ shape, c }) => {
    const rng = createRng(c * 31);
    const n = shape.reduce((a, b) => a * b, 1);
    const x = rand(rng, n, 2);
    const w = rand(rng, c, 0.5, 1);
    const dy = rand(rng, n);
    const want = rmsnormBackwardCpu(x, w, dy, 1e-5);
    const e = new Engine(gpu);
    const xt = e.tensor(shape, x);
    const wt = e.tensor([c], w);
    const dyt = e.tensor(shape, dy);
    const full = rmsnormBackward(e, xt, wt, dyt, 1e-5, { weightGrad: true });
    const only = rmsnormBackward(e, xt, wt, dyt, 1e-5);
    expect(only.dw).toBeUndefined();
    expect(full.dx.shape).toEqual(shape);
    expect(worstRelErr(await e.read(full.dx), want.dx)).toBeLessThan(1e-4);
    expect(worstRelErr(await e.read(full.dw!), want.dw)).toBeLessThan(1e-4);
    expect(worstRelErr(await e.read(only.dx), want.dx)).toBeLessThan(1e-4);
  });

  it('rejects a weight that does not divide x', () => {
    const e = new Engine(gpu);
    expect(() => rmsnorm(e, e.tensor([2, 5]), e.tensor([3]), 1e-5)).toThrow(/not a multiple of C=3/);
  });
});
