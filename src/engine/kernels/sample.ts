/**
 * sample: one token id per row of logits (B, V) on the GPU — temperature, top-k, top-p, min-p —
 * with one uniform u per row drawn by the host from its seeded Rng, so that only B ids come back
 * instead of B·V logits. Same rule as the CPU reference (`sampleCpu`, i.e. sampleTokenU of
 * ../sample.ts): equal ids for the same u, except where u·mass lands within f32 rounding of a
 * boundary between two ids (the GPU sums in f32, the CPU in f64).
 */
import { isSoftwareAdapter } from '../device.ts';
import { uniforms, type Engine, type Tensor } from '../runtime.ts';
import { checkFiniteLogits, filtersActive, sampleTokenU, type SampleOptions } from '../sample.ts';
import { grid1d } from './dispatch_grid.ts';
import shader from './sample.wgsl?raw';

/**
 * Workgroup size: 256 on GPUs; 64 on software adapters, where every workgroup barrier switches
 * all invocations (the kernel runs ~100 of them per row) and 4× fewer invocations halve the time.
 */
const wgFor = (e: Engine) => (isSoftwareAdapter(e.ctx.report) ? 64 : 256);

/** CPU reference. logits: (B, V) flattened, u: (B,) → ids (B,). NonFiniteLogitsError (naming the row) on NaN/Inf. */
export function sampleCpu(logits: Float32Array, v: number, o: SampleOptions, u: ArrayLike<number>): number[] {
  const rows = logits.length / v;
  return Array.from({ length: rows }, (_, r) => {
    const row = logits.subarray(r * v, (r + 1) * v);
    checkFiniteLogits(row, r);
    return sampleTokenU(row, o, u[r]!);
  });
}

/**
 * GPU version, recorded on `e`. logits: (B, V) f32, u: (B,) uniforms in [0, 1) (ignored when
 * greedy) → ids: (B,) u32 in an f32-typed tensor (read it with `readIds`).
 */
export function sample(e: Engine, logits: Tensor, o: SampleOptions, u: ArrayLike<number>): Tensor {
  if (logits.dtype !== 'f32' || logits.shape.length !== 2)
    throw new RangeError(`sample: logits must be (B, V) f32, got ${logits.dtype} ${JSON.stringify(logits.shape)}`);
  const [b, v] = logits.shape as [number, number];
  if (u.length !== b) throw new RangeError(`sample: ${u.length} uniforms for ${b} rows`);
  const k = o.topK ?? 0;
  const rand = e.tensor([b], Float32Array.from(u));
  const ids = e.tensor([b]);
  const greedy = !(o.temperature > 0);
  e.run({
    key: 'sample',
    code: shader,
    constants: { WG: wgFor(e) },
    bindings: [logits, rand, ids],
    uniforms: uniforms(
      { u32: v },
      { u32: b },
      { u32: k >= 1 && k < v ? k : 0 },
      { u32: greedy ? 1 : 0 },
      { f32: greedy ? 1 : 1 / o.temperature },
      { f32: o.topP ?? 1 },
      { f32: o.minP ?? 0 },
      { u32: filtersActive(o, v) ? 1 : 0 },
    ),
    workgroups: grid1d(b),
  });
  e.release(rand);
  return ids;
}

/** Read back the ids written by `sample` (and release the tensor). */
export async function readIds(e: Engine, ids: Tensor): Promise<number[]> {
  const raw = await e.read(ids);
  e.release(ids);
  return Array.from(new Uint32Array(raw.buffer, raw.byteOffset, ids.size));
}
