/**
 * The Lab's fast path for tiny models: the same model, sampler and GRPO step as the engine's CPU
 * references (LocalChatModel on CpuOps with its paged KV cache, and LoraTrainer), written for a
 * model of a few thousand parameters, where the references' generality is the whole cost:
 *
 *   - contiguous KV per sequence (Float32Array rows, no per-element page lookups), grown by doubling;
 *   - attention's exponentials computed once per key (the paged reference recomputes them per output
 *     channel) and every matmul a plain loop over Float32Arrays, no tensor objects per op, reading
 *     Wᵀ (and the adapter's Aᵀ, Bᵀ, made once per adapter version) so eight outputs share a pass;
 *   - where WebAssembly SIMD is there (tiny_kernels.ts), a turn's attention and every projection of
 *     decoding and of the GRPO step run there instead, each lane the loop's own sums in its order;
 *   - layer 0's q, k and v depend on the token id alone: computed once per id and adapter version;
 *   - a prefix cache: a prompt starts from the longest cached sequence that shares its tokens (the
 *     template and the level's intro are prefilled once for all plays of a level, and each turn of an
 *     episode extends that episode's own sequence), dropped when the adapter changes;
 *   - many sequences per call (`step`), each row seeing only its own sequence;
 *   - the LM head, the sampler, the log-probs and the training NLL over the allowed ids only: the
 *     references give every other id the logit −1e9, whose exp is exactly 0, so the sums are the same.
 *
 * Same numbers, not close ones: every product and sum is taken in the references' order, in f64,
 * and rounded to f32 where the references store an f32 tensor, so the sampled ids, their log-probs,
 * the losses, the gradients and the adapter after AdamW equal the references' bit for bit
 * (tests/unit/tiny_lm.test.ts compares them; `spade bench lab` runs both paths on the same settings).
 * What it does not do: top-k/top-p/min-p sampling, q/k-norm (Qwen3), biases (Qwen2), checkpointing
 * and the KL-to-base term — the Lab's tiny Llama models use none of them (the constructor and
 * the trainer refuse them with a RangeError).
 *
 * This file holds the model (its weights, the adapter's derived arrays, the sequences) and the
 * decoding forward (`step`, `logits`); tiny_math.ts and tiny_attention.ts its loops, tiny_train.ts
 * the GRPO step (a training forward, the backward, AdamW), tiny_chat.ts the ChatModel.
 */
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames, type ModelConfig } from '../io/config.ts';
import { loraKey, LORA_MODULES, type LoraModule } from '../io/peft.ts';
import type { TensorStore } from '../io/safetensors.ts';
import { ropeFrequencies } from '../kernels/rope.ts';
import type { LoraParams } from '../model/model.ts';
import type { CpuTensor } from '../ops/cpu_ops.ts';
import { attendRow, attendRow16 } from './tiny_attention.ts';
import { TinyKernels, type KernelLora } from './tiny_kernels.ts';
import { f32, mapModules, mmNN, ropeRow, rmsnorm, sigmoid, transpose } from './tiny_math.ts';

/**
 * The reference model as the fast path meets it (a LlamaModel on the CPU references is one): its
 * config, its device, and its adapter — the CPU tensors the trainer updates in place, which
 * adapterChanged() announces, and the version that tells TinyLm to remake what it derived from them.
 */
export interface TinyBase {
  readonly cfg: ModelConfig;
  readonly ops: { readonly device: string };
  readonly adapterVersion: number;
  readonly lora: LoraParams<CpuTensor> | null;
  adapterChanged(): void;
}

/** One layer's base weights, and each projection's Wᵀ (nIn, nOut) for the forward (and its offset in the kernels' memory). */
interface LayerW {
  inNorm: Float32Array;
  postNorm: Float32Array;
  w: Record<LoraModule, Float32Array>;
  wt: Record<LoraModule, Float32Array>;
  /** Wᵀ (t) and W (n) in the kernels' memory (byte offsets), or null without kernels. */
  wk: Record<LoraModule, { t: number; n: number }> | null;
}

