/**
 * The operations the model is written against, with two backends: `CpuOps` (the
 * kernels' plain-TypeScript CPU references, for `--device cpu` and as the test
 * oracle) and `GpuOps` (the WGSL kernels, recorded on an Engine and submitted once
 * per step). The model (model.ts) never knows which one it runs on.
 * Shapes are row-major; linear weights are stored (out, in) as in PyTorch.
 */
import type { Engine, Tensor } from './runtime.ts';
import { numel } from './runtime.ts';
import { attention, attentionBackward, attentionBackwardCpu, attentionCpu } from '../kernels/attention.ts';
import { add, addCpu, addInPlace, addInPlaceCpu, placeColumns, scale, scaleCpu } from '../kernels/elementwise.ts';
import { embedding, embeddingCpu } from '../kernels/embedding.ts';
import { matmul, matmulCpu } from '../kernels/matmul.ts';
import { gluMatvec, matvec, matvecFused, MATVEC_MAX_ROWS } from '../kernels/matvec.ts';
import { nll, nllBackward, nllBackwardCpu, nllCpu } from '../kernels/nll.ts';
import { rmsnorm, rmsnormBackward, rmsnormBackwardCpu, rmsnormCpu } from '../kernels/rmsnorm.ts';
import { rope, ropeBackward, ropeBackwardCpu, ropeCpu } from '../kernels/rope.ts';
import { swiglu, swigluBackward, swigluBackwardCpu, swigluCpu } from '../kernels/swiglu.ts';
import { adamw, adamwCpu, type AdamWOptions } from '../kernels/adamw.ts';
import { sumSquares, sumSquaresCpu } from '../kernels/reduce.ts';
import { readIds, sample, sampleCpu } from '../kernels/sample.ts';
import { grpoWeights, grpoWeightsCpu, type GrpoWeightOptions } from '../kernels/grpo_weights.ts';
import type { SampleOptions } from '../model/sample.ts';
import { packWeight, quantiseLike, type WeightFormat } from '../io/pack.ts';
import { embeddingPacked } from '../kernels/embedding_packed.ts';
import { matmulPacked } from '../kernels/matmul_packed.ts';
import { matvecPacked } from '../kernels/matvec_packed.ts';
import { isPacked, uploadPacked } from '../kernels/packed_weight.ts';
import { isSoftwareAdapter } from './device.ts';
import type { PagedBatch } from '../kernels/attention_paged.ts';
import { ropeAppend, ropeAppendCpu } from '../kernels/rope_append.ts';
import { attentionPaged, attentionPagedCpu, packPagedIndex } from '../kernels/attention_paged.ts';

export interface NllBackwardOpts {
  /** Scalar factor on the gradient (e.g. 1/T when logits were divided by a temperature T). Default 1. */
  upstream?: number;
  /** GPU: write the gradient over `logits` and return it (the CPU returns a new tensor either way). */
  inPlace?: boolean;
}

export interface MatOpts {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
}

