/**
 * The GPU backend of Ops (ops_interface.ts): the WGSL kernels, recorded on an Engine and
 * submitted once per step. Its CPU twin (cpu_ops.ts) is the test oracle.
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { numel } from '../runtime/runtime.ts';
import type { MatOpts, NllBackwardOpts, Ops } from './ops_interface.ts';
import { adamw, type AdamWOptions } from '../kernels/adamw.ts';
import { attention, attentionBackward } from '../kernels/attention.ts';
import { attentionPaged, packPagedIndex, type KvFormat, type PagedBatch } from '../kernels/attention_paged.ts';
import { add, addInPlace, placeColumns, scale } from '../kernels/elementwise.ts';
import { embedding } from '../kernels/embedding.ts';
import { embeddingPacked } from '../kernels/embedding_packed.ts';
import { grpoWeights, type GrpoWeightOptions } from '../kernels/grpo_weights.ts';
import { matmul } from '../kernels/matmul.ts';
import { matmulPacked } from '../kernels/matmul_packed.ts';
import { gluMatvec, matvec, matvecFused, MATVEC_MAX_ROWS } from '../kernels/matvec.ts';
import { matvecPacked } from '../kernels/matvec_packed.ts';
import { nll, nllBackward } from '../kernels/nll.ts';
import { isPacked, uploadPacked } from '../kernels/packed_weight.ts';
import { sumSquares } from '../kernels/reduce.ts';
import { rmsnorm, rmsnormBackward } from '../kernels/rmsnorm.ts';
import { rope, ropeBackward } from '../kernels/rope.ts';
import { ropeAppend } from '../kernels/rope_append.ts';
import { segmentBounds } from '../kernels/segments.ts';
import { readIds, sample } from '../kernels/sample.ts';
import { swiglu, swigluBackward } from '../kernels/swiglu.ts';
import { packWeight, type WeightFormat } from '../io/pack.ts';
import type { SampleOptions } from '../kernels/sample_cpu.ts';

/** A PagedBatch uploaded as one u32 tensor, with the offsets of its arrays (GpuOps.batchIndex). */
interface PagedIndex {
  batch: PagedBatch;
  tensor: Tensor;
  /** e.submits at the upload: a flush since then means a new step, so the batch is uploaded again. */
  submits: number;
  posOff: number;
  destOff: number;
  seqOff: number;
  pagesOff: number;
}

/** Smallest KV-cache allocation in rows (a short prompt plus some decode steps before the first growth). */
const KV_MIN_ROWS = 64;

export class GpuOps implements Ops<Tensor> {
  readonly device = 'gpu' as const;
  /** The last PagedBatch's uploaded index tensor and the e.submits it was uploaded at (batchIndex). */
  private pagedIndex: PagedIndex | undefined;
  constructor(readonly e: Engine) {}

  /**
   * Most rows a product sends to the matvec kernels (fused q|k|v, gate-up) rather than the tiled
   * matmul: MATVEC_MAX_ROWS, so a batch-16 decode step still reads each weight once. Software
   * adapters too: at 16 rows matvec (vec4 weight loads) beats the tiled matmul on every decode
   * product there (SwiftShader, 16 rows: 4096×576 534 vs 833 ms, gate-up 1536×576 233 vs 565 ms).
   */
  get matvecRows(): number {
    return MATVEC_MAX_ROWS;
  }

  get maxTensorBytes(): number {
    const l = this.e.ctx.report.limits;
    return Math.min(l.maxStorageBufferBindingSize, l.maxBufferSize);
  }

