/**
 * A Llama-family decoder (SmolLM2 / Llama-3.2 / Qwen2.5 / Qwen3) with LoRA, written
 * once against `Ops` (ops.ts) so it runs on the GPU kernels or on their CPU
 * references (`--device cpu`). Forward with a KV cache (prefill, then decode),
 * teacher-forced per-token log-probs, and the backward pass for LoRA adapters
 * only: the frozen base gets input gradients, never weight gradients.
 *
 * Per layer (T new tokens, C hidden, Hq/Hkv heads of D):
 *   a = rmsnorm(h)                    (T, C)
 *   q, k, v = a·Wqᵀ, a·Wkᵀ, a·Wvᵀ       (T, Hq·D), (T, Hkv·D) (+ biases: Qwen2)
 *   q, k = rmsnorm per head            (Qwen3)
 *   q, k = rope(q, k, positions)
 *   o = attention(q, [cache; k], [cache; v])
 *   h = h + o·Woᵀ
 *   m = rmsnorm(h); h = h + (silu(m·Wgᵀ) ⊙ m·Wuᵀ)·Wdᵀ
 * logits = rmsnorm(h)·Wlmᵀ            (tied: Wlm = embedding table)
 * A LoRA target y = x·Wᵀ becomes y = x·Wᵀ + (α/r)·(x·Aᵀ)·Bᵀ with A (r, in), B (out, r).
 * The frozen base (linear weights, embedding table / LM head) is held in `opts.weights`
 * (f32 | bf16 | f16 | q4, io/pack.ts); norms, biases and the LoRA path stay f32.
 */
import type { ModelConfig } from '../io/config.ts';
import { layerTensorNames } from '../io/config.ts';
import { loraKey, loraScaling, type LoraAdapter, type LoraModule } from '../io/peft.ts';
import type { TensorStore } from '../io/safetensors.ts';
import { packedWords, Q4_GROUP, type WeightFormat } from '../io/pack.ts';
import { ropeFrequencies } from '../kernels/rope.ts';
import type { Ops } from '../ops/ops.ts';
import type { KvPages, StepItem } from './kv_pages.ts';
import { createRng } from '../../core/rng.ts';
import { GpuError, ModelLoadError } from '../../core/errors.ts';

interface LayerWeights<X> {
  inputNorm: X;
  postNorm: X;
  lin: Record<LoraModule, X>;
  bias: Partial<Record<'q_proj' | 'k_proj' | 'v_proj' | 'o_proj', X>>;
  qNorm?: X;
  kNorm?: X;
}

export interface LoraParams<X> {
  r: number;
  alpha: number;
  scale: number;
  targets: LoraModule[];
  /** key "layer.module.A|B" → tensor */
  w: Map<string, X>;
}

export interface KvCache<X> {
  /** Tokens already in the cache. */
  length: number;
  k: X[];
  v: X[];
}

/** Rows [start, start + rows) of a vocabulary-indexed weight (embedding table, LM head), in one buffer. */
interface VocabShard<X> {
  start: number;
  rows: number;
  w: X;
}

/** Token ids already on the backend: `count` from `offset` of an id tensor (Ops.idTensor, sampleInto). */
export interface DeviceIds<X> {
  tensor: X;
  offset: number;
  count: number;
}

/** What the backward needs from one layer's forward. */
interface LayerTape<X> {
  h0: X;
  a1: X;
  qRaw: X;
  kRaw: X;
  qn: X;
  kn: X;
  qr: X;
  kr: X;
  v: X;
  o: X;
  lse: X;
  h1: X;
  a2: X;
  g: X;
  u: X;
  s: X;
  /** x·Aᵀ per LoRA module (for dB). */
  xa: Partial<Record<LoraModule, X>>;
}

/** A checkpointed layer: only its input is kept; the backward recomputes the rest (forward with a tape). */
interface LayerCheckpoint<X> {
  h0: X;
}

export interface Tape<X> {
  /** Per layer: everything the backward needs, or (checkpointing) only the layer's input h0. */
  layers: (LayerTape<X> | LayerCheckpoint<X>)[];
  hFinal: X;
  /** rmsnorm(hFinal) (T, C): the LM head's input. */
  hn: X;
  /** (T, V); absent from a forwardHidden() tape (the trainer runs the LM head in chunks). */
  logits?: X;
  /** A packed forward's segment bounds (Ops.segments): the backward attends and rotates within them. */
  seg?: X;
}

const isFullTape = <X>(t: LayerTape<X> | LayerCheckpoint<X>): t is LayerTape<X> => 'a1' in t;

/** LM-head rows per chunk: at most this many bytes of (rows, V) f32 logits at once in training (default 32 MiB, about one layer's activations at 1k tokens of a 0.5B model). */
export const HEAD_CHUNK_BYTES = 32 * 2 ** 20;

export class LlamaModel<X> {
  private readonly layers: LayerWeights<X>[] = [];
  /** The embedding table in vocabulary-row shards, each within the device's largest binding (usually one). */
  private readonly embed: VocabShard<X>[];
  private readonly norm: X;
  private readonly lmHead: VocabShard<X>[];
  private readonly freqs: X;
  private adapter: LoraParams<X> | null = null;
  /**
   * Bumped whenever what the adapter computes may change (a new or removed adapter, an optimiser
   * step in place: `adapterChanged()`), so caches of k/v (batch.ts's prefix cache) know to drop.
   */
  adapterVersion = 0;
  get lora(): LoraParams<X> | null {
    return this.adapter;
  }
  set lora(l: LoraParams<X> | null) {
    this.adapter = l;
    this.adapterVersion++;
  }
  /** Say that the adapter's tensors were updated in place (an optimiser step). */
  adapterChanged(): void {
    this.adapterVersion++;
  }
  /** Storage format of the frozen base's linear weights and embedding table. */
  readonly weightFormat: WeightFormat;
  /** Bytes the base weights hold on the backend (GPU: the buffers, each padded to 16 bytes). */
  readonly weightBytes: number;

