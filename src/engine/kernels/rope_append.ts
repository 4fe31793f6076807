/**
 * ropeAppend: the attention input stage of a batched decode step, in one dispatch.
 *
 *   qkv (N, (Hq + 2·Hkv)·D), columns [q heads | k heads | v heads] as linearFused([Wq, Wk, Wv]) writes them
 *   →  out (N, Hq, D): q of each row, RMSNorm'd per head (qNorm, Qwen3) and rotated at position pos[n]
 *   and, in place, kStore/vStore (rows, Hkv, D) row dest[n]: k (RMSNorm'd by kNorm, rotated) and raw v.
 *
 * The rotation is rope.ts's (HF rotate_half; angle = f32(pos · freq), cos/sin from the same exact
 * range reduction and polynomials, the WGSL shared with rope.wgsl through the preprocessor); the
 * norm is rmsnorm.ts's, y = x / sqrt(mean(x²) + eps) · w over each head's D values.
 * Positions, destinations and pages come from a PagedBatch (kv_pages.ts). f32 tensors, except
 * the stores in the f16 KV format (KvFormat): k and v are then rounded to f16 (to nearest even)
 * as they are written; on the GPU the stores are 'f16' tensors bound as u32 words, two values each
 * (WGSL's pack2x16float: no 'shader-f16' feature needed), on the CPU f32 arrays of the rounded values.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { halfToFloat, floatToHalf } from '../io/float16.ts';
import { kvFormatOf, type KvFormat, type PagedBatch } from './attention_paged.ts';
import { gridChecked } from './dispatch_grid.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import ropeShader from './rope.wgsl?raw';
import shader from './rope_append.wgsl?raw';

/**
 * Largest workgroup: one invocation per rotated pair (D/2 rounded up to a power of two), at most 64,
 * so a D = 128 head (64 pairs) is one pass and D = 64 (32 pairs) has no idle invocations.
 */
const MAX_WG = 64;

export interface RopeAppendDims {
  /** New rows of this step. */
  N: number;
  /** Query heads, a multiple of Hkv. */
  Hq: number;
  /** Key/value heads. */
  Hkv: number;
  /** Head dimension (even; freqs has D/2 values). */
  D: number;
}

export interface RopeAppendNorm {
  /** (D,) per-head RMSNorm weight of q (Qwen3), or none. */
  qNorm?: Float32Array;
  /** (D,) per-head RMSNorm weight of k (Qwen3), or none. */
  kNorm?: Float32Array;
  /** The norm's epsilon (config rms_norm_eps); required when a norm is given. */
  eps?: number;
}

function fail(msg: string): never {
  throw new RangeError(`ropeAppend: ${msg}`);
}

/** Checks dims against the array sizes; returns the number of store rows. */
function checkArgs(
  d: RopeAppendDims,
  sizes: { qkv: number; freqs: number; kStore: number; vStore: number },
  b: PagedBatch,
  norm: { q: number | undefined; k: number | undefined; eps: number | undefined },
): number {
  const { N, Hq, Hkv, D } = d;
  for (const [name, n] of Object.entries({ N, Hq, Hkv, D }))
    if (!Number.isInteger(n) || n < 1) fail(`${name} must be a whole number ≥ 1, got ${n}`);
  if (Hq % Hkv !== 0) fail(`Hq=${Hq} is not a multiple of Hkv=${Hkv}`);
  if (D % 2 !== 0 || sizes.freqs !== D / 2) fail(`D=${D} needs D/2 frequencies, got ${sizes.freqs}`);
  if (sizes.qkv !== N * (Hq + 2 * Hkv) * D) fail(`qkv has ${sizes.qkv} values, expected N·(Hq + 2·Hkv)·D`);
  if (sizes.kStore !== sizes.vStore || sizes.kStore % (Hkv * D) !== 0)
    fail(`kStore (${sizes.kStore} values) and vStore (${sizes.vStore}) must both be (rows, Hkv=${Hkv}, D=${D})`);
  const rows = sizes.kStore / (Hkv * D);
  if (b.pos.length !== N || b.dest.length !== N)
    fail(`batch has ${b.pos.length} positions and ${b.dest.length} destinations for N=${N} rows`);
  for (let n = 0; n < N; n++)
    if (b.dest[n]! >= rows)
      fail(`row ${n} writes store row ${b.dest[n]}, the stores hold ${rows}; grow the stores first`);
  for (const [name, len] of [
    ['qNorm', norm.q],
    ['kNorm', norm.k],
  ] as const)
    if (len !== undefined && len !== D) fail(`${name} has ${len} values, expected D=${D}`);
  if ((norm.q !== undefined || norm.k !== undefined) && !(typeof norm.eps === 'number' && norm.eps >= 0))
    fail('a q/k norm needs o.eps (the config rms_norm_eps)');
  return rows;
}

/** Largest finite f16. */
const F16_MAX = 65504;
/**
 * x rounded to the nearest f16 value (ties to even), as WGSL's pack2x16float stores it, after
 * clamping to ±65504 as rope_append.wgsl does (pack2x16float's result is undefined beyond).
 */
const roundF16 = (x: number): number => halfToFloat(floatToHalf(Math.min(F16_MAX, Math.max(-F16_MAX, x))));

/**
 * CPU reference. qkv (N, (Hq + 2·Hkv)·D), freqs (D/2,) → q (N, Hq, D); writes k and v into
 * kStore/vStore (rows, Hkv, D) at row b.dest[n], rounded to f16 when kv is 'f16' (the stores
 * then hold f16 values widened to f32).
 */
