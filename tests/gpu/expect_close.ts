/**
 * Numeric helpers for the kernel tests: seeded random arrays and a closeness check that is
 * relative to the scale of the expected values (|got − want| ≤ rtol · max(|want_i|, max|want|·floor)),
 * so that sums which cancel to near zero do not need an absurd relative precision.
 */
import { expect } from 'vitest';
import { createRng, type Rng } from '../../src/core/rng.ts';

/** n uniform values in [lo, hi) from a seed, or drawn next from a shared rng. */
export function randomArray(n: number, seed: number | Rng, lo = -1, hi = 1): Float32Array {
  const rng = typeof seed === 'number' ? createRng(seed) : seed;
  return new Float32Array(n).map(() => lo + (hi - lo) * rng.next());
}

/**
 * Largest |got − want| / max(|want_i|, scale) over the arrays, scale = max|want| · floor
 * (floor = 1: error relative to max|want|). NaN when the lengths differ or a value is NaN.
 */
export function relError(got: ArrayLike<number>, want: ArrayLike<number>, floor = 1e-2): number {
  if (got.length !== want.length) return NaN;
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

/** Central finite differences of loss(x) = sum(f(x) * r) with respect to x (x is restored). */
export function finiteDiff(
  f: (x: Float32Array) => Float32Array,
  x: Float32Array,
  r: Float32Array,
  h = 1e-2,
): Float64Array {
  const loss = () => f(x).reduce((s, v, i) => s + v * r[i]!, 0);
  const g = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const xi = x[i]!;
    x[i] = xi + h;
    const up = x[i]!;
    const lp = loss();
    x[i] = xi - h;
    const down = x[i]!;
    const lm = loss();
    x[i] = xi;
    g[i] = (lp - lm) / (up - down);
  }
  return g;
}
