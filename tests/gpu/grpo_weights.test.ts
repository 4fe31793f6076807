// grpo_weights on the software adapter against its CPU twin, with truncated importance sampling:
// each row's TIS weight c (info's third column) scales the clipped policy term and its gradient
// weight; rows inside and outside the clip, untrained rows, both signs of A, with and without the
// KL to the base. Tiny: SwiftShader is slow.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { grpoWeights, grpoWeightsCpu, type GrpoWeightOptions } from '../../src/engine/kernels/grpo_weights.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { expectClose } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

// rows: (trained, log π_old, c) with log π below — r inside the clip, r = e (clipped for A > 0),
// untrained, r = e^-1 (clipped for A < 0), c truncated at 2, c < 1
const logp = Float32Array.from([-1, -1, -2, -3, -0.5, -1.2]);
const info = Float32Array.from([1, -1.1, 1.6, 1, -2, 0.7, 0, -9, 1, 1, -2, 1.3, 1, -0.6, 2, 1, -1.3, 0.45]);
const base = Float32Array.from([-1.2, -0.8, -2, -2.5, -0.4, -1.5]);
const opts: GrpoWeightOptions = {
  advantage: 0.7,
  invN: 0.2,
  clipLow: 0.2,
  clipHigh: 0.28,
  beta: 0,
  onPolicy: false,
  maxLogRatio: 20,
};

describe.skipIf(!ctx)(`grpo_weights with TIS on WebGPU ${reason}`, () => {
  it.each([
    ['A > 0, no base', opts, false],
    ['A < 0, no base', { ...opts, advantage: -0.7 }, false],
    ['A > 0, KL to the base', { ...opts, beta: 0.3 }, true],
  ] as const)('matches the CPU twin (%s)', async (_name, o, withBase) => {
    const e = new Engine(ctx as GpuContext);
    const R = logp.length;
    const b = withBase ? base : undefined;
    const got = grpoWeights(e, e.tensor([R], logp), e.tensor([R, 3], info), b && e.tensor([R], b), o);
    const want = grpoWeightsCpu(logp, info, b, o);
    expectClose(await e.read(got.w), want.w, 1e-5, 1e-3);
    expectClose(await e.read(got.stats), want.stats, 1e-5, 1e-3);
    // the TIS weight is there: the first row's weight is c·A·r/N, not A·r/N
    expect(want.w[0]).toBeCloseTo(
      1.6 * o.advantage * Math.exp(0.1) * 0.2 - (withBase ? 0.2 * 0.3 * (1 - Math.exp(-0.2)) : 0),
      6,
    );
  });
});
