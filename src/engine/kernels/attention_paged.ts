/**
 * attentionPaged: causal attention of a batched decode step against a paged KV cache.
 *
 *   q (N, Hq, D), kStore/vStore (rows, Hkv, D), a PagedBatch (kv_pages.ts)  →  out (N, Hq, D)
 *
 * Row n attends to keys 0 ..= pos[n] of its sequence seq[n]; key j sits at store row
 * pages[seq[n]·maxPages + ⌊j / pageSize⌋]·pageSize + j mod pageSize. Query head h reads KV head
 * h / (Hq / Hkv); scores are q·k / sqrt(D). Rows of different sequences and lengths share one
 * dispatch. The same maths as attention.ts's forward on a contiguous cache (no lse: decode only).
 * GPU: attention_paged.wgsl, GQA-packed: one workgroup per (group of query heads sharing a KV head,
 * row) reads each key and value of that KV head once for all the group's heads (groupWidth: up to
 * 8 heads; Qwen2.5-0.5B's 7), where one workgroup per query head read them 7 times. Each head's
 * arithmetic is the one-head kernel's, in the same order. q f32; the stores f32 or, in the f16 KV
 * format (KvFormat), 'f16' tensors read as f16 pairs of u32 words (unpack2x16float). D ≤ 256.
 * Few rows with long keys (splitPlan): the keys of each row are split (flash-decoding): pass 1, the
 * SPLIT variant, one workgroup per (head, row, split), writes each split's partial softmax; pass 2,
 * attention_merge.ts, combines them. Two dispatches instead of one; short contexts keep one.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { attentionMerge, MAX_SPLITS } from './attention_merge.ts';
import { gridChecked } from './dispatch_grid.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import shader from './attention_paged.wgsl?raw';

/**
 * How the paged K/V stores hold their values (kv_pages.ts): 'f32', or 'f16' (half the bytes; each
 * value rounded to the nearest f16, ties to even, when rope_append writes it).
 */
export type KvFormat = 'f32' | 'f16';

/** The KV format of a pair of GPU stores, from their dtype (an 'f16' tensor holds f16 pairs in u32 words). */
export function kvFormatOf(op: string, kStore: Tensor, vStore: Tensor): KvFormat {
  if (kStore.dtype !== vStore.dtype)
    throw new TypeError(`${op}: kStore is ${kStore.dtype} and vStore ${vStore.dtype}; both must hold one KV format`);
  return kStore.dtype;
}

const codes = new Map<KvFormat, string>();
/** attention_paged.wgsl for a KV format. */
function kernelCode(kv: KvFormat): string {
  let code = codes.get(kv);
  if (code === undefined)
    codes.set(kv, (code = preprocessWgsl(shader, { KV_F16: kv === 'f16' }, 'attention_paged.wgsl')));
  return code;
}

/**
 * How a step's N new rows map into the paged K/V stores (kv_pages.ts allocates them): row n sits at
 * position pos[n] of its sequence, writes its k/v to store row dest[n], and sees keys 0 ..= pos[n].
 */
export interface PagedBatch {
  /** Rows per page of the stores. */
  pageSize: number;
  /** Columns of `pages` (the longest page list in this step). */
  maxPages: number;
  /** (N) position of each new row in its sequence (its RoPE angle; it sees keys 0 ..= pos). */
  pos: Uint32Array;
  /** (N) store row that each new row's k and v are written to. */
  dest: Uint32Array;
  /** (N) row of `pages` that lists the pages of each new row's sequence. */
  seq: Uint32Array;
  /** (numSeq, maxPages) page ids of each sequence in this step (unused entries 0). */
  pages: Uint32Array;
}

/** Workgroup size: keys scored per chunk and output dims per pass (attention_paged.wgsl's WG). */
const WG = 64;
/** Largest head dimension: the workgroup arrays of the shader (attention_paged.wgsl's MAX_D). */
const MAX_D = 256;
/** Most query heads one workgroup serves (attention_paged.wgsl's MAX_G: its q rows and sums). */
const MAX_GROUP = 8;

/** Query heads per workgroup: the largest divisor of the group Hq / Hkv that is ≤ 8. */
export function groupWidth(Hq: number, Hkv: number): number {
  const g = Hq / Hkv;
  for (let w = Math.min(g, MAX_GROUP); w > 1; w--) if (g % w === 0) return w;
  return 1;
}

/**
 * Split only below this many (head group, row) workgroups: the single pass gives a GPU
 * (Hq / groupWidth)·N workgroups of 64 invocations, and at batch 1 on Qwen2.5-0.5B that is 2, a
 * few percent of a GPU's compute units (20–130 of them, each holding several workgroups) while each
 * loops over every key. From 256 on the single pass already covers every unit a few times over and
 * a split would add a dispatch and the partials' round trip for little gain.
 */
