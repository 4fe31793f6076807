/**
 * A paged KV cache for batched decoding. Every layer keeps one K store and one V store
 * of shape (pages · PAGE, Hkv, D); a sequence owns a list of pages, so sequences of any length
 * share the stores without a slot of the maximum length each. A step's new rows are described to
 * the kernels by one host object, `PagedBatch` (uploaded once per step on the GPU).
 *
 * Row n of a step (one new token of some sequence) sits at position pos[n] of its sequence, writes
 * its k/v to store row dest[n], and attends to keys 0 ..= pos[n] of its sequence, key j being store
 * row pages[seq[n] · maxPages + ⌊j / pageSize⌋] · pageSize + j mod pageSize.
 *
 * `KvPages` is the allocator: pages are reference-counted so sequences with a common prefix (the
 * turns of one episode, the plays of one environment, a finished sequence kept for reuse) share
 * them. A sequence writes only rows ≥ its own length, and only into a page it holds alone: before
 * writing into a shared, partly filled last page it copies that page's valid rows to a fresh page
 * (copy-on-write). A full page is never written again, so sharing it needs no copy at all.
 * The stores grow by doubling (a new store, the old rows copied, the old store freed).
 *
 * The stores hold `kvFormat` values: 'f32' (the default), or 'f16', half the bytes (on the GPU two
 * f16 values per u32 word; k and v rounded to nearest even as they are written, ±65504 at most, so
 * every backend stores the same values). For Qwen2.5-0.5B's layout (24 layers, 2 KV heads, D = 64)
 * a token's k and v take 24 576 B in f32 and 12 288 B in f16: 16 sequences of 2048 tokens, 805 MB
 * or 403 MB.
 */
import type { KvFormat, PagedBatch } from '../kernels/attention_paged.ts';
import type { Ops } from '../ops/ops.ts';
import { ConfigError, GpuError } from '../../core/errors.ts';

export type { KvFormat, PagedBatch };

/**
 * Rows per page. 16: a sequence wastes at most 15 rows of its last page (≈ 1 % of a 2k-token
 * sequence), a copy-on-write copies at most 15 rows, the page table of a 4k-token sequence has 256
 * entries, and a kernel still reads keys in contiguous runs of 16 rows. Larger pages waste more per
 * sequence and copy more on a shared prefix; smaller ones make the page table and its lookups grow.
 */
export const PAGE = 16;

/** A sequence in the paged cache: its pages and the tokens whose k/v are stored. */
export interface KvSeq {
  /** Page ids, in order: token j lives in page pages[⌊j / PAGE⌋]. */
  pages: number[];
  /** Tokens whose k/v are written (= tokens.length). */
  length: number;
  /** The token ids at positions 0 .. length − 1 (for prefix matching). */
  tokens: number[];
  /** Set by release(): the sequence may no longer be used. */
  released?: boolean;
}

/** One sequence's new tokens in a step. */
export interface StepItem {
  seq: KvSeq;
  ids: number[];
}

export interface KvPagesOptions {
  /** Pages allocated up front (default 16 = 256 rows: a few short sequences before the first growth). */
  initialPages?: number;
  /** What the stores hold (default 'f32'; 'f16' halves them and needs an even head dimension). */
  kvFormat?: KvFormat;
}

/** The dims of a paged cache: layers, KV heads and the head dimension. */
export interface KvDims {
  layers: number;
  Hkv: number;
  D: number;
}

/** Bytes one token's k and v take over every layer in `format` (layers · 2 · Hkv · D · 4 or 2). */
export function kvBytesPerToken(dims: KvDims, format: KvFormat): number {
  return dims.layers * 2 * dims.Hkv * dims.D * (format === 'f16' ? 2 : 4);
}

/** A ConfigError unless `format` is a KV format the dims allow (f16 packs the head dimension in pairs). */
export function checkKvFormat(dims: KvDims, format: KvFormat): void {
  if (format !== 'f32' && format !== 'f16')
    throw new ConfigError(`The KV cache format must be 'f32' or 'f16', got '${String(format)}'.`, {
      issues: [`kvFormat: ${String(format)}`],
    });
  if (format === 'f16' && dims.D % 2 !== 0)
    throw new ConfigError(
      `The f16 KV cache stores each head's values in pairs, and this model's head dimension ` +
        `(config.json head_dim, or hidden_size / num_attention_heads) is ${dims.D}, odd. Use the f32 KV cache (kvFormat 'f32', --kv f32).`,
      { issues: [`head_dim ${dims.D} is odd`] },
    );
}

