// Split-K and double-buffered tiles of the tiled matmul (matmul.ts, matmul_packed.ts) on the
// software adapter: S = 1..8 slices against the CPU reference and against S = 1 (within 1e-5 of
// the output's largest magnitude) on shapes no tile or slice divides, with transposes, alpha,
// accumulate and batching; f32 and the packed formats; the reduce is one more dispatch and gives
// the same bits on every run; 'auto' through GpuOps (the LM-head backward's call); and the
// double-buffered loop on every product of a Qwen2.5-0.5B layer.
import { describe, expect, it } from 'vitest';
import { matmul, matmulCpu, pickTile, tileSize } from '../../src/engine/kernels/matmul.ts';
import { matmulPacked, matmulPackedCpu } from '../../src/engine/kernels/matmul_packed.ts';
import { uploadPacked } from '../../src/engine/kernels/packed_weight.ts';
import { packWeight } from '../../src/engine/io/pack.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const SLICES = [1, 2, 3, 4, 5, 6, 7, 8];

describe.skipIf(!ctx)(`split-K matmul on WebGPU ${reason}`, () => {
  const gpu = ctx!;

  // M = 55 rows (an LM-head chunk; no tile height divides it), N = 70, K = 1001: K is a multiple
  // of no S · 16 (the slab), and the last slice is shorter than the others.
  it.each([
    [false, false],
    [false, true],
    [true, false],
    [true, true],
  ])('S = 1..8 at 55×1001·1001×70 matches the CPU and S = 1 (transA=%s, transB=%s)', async (ta, tb) => {
    const [m, k, n] = [55, 1001, 70];
    const aShape = ta ? [k, m] : [m, k];
    const bShape = tb ? [n, k] : [k, n];
    const a = randomArray(m * k, 1);
    const b = randomArray(k * n, 2);
    const want = matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb, alpha: 0.5 });
    const e = new Engine(gpu);
    const [at, bt] = [e.tensor(aShape, a), e.tensor(bShape, b)];
    const outs = SLICES.map((s) => matmul(e, at, bt, { transA: ta, transB: tb, alpha: 0.5, splitK: s }));
    const got = await Promise.all(outs.map((o) => e.read(o)));
    for (const g of got) {
      expectClose(g, want, 1e-5, 1);
      expectClose(g, got[0]!, 1e-5, 1);
    }
  });

  it('a split product is two dispatches (partials, then the reduce) and gives the same bits every run', async () => {
    const [m, k, n] = [20, 777, 33];
    const a = randomArray(m * k, 3);
    const b = randomArray(k * n, 4);
    const e = new Engine(gpu);
    const [at, bt] = [e.tensor([m, k], a), e.tensor([k, n], b)];
    const before = e.dispatches;
    const y1 = matmul(e, at, bt, { splitK: 5 });
    expect(e.dispatches - before).toBe(2);
    const y2 = matmul(e, at, bt, { splitK: 5 });
    const [g1, g2] = [await e.read(y1), await e.read(y2)];
    expect(Array.from(g2)).toEqual(Array.from(g1));
    expectClose(g1, matmulCpu(a, [m, k], b, [k, n]), 1e-5, 1);
    // more slices than K has slabs: the empty ones are dropped
    const tiny = matmul(e, e.tensor([2, 20], a.subarray(0, 40)), e.tensor([20, 3], b.subarray(0, 60)), { splitK: 8 });
    expectClose(await e.read(tiny), matmulCpu(a.subarray(0, 40), [2, 20], b.subarray(0, 60), [20, 3]), 1e-5, 1);
  });

  it('accumulates onto out and splits batched products', async () => {
    const [m, k, n] = [19, 600, 21];
    const a = randomArray(m * k, 5);
    const b = randomArray(k * n, 6);
    const c0 = randomArray(m * n, 7);
    const e = new Engine(gpu);
    const out = e.tensor([m, n], c0);
    matmul(e, e.tensor([m, k], a), e.tensor([k, n], b), { out, accumulate: true, alpha: -2, splitK: 3 });
    expectClose(await e.read(out), matmulCpu(a, [m, k], b, [k, n], { alpha: -2, accumulate: c0 }), 1e-5, 1);
    // batch 3 of A and B (the grid's z is slice · batch + batch)
    const [bm, bk, bn] = [7, 300, 9];
    const ab = randomArray(3 * bm * bk, 8);
    const bb = randomArray(3 * bk * bn, 9);
    const y = matmul(e, e.tensor([3, bm, bk], ab), e.tensor([3, bk, bn], bb), { splitK: 4 });
    expectClose(await e.read(y), matmulCpu(ab, [3, bm, bk], bb, [3, bk, bn]), 1e-5, 1);
  });

  it.each(['bf16', 'f16', 'q4'] as const)(
    'packed %s: S = 1..8 match the CPU and S = 1, both ways (dh = dz·W and y = x·Wᵀ)',
    async (format) => {
      const [m, k, n] = [55, 1001, 40];
      const e = new Engine(gpu);
      // dh = dz · W, W stored (K, N) as the LM head (V, C); q4 packs along the stored columns
      const wk = packWeight(randomArray(k * 64, 10, -0.5, 0.5), k, 64, format);
      const dz = randomArray(m * k, 11);
      const want = matmulPackedCpu(dz, m, wk, { alpha: 1.5 });
      const [dzt, wkt] = [e.tensor([m, k], dz), uploadPacked(e, wk)];
      const got = await Promise.all(SLICES.map((s) => e.read(matmulPacked(e, dzt, wkt, { alpha: 1.5, splitK: s }))));
      for (const g of got) {
        expectClose(g, want, 1e-5, 1);
        expectClose(g, got[0]!, 1e-5, 1);
      }
      // y = x · Wᵀ, W stored (N, K), accumulating
      const kt = 1024;
      const wn = packWeight(randomArray(n * kt, 12, -0.5, 0.5), n, kt, format);
      const x = randomArray(m * kt, 13);
      const c0 = randomArray(m * n, 14);
      const out = e.tensor([m, n], c0);
      matmulPacked(e, e.tensor([m, kt], x), uploadPacked(e, wn), { transB: true, out, accumulate: true, splitK: 6 });
      const prod = matmulPackedCpu(x, m, wn, { transB: true });
      expectClose(
        await e.read(out),
        prod.map((p, i) => p + c0[i]!),
        1e-5,
        1,
      );
    },
  );

  it("GpuOps passes splitK through: 'auto' splits a one-tile output with a long K (f32 and packed)", async () => {
    const [m, k, n] = [8, 4096, 16];
    const e = new Engine(gpu);
    const ops = new GpuOps(e);
    const { bm, bn } = tileSize(pickTile(m, n, true));
    expect(Math.ceil(m / bm) * Math.ceil(n / bn)).toBe(1);
    const dz = randomArray(m * k, 15);
    const w = randomArray(k * n, 16, -0.5, 0.5);
    const dzt = ops.upload([m, k], dz);
    let before = e.dispatches;
    const y = ops.matmul(dzt, ops.upload([k, n], w), { splitK: 'auto' });
    expect(e.dispatches - before).toBe(2);
    expectClose(await ops.read(y), matmulCpu(dz, [m, k], w, [k, n]), 1e-5, 1);
    const wp = ops.uploadWeight([k, n], w, 'bf16');
    before = e.dispatches;
    const yp = ops.matmul(dzt, wp, { splitK: 'auto' });
    expect(e.dispatches - before).toBe(2);
    expectClose(await ops.read(yp), matmulPackedCpu(dz, m, packWeight(w, k, n, 'bf16')), 1e-5, 1);
  });
});