export function ropeAppendCpu(
  qkv: Float32Array,
  freqs: Float32Array,
  kStore: Float32Array,
  vStore: Float32Array,
  b: PagedBatch,
  dims: RopeAppendDims,
  norm: RopeAppendNorm = {},
  kv: KvFormat = 'f32',
): Float32Array {
  const { N, Hq, Hkv, D } = dims;
  checkArgs(dims, { qkv: qkv.length, freqs: freqs.length, kStore: kStore.length, vStore: vStore.length }, b, {
    q: norm.qNorm?.length,
    k: norm.kNorm?.length,
    eps: norm.eps,
  });
  const half = D / 2;
  const width = (Hq + 2 * Hkv) * D;
  const q = new Float32Array(N * Hq * D);
  const head = new Float32Array(D);

  /** One head of row n: `head` ← x (normed when w is given), then rotated into dst at dstOff. */
  const rotateHead = (n: number, src: number, w: Float32Array | undefined, dst: Float32Array, dstOff: number) => {
    for (let i = 0; i < D; i++) head[i] = qkv[src + i]!;
    if (w) {
      let ss = 0;
      for (let i = 0; i < D; i++) ss += head[i]! * head[i]!;
      const rstd = 1 / Math.sqrt(ss / D + norm.eps!);
      for (let i = 0; i < D; i++) head[i] = head[i]! * rstd * w[i]!; // rounded to f32, as rmsnormCpu stores it
    }
    for (let i = 0; i < half; i++) {
      const a = Math.fround(Math.fround(b.pos[n]!) * freqs[i]!); // f32, as on the GPU and in HF
      const c = Math.cos(a);
      const s = Math.sin(a);
      const x1 = head[i]!;
      const x2 = head[i + half]!;
      dst[dstOff + i] = x1 * c - x2 * s;
      dst[dstOff + i + half] = x2 * c + x1 * s;
    }
  };

  for (let n = 0; n < N; n++) {
    const row = n * width;
    for (let h = 0; h < Hq; h++) rotateHead(n, row + h * D, norm.qNorm, q, (n * Hq + h) * D);
    for (let h = 0; h < Hkv; h++) {
      const storeOff = (b.dest[n]! * Hkv + h) * D;
      rotateHead(n, row + (Hq + h) * D, norm.kNorm, kStore, storeOff);
      for (let i = 0; i < D; i++) vStore[storeOff + i] = qkv[row + (Hq + Hkv + h) * D + i]!;
      if (kv === 'f16')
        for (let i = storeOff; i < storeOff + D; i++) {
          // k was stored as f32 first: the GPU rounds its f32 result too
          kStore[i] = roundF16(kStore[i]!);
          vStore[i] = roundF16(vStore[i]!);
        }
    }
  }
  return q;
}

const codes = new Map<KvFormat, string>();
/**
 * rope_append.wgsl for a KV format, with rope.wgsl's cosSin (and its constants) appended; rope.wgsl's
 * own entry point left out.
 */
function kernelCode(kv: KvFormat): string {
  let code = codes.get(kv);
  if (code === undefined) {
    const own = preprocessWgsl(shader, { KV_F16: kv === 'f16' }, 'rope_append.wgsl');
    code = `${own}\n${preprocessWgsl(ropeShader, { ROPE_KERNEL: false }, 'rope.wgsl')}`;
    codes.set(kv, code);
  }
  return code;
}

/**
 * GPU op, recorded on `e`. qkv (N, (Hq + 2·Hkv)·D), freqs (D/2,), kStore/vStore (rows, Hkv, D) written
 * in place (both 'f32', or both 'f16': the f16 KV format, see kvFormatOf); `idx` (u32) holds b.pos
 * at `posOff` and b.dest at `destOff` (see GpuOps.batchIndex). → q (N, Hq, D).
 */
export function ropeAppend(
  e: Engine,
  qkv: Tensor,
  freqs: Tensor,
  kStore: Tensor,
  vStore: Tensor,
  b: PagedBatch,
  idx: { tensor: Tensor; posOff: number; destOff: number },
  o: { Hq: number; Hkv: number; qNorm?: Tensor; kNorm?: Tensor; eps?: number },
): Tensor {
  for (const t of [qkv, freqs, o.qNorm, o.kNorm])
    if (t && t.dtype !== 'f32') throw new TypeError(`ropeAppend: f32 tensors only, got ${t.dtype}`);
  const kv = kvFormatOf('ropeAppend', kStore, vStore);
  const N = qkv.shape[0]!;
  const D = 2 * freqs.size;
  const dims = { N, Hq: o.Hq, Hkv: o.Hkv, D };
  checkArgs(dims, { qkv: qkv.size, freqs: freqs.size, kStore: kStore.size, vStore: vStore.size }, b, {
    q: o.qNorm?.size,
    k: o.kNorm?.size,
    eps: o.eps,
  });
  const out = e.tensor([N, o.Hq, D]);
  // an absent norm binds freqs as a stand-in weight (never read: the flag is 0)
  const flags = (o.qNorm ? 1 : 0) | (o.kNorm ? 2 : 0);
  e.run({
    key: `rope_append_${kv}`,
    code: kernelCode(kv),
    constants: { WG: Math.min(MAX_WG, Math.max(1, 2 ** Math.ceil(Math.log2(D / 2)))) },
    bindings: [qkv, freqs, o.qNorm ?? freqs, o.kNorm ?? freqs, idx.tensor, out, kStore, vStore],
    uniforms: uniforms(
      { u32: N },
      { u32: o.Hq },
      { u32: o.Hkv },
      { u32: D },
      { u32: idx.posOff },
      { u32: idx.destOff },
      { u32: flags },
      { f32: o.eps ?? 0 }, // unused without a norm (checkArgs requires eps with one)
    ),
    workgroups: gridChecked('ropeAppend', o.Hq + o.Hkv, N),
  });
  return out;
}
