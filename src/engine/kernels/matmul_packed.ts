/**
 * matmul_packed: C (M, N) = alpha · A (M, K) · op(W) (+ C), A f32, W a packed frozen weight
 * (bf16 / f16 / q4, io/pack.ts): with transB the forward of a linear layer (W stored (N, K)),
 * without it the input gradient dx = dy · W of the frozen base (W stored (K, N)), so LoRA trains
 * on a packed base without a dequantised copy. Prefill and training shapes; decode goes to
 * matvec_packed. The CPU reference dequantises (unpackWeight) and multiplies (matmulCpu).
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import { isSoftwareAdapter } from '../runtime/device.ts';
import { numel, uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { gridChecked } from './dispatch_grid.ts';
import { matmulCpu, pickTile, tileSize, variantKey, vec4Ok, type TileFlags } from './matmul.ts';
import { packedKernelCode, type PackedTensor } from './packed_weight.ts';
import shader from './matmul_packed.wgsl?raw';

export interface MatmulPackedOptions {
  transB?: boolean;
  alpha?: number;
  out?: Tensor;
  accumulate?: boolean;
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
  const flags: TileFlags = { TM8: tile.tm === 8, VEC4_A: vec4Ok(a.dtype, k, tile.bk), VEC4_B: false };
  e.run({
    key: `matmul_packed_${format}${variantKey(flags)}`,
    code: packedKernelCode('matmul_packed', shader, format, { ...flags }),
    constants: {
      WG_X: tile.wgX,
      WG_Y: tile.wgY,
      BK: tile.bk,
      TRANS_B: transB ? 1 : 0,
      ACCUMULATE: accumulate ? 1 : 0,
    },
    bindings: [a, w, out],
    uniforms: uniforms({ u32: m }, { u32: n }, { u32: k }, { u32: cols }, { u32: scaleOffset }, { f32: alpha }),
    workgroups: gridChecked('matmul_packed', Math.ceil(n / bn), Math.ceil(m / bm)),
  });
  return out;
}