export interface Ops<X> {
  readonly device: 'cpu' | 'gpu';
  /** Largest tensor the backend can bind, in bytes (GPU: the device's buffer limits). */
  readonly maxTensorBytes: number;
  upload(shape: number[], data: Float32Array): X;
  /**
   * A frozen base weight (rows, cols) — a linear layer's (out, in) or the embedding table — stored
   * in `format` (io/pack.ts). It may only be used as `table` of embedding() and as `b` of
   * matmul/matmulAcc without transA. GPU: packed words; CPU: the dequantised values in f32.
   */
  uploadWeight(shape: [number, number], data: Float32Array, format: WeightFormat): X;
  /** Bytes a tensor holds on the backend (GPU: its buffer; CPU: its f32 data). */
  bytes(x: X): number;
  zeros(shape: number[]): X;
  read(x: X): Promise<Float32Array>;
  shape(x: X): number[];
  /** Same data, another shape (same element count). */
  view(x: X, shape: number[]): X;
  /** Rows [start, start + n) of a (R, C) tensor, as (n, C) (a copy on the GPU). */
  rows(x: X, start: number, n: number): X;
  embedding(table: X, ids: number[]): X;
  /**
   * KV-cache storage: x (T, ...) written after the first `len` rows of `store` (undefined for the
   * first append). Returns storage holding at least len + T rows, to be viewed as (len + T, ...);
   * `store` is consumed (it may be the returned tensor). CPU: a new concatenated array; GPU: a
   * buffer with spare rows that grows by doubling, so a decode step is a single copy.
   */
  appendRows(store: X | undefined, len: number, x: X): X;
  /**
   * Rows [srcRow, srcRow + n) of src (R, ...) copied into dst (R', ...) at row dstRow, in place (the
   * paged KV cache's growth and copy-on-write, kv_pages.ts). src may be dst if the ranges do not overlap.
   */
  copyRows(src: X, srcRow: number, dst: X, dstRow: number, n: number): void;
  matmul(a: X, b: X, o?: MatOpts): X;
  /** out += alpha · op(a) · op(b) */
  matmulAcc(out: X, a: X, b: X, o?: MatOpts): void;
  /** (R, C) + bias (C,) broadcast over rows. */
  addBias(x: X, bias: X): X;
  add(a: X, b: X): X;
  /** a += s · b */
  addInPlace(a: X, b: X, s?: number): void;
  scale(a: X, s: number): X;
  rmsnorm(x: X, w: X, eps: number): X;
  rmsnormBackward(x: X, w: X, dy: X, eps: number): X;
  rope(x: X, freqs: X, pos0: number): X;
  ropeBackward(dy: X, freqs: X, pos0: number): X;
  attention(q: X, k: X, v: X): { out: X; lse: X };
  attentionBackward(q: X, k: X, v: X, out: X, lse: X, dout: X): { dq: X; dk: X; dv: X };
  swiglu(g: X, u: X): X;
  swigluBackward(g: X, u: X, dout: X): { dgate: X; dup: X };
  /** Per-token weighted NLL −w·log p(target), the log-probs and each row's log-sum-exp. logits (T, V). */
  nll(logits: X, targets: number[], weights: Float32Array): { loss: X; logprobs: X; lse: X };
  /**
   * d(Σ loss)/d(logits) = upstream·w·(softmax − onehot), using the forward's lse; weights from the
   * host or a (T,) tensor. `inPlace` (GPU): the gradient overwrites `logits` (returned; no second (T, V)).
   */
  nllBackward(logits: X, targets: number[], weights: Float32Array | X, lse: X, o?: NllBackwardOpts): X;
  /** GRPO weights and per-token loss terms from log π (kernels/grpo_weights.ts), on the backend. */
  grpoWeights(logp: X, info: X, base: X | undefined, o: GrpoWeightOptions): { w: X; stats: X };
  /** Σ x² over several tensors (read back: the clip scale needs it on the host). */
  sumSquares(xs: X[]): Promise<number>;
  /** In-place AdamW step on param with grad (scaled by opts.gradScale) and state m, v. */
  adamw(param: X, grad: X, m: X, v: X, opts: AdamWOptions): void;
  /**
   * One id per row of logits (B, V) by the rule of sample.ts, with u[r] the row's uniform in [0, 1)
   * (unused when greedy). GPU: sampled on the device; only the B ids are read back.
   */
  sample(logits: X, o: SampleOptions, u: number[]): Promise<number[]>;
  // --- multi-step decode: sampled ids stay on the backend and feed the next step ---
  /** A (n,) tensor for ids written by sampleInto (GPU: u32 words). */
  idTensor(n: number): X;
  /**
   * Rows for `count` ids read from `offset` of an id tensor (see embedding()); `table` holds the
   * vocabulary rows from `base` on (a shard): other ids give zero rows.
   */
  embeddingAt(table: X, ids: X, offset: number, count: number, base?: number): X;
  /**
   * As sample() for one row of logits (1, V), with the uniform rand[randOffset], writing the id to
   * out[outOffset] on the backend (nothing read back; a later embeddingAt may read it).
   */
  sampleInto(logits: X, o: SampleOptions, rand: X, randOffset: number, out: X, outOffset: number): void;
  /** The ids of an id tensor (one read-back); NonFiniteLogitsError where a row was NaN/Inf. */
  readIdTensor(ids: X): Promise<number[]>;
  // --- batched decoding (issue 12): a fused QKV / gate-up path and a paged KV cache (kv_pages.ts) ---
  /**
   * y (N, Σ nᵢ) = [x·W₀ᵀ + b₀ | x·W₁ᵀ + b₁ | …] for weights Wᵢ (nᵢ, K) (packed allowed) and optional
   * biases bᵢ (nᵢ,): one dispatch for a decode step's q, k, v. Column blocks in the order given.
   */
  linearFused(x: X, ws: X[], biases: (X | undefined)[]): X;
  /** s (N, F) = silu(x·Wgᵀ) ⊙ (x·Wuᵀ): gate, up and SwiGLU in one dispatch on a decode step. */
  gluLinear(x: X, wg: X, wu: X): X;
  /**
   * From qkv (N, (Hq + 2·Hkv)·D) in the column order of linearFused([q, k, v]): per-head RMSNorm of
   * q and k when qNorm/kNorm (D,) are given (Qwen3), RoPE at positions b.pos, then the rotated k and
   * v written to row b.dest[n] of kStore/vStore (rows, Hkv, D). Returns the rotated q (N, Hq, D).
   */
  ropeAppend(
    qkv: X,
    freqs: X,
    kStore: X,
    vStore: X,
    b: PagedBatch,
    o: { Hq: number; Hkv: number; qNorm?: X; kNorm?: X; eps?: number },
  ): X;
  /** Causal attention of q (N, Hq, D) against each row's sequence in the paged stores (kv_pages.ts). */
  attentionPaged(q: X, kStore: X, vStore: X, b: PagedBatch): X;
  /** Release temporaries (GPU: back to the pool after the next submit). */
  free(...xs: X[]): void;
  /** Submit recorded work (GPU); a no-op on the CPU. */
  flush(): void;
  /** GPU: destroy pooled buffers of at least `minBytes` no longer in use (Engine.trim); a no-op on the CPU. */
  trim(minBytes?: number): void;
}