  constructor(
    readonly cfg: ModelConfig,
    readonly ops: Ops<X>,
    weights: TensorStore,
    opts: { weights?: WeightFormat; maxShardBytes?: number } = {},
  ) {
    // f32 by default: the reference every other format is checked against
    const format = (this.weightFormat = opts.weights ?? 'f32');
    let bytes = 0;
    const count = (x: X) => ((bytes += ops.bytes(x)), x);
    // the load-time plan: every tensor in one buffer within the device's limits, except the
    // vocabulary-indexed ones (embedding, LM head), split by rows into shards that fit
    const limit = Math.min(ops.maxTensorBytes, opts.maxShardBytes ?? Infinity);
    const fits = (name: string, rows: number, cols: number, fmt: WeightFormat) => {
      const need = fmt === 'f32' ? rows * cols * 4 : packedWords(rows, cols, fmt) * 4;
      if (need > ops.maxTensorBytes)
        throw new ModelLoadError(
          `${name} needs ${(need / 2 ** 20).toFixed(1)} MiB in one buffer, above this GPU's largest binding ` +
            `(maxStorageBufferBindingSize / maxBufferSize: ${(ops.maxTensorBytes / 2 ** 20).toFixed(0)} MiB). ` +
            'Load it with a smaller weight format (--weights q4) or pick a smaller model.',
          {
            code: 'tensor-too-large',
            tensor: name,
            limit: 'maxStorageBufferBindingSize',
            limitBytes: ops.maxTensorBytes,
            bytes: need,
          },
        );
    };
    const up = (name: string, shape: number[]) => {
      fits(name, shape[0]!, shape[1] ?? 1, 'f32');
      return count(ops.upload(shape, weights.f32(name)));
    };
    const packed = (name: string, shape: [number, number]) => {
      fits(name, shape[0], shape[1], format);
      return count(ops.uploadWeight(shape, weights.f32(name), format));
    };
    const C = cfg.hiddenSize;
    const vocabShards = (name: string): VocabShard<X>[] => {
      const V = cfg.vocabSize;
      const rowBytes = format === 'f32' ? 4 * C : (packedWords(Q4_GROUP, C, format) * 4) / Q4_GROUP;
      const rows = Math.max(Q4_GROUP, Math.floor((limit - 256) / rowBytes / Q4_GROUP) * Q4_GROUP);
      if (rows >= V) return [{ start: 0, rows: V, w: packed(name, [V, C]) }];
      const data = weights.f32(name);
      const shards: VocabShard<X>[] = [];
      for (let start = 0; start < V; start += rows) {
        const n = Math.min(rows, V - start);
        fits(name, n, C, format);
        shards.push({
          start,
          rows: n,
          w: count(ops.uploadWeight([n, C], data.subarray(start * C, (start + n) * C), format)),
        });
      }
      return shards;
    };
    const qd = cfg.numHeads * cfg.headDim;
    const kvd = cfg.numKvHeads * cfg.headDim;
    const F = cfg.intermediateSize;
    this.embed = vocabShards('model.embed_tokens.weight');
    this.norm = up('model.norm.weight', [C]);
    this.lmHead = cfg.tieWordEmbeddings ? this.embed : vocabShards('lm_head.weight');
    this.freqs = ops.upload(
      [cfg.headDim / 2],
      ropeFrequencies({ headDim: cfg.headDim, theta: cfg.ropeTheta, scaling: cfg.ropeScaling }),
    );
    for (let i = 0; i < cfg.numLayers; i++) {
      const n = layerTensorNames(cfg, i);
      const lw: LayerWeights<X> = {
        inputNorm: up(n.inputNorm, [C]),
        postNorm: up(n.postAttentionNorm, [C]),
        lin: {
          q_proj: packed(n.q, [qd, C]),
          k_proj: packed(n.k, [kvd, C]),
          v_proj: packed(n.v, [kvd, C]),
          o_proj: packed(n.o, [C, qd]),
          gate_proj: packed(n.gate, [F, C]),
          up_proj: packed(n.up, [F, C]),
          down_proj: packed(n.down, [C, F]),
        },
        bias: {},
      };
      if (n.qBias) lw.bias.q_proj = up(n.qBias, [qd]);
      if (n.kBias) lw.bias.k_proj = up(n.kBias, [kvd]);
      if (n.vBias) lw.bias.v_proj = up(n.vBias, [kvd]);
      if (n.oBias) lw.bias.o_proj = up(n.oBias, [C]);
      if (n.qNorm) lw.qNorm = up(n.qNorm, [cfg.headDim]);
      if (n.kNorm) lw.kNorm = up(n.kNorm, [cfg.headDim]);
      this.layers.push(lw);
    }
    this.weightBytes = bytes;
  }

