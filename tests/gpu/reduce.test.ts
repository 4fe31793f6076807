// reduce (sum, sum of squares over several tensors) on the software adapter against f64 sums.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { sum, sumCpu, sumSquares, sumSquaresCpu } from '../../src/engine/kernels/reduce.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const rel = (got: number, want: number) => Math.abs(got - want) / Math.max(Math.abs(want), 1e-30);

describe.skipIf(!ctx)(`reduce on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([1, 7, 256, 1025, 100_003, 600_000])('sum of N=%i values', async (n) => {
    const x = randomArray(n, n, -0.5, 1); // positive mean: no cancellation to zero
    const e = new Engine(gpu);
    const [got] = await e.read(sum(e, e.tensor([n], x)));
    expect(rel(got!, sumCpu(x))).toBeLessThan(1e-4);
  });

  it('sum of squares over several tensors, accumulating across calls', async () => {
    const xs = [1, 300, 5000, 70_001].map((n, i) => randomArray(n, 100 + i, -2, 2));
    const e = new Engine(gpu);
    const out = sumSquares(
      e,
      xs.slice(0, 2).map((x) => e.tensor([x.length], x)),
    );
    const [first] = await e.read(out);
    expect(rel(first!, sumSquaresCpu(xs.slice(0, 2)))).toBeLessThan(1e-5);
    expect(
      sumSquares(
        e,
        xs.slice(2).map((x) => e.tensor([x.length], x)),
        out,
      ),
    ).toBe(out);
    const [total] = await e.read(out);
    expect(rel(total!, sumSquaresCpu(xs))).toBeLessThan(1e-4);
  });

  it('handles empty inputs and rejects out among the inputs', async () => {
    const e = new Engine(gpu);
    const [z] = await e.read(sumSquares(e, []));
    expect(z).toBe(0);
    const x = e.tensor([1], new Float32Array([3]));
    expect(() => sum(e, x, x)).toThrow(/must not be one of the inputs/);
  });
});