// --- CPU --------------------------------------------------------------------------------------

export interface CpuTensor {
  data: Float32Array;
  shape: number[];
}

export class CpuOps implements Ops<CpuTensor> {
  readonly device = 'cpu' as const;
  /** A Float32Array of up to 2³¹ − 1 elements. */
  readonly maxTensorBytes = (2 ** 31 - 1) * 4;
  upload(shape: number[], data: Float32Array): CpuTensor {
    if (data.length !== numel(shape))
      throw new RangeError(`upload: ${data.length} values for shape ${JSON.stringify(shape)}`);
    return { data, shape: [...shape] };
  }
  /** Dequantised at load: the same values as the packed kernels' CPU references multiply. */
  uploadWeight(shape: [number, number], data: Float32Array, format: WeightFormat): CpuTensor {
    return this.upload(shape, quantiseLike(data, shape[0], shape[1], format));
  }
  bytes(x: CpuTensor): number {
    return x.data.byteLength;
  }
  zeros(shape: number[]): CpuTensor {
    return { data: new Float32Array(numel(shape)), shape: [...shape] };
  }
  async read(x: CpuTensor): Promise<Float32Array> {
    return x.data;
  }
  shape(x: CpuTensor): number[] {
    return x.shape;
  }
  view(x: CpuTensor, shape: number[]): CpuTensor {
    if (numel(shape) !== x.data.length)
      throw new RangeError(`view: ${JSON.stringify(x.shape)} → ${JSON.stringify(shape)}`);
    return { data: x.data, shape };
  }
  rows(x: CpuTensor, start: number, n: number): CpuTensor {
    const c = x.data.length / x.shape[0]!;
    return { data: x.data.slice(start * c, (start + n) * c), shape: [n, ...x.shape.slice(1)] };
  }
  embedding(table: CpuTensor, ids: number[]): CpuTensor {
    const c = table.shape[1]!;
    return { data: embeddingCpu(table.data, table.shape[0]!, c, Uint32Array.from(ids)), shape: [ids.length, c] };
  }
  appendRows(store: CpuTensor | undefined, len: number, x: CpuTensor): CpuTensor {
    const row = x.data.length / x.shape[0]!;
    const data = new Float32Array((len + x.shape[0]!) * row);
    if (store) data.set(store.data.subarray(0, len * row));
    data.set(x.data, len * row);
    return { data, shape: [len + x.shape[0]!, ...x.shape.slice(1)] };
  }
  copyRows(src: CpuTensor, srcRow: number, dst: CpuTensor, dstRow: number, n: number): void {
    const c = src.data.length / src.shape[0]!;
    if (dst.data.length / dst.shape[0]! !== c) throw new RangeError('copyRows: src and dst rows differ in size');
    dst.data.set(src.data.subarray(srcRow * c, (srcRow + n) * c), dstRow * c);
  }
  private mm(a: CpuTensor, b: CpuTensor, o: MatOpts, acc?: Float32Array): CpuTensor {
    const m = o.transA ? a.shape[1]! : a.shape[0]!;
    const n = o.transB ? b.shape[0]! : b.shape[1]!;
    const data = matmulCpu(a.data, a.shape, b.data, b.shape, {
      transA: o.transA,
      transB: o.transB,
      alpha: o.alpha,
      accumulate: acc,
    });
    return { data, shape: [m, n] };
  }
  matmul(a: CpuTensor, b: CpuTensor, o: MatOpts = {}): CpuTensor {
    return this.mm(a, b, o);
  }
  matmulAcc(out: CpuTensor, a: CpuTensor, b: CpuTensor, o: MatOpts = {}): void {
    out.data.set(this.mm(a, b, o, out.data).data);
  }
  addBias(x: CpuTensor, bias: CpuTensor): CpuTensor {
    const c = bias.data.length;
    const out = x.data.slice();
    for (let i = 0; i < out.length; i++) out[i]! += bias.data[i % c]!;
    return { data: out, shape: x.shape };
  }
  add(a: CpuTensor, b: CpuTensor): CpuTensor {
    return { data: addCpu(a.data, b.data), shape: a.shape };
  }
  addInPlace(a: CpuTensor, b: CpuTensor, s = 1): void {
    a.data.set(addInPlaceCpu(a.data, b.data, s));
  }
  scale(a: CpuTensor, s: number): CpuTensor {
    return { data: scaleCpu(a.data, s), shape: a.shape };
  }
  rmsnorm(x: CpuTensor, w: CpuTensor, eps: number): CpuTensor {
    return { data: rmsnormCpu(x.data, w.data, eps), shape: x.shape };
  }
  rmsnormBackward(x: CpuTensor, w: CpuTensor, dy: CpuTensor, eps: number): CpuTensor {
    return { data: rmsnormBackwardCpu(x.data, w.data, dy.data, eps).dx, shape: x.shape };
  }
  rope(x: CpuTensor, freqs: CpuTensor, pos0: number): CpuTensor {
    return { data: ropeCpu(x.data, x.shape, freqs.data, pos0), shape: x.shape };
  }
  ropeBackward(dy: CpuTensor, freqs: CpuTensor, pos0: number): CpuTensor {
    return { data: ropeBackwardCpu(dy.data, dy.shape, freqs.data, pos0), shape: dy.shape };
  }
  private dims(q: CpuTensor, k: CpuTensor) {
    return { T: q.shape[0]!, S: k.shape[0]!, Hq: q.shape[1]!, Hkv: k.shape[1]!, D: q.shape[2]! };
  }
  attention(q: CpuTensor, k: CpuTensor, v: CpuTensor) {
    const d = this.dims(q, k);
    const r = attentionCpu(q.data, k.data, v.data, d);
    return { out: { data: r.out, shape: q.shape }, lse: { data: r.lse, shape: [d.Hq, d.T] } };
  }
  attentionBackward(q: CpuTensor, k: CpuTensor, v: CpuTensor, _out: CpuTensor, _lse: CpuTensor, dout: CpuTensor) {
    const r = attentionBackwardCpu(q.data, k.data, v.data, dout.data, this.dims(q, k));
    return {
      dq: { data: r.dq, shape: q.shape },
      dk: { data: r.dk, shape: k.shape },
      dv: { data: r.dv, shape: v.shape },
    };
  }
  swiglu(g: CpuTensor, u: CpuTensor): CpuTensor {
    return { data: swigluCpu(g.data, u.data), shape: g.shape };
  }
  swigluBackward(g: CpuTensor, u: CpuTensor, dout: CpuTensor) {
    const r = swigluBackwardCpu(g.data, u.data, dout.data);
    return { dgate: { data: r.dgate, shape: g.shape }, dup: { data: r.dup, shape: u.shape } };
  }
  nll(logits: CpuTensor, targets: number[], weights: Float32Array) {
    const [t, v] = logits.shape as [number, number];
    const r = nllCpu(logits.data, Uint32Array.from(targets), weights, v);
    return {
      loss: { data: r.loss, shape: [t] },
      logprobs: { data: r.logp, shape: [t] },
      lse: { data: r.lse, shape: [t] },
    };
  }
  nllBackward(
    logits: CpuTensor,
    targets: number[],
    weights: Float32Array | CpuTensor,
    _lse: CpuTensor,
    o: NllBackwardOpts = {},
  ): CpuTensor {
    const v = logits.shape[1]!;
    const w = weights instanceof Float32Array ? weights : weights.data;
    return {
      data: nllBackwardCpu(logits.data, Uint32Array.from(targets), w, v, o.upstream ?? 1),
      shape: logits.shape,
    };
  }
  grpoWeights(logp: CpuTensor, info: CpuTensor, base: CpuTensor | undefined, o: GrpoWeightOptions) {
    const r = grpoWeightsCpu(logp.data, info.data, base?.data, o);
    return { w: { data: r.w, shape: [r.w.length] }, stats: { data: r.stats, shape: [r.w.length, 4] } };
  }
  async sumSquares(xs: CpuTensor[]): Promise<number> {
    return sumSquaresCpu(xs.map((x) => x.data));
  }
  adamw(param: CpuTensor, grad: CpuTensor, m: CpuTensor, v: CpuTensor, opts: AdamWOptions): void {
    adamwCpu(param.data, grad.data, m.data, v.data, opts);
  }
  async sample(logits: CpuTensor, o: SampleOptions, u: number[]): Promise<number[]> {
    return sampleCpu(logits.data, logits.shape[logits.shape.length - 1]!, o, u);
  }
  idTensor(n: number): CpuTensor {
    return this.zeros([n]);
  }
  embeddingAt(table: CpuTensor, ids: CpuTensor, offset: number, count: number, base = 0): CpuTensor {
    const rows = table.shape[0]!;
    const local = Array.from(ids.data.subarray(offset, offset + count), (id) =>
      id >= base && id < base + rows ? id - base : rows,
    );
    return this.embedding(table, local);
  }
  sampleInto(
    logits: CpuTensor,
    o: SampleOptions,
    rand: CpuTensor,
    randOffset: number,
    out: CpuTensor,
    outOffset: number,
  ): void {
    out.data[outOffset] = sampleCpu(logits.data, logits.shape[logits.shape.length - 1]!, o, [
      rand.data[randOffset]!,
    ])[0]!;
  }
  async readIdTensor(ids: CpuTensor): Promise<number[]> {
    return Array.from(ids.data);
  }
  linearFused(x: CpuTensor, ws: CpuTensor[], biases: (CpuTensor | undefined)[]): CpuTensor {
    const n = x.shape[0]!;
    const parts = ws.map((w, i) => {
      const y = this.matmul(x, w, { transB: true });
      const b = biases[i];
      return b ? this.addBias(y, b) : y;
    });
    const width = parts.reduce((a, p) => a + p.shape[1]!, 0);
    const data = new Float32Array(n * width);
    for (let r = 0; r < n; r++) {
      let off = r * width;
      for (const p of parts) {
        const c = p.shape[1]!;
        data.set(p.data.subarray(r * c, (r + 1) * c), off);
        off += c;
      }
    }
    return { data, shape: [n, width] };
  }
  gluLinear(x: CpuTensor, wg: CpuTensor, wu: CpuTensor): CpuTensor {
    return this.swiglu(this.matmul(x, wg, { transB: true }), this.matmul(x, wu, { transB: true }));
  }
  ropeAppend(
    qkv: CpuTensor,
    freqs: CpuTensor,
    kStore: CpuTensor,
    vStore: CpuTensor,
    b: PagedBatch,
    o: { Hq: number; Hkv: number; qNorm?: CpuTensor; kNorm?: CpuTensor; eps?: number },
  ): CpuTensor {
    const N = qkv.shape[0]!;
    const D = 2 * freqs.data.length;
    const dims = { N, Hq: o.Hq, Hkv: o.Hkv, D };
    const norm = { qNorm: o.qNorm?.data, kNorm: o.kNorm?.data, eps: o.eps };
    const q = ropeAppendCpu(qkv.data, freqs.data, kStore.data, vStore.data, b, dims, norm);
    return { data: q, shape: [N, o.Hq, D] };
  }
  attentionPaged(q: CpuTensor, kStore: CpuTensor, vStore: CpuTensor, b: PagedBatch): CpuTensor {
    const [N, Hq, D] = q.shape as [number, number, number];
    const dims = { N, Hq, Hkv: kStore.shape[1]!, D };
    return { data: attentionPagedCpu(q.data, kStore.data, vStore.data, b, dims), shape: [N, Hq, D] };
  }
  free(): void {}
  flush(): void {}
  trim(): void {}
}

