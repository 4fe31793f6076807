/**
 * sample: one token id per row of logits (B, V) on the GPU — temperature, top-k, top-p, min-p —
 * with one uniform u per row drawn by the host from its seeded Rng, so that only B ids come back
 * instead of B·V logits. Same rule as the CPU reference (`sampleCpu`, i.e. sampleTokenU of
 * ../sample.ts): equal ids for the same u, except where u·mass lands within f32 rounding of a
 * boundary between two ids (the GPU sums in f32, the CPU in f64).
 *
 * No sort of the row, and no pass over the row in a single workgroup:
 *   1. sample_stats (chunks × rows): per chunk its max, Σ exp((l − m)/T), a non-finite flag and
 *      its first argmax; when filtered also its histogram of −log₂ p (8 bins per octave; count
 *      and a lower bound of the mass). Greedy and the unfiltered walk need nothing else.
 *   2. sample_select (a workgroup per row): the merged histogram's last bin the kept set can
 *      reach (top-k's count, top-p's mass, τ = (1 − top_p)·Z/V, min-p), see sample_select.wgsl,
 *      and each chunk's number of candidates.
 *   3. sample_compact (chunks × rows): the candidates (ids in those bins), in id order.
 *   4. sample (a workgroup per row): the filters and the walk over the candidates, sorted in
 *      workgroup memory (up to 2,048) or searched without sorting (more; the whole row past
 *      CAP); greedy and the unfiltered walk from the chunk partials.
 * A row holding NaN or ±Infinity gets the id NON_FINITE (0xFFFFFFFF); `readIds` turns it into
 * NonFiniteLogitsError.
 */
import { NonFiniteLogitsError } from '../../core/errors.ts';
import { isSoftwareAdapter } from '../runtime/device.ts';
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { checkFiniteLogits, filtersActive, sampleTokenU, type SampleOptions } from './sample_cpu.ts';
import { grid1d, gridChecked } from './dispatch_grid.ts';
import compactShader from './sample_compact.wgsl?raw';
import selectShader from './sample_select.wgsl?raw';
import statsShader from './sample_stats.wgsl?raw';
import shader from './sample.wgsl?raw';
import { wgslOnce } from './wgsl_preprocess.ts';

/** The id a row holding NaN or ±Infinity gets on the GPU. */
const NON_FINITE_ID = 0xffffffff;
/**
 * Logits per chunk (one workgroup of the row-wide passes): 4,096 on GPUs (37 workgroups per
 * row at V = 151,936); 16,384 on software adapters, where each workgroup's barriers cost more
 * than its share of the row (the limit of the fixed-point chunk masses, see sample_stats.wgsl).
 */
const chunkFor = (e: Engine) => (isSoftwareAdapter(e.ctx.report) ? 16384 : 4096);
/** Histogram bins (8 per octave of p: down to p = 2^-64; the last bin holds the rest). */
const NB = 512;
/** Candidates kept per row; more (a nearly flat row) and the last pass scans the whole row. */
const MAX_CAND = 16384;

/** Workgroup size: 256 on GPUs; 32 on software adapters, where every barrier switches all invocations. */
const wgFor = (e: Engine) => (isSoftwareAdapter(e.ctx.report) ? 32 : 256);

/**
 * Candidates the last pass sorts in workgroup memory (8 bytes each, beside its 8·WG bytes of
 * reductions): 2,048 where the device allows 32 KiB, else 1,024 (WebGPU's default 16 KiB).
 */
const sortCapFor = (e: Engine, wg: number) =>
  e.ctx.report.limits.maxComputeWorkgroupStorageSize >= 2048 * 8 + wg * 8 + 64 ? 2048 : 1024;

const codes = {
  stats: wgslOnce(statsShader, 'sample_stats.wgsl'),
  select: wgslOnce(selectShader, 'sample_select.wgsl'),
  compact: wgslOnce(compactShader, 'sample_compact.wgsl'),
  final: wgslOnce(shader, 'sample.wgsl'),
};

/** CPU reference. logits: (B, V) flattened, u: (B,) → ids (B,). NonFiniteLogitsError (naming the row) on NaN/Inf. */
export function sampleCpu(logits: Float32Array, v: number, o: SampleOptions, u: ArrayLike<number>): number[] {
  const rows = logits.length / v;
  return Array.from({ length: rows }, (_, r) => {
    const row = logits.subarray(r * v, (r + 1) * v);
    checkFiniteLogits(row, r);
    return sampleTokenU(row, o, u[r]!);
  });
}

/** Where `sample` takes its uniforms from and writes its ids (multi-step decode: one tensor for K steps). */
export interface SampleTarget {
  /** Uniforms (≥ randOffset + B values); default: a tensor uploaded from `u`. */
  rand?: Tensor;
  randOffset?: number;
  /** Output ids (u32 data); default: a new (B,) tensor. */
  out?: Tensor;
  outOffset?: number;
}

