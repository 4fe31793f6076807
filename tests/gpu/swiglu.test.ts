// swiglu on the software adapter: GPU vs CPU reference, CPU backward vs finite differences.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { swiglu, swigluBackward, swigluBackwardCpu, swigluCpu } from '../../src/engine/kernels/swiglu.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { finiteDiff, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe('swiglu CPU reference', () => {
  it('is silu(gate) * up, finite for large |gate|', () => {
    const out = swigluCpu(new Float32Array([0, 1, -200, 200]), new Float32Array([5, 2, 3, 0.5]));
    expect(out[0]).toBe(0);
    expect(out[1]).toBeCloseTo(2 / (1 + Math.exp(-1)), 6);
    expect(out[2]).toBeCloseTo(0, 30);
    expect(out[3]).toBe(100);
  });

  it('backward matches finite differences of the forward', () => {
    const rng = createRng(1);
    const gate = randomArray(40, rng, -4, 4);
    const up = randomArray(40, rng, -2, 2);
    const r = randomArray(40, rng);
    const { dgate, dup } = swigluBackwardCpu(gate, up, r);
    expect(
      relError(
        dgate,
        finiteDiff((g) => swigluCpu(g, up), gate, r),
      ),
    ).toBeLessThan(1e-3);
    expect(
      relError(
        dup,
        finiteDiff((u) => swigluCpu(gate, u), up, r),
      ),
    ).toBeLessThan(1e-3);
  });
});

describe.skipIf(!ctx)(`swiglu on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    [1, 1],
    [7, 13],
    [3, 300],
    [5, 1037],
  ])('forward and backward match the CPU reference on (%i, %i)', async (t, f) => {
    const rng = createRng(t * 10000 + f);
    const n = t * f;
    const gate = randomArray(n, rng, -8, 8);
    gate[0] = -120; // exp overflow guard
    const up = randomArray(n, rng, -2, 2);
    const dout = randomArray(n, rng);
    const want = swigluBackwardCpu(gate, up, dout);
    const e = new Engine(gpu);
    const [gt, ut] = [e.tensor([t, f], gate), e.tensor([t, f], up)];
    const out = swiglu(e, gt, ut);
    const { dgate, dup } = swigluBackward(e, gt, ut, e.tensor([t, f], dout));
    expect(out.shape).toEqual([t, f]);
    expect(relError(await e.read(out), swigluCpu(gate, up))).toBeLessThan(1e-4);
    expect(relError(await e.read(dgate), want.dgate)).toBeLessThan(1e-4);
    expect(relError(await e.read(dup), want.dup)).toBeLessThan(1e-4);
  });

  it('covers more than 65535 workgroups (2-D grid)', async () => {
    const n = 65536 * 256 + 300;
    const gate = new Float32Array(n);
    const up = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      gate[i] = ((i * 7919) % 2001) / 250 - 4;
      up[i] = ((i * 104729) % 1999) / 999 - 1;
    }
    const e = new Engine(gpu);
    const got = await e.read(swiglu(e, e.tensor([n], gate), e.tensor([n], up)));
    for (const [a, b] of [
      [0, 1000],
      [n - 70000, n],
    ] as const) {
      expect(relError(got.subarray(a, b), swigluCpu(gate.subarray(a, b), up.subarray(a, b)))).toBeLessThan(1e-4);
    }
  });

  it('rejects mismatched sizes', () => {
    const e = new Engine(gpu);
    expect(() => swiglu(e, e.tensor([2, 3]), e.tensor([2, 4]))).toThrow(/size mismatch 6 vs 8/);
  });
});