/**
 * The adapter as the forward reads it: the LlamaModel's own arrays (the trainer updates them in
 * place) and, for one adapterVersion, their transposes Aᵀ (nIn, r) and Bᵀ (r, nOut).
 */
export interface Lora {
  r: number;
  scale: number;
  A: Record<LoraModule, Float32Array>[];
  B: Record<LoraModule, Float32Array>[];
  At: Record<LoraModule, Float32Array>[];
  Bt: Record<LoraModule, Float32Array>[];
  /** The adapter in the kernels' memory, as Aᵀ, Bᵀ and (for the backward) A, B (null: no kernels, or a rank they do not take). */
  k: Record<LoraModule, KernelLora>[] | null;
}

/** A sequence's contiguous KV cache and its tokens. */
export interface TinySeq {
  tokens: number[];
  /** Rows allocated. */
  cap: number;
  /** Per layer: (cap, Hkv·D) rotated keys and values. */
  k: Float32Array[];
  v: Float32Array[];
}

/**
 * Rows of one sequence in a step from which its attention runs on the WebAssembly kernel: a turn's
 * new tokens (~30 in the Lab) are; a lone decoded token is not worth copying the sequence's keys.
 */
const KERNEL_ROWS = 4;

/** Rows a sequence starts with (it doubles as needed). */
const SEQ_ROWS = 256;
/**
 * Sequences kept for reuse after release (TinyChat's prefix cache gives back what it drops): more
 * than its 64, since an adapter change drops them all at once (at 16, fresh zeroed arrays were 3.7%
 * of a fast Lab cycle; docs/benchmarks.md).
 */
const SPARE_SEQS = 80;

/** step()'s scratch (grown, never shrunk; every value is written before it is read). */
interface StepScratch {
  rows: number;
  r: number;
  h: Float32Array;
  a: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  qr: Float32Array;
  att: Float32Array;
  g: Float32Array;
  u: Float32Array;
  s: Float32Array;
  xa: Float32Array;
  pos: Int32Array;
  ids: Int32Array;
  last: Int32Array;
  /** Each row's item's row count. */
  len: Int32Array;
  e: Float64Array;
}

/** A row of step() as the items give it: the sequence it extends and the new ids. */
interface StepItem {
  seq: TinySeq;
  ids: number[];
}

export class TinyLm {
  readonly cfg: ModelConfig;
  readonly C: number;
  readonly F: number;
  readonly Hq: number;
  readonly Hkv: number;
  readonly D: number;
  readonly kvd: number;
  readonly qd: number;
  readonly eps: number;
  private readonly freqs: Float32Array;
  readonly embed: Float32Array;
  readonly head: Float32Array;
  readonly norm: Float32Array;
  readonly layers: LayerW[] = [];

  /** Attention and projections on WebAssembly SIMD (null: the loops alone). */
  readonly kernel: TinyKernels | null;

