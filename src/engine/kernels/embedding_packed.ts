/**
 * embedding_packed: gather rows of a frozen (V, C) table packed as bf16 / f16 / q4 (io/pack.ts)
 * by token ids → (T, C) f32. With tied embeddings the same packed table is the LM head
 * (matmul_packed / matvec_packed). The CPU reference dequantises and gathers (embeddingCpu).
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { embeddingCpu } from './embedding.ts';
import { packedKernelCode, type PackedTensor } from './packed_weight.ts';
import shader from './embedding_packed.wgsl?raw';

const WG = 256;

/** CPU reference. table packed (V, C), ids (T,) → (T, C); an id ≥ V gives a zero row. */
export function embeddingPackedCpu(table: PackedWeight, ids: Uint32Array): Float32Array {
  return embeddingCpu(unpackWeight(table), table.rows, table.cols, ids);
}

/** GPU version, recorded on `e`. ids: (T,) u32 data; `at`: `count` ids from `offset` of a longer tensor. */
export function embeddingPacked(
  e: Engine,
  table: PackedTensor,
  ids: Tensor,
  at?: { offset: number; count: number; base?: number },
): Tensor {
  const { rows: v, cols: c, format, scaleOffset } = table.packed;
  const t = at?.count ?? ids.size;
  if (t * c >= 2 ** 32) throw new RangeError('embedding_packed: output too large');
  const out = e.tensor([t, c]);
  if (t * c === 0) return out;
  e.run({
    key: `embedding_packed_${format}`,
    code: packedKernelCode('embedding_packed', shader, format),
    constants: { WG },
    bindings: [table, ids, out],
    uniforms: uniforms(
      { u32: t },
      { u32: c },
      { u32: v },
      { u32: scaleOffset },
      { u32: at?.offset ?? 0 },
      { u32: at?.base ?? 0 },
    ),
    workgroups: grid1d(Math.ceil((t * c) / WG)),
  });
  return out;
}
