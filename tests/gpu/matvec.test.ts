// matvec (decode-step linear layers) against the CPU reference, including accumulate and alpha.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { matvec, matvecCpu } from '../../src/engine/kernels/matvec.ts';
import { Engine } from '../../src/engine/runtime.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const rand = (n: number, seed: number) => {
  const r = createRng(seed);
  return Float32Array.from({ length: n }, () => r.next() * 2 - 1);
};

describe.skipIf(!ctx)(`matvec on WebGPU ${reason}`, () => {
  it.each([
    [1, 7, 5],
    [1, 300, 129],
    [3, 70, 64],
    [8, 33, 257],
  ])('M=%i N=%i K=%i matches the CPU within 1e-5', async (m, n, k) => {
    const e = new Engine(ctx!);
    const x = rand(m * k, 1);
    const w = rand(n * k, 2);
    const got = await e.read(matvec(e, e.tensor([m, k], x), e.tensor([n, k], w), { alpha: 0.5 }));
    const want = matvecCpu(x, w, m, n, k, 0.5);
    for (let i = 0; i < want.length; i++) expect(got[i]).toBeCloseTo(want[i]!, 4);
  });

  it('accumulates into out', async () => {
    const e = new Engine(ctx!);
    const x = rand(2 * 16, 3);
    const w = rand(5 * 16, 4);
    const base = rand(10, 5);
    const out = e.tensor([2, 5], base);
    const got = await e.read(
      matvec(e, e.tensor([2, 16], x), e.tensor([5, 16], w), { out, accumulate: true, alpha: 2 }),
    );
    const prod = matvecCpu(x, w, 2, 5, 16, 2);
    for (let i = 0; i < 10; i++) expect(got[i]).toBeCloseTo(base[i]! + prod[i]!, 4);
  });

  it('rejects too many rows', () => {
    const e = new Engine(ctx!);
    expect(() => matvec(e, e.tensor([9, 4]), e.tensor([3, 4]))).toThrow('matvec: 9 rows; at most 8');
  });
});