// --- GPU --------------------------------------------------------------------------------------

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
   * matmul. 16 on a GPU (a batch-16 decode step still reads each weight once). 8 on a software
   * adapter: there matvec's time grows with the rows (SwiftShader, 4096×576: 64 ms at 1 row, 250 at
   * 8, 420 at 16) while the tiled matmul's stays near 220 ms up to 16, so past 8 rows tiles win.
   */
  get matvecRows(): number {
    return isSoftwareAdapter(this.e.ctx.report) ? 8 : MATVEC_MAX_ROWS;
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
    // WebGPU forbids a buffer-to-buffer copy within one buffer: go through a temporary
    const tmp = this.rows(src, srcRow, n);
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
    return matmulPacked(this.e, a, b, { transB: o.transB, alpha: o.alpha, ...acc });
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
  rope(x: Tensor, freqs: Tensor, pos0: number): Tensor {
    return rope(this.e, x, freqs, pos0);
  }
  ropeBackward(dy: Tensor, freqs: Tensor, pos0: number): Tensor {
    return ropeBackward(this.e, dy, freqs, pos0);
  }
  attention(q: Tensor, k: Tensor, v: Tensor) {
    return attention(this.e, q, k, v);
  }
  attentionBackward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor) {
    return attentionBackward(this.e, q, k, v, out, lse, dout);
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
    sample(this.e, this.view(logits, [1, v]), o, [], { rand, randOffset, out, outOffset });
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