  /** `o.wasm` false: attention and projections in the JavaScript loops only (the kernels give the same values; tests compare). */
  constructor(
    readonly llm: TinyBase,
    weights: TensorStore,
    o: { wasm?: boolean } = {},
  ) {
    const c = (this.cfg = llm.cfg);
    if (c.qkNorm || c.qkvBias || c.oBias)
      throw new RangeError('TinyLm: the fast path has no q/k-norm and no biases (a Llama-shaped tiny model only)');
    if (llm.ops.device !== 'cpu') throw new RangeError('TinyLm: the fast path shares the CPU model’s adapter arrays');
    this.kernel = o.wasm === false ? null : TinyKernels.create();
    this.C = c.hiddenSize;
    this.F = c.intermediateSize;
    this.Hq = c.numHeads;
    this.Hkv = c.numKvHeads;
    this.D = c.headDim;
    this.kvd = this.Hkv * this.D;
    this.qd = this.Hq * this.D;
    this.eps = c.rmsNormEps;
    this.freqs = ropeFrequencies({ headDim: c.headDim, theta: c.ropeTheta, scaling: c.ropeScaling });
    this.embed = weights.f32(EMBED_TOKENS);
    this.head = c.tieWordEmbeddings ? this.embed : weights.f32(LM_HEAD);
    this.norm = weights.f32(FINAL_NORM);
    for (let i = 0; i < c.numLayers; i++) {
      const n = layerTensorNames(c, i);
      const w: Record<LoraModule, Float32Array> = {
        q_proj: weights.f32(n.q),
        k_proj: weights.f32(n.k),
        v_proj: weights.f32(n.v),
        o_proj: weights.f32(n.o),
        gate_proj: weights.f32(n.gate),
        up_proj: weights.f32(n.up),
        down_proj: weights.f32(n.down),
      };
      const wt = mapModules((m) => transpose(w[m], ...this.shape(m)));
      const kernel = this.kernel;
      const wk = kernel
        ? (Object.fromEntries(
            LORA_MODULES.map((m) => [m, { t: kernel.put(`Wt${i}.${m}`, wt[m]), n: kernel.put(`W${i}.${m}`, w[m]) }]),
          ) as Record<LoraModule, { t: number; n: number }>)
        : null;
      this.layers.push({ inNorm: weights.f32(n.inputNorm), postNorm: weights.f32(n.postAttentionNorm), w, wt, wk });
    }
  }

  /** A projection's (nOut, nIn). */
  private shape(m: LoraModule): [number, number] {
    const { C, F, qd, kvd } = this;
    switch (m) {
      case 'q_proj':
        return [qd, C];
      case 'k_proj':
      case 'v_proj':
        return [kvd, C];
      case 'o_proj':
        return [C, qd];
      case 'gate_proj':
      case 'up_proj':
        return [F, C];
      case 'down_proj':
        return [C, F];
    }
  }

  /** cos and sin of RoPE's angles f32(f32(pos)·freq) per position (rotateCpu's values), grown on demand. */
  private cos = new Float64Array(0);
  private sin = new Float64Array(0);
  trig(pos: number): [Float64Array, Float64Array] {
    const half = this.D / 2;
    const have = this.cos.length / half;
    if (pos >= have) {
      const rows = Math.max(2 * have, pos + 1, 256);
      const cos = new Float64Array(rows * half);
      const sin = new Float64Array(rows * half);
      cos.set(this.cos);
      sin.set(this.sin);
      for (let p = have; p < rows; p++)
        for (let i = 0; i < half; i++) {
          const ang = f32(f32(p) * this.freqs[i]!);
          cos[p * half + i] = Math.cos(ang);
          sin[p * half + i] = Math.sin(ang);
        }
      this.cos = cos;
      this.sin = sin;
    }
    return [this.cos, this.sin];
  }

  /** What was derived from the adapter, for `version` (the LlamaModel's adapterVersion). */
  private derived: { version: number; lora: Lora | null; l0: (Float32Array | undefined)[] } | null = null;

  /** The adapter's arrays and their transposes (initLora/setLora replace them; a step changes them: adapterVersion). */
  lora(): Lora | null {
    return this.current().lora;
  }

  private current() {
    const version = this.llm.adapterVersion;
    if (this.derived?.version === version) return this.derived;
    const l = this.llm.lora;
    let lora: Lora | null = null;
    if (l) {
      if (LORA_MODULES.some((m) => !l.targets.includes(m)))
        throw new RangeError('TinyLm: the fast path expects LoRA on all seven projections');
      const side = (i: number, s: 'A' | 'B') =>
        Object.fromEntries(LORA_MODULES.map((m) => [m, l.w.get(loraKey(i, m, s))!.data])) as Record<
          LoraModule,
          Float32Array
        >;
      const A = this.layers.map((_, i) => side(i, 'A'));
      const B = this.layers.map((_, i) => side(i, 'B'));
      const r = l.r;
      const At = A.map((x) => mapModules((m) => transpose(x[m], r, this.shape(m)[1])));
      const Bt = B.map((x) => mapModules((m) => transpose(x[m], this.shape(m)[0], r)));
      const kernel = r % 8 === 0 ? this.kernel : null;
      const k = kernel
        ? At.map(
            (_, i) =>
              Object.fromEntries(
                LORA_MODULES.map((m) => [
                  m,
                  {
                    At: kernel.put(`At${i}.${m}`, At[i]![m]),
                    Bt: kernel.put(`Bt${i}.${m}`, Bt[i]![m]),
                    A: kernel.put(`A${i}.${m}`, A[i]![m]),
                    B: kernel.put(`B${i}.${m}`, B[i]![m]),
                    r,
                    scale: l.scale,
                  },
                ]),
              ) as Record<LoraModule, KernelLora>,
          )
        : null;
      lora = { r, scale: l.scale, A, B, At, Bt, k };
    }
    return (this.derived = { version, lora, l0: [] });
  }