/**
 * GPU version, recorded on `e`. logits: (B, V) f32, u: (B,) uniforms in [0, 1) (ignored when
 * greedy; unused when `target.rand` is given) → ids: (B,) u32 in an f32-typed tensor (read it
 * with `readIds`), or `target.out` with the ids at `target.outOffset`.
 */
export function sample(
  e: Engine,
  logits: Tensor,
  o: SampleOptions,
  u: ArrayLike<number>,
  target: SampleTarget = {},
): Tensor {
  if (logits.dtype !== 'f32' || logits.shape.length !== 2)
    throw new RangeError(`sample: logits must be (B, V) f32, got ${logits.dtype} ${JSON.stringify(logits.shape)}`);
  const [b, v] = logits.shape as [number, number];
  if (!target.rand && u.length !== b) throw new RangeError(`sample: ${u.length} uniforms for ${b} rows`);
  const k = o.topK ?? 0;
  const greedy = !(o.temperature > 0);
  const filtered = !greedy && filtersActive(o, v);
  const chunk = chunkFor(e);
  const nc = Math.ceil(v / chunk);
  const cap = Math.min(v, MAX_CAND);
  const wg = wgFor(e);
  const constants = { WG: wg, CHUNK: chunk, NB };
  const finalConstants = { ...constants, SORT_CAP: sortCapFor(e, wg) };
  const rand = target.rand ?? e.tensor([b], Float32Array.from(u));
  const ids = target.out ?? e.tensor([b]);
  const params = uniforms(
    { u32: v },
    { u32: b },
    { u32: k >= 1 && k < v ? k : 0 },
    { u32: greedy ? 1 : 0 },
    { f32: greedy ? 1 : 1 / o.temperature },
    { f32: o.topP ?? 1 },
    { f32: o.minP ?? 0 },
    { u32: filtered ? 1 : 0 },
    { u32: nc },
    { u32: cap },
    { u32: target.randOffset ?? 0 },
    { u32: target.outOffset ?? 0 },
  );
  const rowsGrid = gridChecked('sample', nc, b);
  const part = e.tensor([b, nc, 4]);
  const chist = filtered ? e.tensor([b, nc, NB, 2]) : e.tensor([4]);
  e.run({
    key: 'sample_stats',
    code: codes.stats(),
    constants,
    bindings: [logits, part, chist],
    uniforms: params,
    workgroups: rowsGrid,
  });
  let ccount = part;
  let cand = part;
  if (filtered) {
    const info = e.tensor([b]);
    ccount = e.tensor([b, nc]);
    e.run({
      key: 'sample_select',
      code: codes.select(),
      constants,
      bindings: [part, chist, info, ccount],
      uniforms: params,
      workgroups: grid1d(b),
    });
    cand = e.tensor([b, cap, 2]);
    e.run({
      key: 'sample_compact',
      code: codes.compact(),
      constants,
      bindings: [logits, info, ccount, cand],
      uniforms: params,
      workgroups: rowsGrid,
    });
    e.release(info);
  }
  e.release(chist);
  e.run({
    key: 'sample',
    code: codes.final(),
    constants: finalConstants,
    bindings: [logits, part, ccount, cand, rand, ids],
    uniforms: params,
    workgroups: grid1d(b),
  });
  e.release(part);
  if (filtered) {
    e.release(ccount);
    e.release(cand);
  }
  if (!target.rand) e.release(rand);
  return ids;
}

/** NonFiniteLogitsError if any id is the GPU sampler's NON_FINITE marker. */
function checkSampledIds(ids: ArrayLike<number>, rowOffset = 0): void {
  for (let r = 0; r < ids.length; r++)
    if (ids[r] === NON_FINITE_ID) {
      const row = r + rowOffset;
      throw new NonFiniteLogitsError(
        `The model produced a non-finite logit (NaN or Infinity${row ? ` in row ${row}` : ''}), so no token can be sampled. ` +
          'Check the checkpoint (its weights may hold NaN/Inf or overflow this weight format: try --weights f32), ' +
          "the LoRA adapter's factors, and config.json's rope_scaling, rope_theta and rms_norm_eps.",
        { row },
      );
    }
}

/** Read back the ids written by `sample` (and release the tensor); NonFiniteLogitsError for a non-finite row. */
export async function readIds(e: Engine, ids: Tensor): Promise<number[]> {
  const raw = await e.read(ids);
  e.release(ids);
  const out = Array.from(new Uint32Array(raw.buffer, raw.byteOffset, ids.size));
  checkSampledIds(out);
  return out;
}
