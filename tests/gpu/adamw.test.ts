// adamw on the software adapter: a hand-computed two-step example, the CPU reference on random
// data over several steps, and clipping by global norm from a GPU-side sum of squares.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { adamw, adamwCpu, gradClipScale } from '../../src/engine/kernels/adamw.ts';
import { sumSquares, sumSquaresCpu } from '../../src/engine/kernels/reduce.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

// lr 0.1, β1 0.9, β2 0.999, eps 1e-8, weight decay 0.01; three parameters.
//   p = 1,  g = 0.5 then −0.25:
//     step 1: p·(1 − 0.001) = 0.999; m = 0.05; v = 0.00025; m̂ = 0.05/0.1 = 0.5; v̂ = 0.00025/0.001 = 0.25
//             p = 0.999 − 0.1·0.5/(0.5 + 1e-8) = 0.899000002
//     step 2: p·0.999 = 0.898101002; m = 0.045 − 0.025 = 0.02; v = 0.00024975 + 0.0000625 = 0.00031225
//             m̂ = 0.02/0.19 = 0.1052632; v̂ = 0.00031225/0.001999 = 0.1562031, √ = 0.3952254
//             p = 0.898101002 − 0.1·0.1052632/0.3952254 = 0.8714673
//   p = −2, g = 0 twice: decay only, −2·0.999 = −1.998, then −1.996002.
//   p = 0.5, g = 4 twice: m̂ = 4, v̂ = 16 both steps, so each step subtracts 0.1·4/(4 + 1e-8):
//     step 1: 0.4995 − 0.09999999975 = 0.39950000025; step 2: 0.39910049975 − 0.1 = 0.2991005.
const HYPER = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 };
const P0 = [1, -2, 0.5];
const GRADS = [
  [0.5, 0, 4],
  [-0.25, 0, 4],
];
const AFTER = [
  { p: [0.899000002, -1.998, 0.39950000025], m: [0.05, 0, 0.4], v: [0.00025, 0, 0.016] },
  { p: [0.8714673, -1.996002, 0.2991005], m: [0.02, 0, 0.76], v: [0.00031225, 0, 0.031984] },
];

describe('adamw (CPU)', () => {
  it('matches the hand-computed two-step example', () => {
    const p = new Float32Array(P0);
    const m = new Float32Array(3);
    const v = new Float32Array(3);
    GRADS.forEach((g, s) => {
      adamwCpu(p, new Float32Array(g), m, v, { ...HYPER, step: s + 1 });
      expectClose(p, AFTER[s]!.p, 1e-6);
      expectClose(m, AFTER[s]!.m, 1e-6);
      expectClose(v, AFTER[s]!.v, 1e-6);
    });
  });

  it('computes the clipping scale and validates the step', () => {
    expect(gradClipScale(16, 1)).toBeCloseTo(0.25, 12);
    expect(gradClipScale(0.25, 1)).toBe(1);
    const z = new Float32Array(1);
    expect(() => adamwCpu(z, z, z, z, { lr: 1, step: 0 })).toThrow(/step must be an integer/);
  });
});

describe.skipIf(!ctx)(`adamw on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it('matches the hand-computed two-step example', async () => {
    const e = new Engine(gpu);
    const p = e.tensor([3], new Float32Array(P0));
    const m = e.zeros([3]);
    const v = e.zeros([3]);
    for (let s = 0; s < 2; s++) {
      expect(adamw(e, p, e.tensor([3], new Float32Array(GRADS[s]!)), m, v, { ...HYPER, step: s + 1 })).toBe(p);
      expectClose(await e.read(p), AFTER[s]!.p, 1e-6);
      expectClose(await e.read(m), AFTER[s]!.m, 1e-6);
      expectClose(await e.read(v), AFTER[s]!.v, 1e-6);
    }
  });

  it('matches the CPU reference over three steps with a gradient scale (N = 1001)', async () => {
    const n = 1001;
    const e = new Engine(gpu);
    const p = randomArray(n, 1);
    const m = new Float32Array(n);
    const v = new Float32Array(n);
    const pt = e.tensor([n], p);
    const mt = e.zeros([n]);
    const vt = e.zeros([n]);
    for (let step = 1; step <= 3; step++) {
      const g = randomArray(n, 10 + step, -3, 3);
      const opts = { lr: 3e-3, beta1: 0.8, beta2: 0.95, eps: 1e-6, weightDecay: 0.1, step, gradScale: 0.5 };
      adamwCpu(p, g, m, v, opts);
      adamw(e, pt, e.tensor([n], g), mt, vt, opts);
    }
    expectClose(await e.read(pt), p, 1e-5);
    expectClose(await e.read(mt), m, 1e-5);
    expectClose(await e.read(vt), v, 1e-5);
  });

  it.each([0.5, 100])('clips by the global norm of several gradients on the GPU (maxNorm %s)', async (maxNorm) => {
    const sizes = [37, 300];
    const grads = sizes.map((n, i) => randomArray(n, 20 + i));
    const params = sizes.map((n, i) => randomArray(n, 30 + i));
    const sumSq = sumSquaresCpu(grads);
    const scale = gradClipScale(sumSq, maxNorm);
    expect(scale < 1).toBe(maxNorm === 0.5);
    const e = new Engine(gpu);
    const gts = grads.map((g) => e.tensor([g.length], g));
    const sq = sumSquares(e, gts);
    const opts = { lr: 0.01, step: 1 };
    for (let i = 0; i < sizes.length; i++) {
      const pt = e.tensor([sizes[i]!], params[i]);
      const mt = e.zeros([sizes[i]!]);
      const vt = e.zeros([sizes[i]!]);
      adamw(e, pt, gts[i]!, mt, vt, { ...opts, clip: { sumSq: sq, maxNorm } });
      const p = params[i]!.slice();
      const m = new Float32Array(sizes[i]!);
      adamwCpu(p, grads[i]!, m, new Float32Array(sizes[i]!), { ...opts, gradScale: scale });
      expectClose(await e.read(pt), p, 1e-5);
      expectClose(await e.read(mt), m, 1e-5);
    }
  });

  it('rejects mismatched sizes and aliasing', () => {
    const e = new Engine(gpu);
    const a = e.tensor([4]);
    expect(() => adamw(e, a, e.tensor([4]), e.tensor([4]), e.tensor([5]), { lr: 1, step: 1 })).toThrow(/size mismatch/);
    expect(() => adamw(e, a, e.tensor([4]), a, e.tensor([4]), { lr: 1, step: 1 })).toThrow(/distinct/);
  });
});