  newSeq(): TinySeq {
    return this.alloc(SEQ_ROWS);
  }

  /** Sequences given back (release), reused by alloc without zeroing: a row is written before it is read. */
  private readonly spare: TinySeq[] = [];

  /** Give back a sequence no one will read again (its arrays are reused). */
  release(seq: TinySeq): void {
    if (this.spare.length < SPARE_SEQS) this.spare.push(seq);
  }

  private alloc(cap: number): TinySeq {
    for (let i = this.spare.length - 1; i >= 0; i--) {
      const s = this.spare[i]!;
      if (s.cap < cap) continue;
      this.spare.splice(i, 1);
      s.tokens = [];
      return s;
    }
    const n = cap * this.kvd;
    return {
      tokens: [],
      cap,
      k: this.layers.map(() => new Float32Array(n)),
      v: this.layers.map(() => new Float32Array(n)),
    };
  }

  /** A new sequence holding the first `n` tokens (and their KV rows) of `src`. */
  fork(src: TinySeq, n: number): TinySeq {
    const out = this.alloc(Math.max(SEQ_ROWS, src.cap));
    out.tokens = src.tokens.slice(0, n);
    for (let i = 0; i < this.layers.length; i++) {
      out.k[i]!.set(src.k[i]!.subarray(0, n * this.kvd));
      out.v[i]!.set(src.v[i]!.subarray(0, n * this.kvd));
    }
    return out;
  }

  private reserve(seq: TinySeq, rows: number): void {
    if (rows <= seq.cap) return;
    let cap = seq.cap;
    while (cap < rows) cap *= 2;
    for (let i = 0; i < this.layers.length; i++) {
      const k = new Float32Array(cap * this.kvd);
      k.set(seq.k[i]!);
      seq.k[i] = k;
      const v = new Float32Array(cap * this.kvd);
      v.set(seq.v[i]!);
      seq.v[i] = v;
    }
    seq.cap = cap;
  }

  private work: StepScratch | null = null;

  /** step()'s scratch for N rows (grown, never shrunk; every value is written before it is read). */
  private scratch(N: number, r: number): StepScratch {
    const have = this.work;
    if (have && have.rows >= N && have.r >= r) return have;
    const rows = Math.max(N, 2 * (have?.rows ?? 0), 64);
    const { C, F, qd, kvd } = this;
    this.work = {
      rows,
      r,
      h: new Float32Array(rows * C),
      a: new Float32Array(rows * C),
      q: new Float32Array(rows * qd),
      k: new Float32Array(rows * kvd),
      v: new Float32Array(rows * kvd),
      qr: new Float32Array(rows * qd),
      att: new Float32Array(rows * qd),
      g: new Float32Array(rows * F),
      u: new Float32Array(rows * F),
      s: new Float32Array(rows * F),
      xa: new Float32Array(rows * Math.max(1, r)),
      pos: new Int32Array(rows),
      ids: new Int32Array(rows),
      last: new Int32Array(rows),
      len: new Int32Array(rows),
      e: have?.e ?? new Float64Array(256),
    };
    return this.work;
  }