  /** Give every weight (and adapter) back to the backend (GPU: to the pool after the next submit). */
  dispose(): void {
    const ops = this.ops;
    const seen = new Set<X>();
    const free = (x: X | undefined) => {
      if (x !== undefined && !seen.has(x)) {
        seen.add(x);
        ops.free(x);
      }
    };
    [...this.embed, ...this.lmHead].forEach((s) => free(s.w));
    [this.norm, this.freqs].forEach(free);
    for (const lw of this.layers) {
      [lw.inputNorm, lw.postNorm, lw.qNorm, lw.kNorm].forEach(free);
      Object.values(lw.lin).forEach(free);
      Object.values(lw.bias).forEach(free);
    }
    if (this.lora) [...this.lora.w.values()].forEach(free);
    for (const { A, B } of this.padded.values()) [A, B].forEach(free);
    this.padded.clear();
    this.lora = null;
    this.layers.length = 0;
  }

  /** (in, out) of a LoRA target module. */
  moduleDims(m: LoraModule): [number, number] {
    const { hiddenSize: C, intermediateSize: F, numHeads, numKvHeads, headDim } = this.cfg;
    const dims: Record<LoraModule, [number, number]> = {
      q_proj: [C, numHeads * headDim],
      k_proj: [C, numKvHeads * headDim],
      v_proj: [C, numKvHeads * headDim],
      o_proj: [numHeads * headDim, C],
      gate_proj: [C, F],
      up_proj: [C, F],
      down_proj: [F, C],
    };
    return dims[m];
  }

  /** Fresh adapters: A ~ U(−1/√in, 1/√in) from `seed`, B = 0 (so the model starts unchanged), as PEFT does. */
  initLora(r: number, alpha: number, targets: LoraModule[], seed = 0): void {
    this.freeLora();
    const rng = createRng(seed);
    const w = new Map<string, X>();
    for (let i = 0; i < this.cfg.numLayers; i++) {
      for (const m of targets) {
        const [din, dout] = this.moduleDims(m);
        const bound = 1 / Math.sqrt(din);
        w.set(
          loraKey(i, m, 'A'),
          this.ops.upload(
            [r, din],
            Float32Array.from({ length: r * din }, () => (rng.next() * 2 - 1) * bound),
          ),
        );
        w.set(loraKey(i, m, 'B'), this.ops.zeros([dout, r]));
      }
    }
    this.lora = { r, alpha, scale: loraScaling({ r, alpha }), targets: [...targets], w };
  }

  /** Give the current adapter's tensors back before another replaces it. */
  private freeLora(): void {
    if (this.adapter) this.ops.free(...this.adapter.w.values());
  }

  /** step()'s fused q/k/v LoRA of each layer (qkvLora), for one adapterVersion. */
  private readonly padded = new Map<number, { A: X; B: X }>();
  private paddedVersion = -1;

  /**
   * The q/k/v LoRA of `layer` as one delta for step()'s fused q/k/v columns: A (n·r, C), the n
   * adapted modules' A stacked, and B (width, n·r), module j's B at its output columns and at
   * inputs [j·r, (j + 1)·r), zero elsewhere; so qkv += s·(x·Aᵀ)·Bᵀ is two dispatches instead of 2n.
   * Built once per adapter version (module j's B is placed by a product with a 0/1 selector: exact).
   */
  private qkvLora(layer: number, mods: { m: LoraModule; col: number }[], width: number): { A: X; B: X } {
    const ops = this.ops;
    if (this.paddedVersion !== this.adapterVersion) {
      for (const { A, B } of this.padded.values()) ops.free(A, B);
      this.padded.clear();
      this.paddedVersion = this.adapterVersion;
    }
    let out = this.padded.get(layer);
    if (!out) {
      const { r } = this.lora!;
      const n = mods.length;
      const A = ops.zeros([n * r, this.cfg.hiddenSize]);
      const B = ops.zeros([width, n * r]);
      mods.forEach(({ m, col }, j) => {
        ops.copyRows(this.lora!.w.get(loraKey(layer, m, 'A'))!, 0, A, j * r, r);
        const Bm = this.lora!.w.get(loraKey(layer, m, 'B'))!; // (rows, r)
        const sel = new Float32Array(r * n * r); // (r, n·r): the identity at columns j·r
        for (let c = 0; c < r; c++) sel[c * n * r + j * r + c] = 1;
        const selT = ops.upload([r, n * r], sel);
        const placed = ops.matmul(Bm, selT); // (rows, n·r)
        ops.copyRows(placed, 0, B, col, ops.shape(Bm)[0]!);
        ops.free(selT, placed);
      });
      out = { A, B };
      this.padded.set(layer, out);
    }
    return out;
  }

  /** Load adapters (PEFT import or a saved state). */
  setLora(adapter: LoraAdapter): void {
    this.freeLora();
    const w = new Map<string, X>();
    for (const [key, t] of adapter.tensors) w.set(key, this.ops.upload(t.shape, t.data));
    this.lora = {
      r: adapter.config.r,
      alpha: adapter.config.alpha,
      scale: loraScaling(adapter.config),
      targets: [...adapter.config.targets],
      w,
    };
  }

  async getLora(): Promise<LoraAdapter | null> {
    if (!this.lora) return null;
    const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
    for (const [key, x] of this.lora.w)
      tensors.set(key, { shape: [...this.ops.shape(x)], data: Float32Array.from(await this.ops.read(x)) });
    return { config: { r: this.lora.r, alpha: this.lora.alpha, targets: [...this.lora.targets] }, tensors };
  }

  newCache(): KvCache<X> {
    return { length: 0, k: [], v: [] };
  }

  /** Give a cache's buffers back (GPU: to the pool after the next submit). */
  freeCache(cache: KvCache<X>): void {
    this.ops.free(...cache.k, ...cache.v);
    cache.k = [];
    cache.v = [];
    cache.length = 0;
  }

