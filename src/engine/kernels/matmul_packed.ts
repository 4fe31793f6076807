/**
 * matmul_packed: C (M, N) = alpha · A (M, K) · op(W) (+ C), A f32, W a packed frozen weight
 * (bf16 / f16 / q4, io/pack.ts): with transB the forward of a linear layer (W stored (N, K)),
 * without it the input gradient dx = dy · W of the frozen base (W stored (K, N)), so LoRA trains
 * on a packed base without a dequantised copy. Prefill and training shapes; decode goes to
 * matvec_packed. The CPU reference dequantises (unpackWeight) and multiplies (matmulCpu).
 * Split-K and double-buffered tiles as matmul.ts (options splitK, doubleBuffer).
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import { isSoftwareAdapter } from '../runtime/device.ts';
import { numel, uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { gridChecked } from './dispatch_grid.ts';
import {
  doubleBufferFor,
  matmulCpu,
  pickTile,
  resolveSplitK,
  splitKReduce,
  tileFits,
  tileSize,
  variantKey,
  vec4Ok,
  type SplitK,
  type TileFlags,
} from './matmul.ts';
import { packedKernelCode, type PackedTensor } from './packed_weight.ts';
import shader from './matmul_packed.wgsl?raw';

export interface MatmulPackedOptions {
  transB?: boolean;
  alpha?: number;
  out?: Tensor;
  accumulate?: boolean;
  /** Split-K slices (default 1), or 'auto' (matmul.ts). */
  splitK?: SplitK;
  /** Double-buffered tiles; normally chosen per adapter (doubleBufferFor). */
  doubleBuffer?: boolean;
}

/** CPU reference. a: (M, K); w packed, stored (N, K) with transB, else (K, N) → (M, N). */
export function matmulPackedCpu(
  a: Float32Array,
  m: number,
  w: PackedWeight,
  opts: { transB?: boolean; alpha?: number } = {},
): Float32Array {
  const k = opts.transB ? w.cols : w.rows;
  return matmulCpu(a, [m, k], unpackWeight(w), [w.rows, w.cols], { transB: opts.transB, alpha: opts.alpha });
}

/** GPU version, recorded on `e`. */
export function matmulPacked(e: Engine, a: Tensor, w: PackedTensor, opts: MatmulPackedOptions = {}): Tensor {
  const { transB = false, alpha = 1, accumulate = false } = opts;
  const { rows, cols, format, scaleOffset } = w.packed;
  const [k, n] = transB ? [cols, rows] : [rows, cols];
  const m = a.size / k;
  if (a.dtype !== 'f32' || !Number.isInteger(m) || a.shape[a.shape.length - 1] !== k)
    throw new RangeError(
      `matmul_packed: A ${JSON.stringify(a.shape)} does not match op(W) (${k}, ${n}) (W ${rows}×${cols}${transB ? ', transposed' : ''})`,
    );
  let out: Tensor;
  if (opts.out) {
    out = opts.out;
    if (out.dtype !== 'f32' || out.size !== numel([m, n]))
      throw new RangeError(`matmul_packed: out must be f32 with ${m * n} elements`);
  } else {
    if (accumulate) throw new RangeError('matmul_packed: accumulate needs an existing `out` tensor');
    out = e.tensor([m, n]);
  }
  if (m === 0 || n === 0) return out;
  const tile = pickTile(m, n, isSoftwareAdapter(e.ctx.report));
  const { bm, bn } = tileSize(tile);
  const flags: TileFlags = {
    TM8: tile.tm === 8,
    VEC4_A: vec4Ok(a.dtype, k, tile.bk),
    VEC4_B: false,
    DOUBLE_BUF: opts.doubleBuffer ?? doubleBufferFor(e.ctx.report, tile),
  };
  if (flags.DOUBLE_BUF && !tileFits(tile, e.ctx.report.limits, true))
    throw new RangeError(`matmul_packed: tile ${JSON.stringify(tile)} does not fit twice in workgroup memory`);
  const [gx, gy] = [Math.ceil(n / bn), Math.ceil(m / bm)];
  const { slices, kSlice } = resolveSplitK(e, opts.splitK, gx * gy, k, tile.bk);
  const parts = slices > 1 ? e.tensor([slices * m * n]) : out;
  e.run({
    key: `matmul_packed_${format}${variantKey(flags)}`,
    code: packedKernelCode('matmul_packed', shader, format, { ...flags, DOUBLE_BUF: flags.DOUBLE_BUF ?? false }),
    constants: {
      WG_X: tile.wgX,
      WG_Y: tile.wgY,
      BK: tile.bk,
      TRANS_B: transB ? 1 : 0,
      ACCUMULATE: accumulate && slices === 1 ? 1 : 0,
    },
    bindings: [a, w, parts],
    uniforms: uniforms(
      { u32: m },
      { u32: n },
      { u32: k },
      { u32: cols },
      { u32: scaleOffset },
      { f32: alpha },
      { u32: 1 },
      { u32: kSlice },
    ),
    workgroups: gridChecked('matmul_packed', gx, gy, slices),
  });
  if (slices > 1) splitKReduce(e, parts, out, slices, accumulate);
  return out;
}
