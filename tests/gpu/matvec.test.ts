// matvec (decode-step linear layers, M ≤ 16 rows) against the CPU reference, including accumulate
// and alpha; a row's result does not depend on how many rows are in the call (bit-identical), for
// f32 and packed weights and for 1 or 32 threads per column; the partial sums fit 16 KiB.
import { describe, expect, it } from 'vitest';
import { packWeight } from '../../src/engine/io/pack.ts';
import { matvec, matvecCpu, matvecWorkgroupSize, MATVEC_MAX_ROWS } from '../../src/engine/kernels/matvec.ts';
import { matvecPacked, matvecPackedCpu } from '../../src/engine/kernels/matvec_packed.ts';
import { uploadPacked } from '../../src/engine/kernels/packed_weight.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('matvec workgroup size', () => {
  it('keeps the partial sums within 16 KiB and a whole number of columns per workgroup', () => {
    for (let rows = 1; rows <= MATVEC_MAX_ROWS; rows++)
      for (const nacc of [1, 2])
        for (const lanes of [1, 32]) {
          const wg = matvecWorkgroupSize(rows, nacc, lanes);
          expect(nacc * rows * wg * 4).toBeLessThanOrEqual(16 * 1024);
          expect(wg % lanes).toBe(0);
          expect(wg).toBeGreaterThanOrEqual(64); // enough columns per workgroup to fill it
        }
  });
});

describe.skipIf(!ctx)(`matvec on WebGPU ${reason}`, () => {
  it.each([
    [1, 7, 5, undefined],
    [1, 300, 129, undefined],
    [3, 70, 64, undefined],
    [8, 33, 257, undefined],
    [16, 45, 70, undefined],
    [16, 45, 70, 32],
    [11, 20, 33, 8],
  ])('M=%i N=%i K=%i lanes=%s matches the CPU within 1e-4', async (m, n, k, lanes) => {
    const e = new Engine(ctx!);
    const x = randomArray(m * k, 1);
    const w = randomArray(n * k, 2);
    const got = await e.read(matvec(e, e.tensor([m, k], x), e.tensor([n, k], w), { alpha: 0.5, lanes }));
    expectClose(got, matvecCpu(x, w, m, n, k, 0.5), 1e-4);
  });

  it('accumulates into out', async () => {
    const e = new Engine(ctx!);
    const x = randomArray(2 * 16, 3);
    const w = randomArray(5 * 16, 4);
    const base = randomArray(10, 5);
    const out = e.tensor([2, 5], base);
    const got = await e.read(
      matvec(e, e.tensor([2, 16], x), e.tensor([5, 16], w), { out, accumulate: true, alpha: 2 }),
    );
    const prod = matvecCpu(x, w, 2, 5, 16, 2);
    expectClose(
      got,
      base.map((b, i) => b + prod[i]!),
      1e-5,
    );
  });

  it('rejects too many rows', () => {
    const e = new Engine(ctx!);
    expect(() => matvec(e, e.tensor([17, 4]), e.tensor([3, 4]))).toThrow('matvec: 17 rows; at most 16');
  });

  // Row r of a 16-row call equals row r computed alone, bit for bit: the per-row accumulation
  // order may not depend on M (a batch of sequences must decode as each would alone).
  it.each([
    ['f32', 1],
    ['f32', 32],
    ['bf16', 1],
    ['bf16', 32],
    ['q4', 1],
    ['q4', 32],
  ] as const)('%s, lanes %i: row r of 16 rows is bit-identical to the row alone', async (format, lanes) => {
    const e = new Engine(ctx!);
    const m = 16;
    const n = 40;
    const k = 96;
    const x = randomArray(m * k, 6);
    const wData = randomArray(n * k, 7);
    const p = format === 'f32' ? null : packWeight(wData, n, k, format);
    const w = p ? uploadPacked(e, p) : e.tensor([n, k], wData);
    const mv = (xt: Tensor) =>
      p ? matvecPacked(e, xt, w as ReturnType<typeof uploadPacked>, { lanes }) : matvec(e, xt, w, { lanes });
    const all = await e.read(mv(e.tensor([m, k], x)));
    for (const r of [0, 7, 15]) {
      const alone = await e.read(mv(e.tensor([1, k], x.subarray(r * k, (r + 1) * k))));
      expect(Array.from(all.subarray(r * n, (r + 1) * n))).toEqual(Array.from(alone));
    }
    const want = p ? matvecPackedCpu(x, p, m) : matvecCpu(x, wData, m, n, k);
    expectClose(all, want, 1e-5);
  });
});