export class KvPages<X> {
  /** Per layer: K store (capacity · PAGE, Hkv, D). Replaced on growth: read it at each step. */
  readonly k: X[] = [];
  /** Per layer: V store, as k. */
  readonly v: X[] = [];
  /** Pages the stores hold. */
  capacity: number;
  /** Times the stores grew (for tests and stats). */
  growths = 0;
  /** What the stores hold (KvPagesOptions.kvFormat). */
  readonly kvFormat: KvFormat;
  private readonly refs: number[] = [];
  /** Free page ids; popped from the end (lowest ids first). */
  private freeList: number[] = [];

  constructor(
    readonly ops: Ops<X>,
    readonly dims: KvDims,
    opts: KvPagesOptions = {},
  ) {
    this.kvFormat = opts.kvFormat ?? 'f32';
    checkKvFormat(dims, this.kvFormat);
    this.capacity = Math.max(1, opts.initialPages ?? 16);
    for (let l = 0; l < dims.layers; l++) {
      this.k.push(ops.kvStore([this.capacity * PAGE, dims.Hkv, dims.D], this.kvFormat));
      this.v.push(ops.kvStore([this.capacity * PAGE, dims.Hkv, dims.D], this.kvFormat));
    }
    for (let p = 0; p < this.capacity; p++) this.refs.push(0);
    this.freeList = Array.from({ length: this.capacity }, (_, i) => this.capacity - 1 - i);
  }

  /**
   * Bytes the stores take at kvFormat's size: the GPU's buffers (the CPU backend holds f16 stores
   * widened to f32, twice this).
   */
  get bytes(): number {
    return this.capacity * PAGE * kvBytesPerToken(this.dims, this.kvFormat);
  }

  /** Pages held by at least one sequence. */
  get usedPages(): number {
    return this.capacity - this.freeList.length;
  }

  /** Reference count of a page (tests). */
  refCount(page: number): number {
    return this.refs[page] ?? 0;
  }

  newSeq(): KvSeq {
    return { pages: [], length: 0, tokens: [] };
  }

  /** A new sequence holding the first `len` tokens of `src` (its pages shared, nothing copied yet). */
  fork(src: KvSeq, len: number): KvSeq {
    this.check(src);
    if (len < 0 || len > src.length) throw new RangeError(`fork: ${len} tokens of a sequence of ${src.length}`);
    const pages = src.pages.slice(0, Math.ceil(len / PAGE));
    for (const p of pages) this.refs[p]!++;
    return { pages, length: len, tokens: src.tokens.slice(0, len) };
  }

  /** Drop a sequence: each of its pages loses a reference (free at zero). */
  release(seq: KvSeq): void {
    if (seq.released) return;
    for (const p of seq.pages) this.unref(p);
    seq.pages = [];
    seq.released = true;
  }

  /**
   * Make room for a step (each item's ids written after its seq's tokens: pages allocated, a shared
   * partly filled last page copied) and describe it. Call commit() once the step's forward ran.
   */
  prepare(items: StepItem[]): PagedBatch {
    const seen = new Set<KvSeq>();
    let n = 0;
    for (const it of items) {
      this.check(it.seq);
      if (seen.has(it.seq)) throw new RangeError('prepare: a sequence appears twice in one step');
      if (it.ids.length === 0) throw new RangeError('prepare: an item has no new tokens');
      seen.add(it.seq);
      this.reserve(it.seq, it.seq.length + it.ids.length);
      n += it.ids.length;
    }
    const maxPages = Math.max(1, ...items.map((it) => it.seq.pages.length));
    const b: PagedBatch = {
      pageSize: PAGE,
      maxPages,
      pos: new Uint32Array(n),
      dest: new Uint32Array(n),
      seq: new Uint32Array(n),
      pages: new Uint32Array(items.length * maxPages),
    };
    let r = 0;
    items.forEach((it, s) => {
      b.pages.set(it.seq.pages, s * maxPages);
      for (let j = 0; j < it.ids.length; j++, r++) {
        const pos = it.seq.length + j;
        b.pos[r] = pos;
        b.dest[r] = it.seq.pages[Math.floor(pos / PAGE)]! * PAGE + (pos % PAGE);
        b.seq[r] = s;
      }
    });
    return b;
  }

