// grpo_weights' asymmetric clip on the software adapter: with ε_low = 0.2 and ε_high = 0.28 a token
// whose ratio lies in (1 − ε_high, 1 − ε_low) = (0.72, 0.8) is clipped for A < 0, and one in
// (1 + ε_low, 1 + ε_high) = (1.2, 1.28) is not clipped for A > 0 — the band where using the other
// ε gives the other answer. Checked against the CPU twin and against the stated clip flags.
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { grpoWeights, grpoWeightsCpu, type GrpoWeightOptions } from '../../src/engine/kernels/grpo_weights.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { expectClose } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

// ratios e^-0.3 ≈ 0.741 (inside (0.72, 0.8)), e^0.22 ≈ 1.246 (inside (1.2, 1.28)), and 1
const logp = Float32Array.from([-1.3, -0.78, -1]);
const info = Float32Array.from([1, -1, 1, 1, -1, 1, 1, -1, 1]);
const base: GrpoWeightOptions = {
  advantage: -0.5,
  invN: 1,
  clipLow: 0.2,
  clipHigh: 0.28,
  beta: 0,
  onPolicy: false,
  maxLogRatio: 20,
};

describe.skipIf(!ctx)(`grpo_weights clip band on WebGPU ${reason}`, () => {
  it.each([
    ['A < 0', -0.5, [1, 0, 0]],
    ['A > 0', 0.5, [0, 0, 0]],
  ] as const)('%s: clips by its own ε', async (_name, advantage, clippedFlags) => {
    const o = { ...base, advantage };
    const e = new Engine(ctx as GpuContext);
    const got = grpoWeights(e, e.tensor([3], logp), e.tensor([3, 3], info), undefined, o);
    const stats = await e.read(got.stats);
    expect([0, 1, 2].map((j) => stats[4 * j + 1])).toEqual(clippedFlags);
    const want = grpoWeightsCpu(logp, info, undefined, o);
    expect([0, 1, 2].map((j) => want.stats[4 * j + 1])).toEqual(clippedFlags);
    expectClose(await e.read(got.w), want.w, 1e-5, 1e-3);
    expectClose(stats, want.stats, 1e-5, 1e-3);
  });
});
