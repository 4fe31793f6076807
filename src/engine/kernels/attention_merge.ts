/**
 * attentionMerge: pass 2 of the split paged decode attention (attention_paged.ts, flash-decoding).
 *
 *   part (N, Hq, splits, 2 + D), each partial [m, l, acc[D]]  →  out (N, Hq, D)
 *
 * A partial covers one split of a row's keys: m = its max score, l = Σ exp(s_j − m), acc[d] =
 * Σ exp(s_j − m)·v_j[d] (unnormalised). With M = max over the splits, out = Σ exp(m_s − M)·acc_s /
 * Σ exp(m_s − M)·l_s: the softmax over all the row's keys. An empty split is (−3e38, 0, 0) and adds
 * nothing. GPU: attention_merge.wgsl, one workgroup per (query head, row). f32 only.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import attentionMergeShader from './attention_merge.wgsl?raw';
import { gridChecked } from './dispatch_grid.ts';

/** Most partials per (row, head): attention_merge.wgsl's weight array (MAX_SPLITS). */
export const MAX_SPLITS = 32;
/** Workgroup size: output dims per pass (D = 64 on Qwen2.5 takes one pass). */
const WG = 64;

export interface AttentionMergeDims {
  N: number;
  Hq: number;
  D: number;
  splits: number;
}

function check(size: number, d: AttentionMergeDims): void {
  const { N, Hq, D, splits } = d;
  for (const [name, n] of Object.entries(d))
    if (!Number.isInteger(n) || n < 1)
      throw new RangeError(`attentionMerge: ${name} must be a whole number ≥ 1, got ${n}`);
  if (splits > MAX_SPLITS) throw new RangeError(`attentionMerge: ${splits} splits exceed ${MAX_SPLITS}`);
  if (size !== N * Hq * splits * (2 + D))
    throw new RangeError(
      `attentionMerge: part has ${size} values, expected (N=${N}, Hq=${Hq}, splits=${splits}, 2 + D=${D})`,
    );
}

/** CPU reference. part (N, Hq, splits, 2 + D) → out (N, Hq, D). */
export function attentionMergeCpu(part: Float32Array, dims: AttentionMergeDims): Float32Array {
  check(part.length, dims);
  const { N, Hq, D, splits } = dims;
  const W = 2 + D;
  const out = new Float32Array(N * Hq * D);
  for (let r = 0; r < N * Hq; r++) {
    const first = r * splits * W;
    let M = -Infinity;
    for (let s = 0; s < splits; s++) M = Math.max(M, part[first + s * W]!);
    const w = Array.from({ length: splits }, (_, s) => Math.exp(part[first + s * W]! - M));
    let L = 0;
    for (let s = 0; s < splits; s++) L += w[s]! * part[first + s * W + 1]!;
    for (let d = 0; d < D; d++) {
      let a = 0;
      for (let s = 0; s < splits; s++) a += w[s]! * part[first + s * W + 2 + d]!;
      out[r * D + d] = a / L;
    }
  }
  return out;
}

/** GPU op, recorded on `e`. part (N, Hq, splits, 2 + D) → out (N, Hq, D). */
export function attentionMerge(e: Engine, part: Tensor, dims: AttentionMergeDims): Tensor {
  if (part.dtype !== 'f32') throw new TypeError(`attentionMerge: f32 partials only, got ${part.dtype}`);
  check(part.size, dims);
  const { N, Hq, D, splits } = dims;
  const out = e.tensor([N, Hq, D]);
  e.run({
    key: 'attention_merge',
    code: attentionMergeShader,
    constants: { WG },
    bindings: [part, out],
    uniforms: uniforms({ u32: Hq }, { u32: D }, { u32: splits }),
    workgroups: gridChecked('attentionMerge', Hq, N),
  });
  return out;
}