  /** y = x·Wᵀ (+ b) + LoRA; returns y and x·Aᵀ when adapted (for the backward). */
  private linear(x: X, layer: number, m: LoraModule): { y: X; xa?: X } {
    const ops = this.ops;
    const lw = this.layers[layer]!;
    let y = ops.matmul(x, lw.lin[m], { transB: true });
    const b = lw.bias[m as keyof LayerWeights<X>['bias']];
    if (b) {
      const yb = ops.addBias(y, b);
      ops.free(y);
      y = yb;
    }
    if (this.lora?.targets.includes(m)) {
      const A = this.lora.w.get(loraKey(layer, m, 'A'))!;
      const B = this.lora.w.get(loraKey(layer, m, 'B'))!;
      const xa = ops.matmul(x, A, { transB: true }); // (T, r)
      ops.matmulAcc(y, xa, B, { transB: true, alpha: this.lora.scale });
      return { y, xa };
    }
    return { y };
  }

  /**
   * Forward over `ids` (host ids, or ids already on the backend) after the cache's tokens.
   * Returns logits (T, V), or (1, V) for the last position only when `lastOnly`; with `tape`, what
   * the backward needs (no cache then), and with `checkpoint` too, only each layer's input (the
   * backward recomputes the layer).
   */
  forward(
    ids: number[] | DeviceIds<X>,
    opts: { cache?: KvCache<X>; lastOnly?: boolean; tape?: boolean; checkpoint?: boolean } = {},
  ): { logits: X; tape?: Tape<X> } {
    const { cfg, ops } = this;
    const T = Array.isArray(ids) ? ids.length : ids.count;
    const cache = opts.cache;
    if (opts.tape) {
      if (!Array.isArray(ids)) throw new RangeError('forward: a training forward takes ids from the host');
      if (cache) throw new RangeError('forward: a training forward takes no KV cache');
      const tape = this.forwardHidden(ids, { checkpoint: opts.checkpoint });
      tape.logits = this.headLogits(tape.hn);
      return { logits: tape.logits, tape };
    }
    const pos0 = cache?.length ?? 0;
    let h = this.embedRows(ids);
    for (let i = 0; i < cfg.numLayers; i++) h = this.layerForward(i, h, T, pos0, cache, 'none').h;
    if (cache) cache.length = pos0 + T;
    const last = opts.lastOnly ? ops.rows(h, T - 1, 1) : h;
    const hn = ops.rmsnorm(last, this.norm, cfg.rmsNormEps);
    const logits = this.headLogits(hn);
    ops.free(hn, h);
    if (last !== h) ops.free(last);
    return { logits };
  }

  /**
   * Training forward up to the final norm: the tape with hn (T, C) and no logits (the trainer runs
   * the LM head in chunks: headLogits / headBackward). `checkpoint` keeps only each layer's input.
   * `segments`: the lengths of the sequences `ids` concatenates (Σ = T), each run as if alone (its
   * positions from 0, attention within it): one packed forward for a minibatch.
   */
  forwardHidden(ids: number[], opts: { checkpoint?: boolean; segments?: number[] } = {}): Tape<X> {
    const { cfg, ops } = this;
    const T = ids.length;
    const total = opts.segments?.reduce((a, n) => a + n, 0);
    if (total !== undefined && total !== T)
      throw new RangeError(`forwardHidden: the segment lengths add up to ${total}, not the ${T} ids`);
    const seg = opts.segments ? ops.segments(opts.segments) : undefined;
    let h = this.embedRows(ids);
    const layers: (LayerTape<X> | LayerCheckpoint<X>)[] = [];
    for (let i = 0; i < cfg.numLayers; i++) {
      const r = this.layerForward(i, h, T, 0, undefined, opts.checkpoint ? 'checkpoint' : 'tape', seg);
      layers.push(r.tape ?? { h0: h });
      h = r.h;
    }
    return { layers, hFinal: h, hn: ops.rmsnorm(h, this.norm, cfg.rmsNormEps), ...(seg ? { seg } : {}) };
  }

  /**
   * The final norm's output hn (T, C) over `ids`, no tape (a no-gradient pass whose LM head runs in
   * chunks); `segments` as in forwardHidden (a packed sequence, each part run as if alone).
   */
  hiddenStates(ids: number[], segments?: number[]): X {
    const { cfg, ops } = this;
    const total = segments?.reduce((a, n) => a + n, 0);
    if (total !== undefined && total !== ids.length)
      throw new RangeError(`hiddenStates: the segment lengths add up to ${total}, not the ${ids.length} ids`);
    const seg = segments && segments.length > 1 ? ops.segments(segments) : undefined;
    let h = this.embedRows(ids);
    for (let i = 0; i < cfg.numLayers; i++) h = this.layerForward(i, h, ids.length, 0, undefined, 'none', seg).h;
    const hn = ops.rmsnorm(h, this.norm, cfg.rmsNormEps);
    ops.free(h);
    if (seg) ops.free(seg);
    return hn;
  }

  /** Embedding rows of host ids or ids on the backend: one gather per shard, summed (other shards give zero rows). */
  private embedRows(ids: number[] | DeviceIds<X>): X {
    const ops = this.ops;
    const one = (s: VocabShard<X>) => {
      if (!Array.isArray(ids)) return ops.embeddingAt(s.w, ids.tensor, ids.offset, ids.count, s.start);
      if (this.embed.length === 1) return ops.embedding(s.w, ids);
      return ops.embedding(
        s.w,
        ids.map((id) => (id >= s.start && id < s.start + s.rows ? id - s.start : s.rows)),
      );
    };
    const h = one(this.embed[0]!);
    for (const s of this.embed.slice(1)) {
      const x = one(s);
      ops.addInPlace(h, x);
      ops.free(x);
    }
    return h;
  }

