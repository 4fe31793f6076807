// matmul on the software adapter against its CPU reference: odd sizes, every transpose
// combination, accumulate/alpha, batching, tile shapes, the backward (against finite differences of
// the forward), and the f16 path.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import {
  matmul,
  matmulBackward,
  matmulBackwardCpu,
  matmulCpu,
  matmulDims,
  packF16,
  pickTile,
} from '../../src/engine/kernels/matmul.ts';
import { f16ToF32 } from '../../src/engine/io/float16.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { expectClose, finiteDiff, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/** Stored shape of an operand: op(A) is (m, k), stored transposed when `trans`. */
const stored = (rows: number, cols: number, trans: boolean, batch?: number) => {
  const s = trans ? [cols, rows] : [rows, cols];
  return batch === undefined ? s : [batch, ...s];
};
const TRANS: [boolean, boolean][] = [
  [false, false],
  [false, true],
  [true, false],
  [true, true],
];

describe('matmul f16 packing (CPU)', () => {
  it('packs IEEE binary16 bit patterns, little-endian, padded to whole 4-byte words', () => {
    const x = new Float32Array([1, -2, 0.1, 65504, 2 ** -24, 1e6, -0, 0.333333]);
    const h = packF16(x);
    expect(Array.from(h)).toEqual([0x3c00, 0xc000, 0x2e66, 0x7bff, 0x0001, 0x7c00, 0x8000, 0x3555]);
    // Element i lives at byte 2i, low byte first: how WGSL's array<f16> reads the buffer.
    const bytes = new Uint8Array(h.buffer);
    expect(Array.from(bytes.slice(0, 4))).toEqual([0x00, 0x3c, 0x00, 0xc0]);
    const odd = packF16(new Float32Array([1.5, 2.5, 3.5]));
    expect(odd.length).toBe(4);
    expect(odd.byteLength % 4).toBe(0);
    expect(odd[3]).toBe(0);
    expect(Array.from(f16ToF32(odd.subarray(0, 3)))).toEqual([1.5, 2.5, 3.5]);
  });

  it('round-trips within half precision and rounds to nearest even', () => {
    const x = randomArray(1000, 7, -4, 4);
    const back = f16ToF32(packF16(x));
    for (let i = 0; i < x.length; i++) expect(Math.abs(back[i]! - x[i]!)).toBeLessThanOrEqual(2 ** -11 * 4);
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
    expect(packF16(new Float32Array([1 + 2 ** -11]))[0]).toBe(0x3c00);
    expect(packF16(new Float32Array([1 + 3 * 2 ** -11]))[0]).toBe(0x3c02);
  });

  it('an f16-weight product stays within half-precision error of the f32 one', () => {
    const [m, k, n] = [5, 64, 7];
    const a = randomArray(m * k, 1);
    const w = randomArray(k * n, 2);
    const exact = matmulCpu(a, [m, k], w, [k, n]);
    const half = matmulCpu(a, [m, k], f16ToF32(packF16(w).subarray(0, k * n)), [k, n]);
    expectClose(half, exact, 5e-3, 0.1);
  });
});

describe('matmul backward (CPU)', () => {
  it.each(TRANS)('the reference backward matches finite differences, transA=%s transB=%s', (ta, tb) => {
    const [m, k, n] = [4, 7, 3];
    const aShape = stored(m, k, ta);
    const bShape = stored(k, n, tb);
    const a = randomArray(m * k, 71);
    const b = randomArray(k * n, 72);
    const dC = randomArray(m * n, 73);
    const opts = { transA: ta, transB: tb, alpha: -1.5 };
    const got = matmulBackwardCpu(a, aShape, b, bShape, dC, opts);
    expectClose(
      got.dA,
      finiteDiff((x) => matmulCpu(x, aShape, b, bShape, opts), a, dC),
      1e-3,
    );
    expectClose(
      got.dB,
      finiteDiff((x) => matmulCpu(a, aShape, x, bShape, opts), b, dC),
      1e-3,
    );
  });
});

