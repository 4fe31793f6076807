// elementwise (add, scale, add-in-place, place-columns) on the software adapter against the CPU reference.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import {
  add,
  addCpu,
  addInPlace,
  addInPlaceCpu,
  placeColumns,
  placeColumnsCpu,
  scale,
  scaleCpu,
} from '../../src/engine/kernels/elementwise.ts';
import { grid1d } from '../../src/engine/kernels/dispatch_grid.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('dispatch grid (CPU)', () => {
  it('keeps each dimension within 65535 and covers the range', () => {
    expect(grid1d(0)).toEqual([1, 1]);
    expect(grid1d(65535)).toEqual([65535, 1]);
    const [x, y] = grid1d(65536 * 3 + 1);
    expect(x).toBeLessThanOrEqual(65535);
    expect(x * y).toBeGreaterThanOrEqual(65536 * 3 + 1);
  });
});

describe.skipIf(!ctx)(`elementwise on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;
  const sizes = [1, 255, 256, 1000, 4099];

  it.each(sizes)('add is exact at N=%i', async (n) => {
    const a = randomArray(n, n);
    const b = randomArray(n, n + 1);
    const e = new Engine(gpu);
    const y = add(e, e.tensor([n], a), e.tensor([n], b));
    expect(await e.read(y)).toEqual(addCpu(a, b));
  });

  it.each(sizes)('scale is exact at N=%i', async (n) => {
    const a = randomArray(n, n + 2);
    const e = new Engine(gpu);
    const y = scale(e, e.tensor([n], a), -0.375);
    expect(await e.read(y)).toEqual(scaleCpu(a, -0.375).map(Math.fround));
  });

  it.each(sizes)('addInPlace matches at N=%i and keeps the shape and buffer', async (n) => {
    const a = randomArray(n, n + 3);
    const b = randomArray(n, n + 4);
    const e = new Engine(gpu);
    const at = e.tensor([1, n], a);
    const y = addInPlace(e, at, e.tensor([n], b), 0.25);
    expect(y).toBe(at);
    const got = await e.read(y);
    const want = addInPlaceCpu(a.slice(), b, 0.25);
    // The GPU may fuse the multiply-add (one rounding), the CPU rounds once too (f64 then f32).
    for (let i = 0; i < n; i++)
      expect(Math.abs(got[i]! - want[i]!)).toBeLessThanOrEqual(2 ** -22 * Math.max(1, Math.abs(want[i]!)));
  });

  it('keeps the input shape and checks sizes and aliasing', () => {
    const e = new Engine(gpu);
    const a = e.tensor([3, 4]);
    expect(add(e, a, e.tensor([12])).shape).toEqual([3, 4]);
    expect(() => add(e, a, e.tensor([11]))).toThrow(/size mismatch 12 vs 11/);
    expect(() => addInPlace(e, a, a)).toThrow(/alias/);
  });

  it('place-columns writes q | k | v blocks (with and without a bias) exactly where the CPU reference does', async () => {
    const e = new Engine(gpu);
    const R = 19;
    const widths = [12, 4, 4];
    const width = 20;
    const parts = widths.map((c, i) => randomArray(R * c, 40 + i));
    const biases = [randomArray(12, 50), undefined, randomArray(4, 52)];
    const out = e.zeros([R, width]);
    const want = new Float32Array(R * width);
    let off = 0;
    parts.forEach((p, i) => {
      const b = biases[i];
      placeColumns(e, out, off, e.tensor([R, widths[i]!], p), b ? e.tensor([b.length], b) : undefined);
      placeColumnsCpu(want, width, off, p, widths[i]!, b);
      off += widths[i]!;
    });
    expect(Array.from(await e.read(out))).toEqual(Array.from(want));
    expect(() => placeColumns(e, out, 18, e.tensor([R, 4]))).toThrow(/does not fit/);
  });
});