  /** Logits (R, V) of rows of hn (R, C): the LM head (per shard, each row's columns copied into place). */
  headLogits(hn: X): X {
    const ops = this.ops;
    if (this.lmHead.length === 1) return ops.matmul(hn, this.lmHead[0]!.w, { transB: true });
    const V = this.cfg.vocabSize;
    const R = ops.shape(hn)[0]!;
    if (R * V * 4 > ops.maxTensorBytes)
      throw new GpuError(
        `The logits of ${R} positions need ${((R * V * 4) / 2 ** 20).toFixed(0)} MiB in one buffer, above this GPU's ` +
          `largest binding (maxStorageBufferBindingSize: ${(ops.maxTensorBytes / 2 ** 20).toFixed(0)} MiB). Use fewer positions at a time.`,
        { code: 'logits-too-large', limit: 'maxStorageBufferBindingSize' },
      );
    const out = ops.zeros([R, V]);
    const cols = ops.view(out, [R * V, 1]);
    for (const s of this.lmHead) {
      const part = ops.matmul(hn, s.w, { transB: true }); // (R, rows)
      const rows = ops.view(part, [R * s.rows, 1]);
      for (let r = 0; r < R; r++) ops.copyRows(rows, r * s.rows, cols, r * V + s.start, s.rows);
      ops.free(part);
    }
    return out;
  }

  /** d(hn) (R, C) from d(logits) (R, V): the LM head's input gradient. */
  headBackward(dlogits: X): X {
    if (this.lmHead.length > 1)
      throw new GpuError(
        "Training needs the LM head in one buffer, and this GPU's largest binding (maxStorageBufferBindingSize: " +
          `${(this.ops.maxTensorBytes / 2 ** 20).toFixed(0)} MiB) holds only part of it. Train on a GPU with larger ` +
          'bindings, or load the base with --weights q4.',
        { code: 'lm-head-sharded', limit: 'maxStorageBufferBindingSize' },
      );
    // K is the vocabulary and the output (rows, C) has few tiles: split K across workgroups
    return this.ops.matmul(dlogits, this.lmHead[0]!.w, { splitK: 'auto' });
  }

  /** LM-head rows per chunk so that one chunk's (rows, V) f32 logits stay within `bytes`. */
  headChunkRows(bytes = HEAD_CHUNK_BYTES): number {
    return Math.max(1, Math.floor(bytes / (4 * this.cfg.vocabSize)));
  }

  /**
   * Bytes of the activations a training forward over T tokens keeps for the backward (f32, the
   * current adapter): `full`, every layer's tape (forwardHidden without checkpoint), or
   * `checkpointed`, each layer's input plus the one layer the backward recomputes at a time; both
   * with hFinal and hn. The tensors of LayerTape, counted as forwardHidden leaves them.
   */
  activationBytes(T: number): { full: number; checkpointed: number } {
    const { hiddenSize: C, intermediateSize: F, numHeads: Hq, numKvHeads: Hkv, headDim: D } = this.cfg;
    const lw = this.layers[0];
    const qd = Hq * D;
    const kvd = Hkv * D;
    const r = this.lora?.r ?? 0;
    const xa = (this.lora?.targets.length ?? 0) * r;
    // per token: a1, h1, a2 | q, k (raw, normed when q/k-norm, rotated), v, attention out and lse | g, u, s | x·Aᵀ
    const rest = 3 * C + (lw?.qNorm ? 3 : 2) * qd + (lw?.kNorm ? 3 : 2) * kvd + kvd + qd + Hq + 3 * F + xa;
    const L = this.cfg.numLayers;
    const f = 4 * T;
    return { full: f * (L * (C + rest) + 2 * C), checkpointed: f * (L * C + rest + 2 * C) };
  }