  /** Layer 0's q, k and v of token `id` before rope, (qd + 2·kvd): they depend on the id alone. */
  private layer0(id: number, lora: Lora | null): Float32Array {
    const { C, qd, kvd, eps } = this;
    const a = new Float32Array(C);
    rmsnorm(this.embed.subarray(id * C, (id + 1) * C), this.layers[0]!.inNorm, a, 1, C, eps);
    const out = new Float32Array(qd + 2 * kvd);
    const xa = new Float32Array(Math.max(1, lora?.r ?? 0));
    this.linear(a, 1, 0, 'q_proj', out.subarray(0, qd), false, lora, xa);
    this.linear(a, 1, 0, 'k_proj', out.subarray(qd, qd + kvd), false, lora, xa);
    this.linear(a, 1, 0, 'v_proj', out.subarray(qd + kvd), false, lora, xa);
    return out;
  }

  /**
   * out (M, nOut) = x·Wᵀ (with `acc`, added to out as the reference adds the residual), then the
   * adapter's delta out = f32(scale·(x·Aᵀ)·Bᵀ + out), as LlamaModel adds it; xa: (M, r) scratch.
   */
  private linear(
    x: Float32Array,
    M: number,
    li: number,
    m: LoraModule,
    out: Float32Array,
    acc: boolean,
    lora: Lora | null,
    xa: Float32Array,
  ) {
    const [nOut, nIn] = this.shape(m);
    const wk = this.layers[li]!.wk;
    if (wk && nOut % 8 === 0 && (!lora || lora.k)) {
      this.kernel!.linear(x, M, nIn, nOut, out, acc, wk[m].t, lora ? lora.k![li]![m] : null);
      return;
    }
    mmNN(x, this.layers[li]!.wt[m], out, M, nOut, nIn, acc);
    if (!lora) return;
    mmNN(x, lora.At[li]![m], xa, M, lora.r, nIn);
    mmNN(xa, lora.Bt[li]![m], out, M, nOut, lora.r, true, lora.scale);
  }

  /**
   * Run each item's new ids after its sequence's tokens (LlamaModel.step's arithmetic: every row
   * sees only its own sequence) and return the final-norm output of each item's last row, (items, C).
   */
  step(items: StepItem[]): Float32Array {
    const { C, eps } = this;
    let N = 0;
    for (const it of items) N += it.ids.length;
    const cur = this.current();
    const lora = cur.lora;
    const w = this.scratch(N, lora?.r ?? 0);
    const rowSeq = this.rowsOf(items, w);
    // The last layer's attention, o-projection and MLP only matter for the rows whose logits are
    // read (each item's last row): the other rows need only their k and v there. Skipping them
    // changes no value that is used (the reference computes and drops them).
    const nItems = items.length;
    const lastRows = w.last;
    let end = 0;
    for (let i = 0; i < nItems; i++) lastRows[i] = (end += items[i]!.ids.length) - 1;
    for (let li = 0; li < this.layers.length; li++) {
      const top = li === this.layers.length - 1;
      // the rows that attend here (the top layer: the read rows only)
      const nq = top ? nItems : N;
      const qRow = (i: number) => (top ? lastRows[i]! : i);
      if (li === 0) this.layer0Rows(N, nq, qRow, rowSeq, w, cur.l0, lora);
      else this.qkvRows(li, N, nq, top, qRow, rowSeq, w, lora);
      this.attendRows(li, items, top, nq, qRow, rowSeq, w);
      if (top) {
        // compact the read rows to the front, then run the rest of the layer on them alone
        for (let i = 0; i < nItems; i++) {
          const row = lastRows[i]!;
          w.h.copyWithin(i * C, row * C, (row + 1) * C);
          w.att.copyWithin(i * this.qd, row * this.qd, (row + 1) * this.qd);
        }
      }
      this.outputRows(li, nq, w, lora);
    }
    for (const it of items) for (const id of it.ids) it.seq.tokens.push(id);
    // each item's last row (now rows 0..items − 1) through the final norm
    const out = new Float32Array(nItems * C);
    rmsnorm(w.h, this.norm, out, nItems, C, eps);
    return out;
  }