const SPLIT_BELOW_WORKGROUPS = 256;
/**
 * Fewest keys per split: a split pays a fixed cost (q load, two reductions, a (2 + D)-float partial
 * written and read back) that 256 keys (4 chunks of WG, 256·2·D floats of K/V read) make small. So
 * a batch splits only when its longest row has ≥ 2·256 = 512 keys, into ⌊keys / 256⌋ splits.
 */
const MIN_SPLIT_KEYS = 256;

/** Splits of each row's keys, and keys per split (split s covers keys [s·splitKeys, (s + 1)·splitKeys)). */
export interface SplitPlan {
  splits: number;
  splitKeys: number;
}

/**
 * The split for a step of N rows over `groups` workgroups per row (query heads / groupWidth) whose
 * longest row sees maxKeys keys, or undefined for the single pass (many workgroups already, or too
 * few keys for 2 splits of MIN_SPLIT_KEYS). At most MAX_SPLITS (32, the merge's limit).
 */
export function splitPlan(groups: number, N: number, maxKeys: number): SplitPlan | undefined {
  if (groups * N >= SPLIT_BELOW_WORKGROUPS) return undefined;
  const splits = Math.min(MAX_SPLITS, Math.floor(maxKeys / MIN_SPLIT_KEYS));
  return splits < 2 ? undefined : planFor(maxKeys, Math.ceil(maxKeys / splits));
}

/** Splits of `splitKeys` keys covering maxKeys, rounded up to a multiple of WG (splits align with chunks). */
function planFor(maxKeys: number, splitKeys: number): SplitPlan {
  const k = Math.ceil(splitKeys / WG) * WG;
  return { splits: Math.ceil(maxKeys / k), splitKeys: k };
}

/** AttentionPagedOptions.splitKeys taken as given (no rounding); undefined when it makes one split. */
function forcedPlan(maxKeys: number, splitKeys: number): SplitPlan | undefined {
  if (!Number.isInteger(splitKeys) || splitKeys < 1) fail(`splitKeys must be a whole number ≥ 1, got ${splitKeys}`);
  const splits = Math.ceil(maxKeys / splitKeys);
  if (splits > MAX_SPLITS)
    fail(`splitKeys=${splitKeys} cuts ${maxKeys} keys into ${splits} splits, at most ${MAX_SPLITS}; pass a larger one`);
  return splits > 1 ? { splits, splitKeys } : undefined;
}

export interface AttentionPagedDims {
  /** New rows (queries) of this step. */
  N: number;
  /** Query heads, a multiple of Hkv. */
  Hq: number;
  /** Key/value heads. */
  Hkv: number;
  /** Head dimension. */
  D: number;
}

function fail(msg: string): never {
  throw new RangeError(`attentionPaged: ${msg}`);
}

/** Checks dims, sizes and every store row the batch reads; returns the number of store rows. */
function checkArgs(d: AttentionPagedDims, sizes: { q: number; kStore: number; vStore: number }, b: PagedBatch): number {
  const { N, Hq, Hkv, D } = d;
  for (const [name, n] of Object.entries({ N, Hq, Hkv, D }))
    if (!Number.isInteger(n) || n < 1) fail(`${name} must be a whole number ≥ 1, got ${n}`);
  if (Hq % Hkv !== 0) fail(`Hq=${Hq} is not a multiple of Hkv=${Hkv}`);
  if (sizes.q !== N * Hq * D) fail(`q has ${sizes.q} values, expected (N=${N}, Hq=${Hq}, D=${D})`);
  if (sizes.kStore !== sizes.vStore || sizes.kStore % (Hkv * D) !== 0)
    fail(`kStore (${sizes.kStore} values) and vStore (${sizes.vStore}) must both be (rows, Hkv=${Hkv}, D=${D})`);
  const rows = sizes.kStore / (Hkv * D);
  const { pageSize, maxPages } = b;
  if (!(pageSize >= 1) || !(maxPages >= 1)) fail(`pageSize (${pageSize}) and maxPages (${maxPages}) must be ≥ 1`);
  if (b.pos.length !== N || b.seq.length !== N)
    fail(`batch has ${b.pos.length} positions and ${b.seq.length} sequences for N=${N} rows`);
  if (b.pages.length % maxPages !== 0)
    fail(`pages has ${b.pages.length} entries, not a multiple of maxPages=${maxPages}`);
  const numSeq = b.pages.length / maxPages;
  for (let n = 0; n < N; n++) {
    const s = b.seq[n]!;
    if (s >= numSeq) fail(`row ${n} names sequence ${s}, the batch lists ${numSeq}`);
    const used = Math.floor(b.pos[n]! / pageSize) + 1;
    if (used > maxPages) fail(`row ${n} at position ${b.pos[n]} needs ${used} pages, maxPages is ${maxPages}`);
    for (let p = 0; p < used; p++) {
      const page = b.pages[s * maxPages + p]!;
      if ((page + 1) * pageSize > rows)
        fail(`sequence ${s} lists page ${page}, the stores hold ${rows / pageSize} pages`);
    }
  }
  return rows;
}

