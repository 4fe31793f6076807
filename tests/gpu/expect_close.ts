/**
 * Numeric helpers for the kernel tests: seeded random arrays and a closeness check that is
 * relative to the scale of the expected values (|got − want| ≤ rtol · max(|want_i|, max|want|·floor)),
 * so that sums which cancel to near zero do not need an absurd relative precision.
 */
import { expect } from 'vitest';
import { createRng } from '../../src/core/rng.ts';

/** n uniform values in [lo, hi) from seed. */
export function randomArray(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const rng = createRng(seed);
  return new Float32Array(n).map(() => lo + (hi - lo) * rng.next());
}

/** Largest |got − want| / max(|want_i|, scale) over the arrays, scale = max|want| · floor. */
export function relError(got: ArrayLike<number>, want: ArrayLike<number>, floor = 1e-2): number {
  let maxAbs = 0;
  for (let i = 0; i < want.length; i++) maxAbs = Math.max(maxAbs, Math.abs(want[i]!));
  const scale = Math.max(maxAbs * floor, 1e-30);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!) / Math.max(Math.abs(want[i]!), scale);
    if (Number.isNaN(err)) return NaN;
    worst = Math.max(worst, err);
  }
  return worst;
}

export function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, rtol = 1e-4, floor = 1e-2): void {
  expect(got.length).toBe(want.length);
  const err = relError(got, want, floor);
  expect(err, `relative error ${err} exceeds ${rtol}`).toBeLessThanOrEqual(rtol);
}
