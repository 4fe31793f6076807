// attention on the software adapter: GPU vs CPU reference (GQA, decode, prefill with a cache
// prefix), CPU backward vs finite differences, GPU backward vs CPU backward.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import {
  attention,
  attentionBackward,
  attentionBackwardCpu,
  attentionCpu,
  type AttentionDims,
} from '../../src/engine/kernels/attention.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { finiteDiff, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

function inputs(dims: AttentionDims, seed: number, qScale = 1) {
  const { T, S, Hq, Hkv, D } = dims;
  const rng = createRng(seed);
  return {
    q: randomArray(T * Hq * D, rng, -qScale, qScale),
    k: randomArray(S * Hkv * D, rng),
    v: randomArray(S * Hkv * D, rng),
    dout: randomArray(T * Hq * D, rng),
  };
}

describe('attention CPU reference', () => {
  it('with a single key returns its value', () => {
    const dims = { T: 1, S: 1, Hq: 2, Hkv: 1, D: 3 };
    const { out, lse } = attentionCpu(
      new Float32Array([1, 2, 3, 4, 5, 6]),
      new Float32Array([1, 0, 1]),
      new Float32Array([7, 8, 9]),
      dims,
    );
    expect(Array.from(out)).toEqual([7, 8, 9, 7, 8, 9]);
    expect(lse[0]).toBeCloseTo(4 / Math.sqrt(3), 6);
    expect(lse[1]).toBeCloseTo(10 / Math.sqrt(3), 6);
  });

  it('queries after a cache prefix equal the tail of the full prefill (decode and chunked prefill)', () => {
    const full = { T: 6, S: 6, Hq: 4, Hkv: 2, D: 5 };
    const { q, k, v } = inputs(full, 1);
    const want = attentionCpu(q, k, v, full).out;
    const row = full.Hq * full.D;
    for (const T of [1, 2]) {
      const got = attentionCpu(q.slice((6 - T) * row), k, v, { ...full, T }).out;
      expect(relError(got, want.slice((6 - T) * row))).toBeLessThan(1e-6);
    }
  });

  it('grouped-query heads equal full heads with k and v repeated', () => {
    const dims = { T: 3, S: 4, Hq: 4, Hkv: 2, D: 3 };
    const { q, k, v } = inputs(dims, 2);
    const repeat = (x: Float32Array) => {
      const y = new Float32Array(dims.S * dims.Hq * dims.D);
      for (let j = 0; j < dims.S; j++)
        for (let h = 0; h < dims.Hq; h++)
          for (let d = 0; d < dims.D; d++)
            y[(j * dims.Hq + h) * dims.D + d] = x[(j * dims.Hkv + (h >> 1)) * dims.D + d]!;
      return y;
    };
    expect(attentionCpu(q, repeat(k), repeat(v), { ...dims, Hkv: 4 }).out).toEqual(attentionCpu(q, k, v, dims).out);
  });

  it.each([
    { T: 3, S: 5, Hq: 2, Hkv: 2, D: 3 },
    { T: 2, S: 4, Hq: 4, Hkv: 2, D: 2 },
    { T: 1, S: 3, Hq: 4, Hkv: 1, D: 3 },
  ])('backward matches finite differences of the forward: %o', (dims) => {
    const { q, k, v, dout: r } = inputs(dims, dims.T * 7 + dims.Hq, 2);
    const got = attentionBackwardCpu(q, k, v, r, dims);
    const fq = finiteDiff((x) => attentionCpu(x, k, v, dims).out, q, r);
    const fk = finiteDiff((x) => attentionCpu(q, x, v, dims).out, k, r);
    const fv = finiteDiff((x) => attentionCpu(q, k, x, dims).out, v, r);
    expect(relError(got.dq, fq)).toBeLessThan(2e-3);
    expect(relError(got.dk, fk)).toBeLessThan(2e-3);
    expect(relError(got.dv, fv)).toBeLessThan(2e-3);
  });
});

describe.skipIf(!ctx)(`attention on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    { name: 'prefill, GQA 1', dims: { T: 5, S: 5, Hq: 3, Hkv: 3, D: 7 }, qScale: 1 },
    { name: 'prefill after a cache, GQA 2', dims: { T: 3, S: 8, Hq: 4, Hkv: 2, D: 16 }, qScale: 1 },
    { name: 'decode, long S, GQA 4', dims: { T: 1, S: 150, Hq: 8, Hkv: 2, D: 64 }, qScale: 1 },
    { name: 'decode, peaked softmax', dims: { T: 1, S: 200, Hq: 2, Hkv: 1, D: 8 }, qScale: 8 },
    { name: 'prefill longer than a workgroup, GQA 2', dims: { T: 70, S: 70, Hq: 2, Hkv: 1, D: 5 }, qScale: 3 },
    { name: 'D > WG', dims: { T: 2, S: 3, Hq: 2, Hkv: 2, D: 130 }, qScale: 1 },
    { name: 'D = 256, GQA 4 prefill after a cache', dims: { T: 2, S: 67, Hq: 4, Hkv: 1, D: 256 }, qScale: 1 },
  ])('$name: forward and backward match the CPU reference', async ({ dims, qScale }) => {
    const { T, S, Hq, Hkv, D } = dims;
    const { q, k, v, dout } = inputs(dims, T * 1000 + S + D, qScale);
    const want = attentionCpu(q, k, v, dims);
    const wantGrad = attentionBackwardCpu(q, k, v, dout, dims);
    const e = new Engine(gpu);
    const [qt, kt, vt] = [e.tensor([T, Hq, D], q), e.tensor([S, Hkv, D], k), e.tensor([S, Hkv, D], v)];
    const { out, lse } = attention(e, qt, kt, vt);
    const grad = attentionBackward(e, qt, kt, vt, out, lse, e.tensor([T, Hq, D], dout));
    expect(out.shape).toEqual([T, Hq, D]);
    expect(lse.shape).toEqual([Hq, T]);
    expect(grad.dk.shape).toEqual([S, Hkv, D]);
    expect(relError(await e.read(out), want.out)).toBeLessThan(1e-4);
    expect(relError(await e.read(lse), want.lse)).toBeLessThan(1e-4);
    expect(relError(await e.read(grad.dq), wantGrad.dq)).toBeLessThan(1e-4);
    expect(relError(await e.read(grad.dk), wantGrad.dk)).toBeLessThan(1e-4);
    expect(relError(await e.read(grad.dv), wantGrad.dv)).toBeLessThan(1e-4);
  });

  it('rejects bad shapes', () => {
    const e = new Engine(gpu);
    const q = e.tensor([2, 3, 4]);
    expect(() => attention(e, q, e.tensor([2, 2, 4]), e.tensor([2, 2, 4]))).toThrow(/Hq=3 is not a multiple of Hkv=2/);
    expect(() => attention(e, q, e.tensor([1, 1, 4]), e.tensor([1, 1, 4]))).toThrow(/S=1 keys/);
    expect(() => attention(e, q, e.tensor([2, 1, 5]), e.tensor([2, 1, 5]))).toThrow(/do not fit/);
  });
});