  upload(shape: number[], data: Float32Array): Tensor {
    return this.e.tensor(shape, data);
  }
  uploadWeight(shape: [number, number], data: Float32Array, format: WeightFormat): Tensor {
    if (format === 'f32') return this.upload(shape, data);
    return uploadPacked(this.e, packWeight(data, shape[0], shape[1], format));
  }
  bytes(x: Tensor): number {
    return x.buffer.size;
  }
  zeros(shape: number[]): Tensor {
    return this.e.zeros(shape);
  }
  read(x: Tensor): Promise<Float32Array> {
    return this.e.read(x);
  }
  shape(x: Tensor): number[] {
    return x.shape;
  }
  view(x: Tensor, shape: number[]): Tensor {
    const size = numel(shape);
    if (size > x.buffer.size / 4) throw new RangeError(`view: ${JSON.stringify(shape)} does not fit the buffer`);
    return { ...x, shape: [...shape], size };
  }
  rows(x: Tensor, start: number, n: number): Tensor {
    const c = x.size / x.shape[0]!;
    const out = this.e.tensor([n, ...x.shape.slice(1)]);
    this.e.copy(x, start * c, out, 0, n * c);
    return out;
  }
  embedding(table: Tensor, ids: number[]): Tensor {
    const idt = this.e.tensor([ids.length], Uint32Array.from(ids));
    const out = isPacked(table) ? embeddingPacked(this.e, table, idt) : embedding(this.e, table, idt);
    this.e.release(idt);
    return out;
  }
  appendRows(store: Tensor | undefined, len: number, x: Tensor): Tensor {
    const rows = x.shape[0]!;
    const row = x.size / rows;
    const capacity = (t: Tensor | undefined) => (t ? t.buffer.size / (4 * row) : 0);
    let out = store;
    if (!store || capacity(store) < len + rows) {
      // at least 64 rows, then doubling: O(log n) re-copies of the cache over a generation
      const cap = Math.max(len + rows, 2 * capacity(store), KV_MIN_ROWS);
      out = this.e.zeros([cap, ...x.shape.slice(1)]);
      if (store) {
        this.e.copy(store, 0, out, 0, len * row);
        this.e.release(store);
      }
    }
    this.e.copy(x, 0, out!, len * row, rows * row);
    return out!;
  }
  copyRows(src: Tensor, srcRow: number, dst: Tensor, dstRow: number, n: number): void {
    const c = src.size / src.shape[0]!;
    if (dst.size / dst.shape[0]! !== c) throw new RangeError('copyRows: src and dst rows differ in size');
    if (src.buffer !== dst.buffer) return this.e.copy(src, srcRow * c, dst, dstRow * c, n * c);
    // WebGPU forbids a buffer-to-buffer copy within one buffer: go through a temporary (of src's
    // dtype: copy() counts bytes by the source's, so an f16 KV store's rows stay 2 bytes a value)
    const tmp = this.e.tensor([n, ...src.shape.slice(1)], undefined, src.dtype);
    this.e.copy(src, srcRow * c, tmp, 0, n * c);
    this.e.copy(tmp, 0, dst, dstRow * c, n * c);
    this.e.release(tmp);
  }
  /** Few rows against a transposed weight (a decode step) go to matvec; the rest to the tiled matmul. */
  private useMatvec(a: Tensor, b: Tensor, o: MatOpts): boolean {
    return (
      !o.transA && Boolean(o.transB) && a.shape.length === 2 && a.shape[0]! <= this.matvecRows && b.shape.length === 2
    );
  }
  /** A packed base weight as b: decode rows go to matvec_packed, the rest (and dx = dy·W) to matmul_packed. */
  private packedMatmul(a: Tensor, b: Tensor, o: MatOpts, out?: Tensor): Tensor | null {
    if (!isPacked(b)) return null;
    if (o.transA || isPacked(a)) throw new RangeError('matmul: a packed weight is only supported as B, without transA');
    const acc = out ? { out, accumulate: true } : {};
    if (this.useMatvec(a, b, o)) return matvecPacked(this.e, a, b, { alpha: o.alpha, ...acc });
    return matmulPacked(this.e, a, b, { transB: o.transB, alpha: o.alpha, splitK: o.splitK, ...acc });
  }
  matmul(a: Tensor, b: Tensor, o: MatOpts = {}): Tensor {
    const p = this.packedMatmul(a, b, o);
    if (p) return p;
    if (this.useMatvec(a, b, o)) return matvec(this.e, a, b, { alpha: o.alpha });
    return matmul(this.e, a, b, o);
  }
  matmulAcc(out: Tensor, a: Tensor, b: Tensor, o: MatOpts = {}): void {
    if (this.packedMatmul(a, b, o, out)) return;
    if (this.useMatvec(a, b, o)) matvec(this.e, a, b, { alpha: o.alpha, out, accumulate: true });
    else matmul(this.e, a, b, { ...o, out, accumulate: true });
  }
  /** (R, C) + bias (C,) broadcast over rows: the place-columns kernel over the whole width. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    return placeColumns(this.e, this.e.tensor(x.shape), 0, x, bias); // one dispatch: out = x + bias per row
  }
  add(a: Tensor, b: Tensor): Tensor {
    return add(this.e, a, b);
  }
  addInPlace(a: Tensor, b: Tensor, s = 1): void {
    addInPlace(this.e, a, b, s);
  }
  scale(a: Tensor, s: number): Tensor {
    return scale(this.e, a, s);
  }
  rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
    return rmsnorm(this.e, x, w, eps);
  }
  rmsnormBackward(x: Tensor, w: Tensor, dy: Tensor, eps: number): Tensor {
    return rmsnormBackward(this.e, x, w, dy, eps).dx;
  }
  /** The bounds as u32 words (the tensor's dtype label is f32; only the segment kernels read it). */
  segments(lengths: number[]): Tensor {
    const b = segmentBounds(lengths);
    return this.e.tensor([b.length / 2, 2], b);
  }
  rope(x: Tensor, freqs: Tensor, pos0: number, seg?: Tensor): Tensor {
    return rope(this.e, x, freqs, pos0, seg);
  }
  ropeBackward(dy: Tensor, freqs: Tensor, pos0: number, seg?: Tensor): Tensor {
    return ropeBackward(this.e, dy, freqs, pos0, seg);
  }
  attention(q: Tensor, k: Tensor, v: Tensor, seg?: Tensor) {
    return attention(this.e, q, k, v, seg);
  }
  attentionBackward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor, seg?: Tensor) {
    return attentionBackward(this.e, q, k, v, out, lse, dout, seg);
  }
  swiglu(g: Tensor, u: Tensor): Tensor {
    return swiglu(this.e, g, u);
  }
  swigluBackward(g: Tensor, u: Tensor, dout: Tensor) {
    return swigluBackward(this.e, g, u, dout);
  }
  nll(logits: Tensor, targets: number[], weights: Float32Array) {
    const t = this.e.tensor([targets.length], Uint32Array.from(targets));
    const w = this.e.tensor([weights.length], weights);
    const r = nll(this.e, logits, t, w);
    this.e.release(t);
    this.e.release(w);
    return { loss: r.loss, logprobs: r.logp, lse: r.lse };
  }
  nllBackward(
    logits: Tensor,
    targets: number[],
    weights: Float32Array | Tensor,
    lse: Tensor,
    o: NllBackwardOpts = {},
  ): Tensor {
    const t = this.e.tensor([targets.length], Uint32Array.from(targets));
    const w = weights instanceof Float32Array ? this.e.tensor([weights.length], weights) : weights;
    const d = nllBackward(this.e, logits, t, w, lse, o.upstream ?? 1, { inPlace: o.inPlace });
    this.e.release(t);
    if (w !== weights) this.e.release(w);
    return d;
  }
  grpoWeights(logp: Tensor, info: Tensor, base: Tensor | undefined, o: GrpoWeightOptions) {
    return grpoWeights(this.e, logp, info, base, o);
  }
  async sumSquares(xs: Tensor[]): Promise<number> {
    const t = sumSquares(this.e, xs);
    const v = (await this.e.read(t))[0]!;
    this.e.release(t);
    return v;
  }
  adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, opts: AdamWOptions): void {
    adamw(this.e, param, grad, m, v, opts);
  }
  sample(logits: Tensor, o: SampleOptions, u: number[]): Promise<number[]> {
    const v = logits.shape[logits.shape.length - 1]!;
    return readIds(this.e, sample(this.e, this.view(logits, [logits.size / v, v]), o, u));
  }
  idTensor(n: number): Tensor {
    return this.e.tensor([n]);
  }
  embeddingAt(table: Tensor, ids: Tensor, offset: number, count: number, base = 0): Tensor {
    const at = { offset, count, base };
    return isPacked(table) ? embeddingPacked(this.e, table, ids, at) : embedding(this.e, table, ids, at);
  }
  sampleInto(logits: Tensor, o: SampleOptions, rand: Tensor, randOffset: number, out: Tensor, outOffset: number): void {
    const v = logits.shape[logits.shape.length - 1]!;
    sample(this.e, this.view(logits, [logits.size / v, v]), o, [], { rand, randOffset, out, outOffset });
  }
  readIdTensor(ids: Tensor): Promise<number[]> {
    return readIds(this.e, ids);
  }
  /** Rows of x against (N, K) weights: fused kernels up to matvecRows rows. */
  private fusable(x: Tensor, ws: Tensor[]): boolean {
    const k = ws[0]!.shape[1]!;
    return x.shape[x.shape.length - 1] === k && x.size / k <= this.matvecRows;
  }
  /**
   * Up to matvecRows rows and ≤ 3 weights: one matvecFused dispatch (columns bit-identical to
   * matmul + addBias per weight). More rows: a product per weight, copied into the column blocks.
   */
  linearFused(x: Tensor, ws: Tensor[], biases: (Tensor | undefined)[]): Tensor {
    if (ws.length <= 3 && this.fusable(x, ws)) return matvecFused(this.e, x, ws, biases);
    // more rows (a prefill chunk): one tiled product per weight, each placed (+ its bias) into its
    // column block by one dispatch — not a copy per row, which would end a compute pass each
    const n = x.shape[0]!;
    const parts = ws.map((w) => this.matmul(x, w, { transB: true }));
    const width = parts.reduce((a, p) => a + p.shape[1]!, 0);
    const out = this.e.tensor([n, width]);
    let off = 0;
    parts.forEach((p, i) => {
      placeColumns(this.e, out, off, p, biases[i]);
      off += p.shape[1]!;
      this.e.release(p);
    });
    return out;
  }
  /** Up to matvecRows rows: one gluMatvec dispatch; more: two products and swiglu. */
  gluLinear(x: Tensor, wg: Tensor, wu: Tensor): Tensor {
    if (this.fusable(x, [wg])) return gluMatvec(this.e, x, wg, wu);
    const g = this.matmul(x, wg, { transB: true });
    const u = this.matmul(x, wu, { transB: true });
    const s = this.swiglu(g, u);
    this.e.release(g);
    this.e.release(u);
    return s;
  }
  /**
   * The step's PagedBatch as one u32 tensor [pos (N) | dest (N) | seq (N) | pages (numSeq·maxPages)],
   * uploaded on the first of the 2 × layers calls that use it and reused until the engine flushes
   * (a PagedBatch must not change between flushes once used; after a flush it is uploaded again).
   * The tensor stays live while it may be read: the engine recycles a released buffer within the
   * step (runtime.ts), so it is released only when the next index replaces it, after its last read.
   */
  private batchIndex(b: PagedBatch): PagedIndex {
    const cur = this.pagedIndex;
    if (cur && cur.batch === b && cur.submits === this.e.submits) return cur;
    const { data, ...offsets } = packPagedIndex(b);
    if (cur) this.e.release(cur.tensor);
    const tensor = this.e.tensor([data.length], data);
    this.pagedIndex = { batch: b, tensor, submits: this.e.submits, ...offsets };
    return this.pagedIndex;
  }
  ropeAppend(
    qkv: Tensor,
    freqs: Tensor,
    kStore: Tensor,
    vStore: Tensor,
    b: PagedBatch,
    o: { Hq: number; Hkv: number; qNorm?: Tensor; kNorm?: Tensor; eps?: number },
  ): Tensor {
    return ropeAppend(this.e, qkv, freqs, kStore, vStore, b, this.batchIndex(b), o);
  }
  attentionPaged(q: Tensor, kStore: Tensor, vStore: Tensor, b: PagedBatch): Tensor {
    return attentionPaged(this.e, q, kStore, vStore, b, this.batchIndex(b));
  }
  kvStore(shape: [number, number, number], format: KvFormat): Tensor {
    return this.e.zeros(shape, format); // an 'f16' tensor: 2 bytes a value, bound as u32 words by the kernels
  }
  free(...xs: Tensor[]): void {
    for (const x of xs) this.e.release(x);
  }
  flush(): void {
    this.e.flush();
  }
  trim(minBytes?: number): void {
    this.e.trim(minBytes);
  }
}