describe.skipIf(!ctx)(`double-buffered matmul tiles on WebGPU ${reason}`, () => {
  const gpu = ctx!;

  // (the Qwen2.5-0.5B layer products, double-buffered: matmul.test.ts)
  // The tiles hardware adapters pick (double-buffered there), at sizes none divides, split and not.
  it.each([
    [{ wgX: 16, wgY: 16, bk: 16 }, 65, 333, 70, false, true],
    [{ wgX: 16, wgY: 16, bk: 16, tm: 8 }, 131, 37, 67, true, false],
    [{ wgX: 4, wgY: 64, bk: 8 }, 300, 90, 10, true, true],
    [{ wgX: 64, wgY: 4, bk: 8 }, 3, 517, 300, false, false],
  ] as const)('tile %o at %ix%i·?x%i (transA=%s, transB=%s)', async (tile, m, k, n, ta, tb) => {
    const aShape = ta ? [k, m] : [m, k];
    const bShape = tb ? [n, k] : [k, n];
    const a = randomArray(m * k, m + k);
    const b = randomArray(k * n, k + n);
    const want = matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb });
    const e = new Engine(gpu);
    const [at, bt] = [e.tensor(aShape, a), e.tensor(bShape, b)];
    for (const splitK of [1, 3]) {
      const y = matmul(e, at, bt, { transA: ta, transB: tb, tile, doubleBuffer: true, splitK });
      expectClose(await e.read(y), want, 1e-5, 1);
    }
  });

  it('the LM-head backward shape (55 × 2000 · 2000 × 896), double-buffered, with and without split-K', async () => {
    const [r, v, c] = [55, 2000, 896];
    const dz = randomArray(r * v, 21);
    const w = randomArray(v * c, 22, -0.1, 0.1);
    const want = matmulCpu(dz, [r, v], w, [v, c]);
    const e = new Engine(gpu);
    const [dzt, wt] = [e.tensor([r, v], dz), e.tensor([v, c], w)];
    for (const splitK of [1, 4])
      expectClose(await e.read(matmul(e, dzt, wt, { doubleBuffer: true, splitK })), want, 1e-5, 1);
    const wp = packWeight(w, v, c, 'bf16');
    expectClose(
      await e.read(matmulPacked(e, dzt, uploadPacked(e, wp), { doubleBuffer: true, splitK: 3 })),
      matmulPackedCpu(dz, r, wp),
      1e-5,
      1,
    );
  });
});
