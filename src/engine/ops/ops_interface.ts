/**
 * The contract of the operations the model is written against (ops.ts re-exports it with both
 * backends: cpu_ops.ts and gpu_ops.ts implement it). Shapes are row-major; linear weights are
 * stored (out, in) as in PyTorch.
 */
import type { AdamWOptions } from '../kernels/adamw.ts';
import type { KvFormat, PagedBatch } from '../kernels/attention_paged.ts';
import type { GrpoWeightOptions } from '../kernels/grpo_weights.ts';
import type { WeightFormat } from '../io/pack.ts';
import type { SampleOptions } from '../kernels/sample_cpu.ts';

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
  /**
   * GPU: split the K loop into this many slices (kernels/matmul.ts), or 'auto' to choose from the
   * shape (for few output tiles and a long K, as the LM-head backward). The CPU ignores it.
   */
  splitK?: number | 'auto';
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
  /**
   * The segment bounds of a sequence packed from sequences of `lengths` (kernels/segments.ts), for
   * `seg` of rope and attention: each segment is then rotated and attended as if run alone.
   */
  segments(lengths: number[]): X;
  rope(x: X, freqs: X, pos0: number, seg?: X): X;
  ropeBackward(dy: X, freqs: X, pos0: number, seg?: X): X;
  /** Causal attention (kernels/attention.ts); with `seg` (segments()), within each segment only (S = T). */
  attention(q: X, k: X, v: X, seg?: X): { out: X; lse: X };
  attentionBackward(q: X, k: X, v: X, out: X, lse: X, dout: X, seg?: X): { dq: X; dk: X; dv: X };
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
   * As sample() for rows of logits (n, V), row i with the uniform rand[randOffset + i], writing its
   * id to out[outOffset + i] on the backend (nothing read back; a later embeddingAt may read it).
   */
  sampleInto(logits: X, o: SampleOptions, rand: X, randOffset: number, out: X, outOffset: number): void;
  /** The ids of an id tensor (one read-back); NonFiniteLogitsError where a row was NaN/Inf. */
  readIdTensor(ids: X): Promise<number[]>;
  // --- batched decoding: a fused QKV / gate-up path and a paged KV cache (kv_pages.ts) ---
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
  /**
   * A zero-filled paged K or V store (rows, Hkv, D) holding `format` (kv_pages.ts; D even for f16):
   * ropeAppend and attentionPaged read the format from the store. GPU: an 'f16' tensor is f16 pairs
   * in u32 words (half the bytes); CPU: f32 values, rounded to f16 as ropeAppend writes them.
   */
  kvStore(shape: [number, number, number], format: KvFormat): X;
  /** Release temporaries (GPU: back to the pool after the next submit). */
  free(...xs: X[]): void;
  /** Submit recorded work (GPU); a no-op on the CPU. */
  flush(): void;
  /** GPU: destroy pooled buffers of at least `minBytes` no longer in use (Engine.trim); a no-op on the CPU. */
  trim(minBytes?: number): void;
}
