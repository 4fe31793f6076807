/**
 * matvec_packed: y (M, N) = alpha · x (M, K) · W (N, K)ᵀ for M ≤ 16 with W a packed frozen weight
 * (bf16 / f16 / q4, io/pack.ts) — the decode-step shape of every base linear layer. The kernel is
 * matvec.wgsl's PACKED variant (packed_weight.wgsl reads the words; matvec.ts records it). The CPU
 * reference dequantises (unpackWeight) and multiplies (matmulCpu). GpuOps.matmul routes here.
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { matmulCpu } from './matmul.ts';
import { matvecPackedRecord, type MatvecOpts } from './matvec.ts';
import type { PackedTensor } from './packed_weight.ts';

/** CPU reference. x: (M, K), w packed (N, K) → (M, N). */
export function matvecPackedCpu(x: Float32Array, w: PackedWeight, m: number, alpha = 1): Float32Array {
  return matmulCpu(x, [m, w.cols], unpackWeight(w), [w.rows, w.cols], { transB: true, alpha });
}

/** GPU version, recorded on `e`. With `out` and `accumulate`, out += alpha · x·Wᵀ. K % 8 == 0. */
export function matvecPacked(e: Engine, x: Tensor, w: PackedTensor, opts: MatvecOpts = {}): Tensor {
  return matvecPackedRecord(e, x, w, opts);
}