  /**
   * Pages for `n` more tokens of seq, allocated now (the stores grow now if they must): several
   * decode steps recorded before one read-back (batch.ts, stepsPerReadback) need no growth between them.
   */
  reserveAhead(seq: KvSeq, n: number): void {
    this.check(seq);
    this.reserve(seq, seq.length + n);
  }

  /**
   * Roll seq back to its first `len` tokens: rows written past them (decode steps whose ids were
   * discarded) no longer count, and pages wholly past them are given back. The next write starts
   * at row `len` again, so what those rows held is never read.
   */
  truncate(seq: KvSeq, len: number): void {
    this.check(seq);
    if (!(Number.isInteger(len) && len >= 0 && len <= seq.length))
      throw new RangeError(`truncate: ${len} tokens of a sequence of ${seq.length}`);
    seq.length = len;
    seq.tokens.length = len;
    for (const p of seq.pages.splice(Math.ceil(len / PAGE))) this.unref(p);
  }

  /** After the step's forward: the items' ids are now stored. */
  commit(items: StepItem[]): void {
    for (const it of items) {
      it.seq.length += it.ids.length;
      for (const id of it.ids) it.seq.tokens.push(id);
    }
  }

  /** Give the stores back. */
  dispose(): void {
    this.ops.free(...this.k, ...this.v);
    this.k.length = 0;
    this.v.length = 0;
  }

  private check(seq: KvSeq): void {
    if (seq.released) throw new Error('kv pages: the sequence was released; start a new one with newSeq()');
  }

  /** Pages for `len` tokens, and the last page held alone if the next write goes into it. */
  private reserve(seq: KvSeq, len: number): void {
    const fill = seq.length % PAGE;
    if (fill > 0) {
      const i = seq.pages.length - 1;
      const old = seq.pages[i]!;
      if (this.refs[old]! > 1) {
        const page = this.alloc();
        for (let l = 0; l < this.dims.layers; l++) {
          this.ops.copyRows(this.k[l]!, old * PAGE, this.k[l]!, page * PAGE, fill);
          this.ops.copyRows(this.v[l]!, old * PAGE, this.v[l]!, page * PAGE, fill);
        }
        this.unref(old);
        seq.pages[i] = page;
      }
    }
    while (seq.pages.length * PAGE < len) seq.pages.push(this.alloc());
  }

  private alloc(): number {
    if (this.freeList.length === 0) this.grow();
    const p = this.freeList.pop()!;
    this.refs[p] = 1;
    return p;
  }

  private unref(p: number): void {
    if (--this.refs[p]! === 0) this.freeList.push(p);
  }

  /** Double the stores: new stores, the old rows copied, the old stores freed. */
  private grow(): void {
    const old = this.capacity;
    const cap = old * 2;
    const { Hkv, D } = this.dims;
    const bytes = (cap * PAGE * kvBytesPerToken({ layers: 1, Hkv, D }, this.kvFormat)) / 2; // one store
    if (bytes > this.ops.maxTensorBytes)
      throw new GpuError(
        `The KV cache is full: ${old * PAGE} rows per layer, and doubling needs ${(bytes / 2 ** 20).toFixed(0)} MiB ` +
          `per store, above this device's ${(this.ops.maxTensorBytes / 2 ** 20).toFixed(0)} MiB per buffer. ` +
          "Run fewer chats at once (the loop's concurrency) or shorter conversations" +
          (this.kvFormat === 'f32' ? ", or halve the cache with the f16 KV format (kvFormat 'f16', --kv f16)." : '.'),
        { code: 'kv-cache-full' },
      );
    for (let l = 0; l < this.dims.layers; l++) {
      for (const s of [this.k, this.v]) {
        const next = this.ops.kvStore([cap * PAGE, Hkv, D], this.kvFormat);
        this.ops.copyRows(s[l]!, 0, next, 0, old * PAGE);
        this.ops.free(s[l]!);
        s[l] = next;
      }
    }
    for (let p = old; p < cap; p++) this.refs.push(0);
    for (let p = cap - 1; p >= old; p--) this.freeList.push(p);
    this.capacity = cap;
    this.growths++;
  }
}