describe('matmul shapes (CPU)', () => {
  it('resolves dims, batching and errors', () => {
    expect(matmulDims([7, 13], [13, 5])).toMatchObject({ batch: 1, m: 7, n: 5, k: 13, outShape: [7, 5] });
    expect(matmulDims([13, 7], [5, 13], true, true)).toMatchObject({ m: 7, n: 5, k: 13 });
    expect(matmulDims([3, 7, 13], [13, 5])).toMatchObject({ batch: 3, strideA: 91, strideB: 0, outShape: [3, 7, 5] });
    expect(() => matmulDims([7, 13], [12, 5])).toThrow(/inner dims differ/);
    expect(() => matmulDims([2, 7, 13], [3, 13, 5])).toThrow(/batch sizes differ/);
    expect(() => matmulDims([13], [13, 5])).toThrow(/2-D or 3-D/);
    expect(pickTile(1, 4096)).toEqual({ wgX: 64, wgY: 4, bk: 8 });
    expect(pickTile(64, 64)).toEqual({ wgX: 16, wgY: 16, bk: 16 });
    expect(pickTile(1, 4096, true)).toEqual({ wgX: 8, wgY: 8, bk: 16, tm: 8 });
    expect(pickTile(4096, 16)).toEqual({ wgX: 4, wgY: 64, bk: 8 });
    // 128 × 64 tiles (8 rows per thread) once they make enough workgroups to fill a GPU
    expect(pickTile(4096, 1024)).toEqual({ wgX: 16, wgY: 16, bk: 16, tm: 8 });
    expect(pickTile(256, 256)).toEqual({ wgX: 16, wgY: 16, bk: 16 });
  });
});

