/**
 * reduce: the sum, and the sum of squares over several tensors (the global gradient norm²), of
 * f32 tensors into one f32 scalar tensor (1,), in two passes without atomics: per-workgroup
 * partial sums of every tensor into one partials buffer, then one workgroup adds them all to the
 * scalar (which accumulates: pass `out` to keep summing into it across calls).
 *
 *   const sq = sumSquares(e, grads);                // (1,) = Σ_tensors Σ_i g_i²
 *   adamw(e, p, g, m, v, {..., clip: {sumSq: sq, maxNorm: 1}});
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import shader from './reduce.wgsl?raw';

const WG = 256;
/** Upper bound on pass-1 workgroups per tensor; each thread then sums n / (MAX_GROUPS·WG) items. */
const MAX_GROUPS = 256;
/** Aim for at least this many elements per thread before adding workgroups. */
const PER_THREAD = 4;

/** CPU reference (f64 accumulation): Σ_tensors Σ_i x_i². */
export function sumSquaresCpu(xs: readonly Float32Array[]): number {
  let s = 0;
  for (const x of xs) for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
  return s;
}

/** CPU reference (f64 accumulation): Σ_i x_i. */
export function sumCpu(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]!;
  return s;
}

function reduceInto(e: Engine, xs: readonly Tensor[], square: boolean, out: Tensor | undefined): Tensor {
  for (const x of xs) if (x.dtype !== 'f32') throw new RangeError(`reduce: f32 tensors only, got ${x.dtype}`);
  if (out && (out.dtype !== 'f32' || out.size < 1))
    throw new RangeError('reduce: out must be an f32 tensor of one element');
  if (out && xs.some((x) => x.buffer === out.buffer)) throw new RangeError('reduce: out must not be one of the inputs');
  const target = out ?? e.zeros([1]);
  const groups = xs.map((x) => Math.min(MAX_GROUPS, Math.ceil(x.size / (WG * PER_THREAD))));
  const count = groups.reduce((a, b) => a + b, 0);
  if (count === 0) return target;
  const partials = e.tensor([count]);
  let offset = 0;
  xs.forEach((x, i) => {
    if (groups[i] === 0) return;
    e.run({
      key: 'reduce',
      code: shader,
      constants: { PASS: 1, SQUARE: square ? 1 : 0, WG },
      bindings: [x, partials, target],
      uniforms: uniforms({ u32: x.size }, { u32: offset }),
      workgroups: [groups[i]!],
    });
    offset += groups[i]!;
  });
  e.run({
    key: 'reduce',
    code: shader,
    constants: { PASS: 2, SQUARE: 0, WG },
    bindings: [xs[0]!, partials, target], // x is unused in pass 2; partials can't be bound twice
    uniforms: uniforms({ u32: count }, { u32: 0 }),
    workgroups: [1],
  });
  e.release(partials);
  return target;
}

/** out[0] += Σ_tensors Σ_i x_i² (a new zeroed (1,) tensor when `out` is not given). */
export function sumSquares(e: Engine, xs: readonly Tensor[], out?: Tensor): Tensor {
  return reduceInto(e, xs, true, out);
}

/** out[0] += Σ_i x_i (a new zeroed (1,) tensor when `out` is not given). */
export function sum(e: Engine, x: Tensor, out?: Tensor): Tensor {
  return reduceInto(e, [x], false, out);
}