/** Store row of key j of sequence s (kv_pages.ts). */
function pagedRow(b: Pick<PagedBatch, 'pages' | 'maxPages' | 'pageSize'>, s: number, j: number): number {
  return b.pages[s * b.maxPages + Math.floor(j / b.pageSize)]! * b.pageSize + (j % b.pageSize);
}

/** CPU reference. q (N, Hq, D), kStore/vStore (rows, Hkv, D) → out (N, Hq, D). */
export function attentionPagedCpu(
  q: Float32Array,
  kStore: Float32Array,
  vStore: Float32Array,
  b: PagedBatch,
  dims: AttentionPagedDims,
): Float32Array {
  const { N, Hq, Hkv, D } = dims;
  checkArgs(dims, { q: q.length, kStore: kStore.length, vStore: vStore.length }, b);
  const scale = 1 / Math.sqrt(D);
  const out = new Float32Array(N * Hq * D);
  const acc = new Float64Array(D);
  for (let n = 0; n < N; n++) {
    const nKeys = b.pos[n]! + 1;
    const keyRow = Array.from({ length: nKeys }, (_, j) => pagedRow(b, b.seq[n]!, j));
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / (Hq / Hkv));
      const qOff = (n * Hq + h) * D;
      const s = new Float64Array(nKeys);
      for (let j = 0; j < nKeys; j++) {
        const kOff = (keyRow[j]! * Hkv + kvh) * D;
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[qOff + d]! * kStore[kOff + d]!;
        s[j] = dot * scale;
      }
      let m = -Infinity;
      for (const x of s) m = Math.max(m, x);
      let sum = 0;
      for (let j = 0; j < nKeys; j++) sum += Math.exp(s[j]! - m);
      // out[d] = Σ_j e_j v_j[d] / sum, each sum over j in order in f64; e_j computed once per key, not per d
      acc.fill(0);
      for (let j = 0; j < nKeys; j++) {
        const e = Math.exp(s[j]! - m);
        const vOff = (keyRow[j]! * Hkv + kvh) * D;
        for (let d = 0; d < D; d++) acc[d]! += e * vStore[vOff + d]!;
      }
      for (let d = 0; d < D; d++) out[qOff + d] = acc[d]! / sum;
    }
  }
  return out;
}

/** The idx tensor of a batch (GpuOps.batchIndex): b.pos, b.seq and b.pages at these offsets. */
export interface PagedIndexTensor {
  tensor: Tensor;
  posOff: number;
  seqOff: number;
  pagesOff: number;
}

/** A PagedBatch as one u32 array [pos (N) | dest (N) | seq (N) | pages], with the offsets the kernels read. */
export function packPagedIndex(b: PagedBatch) {
  const n = b.pos.length;
  const data = new Uint32Array(3 * n + b.pages.length);
  data.set(b.pos, 0);
  data.set(b.dest, n);
  data.set(b.seq, 2 * n);
  data.set(b.pages, 3 * n);
  return { data, posOff: 0, destOff: n, seqOff: 2 * n, pagesOff: 3 * n };
}

export interface AttentionPagedOptions {
  /**
   * Keys per split, used as given (any whole number ≥ 1 that makes ≤ 32 splits of the longest
   * row), overriding splitPlan: tests force the split path on short rows with it, and a value ≥
   * the longest row forces the single pass. Undefined (the default): splitPlan decides.
   */
  splitKeys?: number;
}

/**
 * GPU op, recorded on `e`. q (N, Hq, D), kStore/vStore (rows, Hkv, D); `idx` (u32) holds b.pos,
 * b.seq and b.pages at the given offsets (see GpuOps.batchIndex). → out (N, Hq, D).
 */
