/**
 * Frozen weights packed in u32 words on the GPU (layouts: io/pack.ts): the tensor type, the
 * upload, and the WGSL variants. `PackedTensor` is a Tensor whose `shape` is the weight's logical
 * (rows, cols) and whose `size` is the number of u32 words in its buffer (`dtype` 'f32' marks
 * 4-byte elements for copies); only the packed kernels (matvec.wgsl's PACKED variants, matmul_packed,
 * embedding_packed) read it. The shared reading functions (packed_weight.wgsl) are appended to
 * each kernel's source and the format picked with wgsl_preprocess flags BF16 / F16 / Q4.
 */
import type { PackedWeight, WeightFormat } from '../io/pack.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import lib from './packed_weight.wgsl?raw';

export type PackedFormat = Exclude<WeightFormat, 'f32'>;

export interface PackedTensor extends Tensor {
  packed: {
    format: PackedFormat;
    rows: number;
    cols: number;
    /** q4: word index of the first scale word; others: the word count. */
    scaleOffset: number;
  };
}

export function isPacked(t: Tensor): t is PackedTensor {
  return (t as Partial<PackedTensor>).packed !== undefined;
}

/** Upload packed words (one writeBuffer). */
export function uploadPacked(e: Engine, p: PackedWeight): PackedTensor {
  const t = e.tensor([p.words.length], p.words);
  return {
    ...t,
    shape: [p.rows, p.cols],
    size: p.words.length,
    packed: { format: p.format, rows: p.rows, cols: p.cols, scaleOffset: p.scaleOffset },
  };
}

const variants = new Map<string, string>();
/**
 * `kernel` (a packed kernel's WGSL) with the reading functions for `format`, and the kernel's own
 * preprocessor flags `extra`, preprocessed once per combination.
 */
export function packedKernelCode(
  name: string,
  kernel: string,
  format: PackedFormat,
  extra: Record<string, boolean> = {},
): string {
  const key = `${name}_${format}_${JSON.stringify(extra)}`;
  let code = variants.get(key);
  if (!code) {
    const flags = { BF16: format === 'bf16', F16: format === 'f16', Q4: format === 'q4', ...extra };
    code = preprocessWgsl(`${kernel}\n${lib}`, flags, `${name}.wgsl + packed_weight.wgsl`);
    variants.set(key, code);
  }
  return code;
}