  /**
   * step()'s rows, every item's new ids in order: each row's position, id and item's row count into
   * the scratch (pos, ids, len) and its embedding into h; RoPE's angles grown to the last position.
   * Returns each row's sequence (grown to hold its new rows).
   */
  private rowsOf(items: StepItem[], w: StepScratch): TinySeq[] {
    const C = this.C;
    const { h, pos: rowPos, ids: rowId, len: blockLen } = w;
    const rowSeq: TinySeq[] = [];
    let n = 0;
    let maxPos = 0;
    for (const it of items) {
      const at = it.seq.tokens.length;
      this.reserve(it.seq, at + it.ids.length);
      for (let j = 0; j < it.ids.length; j++) {
        const id = it.ids[j]!;
        if (!(Number.isInteger(id) && id >= 0 && id < this.cfg.vocabSize))
          throw new RangeError(`TinyLm: token id ${id} is not in the vocabulary`);
        rowSeq.push(it.seq);
        rowPos[n] = at + j;
        rowId[n] = id;
        blockLen[n] = it.ids.length;
        for (let c = 0, src = id * C, dst = n * C; c < C; c++) h[dst + c] = this.embed[src + c]!;
        n++;
      }
      maxPos = Math.max(maxPos, at + it.ids.length - 1);
    }
    this.trig(maxPos);
    return rowSeq;
  }

  /** ropeRow at position `pos` with the angles trig() last grew. */
  private rope(x: Float32Array, xo: number, dst: Float32Array, dOff: number, pos: number) {
    const half = this.D / 2;
    ropeRow(x, xo, dst, dOff, this.cos, this.sin, pos * half, half);
  }

  /**
   * Layer 0's q, k and v are a function of the token id: computed once per id and adapter version
   * (`l0`), then rotated — k and v into each row's sequence, q into qr for the rows that attend.
   */
  private layer0Rows(
    N: number,
    nq: number,
    qRow: (i: number) => number,
    rowSeq: TinySeq[],
    w: StepScratch,
    l0: (Float32Array | undefined)[],
    lora: Lora | null,
  ) {
    const { Hq, Hkv, D, kvd, qd } = this;
    const { pos: rowPos, ids: rowId, qr } = w;
    for (let row = 0; row < N; row++) {
      const id = rowId[row]!;
      const x = (l0[id] ??= this.layer0(id, lora));
      const pos = rowPos[row]!;
      const ks = rowSeq[row]!.k[0]!;
      const vs = rowSeq[row]!.v[0]!;
      for (let hh = 0; hh < Hkv; hh++) {
        const so = (pos * Hkv + hh) * D;
        this.rope(x, qd + hh * D, ks, so, pos);
        for (let i = 0; i < D; i++) vs[so + i] = x[qd + kvd + hh * D + i]!;
      }
    }
    for (let i = 0; i < nq; i++) {
      const row = qRow(i);
      const x = l0[rowId[row]!]!;
      for (let hh = 0; hh < Hq; hh++) this.rope(x, hh * D, qr, (row * Hq + hh) * D, rowPos[row]!);
    }
  }

