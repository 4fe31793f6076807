// nll (fused log-softmax + weighted NLL) and its backward on the software adapter: GPU vs the
// CPU reference, stability at large logits, ignored rows, and central finite differences in f64.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { nll, nllBackward, nllBackwardCpu, nllCpu, nllRowCpu } from '../../src/engine/kernels/nll.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

function problem(t: number, v: number, seed: number, spread = 10) {
  const rng = createRng(seed);
  const logits = randomArray(t * v, seed, -spread, spread);
  const targets = new Uint32Array(t).map(() => rng.int(v));
  const weights = randomArray(t, seed + 1, -2, 2); // advantages can be negative
  return { logits, targets, weights };
}

/** d(upstream · Σ_t loss_t)/d logits by central differences on the f64 CPU forward. */
function finiteDifferences(
  logits: Float32Array,
  targets: Uint32Array,
  weights: Float32Array,
  v: number,
  upstream: number,
  h = 1e-5,
) {
  const x = Float64Array.from(logits);
  const total = () => {
    let s = 0;
    for (let t = 0; t < targets.length; t++)
      s += nllRowCpu(x.subarray(t * v, (t + 1) * v), targets[t]!, weights[t]!).loss;
    return upstream * s;
  };
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const x0 = x[i]!;
    x[i] = x0 + h;
    const plus = total();
    x[i] = x0 - h;
    const minus = total();
    x[i] = x0;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

describe('nll (CPU)', () => {
  it('is log-softmax at the target, stable at large logits, zero for ignored rows', () => {
    const r = nllRowCpu([1, 2, 3], 2, 2);
    const lse = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));
    expect(r.lse).toBeCloseTo(lse, 12);
    expect(r.logp).toBeCloseTo(3 - lse, 12);
    expect(r.loss).toBeCloseTo(-2 * (3 - lse), 12);
    const big = nllRowCpu([1e4 + 1, 1e4 + 2, 1e4 + 3], 2, 1);
    expect(big.logp).toBeCloseTo(3 - lse, 9);
    expect(nllRowCpu([1, 2], 5, 1)).toMatchObject({ loss: 0, logp: 0 });
  });

  it.each([
    [3, 7, 1],
    [4, 50, 0.25],
  ])('backward matches central differences of the forward in f64 (T=%i, V=%i, upstream %s)', (t, v, up) => {
    const { logits, targets, weights } = problem(t, v, t * v, 3);
    const fd = finiteDifferences(logits, targets, weights, v, up);
    expectClose(nllBackwardCpu(logits, targets, weights, v, up), fd, 1e-6);
  });
});

describe.skipIf(!ctx)(`nll on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    [1, 1],
    [3, 7],
    [5, 1000],
    [7, 257],
    [2, 152_064],
  ])('forward matches the CPU at T=%i, V=%i', async (t, v) => {
    const { logits, targets, weights } = problem(t, v, t + v);
    const e = new Engine(gpu);
    const out = nll(e, e.tensor([t, v], logits), e.tensor([t], targets), e.tensor([t], weights));
    const want = nllCpu(logits, targets, weights, v);
    expectClose(await e.read(out.lse), want.lse);
    expectClose(await e.read(out.logp), want.logp, 1e-4, 1e-3);
    expectClose(await e.read(out.loss), want.loss, 1e-4, 1e-3);
  });

  it('is stable at large logits and zero for ignored rows', async () => {
    const v = 300;
    const t = 4;
    const { logits, targets, weights } = problem(t, v, 9);
    for (let j = 0; j < v; j++) {
      logits[j] = logits[j]! + 80_000; // exp would overflow without the max subtraction
      logits[v + j] = logits[v + j]! - 80_000;
    }
    logits[2 * v + 5] = 500; // one dominant logit
    targets[3] = v + 10; // ignored row
    const e = new Engine(gpu);
    const out = nll(e, e.tensor([t, v], logits), e.tensor([t], targets), e.tensor([t], weights));
    const want = nllCpu(logits, targets, weights, v);
    const logp = await e.read(out.logp);
    // At |logits| ≈ 8e4 an f32 ulp is 0.008: compare absolutely there.
    for (let i = 0; i < t; i++) expect(Math.abs(logp[i]! - want.logp[i]!)).toBeLessThan(0.02);
    expect(logp[3]).toBe(0);
    expect(Math.abs((await e.read(out.loss))[3]!)).toBe(0);
    const d = await e.read(
      nllBackward(e, e.tensor([t, v], logits), e.tensor([t], targets), e.tensor([t], weights), out.lse),
    );
    expect(d.every(Number.isFinite)).toBe(true);
    expect(d.subarray(3 * v).every((x) => x === 0)).toBe(true);
  });

  it.each([
    [3, 7],
    [5, 1000],
    [2, 152_064],
  ])('backward matches the CPU at T=%i, V=%i (and in place)', async (t, v) => {
    const { logits, targets, weights } = problem(t, v, 2 * t + v);
    const e = new Engine(gpu);
    const lt = e.tensor([t, v], logits);
    const tt = e.tensor([t], targets);
    const wt = e.tensor([t], weights);
    const { lse } = nll(e, lt, tt, wt);
    const want = nllBackwardCpu(logits, targets, weights, v, 0.5);
    expectClose(await e.read(nllBackward(e, lt, tt, wt, lse, 0.5)), want, 1e-4, 1e-3);
    const inPlace = nllBackward(e, lt, tt, wt, lse, 0.5, { inPlace: true });
    expect(inPlace).toBe(lt);
    expectClose(await e.read(lt), want, 1e-4, 1e-3);
  });

  it('GPU backward matches central differences of the f64 forward', async () => {
    const [t, v] = [3, 11];
    const { logits, targets, weights } = problem(t, v, 77, 3);
    const e = new Engine(gpu);
    const lt = e.tensor([t, v], logits);
    const tt = e.tensor([t], targets);
    const wt = e.tensor([t], weights);
    const got = await e.read(nllBackward(e, lt, tt, wt, nll(e, lt, tt, wt).lse, 1 / t));
    expectClose(got, finiteDifferences(logits, targets, weights, v, 1 / t), 1e-4, 1e-2);
  });

  it('rejects mismatched shapes', () => {
    const e = new Engine(gpu);
    expect(() => nll(e, e.tensor([2, 5]), e.tensor([3]), e.tensor([2]))).toThrow(/need 2 entries/);
    expect(() => nll(e, e.tensor([10]), e.tensor([1]), e.tensor([1]))).toThrow(/\(T, V\)/);
  });
});
