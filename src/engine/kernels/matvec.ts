/**
 * matvec: y (M, N) = alpha · x (M, K) · W (N, K)ᵀ for M ≤ 8 — the decode-step shape of every
 * linear layer. The CPU reference is matmulCpu with transB. GpuOps.matmul routes here.
 */
import { numel, uniforms, type Engine, type Tensor } from '../runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { isSoftwareAdapter } from '../device.ts';
import { matmulCpu } from './matmul.ts';
import shader from './matvec.wgsl?raw';

export const MATVEC_MAX_ROWS = 8;
const WG = 256;
/**
 * Threads per column. On a real GPU 32 lanes read a column's weights contiguously (coalesced);
 * on a software adapter (CPU SIMD lanes) one thread per column running down K is ~8× faster.
 */
const lanesFor = (e: Engine): number => (isSoftwareAdapter(e.ctx.report) ? 1 : 32);

/** CPU reference. x: (M, K), w: (N, K) → (M, N). */
export function matvecCpu(x: Float32Array, w: Float32Array, m: number, n: number, k: number, alpha = 1): Float32Array {
  return matmulCpu(x, [m, k], w, [n, k], { transB: true, alpha });
}

/** GPU version, recorded on `e`. With `out` and `accumulate`, out += alpha · x·Wᵀ. */
export function matvec(
  e: Engine,
  x: Tensor,
  w: Tensor,
  opts: { alpha?: number; out?: Tensor; accumulate?: boolean } = {},
): Tensor {
  const [n, k] = w.shape as [number, number];
  const m = x.size / k;
  if (w.shape.length !== 2 || !Number.isInteger(m) || x.shape[x.shape.length - 1] !== k) {
    throw new RangeError(`matvec: x ${JSON.stringify(x.shape)} does not match W ${JSON.stringify(w.shape)}`);
  }
  if (m > MATVEC_MAX_ROWS) throw new RangeError(`matvec: ${m} rows; at most ${MATVEC_MAX_ROWS}`);
  if (x.dtype !== 'f32' || w.dtype !== 'f32') throw new RangeError('matvec: f32 tensors only');
  const out = opts.out ?? e.tensor([m, n]);
  if (out.size !== numel([m, n])) throw new RangeError(`matvec: out must hold ${m}×${n}`);
  if (opts.accumulate && !opts.out) throw new RangeError('matvec: accumulate needs `out`');
  const lanes = lanesFor(e);
  e.run({
    key: 'matvec',
    code: shader,
    constants: { WG, LANES: lanes, ROWS: m },
    bindings: [x, w, out],
    uniforms: uniforms({ u32: m }, { u32: n }, { u32: k }, { f32: opts.alpha ?? 1 }, { u32: opts.accumulate ? 1 : 0 }),
    workgroups: grid1d(Math.ceil(n / (WG / lanes))),
  });
  return out;
}
