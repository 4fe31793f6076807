/**
 * attentionPaged: causal attention of a batched decode step (issue 12) against a paged KV cache.
 *
 *   q (N, Hq, D), kStore/vStore (rows, Hkv, D), a PagedBatch (kv_pages.ts)  →  out (N, Hq, D)
 *
 * Row n attends to keys 0 ..= pos[n] of its sequence seq[n]; key j sits at store row
 * pages[seq[n]·maxPages + ⌊j / pageSize⌋]·pageSize + j mod pageSize. Query head h reads KV head
 * h / (Hq / Hkv); scores are q·k / sqrt(D). Rows of different sequences and lengths share one
 * dispatch. The same maths as attention.ts's forward on a contiguous cache (no lse: decode only).
 * GPU: attention.wgsl's PAGED variant, one workgroup per (query head, row). f32 only, D ≤ 256.
 */
import { uniforms, type Engine, type Tensor } from '../runtime.ts';
import { gridChecked } from './dispatch_grid.ts';
import attentionShader from './attention.wgsl?raw';
import { preprocessWgsl } from './wgsl_preprocess.ts';

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

/** The paged variant of attention.wgsl: the same online softmax, keys found through the page table. */
let paged: string | undefined;
const shader = () => (paged ??= preprocessWgsl(attentionShader, { PAGED: true }, 'attention.wgsl'));

/** Workgroup size: keys scored per chunk and output dims per pass (attention.wgsl's 64). */
const WG = 64;
/** Largest head dimension: the workgroup arrays of the shader (attention.wgsl's limit). */
const MAX_D = 256;

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
export function pagedRow(b: Pick<PagedBatch, 'pages' | 'maxPages' | 'pageSize'>, s: number, j: number): number {
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
      for (let d = 0; d < D; d++) {
        let acc = 0;
        for (let j = 0; j < nKeys; j++) acc += Math.exp(s[j]! - m) * vStore[(keyRow[j]! * Hkv + kvh) * D + d]!;
        out[qOff + d] = acc / sum;
      }
    }
  }
  return out;
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
  idx: { tensor: Tensor; posOff: number; seqOff: number; pagesOff: number },
): Tensor {
  for (const t of [q, kStore, vStore]) {
    if (t.dtype !== 'f32') throw new TypeError(`attentionPaged: f32 tensors only, got ${t.dtype}`);
    if (t.shape.length !== 3) fail(`expected (rows, heads, D) shapes, got ${JSON.stringify(t.shape)}`);
  }
  const [N, Hq, D] = q.shape as [number, number, number];
  const Hkv = kStore.shape[1]!;
  if (kStore.shape[2] !== D)
    fail(`q ${JSON.stringify(q.shape)} and kStore ${JSON.stringify(kStore.shape)} differ in D`);
  if (D > MAX_D) fail(`D=${D} exceeds ${MAX_D}`);
  checkArgs({ N, Hq, Hkv, D }, { q: q.size, kStore: kStore.size, vStore: vStore.size }, b);
  const out = e.tensor([N, Hq, D]);
  e.run({
    key: 'attention_paged',
    code: shader(),
    constants: { WG },
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
    ),
    workgroups: gridChecked('attentionPaged', Hq, N),
  });
  return out;
}