  /**
   * A layer above 0: its input norm, k and v for every row and q for the rows that attend (the top
   * layer: the read rows, compacted to the front of `a`), rotated — k and v into each row's sequence
   * (ropeAppendCpu), q into qr.
   */
  private qkvRows(
    li: number,
    N: number,
    nq: number,
    top: boolean,
    qRow: (i: number) => number,
    rowSeq: TinySeq[],
    w: StepScratch,
    lora: Lora | null,
  ) {
    const { C, Hq, Hkv, D, eps } = this;
    const { h, a, q, k, v, qr, xa, pos: rowPos, last: lastRows } = w;
    rmsnorm(h, this.layers[li]!.inNorm, a, N, C, eps);
    this.linear(a, N, li, 'k_proj', k, false, lora, xa);
    this.linear(a, N, li, 'v_proj', v, false, lora, xa);
    if (top) for (let i = 0; i < nq; i++) a.copyWithin(i * C, lastRows[i]! * C, (lastRows[i]! + 1) * C);
    this.linear(a, nq, li, 'q_proj', q, false, lora, xa);
    for (let i = 0; i < nq; i++)
      for (let hh = 0; hh < Hq; hh++) this.rope(q, (i * Hq + hh) * D, qr, (qRow(i) * Hq + hh) * D, rowPos[qRow(i)]!);
    for (let row = 0; row < N; row++) {
      const pos = rowPos[row]!;
      const ks = rowSeq[row]!.k[li]!;
      const vs = rowSeq[row]!.v[li]!;
      for (let hh = 0; hh < Hkv; hh++) {
        const so = (pos * Hkv + hh) * D;
        this.rope(k, (row * Hkv + hh) * D, ks, so, pos);
        for (let i = 0; i < D; i++) vs[so + i] = v[(row * Hkv + hh) * D + i]!;
      }
    }
  }

  /**
   * Attention of each row that attends over its sequence's keys 0..pos (attentionPagedCpu's sums)
   * into att; below the top, an item's rows are a block of consecutive positions: on WebAssembly
   * when it is worth the copy.
   */
  private attendRows(
    li: number,
    items: StepItem[],
    top: boolean,
    nq: number,
    qRow: (i: number) => number,
    rowSeq: TinySeq[],
    w: StepScratch,
  ) {
    const { Hq, Hkv, D } = this;
    const { qr, att, pos: rowPos, len: blockLen } = w;
    const sc = 1 / Math.sqrt(D);
    let e = w.e;
    let done = 0;
    if (!top && D === 16 && this.kernel) {
      let row0 = 0;
      for (const it of items) {
        const len = it.ids.length;
        if (len >= KERNEL_ROWS)
          this.kernel.attendBlock(qr, it.seq.k[li]!, it.seq.v[li]!, att, row0, len, rowPos[row0]!, Hq, Hkv, sc);
        row0 += len;
      }
      done = KERNEL_ROWS;
    }
    for (let i = 0; i < nq; i++) {
      const row = qRow(i);
      if (done && blockLen[row]! >= done) continue;
      const nKeys = rowPos[row]! + 1;
      const seq = rowSeq[row]!;
      if (e.length < nKeys) e = w.e = new Float64Array(2 * nKeys);
      if (D === 16) attendRow16(qr, seq.k[li]!, seq.v[li]!, att, row, nKeys, Hq, Hkv, sc, e, this.kernel);
      else attendRow(qr, seq.k[li]!, seq.v[li]!, att, row, nKeys, Hq, Hkv, D, sc, e);
    }
  }

  /** The rest of a layer on its first M rows: the o-projection (added to h), the post norm and the MLP (added to h). */
  private outputRows(li: number, M: number, w: StepScratch, lora: Lora | null) {
    const { C, F, eps } = this;
    const { h, a, att, g, u, s, xa } = w;
    this.linear(att, M, li, 'o_proj', h, true, lora, xa);
    rmsnorm(h, this.layers[li]!.postNorm, a, M, C, eps);
    this.linear(a, M, li, 'gate_proj', g, false, lora, xa);
    this.linear(a, M, li, 'up_proj', u, false, lora, xa);
    if (this.kernel) this.kernel.swiglu(g, u, s, M * F);
    else for (let i = 0; i < M * F; i++) s[i] = g[i]! * sigmoid(g[i]!) * u[i]!;
    this.linear(s, M, li, 'down_proj', h, true, lora, xa);
  }

  /** The LM head's logits of the ids `ids` (ascending) for one final-norm row: f32, as headLogits. */
  logits(hn: Float32Array, ids: readonly number[]): Float32Array {
    const C = this.C;
    const out = new Float32Array(ids.length);
    ids.forEach((id, j) => {
      let s = 0;
      for (let p = 0; p < C; p++) s += hn[p]! * this.head[id * C + p]!;
      out[j] = s;
    });
    return out;
  }
}