  /**
   * One layer on h0 (T, C) → h (T, C). mode 'tape': returns what the backward needs (h0 included);
   * 'checkpoint': frees every temporary but keeps h0; 'none': frees h0 too. `seg`: the segment
   * bounds of a packed sequence (Ops.segments; no cache then).
   */
  private layerForward(
    i: number,
    h0: X,
    T: number,
    pos0: number,
    cache: KvCache<X> | undefined,
    mode: 'tape' | 'checkpoint' | 'none',
    seg?: X,
  ): { h: X; tape?: LayerTape<X> } {
    const { cfg, ops } = this;
    const Hq = cfg.numHeads;
    const Hkv = cfg.numKvHeads;
    const D = cfg.headDim;
    const eps = cfg.rmsNormEps;
    const lw = this.layers[i]!;
    const a1 = ops.rmsnorm(h0, lw.inputNorm, eps);
    const q = this.linear(a1, i, 'q_proj');
    const k = this.linear(a1, i, 'k_proj');
    const v = this.linear(a1, i, 'v_proj');
    const qRaw = ops.view(q.y, [T, Hq, D]);
    const kRaw = ops.view(k.y, [T, Hkv, D]);
    const vv = ops.view(v.y, [T, Hkv, D]);
    const qn = lw.qNorm ? ops.rmsnorm(qRaw, lw.qNorm, eps) : qRaw;
    const kn = lw.kNorm ? ops.rmsnorm(kRaw, lw.kNorm, eps) : kRaw;
    const qr = ops.rope(qn, this.freqs, pos0, seg);
    const kr = ops.rope(kn, this.freqs, pos0, seg);
    let kAll = kr;
    let vAll = vv;
    if (cache) [kAll, vAll] = this.appendCache(cache, i, kr, vv, pos0, T);
    const att = ops.attention(qr, kAll, vAll, seg);
    const o2 = ops.view(att.out, [T, Hq * D]);
    const oo = this.linear(o2, i, 'o_proj');
    const h1 = ops.add(h0, oo.y);
    const a2 = ops.rmsnorm(h1, lw.postNorm, eps);
    const g = this.linear(a2, i, 'gate_proj');
    const u = this.linear(a2, i, 'up_proj');
    const s = ops.swiglu(g.y, u.y);
    const d = this.linear(s, i, 'down_proj');
    const h = ops.add(h1, d.y);
    if (mode === 'tape') {
      ops.free(oo.y, d.y); // the residual sums h1 and h hold what the backward needs
      const xa = {
        q_proj: q.xa,
        k_proj: k.xa,
        v_proj: v.xa,
        o_proj: oo.xa,
        gate_proj: g.xa,
        up_proj: u.xa,
        down_proj: d.xa,
      };
      return {
        h,
        tape: { h0, a1, qRaw, kRaw, qn, kn, qr, kr, v: vv, o: o2, lse: att.lse, h1, a2, g: g.y, u: u.y, s, xa },
      };
    }
    if (mode === 'none') ops.free(h0);
    ops.free(a1, q.y, k.y, qr, kr, att.out, att.lse, oo.y, h1, a2, g.y, u.y, s, d.y);
    if (qn !== qRaw) ops.free(qn);
    if (kn !== kRaw) ops.free(kn);
    ops.free(v.y);
    for (const x of [q.xa, k.xa, v.xa, oo.xa, g.xa, u.xa, d.xa]) if (x) ops.free(x);
    return { h };
  }

  /**
   * One batched step on the paged cache (kv_pages.ts): every item's new tokens (a prefill
   * chunk or one decode token) packed into N rows, written after its sequence's tokens. Returns the
   * logits of each item's last row, (items, V), in item order; the items' sequences grow by their ids.
   * The same maths as forward() with a KvCache (each row sees only its own sequence), per layer:
   *   a = rmsnorm(h); qkv = linearFused(a, [Wq, Wk, Wv], [bq, bk, bv]) (+ LoRA deltas into its columns)
   *   q = ropeAppend(qkv → k, v into the stores); o = attentionPaged(q); h += o·Woᵀ (+ bo, LoRA)
   *   m = rmsnorm(h); s = gluLinear(m, Wg, Wu) (unfused with LoRA on gate/up); h += s·Wdᵀ (+ LoRA)
   * With `input`, the rows' ids are read on the backend from there (one per row, in item order: the
   * ids an earlier step sampled, batch.ts's stepsPerReadback) and the items' host ids only count
   * rows: the sequences' `tokens` then hold those placeholders until the caller writes the real ids.
   */
  step(kv: KvPages<X>, items: StepItem[], input?: DeviceIds<X>): X {
    const { cfg, ops } = this;
    if (items.length === 0) throw new RangeError('step: no items');
    const Hq = cfg.numHeads;
    const Hkv = cfg.numKvHeads;
    const D = cfg.headDim;
    const eps = cfg.rmsNormEps;
    const ids = items.flatMap((it) => it.ids);
    const N = ids.length;
    if (input && input.count !== N) throw new RangeError(`step: ${input.count} ids on the backend for ${N} rows`);
    const b = kv.prepare(items);
    const lora = this.lora;
    const adapted = (m: LoraModule) => Boolean(lora?.targets.includes(m));
    /** out += s·(x·Aᵀ)·Bᵀ: module m's own A and B, or (qkvLora) one A and B for several modules. */
    const addLora = (out: X, x: X, layer: number, m: LoraModule | { A: X; B: X }) => {
      const A = typeof m === 'string' ? lora!.w.get(loraKey(layer, m, 'A'))! : m.A;
      const B = typeof m === 'string' ? lora!.w.get(loraKey(layer, m, 'B'))! : m.B;
      const xa = ops.matmul(x, A, { transB: true }); // (N, r) or (N, n·r)
      ops.matmulAcc(out, xa, B, { transB: true, alpha: lora!.scale });
      ops.free(xa);
    };
    const qkvCols = [
      { m: 'q_proj' as const, col: 0 },
      { m: 'k_proj' as const, col: Hq * D },
      { m: 'v_proj' as const, col: (Hq + Hkv) * D },
    ].filter(({ m }) => adapted(m));
    let hh = this.embedRows(input ?? ids); // (N, C), the residual stream, updated in place
    for (let i = 0; i < cfg.numLayers; i++) {
      const lw = this.layers[i]!;
      const a = ops.rmsnorm(hh, lw.inputNorm, eps);
      const qkv = ops.linearFused(
        a,
        [lw.lin.q_proj, lw.lin.k_proj, lw.lin.v_proj],
        [lw.bias.q_proj, lw.bias.k_proj, lw.bias.v_proj],
      ); // (N, (Hq + 2·Hkv)·D)
      const width = (Hq + 2 * Hkv) * D;
      if (qkvCols.length) addLora(qkv, a, i, this.qkvLora(i, qkvCols, width));
      const q = ops.ropeAppend(qkv, this.freqs, kv.k[i]!, kv.v[i]!, b, {
        Hq,
        Hkv,
        qNorm: lw.qNorm,
        kNorm: lw.kNorm,
        eps,
      }); // (N, Hq, D)
      const att = ops.attentionPaged(q, kv.k[i]!, kv.v[i]!, b); // (N, Hq, D)
      const o = ops.view(att, [N, Hq * D]);
      ops.matmulAcc(hh, o, lw.lin.o_proj, { transB: true });
      if (adapted('o_proj')) addLora(hh, o, i, 'o_proj');
      if (lw.bias.o_proj) {
        const hb = ops.addBias(hh, lw.bias.o_proj);
        ops.free(hh);
        hh = hb;
      }
      const m = ops.rmsnorm(hh, lw.postNorm, eps);
      let s: X;
      if (adapted('gate_proj') || adapted('up_proj')) {
        const g = this.linear(m, i, 'gate_proj');
        const u = this.linear(m, i, 'up_proj');
        s = ops.swiglu(g.y, u.y);
        ops.free(g.y, u.y);
        for (const x of [g.xa, u.xa]) if (x) ops.free(x);
      } else s = ops.gluLinear(m, lw.lin.gate_proj, lw.lin.up_proj); // (N, F)
      ops.matmulAcc(hh, s, lw.lin.down_proj, { transB: true });
      if (adapted('down_proj')) addLora(hh, s, i, 'down_proj');
      ops.free(a, qkv, q, att, m, s);
    }
    kv.commit(items);
    // each item's last row: (items, C)
    let last = hh;
    if (N !== items.length) {
      const lastRows: number[] = [];
      let r = 0;
      for (const it of items) lastRows.push((r += it.ids.length) - 1);
      last = ops.embedding(hh, lastRows);
    }
    const hn = ops.rmsnorm(last, this.norm, eps);
    const logits = this.headLogits(hn); // (items, V)
    ops.free(hn, hh);
    if (last !== hh) ops.free(last);
    return logits;
  }