export function attentionPaged(
  e: Engine,
  q: Tensor,
  kStore: Tensor,
  vStore: Tensor,
  b: PagedBatch,
  idx: PagedIndexTensor,
  opts: AttentionPagedOptions = {},
): Tensor {
  const { N, Hq, Hkv, D } = checkTensors(q, kStore, vStore, b);
  let maxKeys = 0;
  for (const p of b.pos) maxKeys = Math.max(maxKeys, p + 1);
  // the longest row decides the splits; shorter rows leave their last splits empty
  const groups = Hq / groupWidth(Hq, Hkv);
  const plan = opts.splitKeys === undefined ? splitPlan(groups, N, maxKeys) : forcedPlan(maxKeys, opts.splitKeys);
  if (!plan) {
    const out = e.tensor([N, Hq, D]);
    pass1(e, q, kStore, vStore, b, idx, out, undefined);
    return out;
  }
  const part = e.tensor([N, Hq, plan.splits, 2 + D]);
  pass1(e, q, kStore, vStore, b, idx, part, plan);
  const out = attentionMerge(e, part, { N, Hq, D, splits: plan.splits });
  e.release(part); // its last read (the merge) is recorded
  return out;
}

/**
 * Pass 1 of the split path alone (the merge's input; exported for tests): per (row, head, split)
 * the partial [m, l, acc[D]] of keys [s·splitKeys, (s + 1)·splitKeys) → part (N, Hq, splits, 2 + D).
 */
export function attentionPagedPartials(
  e: Engine,
  q: Tensor,
  kStore: Tensor,
  vStore: Tensor,
  b: PagedBatch,
  idx: PagedIndexTensor,
  plan: SplitPlan,
): Tensor {
  const { N, Hq, D } = checkTensors(q, kStore, vStore, b);
  const { splits, splitKeys } = plan;
  const ok = Number.isInteger(splits) && Number.isInteger(splitKeys) && splitKeys >= 1;
  if (!ok || splits < 1 || splits > MAX_SPLITS)
    fail(`a split plan needs 1 ≤ splits ≤ ${MAX_SPLITS} and splitKeys ≥ 1, got ${JSON.stringify(plan)}`);
  const part = e.tensor([N, Hq, plan.splits, 2 + D]);
  pass1(e, q, kStore, vStore, b, idx, part, plan);
  return part;
}

/** Checks the tensors and the batch; returns the dims. */
function checkTensors(q: Tensor, kStore: Tensor, vStore: Tensor, b: PagedBatch): AttentionPagedDims {
  if (q.dtype !== 'f32') throw new TypeError(`attentionPaged: q must be f32, got ${q.dtype}`);
  kvFormatOf('attentionPaged', kStore, vStore);
  for (const t of [q, kStore, vStore])
    if (t.shape.length !== 3) fail(`expected (rows, heads, D) shapes, got ${JSON.stringify(t.shape)}`);
  const [N, Hq, D] = q.shape as [number, number, number];
  const Hkv = kStore.shape[1]!;
  if (kStore.shape[2] !== D)
    fail(`q ${JSON.stringify(q.shape)} and kStore ${JSON.stringify(kStore.shape)} differ in D`);
  if (D > MAX_D) fail(`D=${D} exceeds ${MAX_D}`);
  if (kStore.dtype === 'f16' && D % 2 !== 0) fail(`f16 stores hold D in pairs; D=${D} is odd`);
  checkArgs({ N, Hq, Hkv, D }, { q: q.size, kStore: kStore.size, vStore: vStore.size }, b);
  return { N, Hq, Hkv, D };
}

/** Records attention_paged.wgsl's dispatch: into out (N, Hq, D), or with a plan part (N, Hq, splits, 2 + D). */
function pass1(
  e: Engine,
  q: Tensor,
  kStore: Tensor,
  vStore: Tensor,
  b: PagedBatch,
  idx: PagedIndexTensor,
  out: Tensor,
  plan: SplitPlan | undefined,
): void {
  const [N, Hq, D] = q.shape as [number, number, number];
  const Hkv = kStore.shape[1]!;
  const gw = groupWidth(Hq, Hkv);
  const kv = kvFormatOf('attentionPaged', kStore, vStore);
  e.run({
    key: `attention_paged_${kv}`,
    code: kernelCode(kv),
    constants: { GW: gw, SPLIT: plan ? 1 : 0 },
    bindings: [q, kStore, vStore, idx.tensor, out],
    uniforms: uniforms(
      { u32: Hq },
      { u32: Hkv },
      { u32: D },
      { u32: b.pageSize },
      { u32: b.maxPages },
      { u32: idx.posOff },
      { u32: idx.seqOff },
      { u32: idx.pagesOff },
      { f32: 1 / Math.sqrt(D) },
      { u32: plan?.splits ?? 1 },
      { u32: plan?.splitKeys ?? 0 },
    ),
    workgroups: gridChecked('attentionPaged', Hq / gw, N, plan?.splits ?? 1),
  });
}
