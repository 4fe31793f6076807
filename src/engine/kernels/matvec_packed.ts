/**
 * matvec_packed: y (M, N) = alpha · x (M, K) · W (N, K)ᵀ for M ≤ 8 with W a packed frozen weight
 * (bf16 / f16 / q4, io/pack.ts) — the decode-step shape of every base linear layer. The CPU
 * reference dequantises (unpackWeight) and multiplies (matmulCpu). GpuOps.matmul routes here.
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import { isSoftwareAdapter } from '../device.ts';
import { numel, uniforms, type Engine, type Tensor } from '../runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { matmulCpu } from './matmul.ts';
import { MATVEC_MAX_ROWS } from './matvec.ts';
import { packedKernelCode, type PackedTensor } from './packed_weight.ts';
import shader from './matvec_packed.wgsl?raw';

const WG = 256;
/** Threads per output column: as matvec.ts (32 coalesced lanes on a GPU, 1 on a software adapter). */
const lanesFor = (e: Engine): number => (isSoftwareAdapter(e.ctx.report) ? 1 : 32);

/** CPU reference. x: (M, K), w packed (N, K) → (M, N). */
export function matvecPackedCpu(x: Float32Array, w: PackedWeight, m: number, alpha = 1): Float32Array {
  return matmulCpu(x, [m, w.cols], unpackWeight(w), [w.rows, w.cols], { transB: true, alpha });
}

/** GPU version, recorded on `e`. With `out` and `accumulate`, out += alpha · x·Wᵀ. */
export function matvecPacked(
  e: Engine,
  x: Tensor,
  w: PackedTensor,
  opts: { alpha?: number; out?: Tensor; accumulate?: boolean } = {},
): Tensor {
  const { rows: n, cols: k, format, scaleOffset } = w.packed;
  const m = x.size / k;
  if (!Number.isInteger(m) || x.shape[x.shape.length - 1] !== k || x.dtype !== 'f32')
    throw new RangeError(`matvec_packed: x ${JSON.stringify(x.shape)} does not match W (${n}, ${k})`);
  if (m > MATVEC_MAX_ROWS) throw new RangeError(`matvec_packed: ${m} rows; at most ${MATVEC_MAX_ROWS}`);
  if (k % 8 !== 0) throw new RangeError(`matvec_packed: K = ${k} must be a multiple of 8`);
  const out = opts.out ?? e.tensor([m, n]);
  if (out.size !== numel([m, n])) throw new RangeError(`matvec_packed: out must hold ${m}×${n}`);
  if (opts.accumulate && !opts.out) throw new RangeError('matvec_packed: accumulate needs `out`');
  const lanes = lanesFor(e);
  e.run({
    key: `matvec_packed_${format}`,
    code: packedKernelCode('matvec_packed', shader, format),
    constants: { WG, LANES: lanes, ROWS: m },
    bindings: [x, w, out],
    uniforms: uniforms(
      { u32: m },
      { u32: n },
      { u32: k },
      { f32: opts.alpha ?? 1 },
      { u32: opts.accumulate ? 1 : 0 },
      { u32: scaleOffset },
    ),
    workgroups: grid1d(Math.ceil(n / (WG / lanes))),
  });
  return out;
}