  /** Append this step's k, v to the layer's cache and return (S, Hkv, D) views of the whole cache. */
  private appendCache(cache: KvCache<X>, layer: number, k: X, v: X, pos0: number, T: number): [X, X] {
    const { numKvHeads: Hkv, headDim: D } = this.cfg;
    cache.k[layer] = this.ops.appendRows(cache.k[layer], pos0, k);
    cache.v[layer] = this.ops.appendRows(cache.v[layer], pos0, v);
    const S = pos0 + T;
    return [this.ops.view(cache.k[layer]!, [S, Hkv, D]), this.ops.view(cache.v[layer]!, [S, Hkv, D])];
  }

  /** d(loss)/d(adapter) via the backward of a taped forward; `dlogits` (T, V). Returns gradients per LoRA key. */
  backward(tape: Tape<X>, dlogits: X): Map<string, X> {
    const dhn = this.headBackward(dlogits); // (T, C)
    const grads = this.backwardHidden(tape, dhn);
    this.ops.free(dhn);
    return grads;
  }

  /**
   * The backward from d(hn) (T, C) (the LM head's input gradient, e.g. summed from chunks). Adds the
   * adapter gradients into `into` when given (several samples into one set), else into new zeros.
   * Checkpointed layers are recomputed from their input, one at a time, and freed after their backward.
   */
  backwardHidden(tape: Tape<X>, dhn: X, into?: Map<string, X>): Map<string, X> {
    const { cfg, ops } = this;
    if (!this.lora) throw new Error('backward: no LoRA adapter to train; call initLora() or setLora() first');
    const lora = this.lora;
    const eps = cfg.rmsNormEps;
    const T = ops.shape(tape.hFinal)[0]!;
    const grads = into ?? new Map<string, X>();
    if (!into) for (const [key, x] of lora.w) grads.set(key, ops.zeros([...ops.shape(x)]));

    // y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ   →   dx = dy·W + s·(dy·B)·A,  dB += s·dyᵀ·(x·Aᵀ),  dA += s·(dy·B)ᵀ·x
    // dx is added to `into` when given: the projections that share an input (q/k/v, gate/up)
    // accumulate its gradient in one tensor, with no temporary and no sum per projection
    const linBack = (layer: number, m: LoraModule, x: X, xa: X | undefined, dy: X, into?: X): X => {
      const W = this.layers[layer]!.lin[m];
      const dx = into ?? ops.matmul(dy, W);
      if (into) ops.matmulAcc(into, dy, W);
      if (xa && lora.targets.includes(m)) {
        const A = lora.w.get(loraKey(layer, m, 'A'))!;
        const B = lora.w.get(loraKey(layer, m, 'B'))!;
        ops.matmulAcc(grads.get(loraKey(layer, m, 'B'))!, dy, xa, { transA: true, alpha: lora.scale });
        const dyB = ops.matmul(dy, B); // (T, r)
        ops.matmulAcc(grads.get(loraKey(layer, m, 'A'))!, dyB, x, { transA: true, alpha: lora.scale });
        ops.matmulAcc(dx, dyB, A, { alpha: lora.scale });
        ops.free(dyB);
      }
      return dx;
    };

    let dh = ops.rmsnormBackward(tape.hFinal, this.norm, dhn, eps);
    for (let i = cfg.numLayers - 1; i >= 0; i--) {
      const saved = tape.layers[i]!;
      let t: LayerTape<X>;
      if (isFullTape(saved)) t = saved;
      else {
        // recompute the layer from its input (the same kernels on the same data: the same values)
        const r = this.layerForward(i, saved.h0, T, 0, undefined, 'tape', tape.seg);
        ops.free(r.h); // the next layer's input is its own checkpoint
        t = r.tape!;
      }
      const lw = this.layers[i]!;
      // MLP
      const ds = linBack(i, 'down_proj', t.s, t.xa.down_proj, dh);
      const { dgate, dup } = ops.swigluBackward(t.g, t.u, ds);
      const da2 = linBack(i, 'gate_proj', t.a2, t.xa.gate_proj, dgate);
      linBack(i, 'up_proj', t.a2, t.xa.up_proj, dup, da2);
      const dh1 = ops.rmsnormBackward(t.h1, lw.postNorm, da2, eps);
      ops.addInPlace(dh1, dh); // residual
      ops.free(ds, dgate, dup, da2, dh);
      // attention
      const dof = linBack(i, 'o_proj', t.o, t.xa.o_proj, dh1);
      const { dq, dk, dv } = ops.attentionBackward(
        t.qr,
        t.kr,
        t.v,
        ops.view(t.o, [T, cfg.numHeads, cfg.headDim]),
        t.lse,
        ops.view(dof, [T, cfg.numHeads, cfg.headDim]),
        tape.seg,
      );
      let dqn = ops.ropeBackward(dq, this.freqs, 0, tape.seg);
      let dkn = ops.ropeBackward(dk, this.freqs, 0, tape.seg);
      if (lw.qNorm) {
        const x = ops.rmsnormBackward(t.qRaw, lw.qNorm, dqn, eps);
        ops.free(dqn);
        dqn = x;
      }
      if (lw.kNorm) {
        const x = ops.rmsnormBackward(t.kRaw, lw.kNorm, dkn, eps);
        ops.free(dkn);
        dkn = x;
      }
      const qd = cfg.numHeads * cfg.headDim;
      const kvd = cfg.numKvHeads * cfg.headDim;
      const da1 = linBack(i, 'q_proj', t.a1, t.xa.q_proj, ops.view(dqn, [T, qd]));
      linBack(i, 'k_proj', t.a1, t.xa.k_proj, ops.view(dkn, [T, kvd]), da1);
      linBack(i, 'v_proj', t.a1, t.xa.v_proj, ops.view(dv, [T, kvd]), da1);
      const dh0 = ops.rmsnormBackward(t.h0, lw.inputNorm, da1, eps);
      ops.addInPlace(dh0, dh1);
      ops.free(dof, dq, dk, dv, dqn, dkn, da1, dh1);
      if (t !== saved) this.freeLayerTape(t, false);
      dh = dh0;
    }
    ops.free(dh);
    return grads;
  }

