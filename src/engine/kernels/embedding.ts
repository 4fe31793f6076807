/**
 * embedding: gather rows of a (V, C) table by token ids → (T, C) f32. The table is frozen (no
 * backward). It may be stored as f16 where the device has `shader-f16`. Ids ≥ V give zero rows.
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import shader from './embedding.wgsl?raw';

const WG = 256;
const variants = new Map<string, string>();
/** The shader for an f32 or f16 table (each variant preprocessed once). */
const variantCode = (dtype: string) => {
  let code = variants.get(dtype);
  if (!code) {
    code = preprocessWgsl(shader, { F16: dtype === 'f16' }, 'embedding.wgsl');
    variants.set(dtype, code);
  }
  return code;
};

/** CPU reference. table: (V, C), ids: (T,) → (T, C); an id ≥ V gives a zero row. */
export function embeddingCpu(table: Float32Array, v: number, c: number, ids: Uint32Array): Float32Array {
  if (table.length !== v * c) throw new RangeError(`embedding: table has ${table.length} values, not ${v}x${c}`);
  const out = new Float32Array(ids.length * c);
  for (let t = 0; t < ids.length; t++) {
    const id = ids[t]!;
    if (id >= v) continue;
    for (let j = 0; j < c; j++) out[t * c + j] = table[id * c + j]!;
  }
  return out;
}

/**
 * GPU version, recorded on `e`. table: (V, C) f32 or f16; ids: (T,) u32 data (a tensor filled
 * from a Uint32Array; its dtype field is not looked at) → (T, C) f32. `at`: read `count` ids
 * from `offset` of a longer ids tensor instead (the sampler's output, for multi-step decode), as
 * rows of a shard whose first vocabulary row is `base` (other ids give zero rows).
 */
export function embedding(
  e: Engine,
  table: Tensor,
  ids: Tensor,
  at?: { offset: number; count: number; base?: number },
): Tensor {
  if (table.shape.length !== 2)
    throw new RangeError(`embedding: table must be (V, C), got ${JSON.stringify(table.shape)}`);
  const [v, c] = table.shape as [number, number];
  const t = at?.count ?? ids.size;
  if (table.dtype === 'f16' && !e.f16) throw new Error("embedding: an f16 table needs the device feature 'shader-f16'");
  if (t * c >= 2 ** 32) throw new RangeError('embedding: output too large');
  const out = e.tensor([t, c]);
  if (t * c === 0) return out;
  e.run({
    key: `embedding_${table.dtype}`,
    code: variantCode(table.dtype),
    constants: { WG },
    bindings: [table, ids, out],
    uniforms: uniforms({ u32: t }, { u32: c }, { u32: v }, { u32: at?.offset ?? 0 }, { u32: at?.base ?? 0 }),
    workgroups: grid1d(Math.ceil((t * c) / WG)),
  });
  return out;
}