describe.skipIf(!ctx)(`matmul on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  const sizes: [number, number, number][] = [
    [1, 1, 1],
    [7, 13, 5],
    [65, 33, 70],
    [64, 16, 64],
    [3, 40, 100],
  ];
  for (const [m, k, n] of sizes) {
    it.each(TRANS)(`matches the CPU at ${m}x${k}·${k}x${n}, transA=%s transB=%s`, async (ta, tb) => {
      const seed = m * 1000 + k * 10 + n + (ta ? 1 : 0) + (tb ? 2 : 0);
      const aShape = stored(m, k, ta);
      const bShape = stored(k, n, tb);
      const a = randomArray(m * k, seed);
      const b = randomArray(k * n, seed + 1);
      const e = new Engine(gpu);
      const got = await e.read(matmul(e, e.tensor(aShape, a), e.tensor(bShape, b), { transA: ta, transB: tb }));
      expectClose(got, matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb }));
    });
  }

  it.each(TRANS)('accumulates with alpha into an existing C, transA=%s transB=%s', async (ta, tb) => {
    const [m, k, n] = [9, 17, 11];
    const aShape = stored(m, k, ta);
    const bShape = stored(k, n, tb);
    const a = randomArray(m * k, 11);
    const b = randomArray(k * n, 12);
    const c0 = randomArray(m * n, 13);
    const e = new Engine(gpu);
    const out = e.tensor([m, n], c0);
    const ret = matmul(e, e.tensor(aShape, a), e.tensor(bShape, b), {
      transA: ta,
      transB: tb,
      alpha: -0.75,
      out,
      accumulate: true,
    });
    expect(ret).toBe(out);
    const want = matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb, alpha: -0.75, accumulate: c0 });
    expectClose(await e.read(out), want);
    // Accumulating twice adds the product twice.
    matmul(e, e.tensor(aShape, a), e.tensor(bShape, b), {
      transA: ta,
      transB: tb,
      alpha: -0.75,
      out,
      accumulate: true,
    });
    expectClose(
      await e.read(out),
      matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb, alpha: -0.75, accumulate: want }),
    );
  });

  it('overwrites a given out without accumulate', async () => {
    const e = new Engine(gpu);
    const a = randomArray(6, 1);
    const b = randomArray(6, 2);
    const out = e.tensor([2, 2], new Float32Array([9, 9, 9, 9]));
    matmul(e, e.tensor([2, 3], a), e.tensor([3, 2], b), { out });
    expectClose(await e.read(out), matmulCpu(a, [2, 3], b, [3, 2]));
  });

  it.each([
    ['batched A and B', [3, 7, 13], [3, 13, 5], false, false],
    ['batched, both transposed', [3, 13, 7], [3, 5, 13], true, true],
    ['batched A, shared B (flattened)', [4, 7, 13], [13, 5], false, false],
    ['batched transposed A, shared B', [4, 13, 7], [5, 13], true, true],
    ['shared A, batched B', [7, 13], [2, 13, 5], false, false],
  ] as [string, number[], number[], boolean, boolean][])('%s', async (_name, aShape, bShape, ta, tb) => {
    const a = randomArray(
      aShape.reduce((x, y) => x * y),
      21,
    );
    const b = randomArray(
      bShape.reduce((x, y) => x * y),
      22,
    );
    const e = new Engine(gpu);
    const y = matmul(e, e.tensor(aShape, a), e.tensor(bShape, b), { transA: ta, transB: tb });
    const want = matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb });
    expect(y.shape).toEqual(matmulDims(aShape, bShape, ta, tb).outShape);
    expectClose(await e.read(y), want);
  });

  // The GPU tiles (the software adapter picks 8x8x8; the skinny ones with a shallower slab here)
  // and an odd one; one transpose case each, since SwiftShader takes seconds to compile large tiles.
  it.each([
    [{ wgX: 16, wgY: 16, bk: 16 }, 65, 33, 70, false, false],
    [{ wgX: 4, wgY: 64, bk: 4 }, 300, 20, 10, true, true],
    [{ wgX: 64, wgY: 4, bk: 4 }, 3, 20, 300, false, true],
    [{ wgX: 2, wgY: 8, bk: 4 }, 37, 19, 41, true, false],
    // 8 rows per thread, sizes no tile divides: vec4 staging of both operands (K % 4 = 0, transB) ...
    [{ wgX: 16, wgY: 16, bk: 16, tm: 8 }, 130, 36, 70, false, true],
    // ... of neither (odd M, K, N: the scalar staging) ...
    [{ wgX: 16, wgY: 16, bk: 16, tm: 8 }, 131, 37, 67, true, false],
    // ... of a transposed A (M % 4 = 0) and a plain B (N % 4 = 0), and 4 rows per thread with both transposed
    [{ wgX: 8, wgY: 8, bk: 16, tm: 8 }, 68, 41, 20, true, false],
    [{ wgX: 8, wgY: 8, bk: 8, tm: 4 }, 36, 44, 52, true, true],
  ] as const)('tile %o at %ix%i·?x%i (transA=%s, transB=%s)', async (tile, m, k, n, ta, tb) => {
    const aShape = stored(m, k, ta);
    const bShape = stored(k, n, tb);
    const a = randomArray(m * k, m + k);
    const b = randomArray(k * n, k + n);
    const e = new Engine(gpu);
    const got = await e.read(matmul(e, e.tensor(aShape, a), e.tensor(bShape, b), { transA: ta, transB: tb, tile }));
    expectClose(got, matmulCpu(a, aShape, b, bShape, { transA: ta, transB: tb }));
  });

  // Every product of a Qwen2.5-0.5B layer (hidden 896, MLP 4864, 2 KV heads of 64, LoRA rank 16)
  // at 19 tokens (no tile divides it): the forward y = x·Wᵀ, the input gradient dx = dy·W and the
  // weight gradient dW = dyᵀ·x, with the tile the adapter picks, within 1e-5 of the CPU relative to
  // the output's largest magnitude (floor 1: an element-wise ratio cannot hold 1e-5 for f32 sums of
  // thousands of terms that cancel to near zero). Single and double-buffered tiles (DOUBLE_BUF, which
  // hardware adapters use) alike.
  it.each([
    [896, 896],
    [896, 128],
    [896, 4864],
    [4864, 896],
    [896, 16],
    [16, 896],
  ])('the model product %i → %i at 19 tokens (forward, dx, dW) matches the CPU within 1e-5', async (k, n) => {
    const t = 19;
    const x = randomArray(t * k, k + n);
    const w = randomArray(n * k, k * n);
    const dy = randomArray(t * n, k - n);
    const e = new Engine(gpu);
    const [xt, wt, dyt] = [e.tensor([t, k], x), e.tensor([n, k], w), e.tensor([t, n], dy)];
    for (const doubleBuffer of [false, true]) {
      const y = matmul(e, xt, wt, { transB: true, doubleBuffer });
      const dx = matmul(e, dyt, wt, { doubleBuffer });
      const dw = matmul(e, dyt, xt, { transA: true, doubleBuffer });
      expectClose(await e.read(y), matmulCpu(x, [t, k], w, [n, k], { transB: true }), 1e-5, 1);
      expectClose(await e.read(dx), matmulCpu(dy, [t, n], w, [n, k]), 1e-5, 1);
      expectClose(await e.read(dw), matmulCpu(dy, [t, n], x, [t, k], { transA: true }), 1e-5, 1);
    }
  });

  // The backward against finite differences of the forward (as every other backward here), not
  // against matmulBackwardCpu: that mirrors the kernel's own formulas, so a shared mistake would pass.
  it.each(TRANS)('backward matches finite differences of the forward, transA=%s transB=%s', async (ta, tb) => {
    const [m, k, n] = [6, 9, 5];
    const aShape = stored(m, k, ta);
    const bShape = stored(k, n, tb);
    const a = randomArray(m * k, 31);
    const b = randomArray(k * n, 32);
    const dC = randomArray(m * n, 33);
    const e = new Engine(gpu);
    const { dA, dB } = matmulBackward(e, e.tensor(aShape, a), e.tensor(bShape, b), e.tensor([m, n], dC), {
      transA: ta,
      transB: tb,
      alpha: 2,
    });
    const opts = { transA: ta, transB: tb, alpha: 2 };
    expect(dA!.shape).toEqual(aShape);
    expect(dB!.shape).toEqual(bShape);
    expectClose(
      await e.read(dA!),
      finiteDiff((x) => matmulCpu(x, aShape, b, bShape, opts), a, dC),
      1e-3,
    );
    expectClose(
      await e.read(dB!),
      finiteDiff((x) => matmulCpu(a, aShape, x, bShape, opts), b, dC),
      1e-3,
    );
  });

  it('backward of a batched A with a shared B sums dB over the batch, and accumulates', async () => {
    const aShape = [3, 4, 6];
    const bShape = [6, 5];
    const a = randomArray(72, 41);
    const b = randomArray(30, 42);
    const dC = randomArray(60, 43);
    const dB0 = randomArray(30, 44);
    const e = new Engine(gpu);
    const dBt = e.tensor(bShape, dB0);
    const { dA, dB } = matmulBackward(e, e.tensor(aShape, a), e.tensor(bShape, b), e.tensor([3, 4, 5], dC), {
      dB: dBt,
    });
    expect(dB!.buffer).toBe(dBt.buffer);
    expectClose(
      await e.read(dA!),
      finiteDiff((x) => matmulCpu(x, aShape, b, bShape), a, dC),
      1e-3,
    );
    const fdB = finiteDiff((x) => matmulCpu(a, aShape, x, bShape), b, dC);
    expectClose(
      await e.read(dB!),
      fdB.map((v, i) => v + dB0[i]!),
      1e-3,
    );
  });

  it('rejects mismatched shapes, accumulate without out, and aliasing', () => {
    const e = new Engine(gpu);
    const a = e.tensor([2, 3]);
    expect(() => matmul(e, a, e.tensor([4, 2]))).toThrow(/inner dims differ/);
    expect(() => matmul(e, a, e.tensor([3, 2]), { accumulate: true })).toThrow(/needs an existing/);
    expect(() => matmul(e, a, e.tensor([3, 2]), { out: e.tensor([3, 3]) })).toThrow(/out must be f32 with 4/);
    const sq = e.tensor([3, 3]);
    expect(() => matmul(e, sq, e.tensor([3, 3]), { out: sq })).toThrow(/alias/);
    expect(() => matmul(e, sq, e.tensor([3, 3]), { tile: { wgX: 64, wgY: 64, bk: 4 } })).toThrow(/workgroup limits/);
  });

  it.skipIf(gpu.report.features.shaderF16)('refuses f16 tensors without shader-f16', () => {
    const e = new Engine(gpu);
    expect(() => matmul(e, e.tensor([2, 2]), e.tensor([2, 2], packF16(new Float32Array(4)), 'f16'))).toThrow(
      /shader-f16/,
    );
  });
});

const f16Skip = !ctx
  ? reason
  : ctx.report.features.shaderF16
    ? ''
    : `(skipped: the adapter "${ctx.report.architecture}" lacks shader-f16)`;
if (ctx && !ctx.report.features.shaderF16) console.warn(`[matmul f16] ${f16Skip}`);

describe.skipIf(!ctx || !ctx.report.features.shaderF16)(`matmul f16 storage on WebGPU ${f16Skip}`, () => {
  const gpu = ctx as GpuContext;
  const half = (x: Float32Array) => f16ToF32(packF16(x).subarray(0, x.length));

  it.each([
    [7, 13, 5],
    [65, 33, 70],
  ])('f32 × f16 weights at M=%i K=%i N=%i, every transpose combination', async (m, k, n) => {
    for (const [ta, tb] of TRANS) {
      const aShape = stored(m, k, ta);
      const bShape = stored(k, n, tb);
      const a = randomArray(m * k, 51);
      const w = randomArray(k * n, 52);
      const e = new Engine(gpu);
      const bt: Tensor = e.tensor(bShape, packF16(w), 'f16');
      const got = await e.read(matmul(e, e.tensor(aShape, a), bt, { transA: ta, transB: tb }));
      expectClose(got, matmulCpu(a, aShape, half(w), bShape, { transA: ta, transB: tb }));
    }
  });

  it('f16 × f16 and f16 × f32, accumulating in f32', async () => {
    const [m, k, n] = [9, 300, 11];
    const a = randomArray(m * k, 61);
    const b = randomArray(k * n, 62);
    const e = new Engine(gpu);
    const ah = e.tensor([m, k], packF16(a), 'f16');
    const got = await e.read(matmul(e, ah, e.tensor([k, n], packF16(b), 'f16')));
    expectClose(got, matmulCpu(half(a), [m, k], half(b), [k, n]));
    const got2 = await e.read(matmul(e, ah, e.tensor([k, n], b)));
    expectClose(got2, matmulCpu(half(a), [m, k], b, [k, n]));
  });
});
