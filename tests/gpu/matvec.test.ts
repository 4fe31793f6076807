// matvec (decode-step linear layers, M ≤ 16 rows) against the CPU reference, including accumulate
// and alpha; a row's result does not depend on how many rows are in the call (bit-identical), for
// f32 and packed weights, for 1 to 128 threads per column, with the subgroup-shuffle reduction and
// with the shared-memory tree; every linear shape of the Qwen2.5-0.5B and bench layouts within
// 1e-5; the launch plan keeps the partial sums within 16 KiB and picks the lanes from K alone.
import { describe, expect, it } from 'vitest';
import { packWeight } from '../../src/engine/io/pack.ts';
import {
  matvec,
  matvecCpu,
  matvecLanes,
  matvecPlan,
  MATVEC_MAX_ROWS,
  type MatvecOpts,
} from '../../src/engine/kernels/matvec.ts';
import { matvecPacked, matvecPackedCpu } from '../../src/engine/kernels/matvec_packed.ts';
import { uploadPacked } from '../../src/engine/kernels/packed_weight.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('matvec launch plan', () => {
  it('keeps the partial sums within 16 KiB, ≤ 16 accumulators and whole column blocks per workgroup', () => {
    for (let rows = 1; rows <= MATVEC_MAX_ROWS; rows++)
      for (const nacc of [1, 2])
        for (const lanes of [1, 4, 32, 128])
          for (const b of [1, 4, 32].filter((v) => v <= lanes))
            for (const n of [5, 896, 4864, 151936]) {
              const { wg, cpt } = matvecPlan(rows, nacc, n, lanes, b);
              expect(nacc * cpt * rows * (wg / b) * 4).toBeLessThanOrEqual(16 * 1024);
              expect(cpt * rows).toBeLessThanOrEqual(MATVEC_MAX_ROWS);
              expect(wg % lanes).toBe(0);
              expect(wg).toBeGreaterThanOrEqual(64); // enough threads per workgroup
            }
  });

  it('splits long K over more lanes, wide products over several columns per thread', () => {
    // Qwen2.5-0.5B, bf16: q/k/v, o, gate/up read K = 896; down reads K = 4,864
    expect(matvecLanes('bf16', 896)).toBe(16);
    expect(matvecLanes('bf16', 4864)).toBe(128);
    expect(matvecLanes('f32', 896)).toBe(32);
    expect(matvecLanes('f32', 70)).toBe(16); // K % 4 ≠ 0: one element per chunk
    expect(matvecPlan(1, 1, 151936, 16).cpt).toBe(4); // the LM head: 4 columns per thread share x
    expect(matvecPlan(1, 1, 896, 128).cpt).toBe(1); // down: every column its own threads
    expect(matvecPlan(16, 1, 151936, 16).cpt).toBe(1); // 16 rows: 16 accumulators already
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

  // shapes whose N is no multiple of a workgroup's columns and whose K is no multiple of 4 (scalar
  // loads) or is (vec4 loads), at 1 to 128 lanes, with shuffles and with the tree
  it.each([
    [1, 131, 68, 128, undefined],
    [5, 131, 68, 4, false],
    [16, 131, 68, 128, false],
    [16, 13, 130, 16, undefined],
    [2, 9, 4, 1, undefined],
    [3, 33, 1003, 64, false],
    [3, 33, 1003, 64, undefined],
  ] as const)('M=%i N=%i K=%i lanes=%i subgroups=%s matches the CPU within 1e-5', async (m, n, k, lanes, sg) => {
    const e = new Engine(ctx!);
    const x = randomArray(m * k, 11);
    const w = randomArray(n * k, 12);
    const got = await e.read(matvec(e, e.tensor([m, k], x), e.tensor([n, k], w), { lanes, subgroups: sg }));
    expectClose(got, matvecCpu(x, w, m, n, k), 1e-5);
  });

  it.skipIf(!ctx?.device.features.has('subgroups'))('reduces with subgroup shuffles when asked', async () => {
    const e = new Engine(ctx!);
    const [m, n, k] = [4, 37, 1000];
    const x = randomArray(m * k, 13);
    const w = randomArray(n * k, 14);
    for (const lanes of [4, 128]) {
      const got = await e.read(matvec(e, e.tensor([m, k], x), e.tensor([n, k], w), { lanes, subgroups: true }));
      expectClose(got, matvecCpu(x, w, m, n, k), 1e-5);
    }
  });

  // (N, K, rows) of every linear layer of the Qwen2.5-0.5B layout (q and o, k and v, gate and up,
  // down) at 1 and 16 rows, and of BENCH_CONFIG (the same and its 49,152-row LM head) at 1 row, at
  // the lanes a GPU picks from K. (Qwen's 151,936 × 896 head only has more columns than gate/up at
  // the same K.) Error relative to max |y|: over K = 4,864 f32 terms, values near 1% of the largest
  // differ from the f64 reference by up to ~2e-5 of themselves in any summation order (the previous
  // kernel: 2.0e-5; this one: 1.0e-5).
  const MODEL_SHAPES: [number, number, number][] = [
    [896, 896, 1],
    [896, 896, 16],
    [128, 896, 1],
    [128, 896, 16],
    [4864, 896, 1],
    [4864, 896, 16],
    [896, 4864, 1],
    [896, 4864, 16],
    [576, 576, 1],
    [192, 576, 1],
    [1536, 576, 1],
    [576, 1536, 1],
    [49152, 576, 1],
  ];
  it.each(['f32', 'bf16'] as const)(
    '%s: every model shape matches the CPU within 1e-5 of max |y|',
    async (format) => {
      const e = new Engine(ctx!);
      for (const [n, k, m] of MODEL_SHAPES) {
        const x = randomArray(m * k, n + m);
        const wData = randomArray(n * k, n + k, -0.1, 0.1);
        const o: MatvecOpts = { lanes: matvecLanes(format, k) };
        const p = format === 'f32' ? null : packWeight(wData, n, k, format);
        const xt = e.tensor([m, k], x);
        const wt = p ? uploadPacked(e, p) : e.tensor([n, k], wData);
        const y = p ? matvecPacked(e, xt, wt as ReturnType<typeof uploadPacked>, o) : matvec(e, xt, wt, o);
        const want = p ? matvecPackedCpu(x, p, m) : matvecCpu(x, wData, m, n, k);
        expectClose(await e.read(y), want, 1e-5, 1);
        for (const t of [xt, wt, y]) e.release(t);
        e.trim();
      }
    },
    300_000,
  );

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
  // order may not depend on M (a batch of sequences must decode as each would alone). At 8,200
  // columns and 32 lanes a row alone runs 4 columns per thread, 16 rows one: same values.
  it.each([
    ['f32', 1, 40],
    ['f32', 32, 8200],
    ['bf16', 1, 40],
    ['bf16', 32, 8200],
    ['q4', 1, 40],
    ['q4', 32, 40],
  ] as const)('%s, lanes %i, N %i: row r of 16 rows is bit-identical to the row alone', async (format, lanes, n) => {
    expect(matvecPlan(1, 1, 8200, 32).cpt).toBe(4);
    expect(matvecPlan(16, 1, 8200, 32).cpt).toBe(1);
    const e = new Engine(ctx!);
    const m = 16;
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