  /** Free one layer's tape (its input h0 too unless `withInput` is false: a checkpoint owns it). */
  private freeLayerTape(t: LayerTape<X>, withInput = true): void {
    const ops = this.ops;
    if (withInput) ops.free(t.h0);
    ops.free(t.a1, t.qr, t.kr, t.lse, t.h1, t.a2, t.g, t.u, t.s);
    ops.free(t.qRaw, t.kRaw, t.v, t.o);
    if (t.qn !== t.qRaw) ops.free(t.qn);
    if (t.kn !== t.kRaw) ops.free(t.kn);
    for (const x of Object.values(t.xa)) if (x) ops.free(x);
  }

  /** Free a tape's activations. */
  freeTape(tape: Tape<X>): void {
    const ops = this.ops;
    for (const t of tape.layers) {
      if (isFullTape(t)) this.freeLayerTape(t);
      else ops.free(t.h0);
    }
    ops.free(tape.hFinal, tape.hn);
    if (tape.logits) ops.free(tape.logits);
    if (tape.seg) ops.free(tape.seg);
  }

  /**
   * Per-token log-probs of `targets` given `ids` (teacher forcing): log p(ids[t+1] | ids[..t]).
   * Returns T − 1 values. The LM head runs in chunks of rows (headChunks), so no (T, V) logits
   * exist at once: at most `chunkBytes` of them (default HEAD_CHUNK_BYTES) whatever T.
   */
  async logprobs(ids: number[], chunkBytes = HEAD_CHUNK_BYTES): Promise<Float32Array> {
    const ops = this.ops;
    const T = ids.length - 1;
    const targets = ids.slice(1);
    const hn = this.hiddenStates(ids);
    const head = ops.rows(hn, 0, T);
    const out = ops.zeros([T, 1]);
    this.headChunks(
      head,
      (logits, row0) => {
        const n = ops.shape(logits)[0]!;
        const r = ops.nll(logits, targets.slice(row0, row0 + n), new Float32Array(n).fill(1));
        ops.copyRows(ops.view(r.logprobs, [n, 1]), 0, out, row0, n);
        ops.free(r.loss, r.logprobs, r.lse);
      },
      chunkBytes,
    );
    const lp = Float32Array.from(await ops.read(out));
    ops.free(hn, head, out);
    ops.flush();
    return lp;
  }

  /**
   * The LM head over hn (R, C) in chunks of rows whose (rows, V) f32 logits fit `bytes`
   * (headChunkRows): `fn(logits, row0)` records its use of each chunk's logits (rows row0 ..), which
   * are freed when it returns. One chunk when all R rows fit.
   */
  headChunks(hn: X, fn: (logits: X, row0: number) => void, bytes = HEAD_CHUNK_BYTES): void {
    const ops = this.ops;
    const R = ops.shape(hn)[0]!;
    const step = this.headChunkRows(bytes);
    for (let row0 = 0; row0 < R; row0 += step) {
      const part = step >= R ? hn : ops.rows(hn, row0, Math.min(step, R - row0));
      const logits = this.headLogits(part);
      fn(logits, row0);
      ops.free(logits);
      if (part !== hn) ops.free(part);
    }
  }
}
