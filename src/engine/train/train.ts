/**
 * GRPO training of the LoRA adapter on the engine (docs/training.md has the equations).
 *
 * A sample is one token sequence — a whole episode, or one design — with the tokens the policy
 * sampled marked (spans or a 0/1 mask), their log-probs under the sampling policy at sampling time
 * (log π_sampler), the same tokens' log-probs recomputed by the learner at the start of the
 * training round (log π_old: `learnerLogprobs`, before the round's first update) and one
 * advantage A. For every marked token t of a minibatch, with
 *   log π_θ(t) = log_softmax((logits + bias) / T)[token]   (policy.ts: the same π as sampling)
 *   r_t = exp(log π_θ(t) − log π_old(t))
 *   c_t = min(exp(log π_old(t) − log π_sampler(t)), C)     (truncated importance sampling, no gradient)
 *   ℓ_t = −c_t·min(r_t·A, clip(r_t, 1 − ε_low, 1 + ε_high)·A) + β·k3_t,
 *   k3_t = exp(δ_t) − δ_t − 1,  δ_t = log π_base(t) − log π_θ(t)   (base = adapter off; β = klCoef)
 * the loss is the token-level mean  L = Σ_t ℓ_t / N  over the N marked tokens of the minibatch.
 * C = tisCap; 0 turns TIS off: c_t = 1 and π_old is the sampler's log-prob (a sample without
 * learner log-probs is trained that way too).
 *
 * The gradient is a weighted NLL: the forward gives log π_θ (ops.nll), the backend
 * computes the weight of each token, w_t = −∂L/∂log π_θ(t) = (c_t·A·r_t·[not clipped] − β·(1 − exp δ_t)) / N
 * (ops.grpoWeights, with the per-token loss terms), and ops.nllBackward with those weights gives
 * ∂L/∂logits (then through 1/T and the model's backward into the adapter). Gradients are summed over
 * the minibatch, clipped by global norm and applied with AdamW.
 *
 * Packing (`pack`, default on): the samples of a minibatch are concatenated into one sequence whose
 * segments the model keeps apart (attention within a segment, positions from 0 in each:
 * model.forwardHidden's `segments`), so one forward and one backward over Σ L rows replace one per
 * sample — larger matmuls, the per-forward fixed costs paid once. The LM head, the NLL and the
 * GRPO weights still run per sample (its advantage and temperature are scalars of the kernels),
 * on its rows of the packed hn. The same gradients as per sample, up to rounding.
 *
 * Memory: the LM head runs in chunks of rows (logits, log π, weights and ∂L/∂logits of a
 * chunk at a time, never a (T, V) tensor; model.headChunkRows), the weights stay on the device (no
 * read-back per sample: the loss terms of the whole minibatch are read once at the end), and a
 * forward whose activations (model.activationBytes) would exceed the activation budget keeps only
 * each layer's input (per-layer activation checkpointing; the backward recomputes the layer, the
 * same values) — decided per forward: packing puts samples together while their packed length
 * stays within the budget, so short ones keep every activation and skip the recompute (a sample
 * over the budget alone is a checkpointed forward of its own); each step reports what it decided.
 * `checkpoint` forces either way, `headChunkRows` sets the chunks and `pack: false` runs one
 * forward per sample, for measuring. `train()` splits a batch into minibatches of at most `minibatchTokens`
 * tokens and makes one optimiser step per minibatch, `epochs` times over the batch, after one
 * no-grad forward over the batch for the learner's π_old (`learnerLogprobs`, also called by the
 * closed loop before each training round).
 * State (AdamW's m, v and the step) exports and imports, so a resumed run repeats the same losses.
 */
import type { LlamaModel } from '../model/model.ts';
import type { GrpoWeightOptions } from '../kernels/grpo_weights.ts';
import { tisRatios, tisStats, tisWeight, type TisStats } from '../../core/train/grpo.ts';
import { gradClipScale, SpikeGuard } from '../kernels/adamw.ts';
import { allowedTokenBias, policyTemperature } from '../model/policy.ts';
import { parseSafetensors, tensorF32, writeSafetensors, type TensorToWrite } from '../io/safetensors.ts';

export interface GrpoSample {
  ids: number[];
  /** [start, end) ranges of ids the policy sampled (the trained tokens); start ≥ 1. */
  spans?: [number, number][];
  /** Or: 1 at each trained position of ids (same length as ids; ids[0] cannot be trained). */
  mask?: (0 | 1)[];
  /** Or: ids[promptLen..] is one completion (one span to the end). */
  promptLen?: number;
  /**
   * log π_sampler of each trained token in order (the sampler's ChatResult.tokens.logprobs): π_old
   * when TIS is off or there are no learnerLogprobs. Absent: on-policy — π_old is taken from the
   * current adapter (`train()`: before the batch's first update; ratio 1).
   */
  oldLogprobs?: number[];
  /**
   * log π_old of each trained token recomputed by the learner at the start of the training round
   * (`LoraTrainer.learnerLogprobs`, before the round's first update). With tisCap > 0 the ratio is
   * taken against these and each token is weighted by min(exp(learner − sampler), tisCap).
   */
  learnerLogprobs?: number[];
  advantage: number;
  /** Sampling temperature of this sample (default: TrainOptions.temperature). */
  temperature?: number;
}

export interface TrainOptions {
  /** Paper: 1e-6 for full fine-tuning; a LoRA adapter needs about 100× that (default 1e-4). */
  lr?: number;
  /** Decoupled weight decay (default 0: the adapter starts at B = 0 and decay would only pull it back). */
  weightDecay?: number;
  /** AdamW moments (default 0.9 / 0.999, PyTorch's). */
  beta1?: number;
  beta2?: number;
  /** Clip the global gradient norm to this (default 1, as verl and TRL). */
  maxGradNorm?: number;
  /**
   * Skip a step whose gradient norm is more than this many times the median of the last 64 steps'
   * (kernels/adamw.ts SpikeGuard; default 0: off). Its window is not part of the saved state.
   */
  skipSpikes?: number;
  /** Lower clip ε of the ratio (default 0.2, PPO/the paper). */
  clipLow?: number;
  /** Upper clip ε (default 0.28, the paper's "clip higher": lets rare good tokens grow faster). */
  clipHigh?: number;
  /** β of the k3 KL to the base policy (adapter off); 0 skips its forward (default 0: the paper's games setting). */
  klCoef?: number;
  /** Most tokens (whole sequences) per optimiser step (default 4096: a few episodes per step on a small GPU). */
  minibatchTokens?: number;
  /** Passes over a batch (default 1: each sample seen once; > 1 reuses samples, the clip keeps it near π_old). */
  epochs?: number;
  /** Sampling temperature that defined π_old (default 1); a sample's own temperature wins. */
  temperature?: number;
  /** The policy's vocabulary constraint (the LocalChatModel's allowedTokens). */
  allowedTokens?: number[];
  /**
   * Truncation C of the sampler/learner importance weight min(exp(log π_old − log π_sampler), C)
   * (default 2, the reference's; 0: TIS off — the ratio is taken against the sampler's log-probs).
   */
  tisCap?: number;
  /**
   * Per-layer activation checkpointing: true always, false never; default: for each forward (one
   * sample, or several packed) whose full tape (model.activationBytes) exceeds
   * `activationBudgetBytes` (a 1k-token step on a 0.5B model then keeps one layer's activations
   * instead of 24, for about a third more compute in the backward; a short one keeps all and skips
   * the recompute).
   */
  checkpoint?: boolean;
  /**
   * Most bytes of activations a forward may keep without checkpointing (default
   * ACTIVATION_BUDGET_BYTES, or the device's largest buffer when that is smaller: a small GPU).
   */
  activationBudgetBytes?: number;
  /** LM-head rows per chunk (default: model.headChunkRows(), ≤ 32 MiB of logits; Infinity = one chunk). */
  headChunkRows?: number;
  /**
   * Run a minibatch's samples packed into one sequence (default true: consecutive samples while
   * their packed length is at most `packTokens` and fits the activation budget), or false: one
   * forward and backward per sample.
   */
  pack?: boolean;
  /**
   * Most tokens of a packed forward (default 1024; a longer sample runs alone). Matmul efficiency
   * has levelled off well before it, and it keeps a packed step's peak memory near that of one
   * forward of this length, not the whole activation budget.
   */
  packTokens?: number;
}

/**
 * One step's figures; tisMean, tisMax, tisTruncated and tisTokens (core/train/grpo.ts TisStats):
 * the sampler/learner ratios of the minibatch's TIS-weighted tokens, present when it had any.
 */
export interface StepStats extends Partial<TisStats> {
  /** The minibatch's objective L (before the update). */
  loss: number;
  /** Share of trained tokens whose ratio was clipped (no gradient). */
  clipFraction: number;
  /** Mean of log π_old − log π_θ over trained tokens (0 on the first step of fresh samples). */
  approxKl: number;
  /** Mean k3 KL to the base policy (only when klCoef > 0). */
  klToBase?: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** The spike guard skipped this step (TrainOptions.skipSpikes): no update was made. */
  skipped?: boolean;
  /** Tokens run through the model (every position of every sequence). */
  tokens: number;
  /** Sequences (of those with trained tokens) whose backward recomputed each layer: checkpointed. */
  checkpointed: number;
  /** The full-tape activation bytes of the minibatch's longest forward, packed or not (model.activationBytes). */
  activationBytes: number;
  /** Forwards the minibatch ran: 1 when its samples were packed together, one per sample unpacked. */
  forwards: number;
  /** The budget those were compared with (TrainOptions.activationBudgetBytes). */
  activationBudgetBytes: number;
  /** Trained (marked) tokens: N of the token-level mean. */
  trainedTokens: number;
  samples: number;
  ms: number;
}

/** AdamW state, host-side (f32): the moments per LoRA key and the step count. */
export interface TrainerState {
  step: number;
  m: Map<string, { shape: number[]; data: Float32Array }>;
  v: Map<string, { shape: number[]; data: Float32Array }>;
}

interface Prepared {
  /** ids[..-1] and ids[1..]: position t predicts ids[t + 1]. */
  input: number[];
  targets: number[];
  /** Target positions (indices into targets) that are trained. */
  positions: number[];
  /** log π_old of the trained tokens (the ratio's reference); undefined: on-policy. */
  old: number[] | undefined;
  /** Sampler/learner ratios of the trained tokens before truncation (TIS on, both log-probs given). */
  tis: number[] | undefined;
  advantage: number;
  temperature: number;
}

const DEFAULTS = {
  lr: 1e-4,
  weightDecay: 0,
  beta1: 0.9,
  beta2: 0.999,
  maxGradNorm: 1,
  skipSpikes: 0,
  clipLow: 0.2,
  clipHigh: 0.28,
  klCoef: 0,
  minibatchTokens: 4096,
  epochs: 1,
  temperature: 1,
  tisCap: 2,
  packTokens: 1024,
};

const MAX_LOG_RATIO = 20;

/**
 * Default activation budget of one forward (a sequence, or samples packed into one): 256 MiB
 * (with r = 8, a 0.5B model on all seven projections keeps every activation up to 130 tokens,
 * 2.1 GB at 1,024; the bench's 12-layer 576-wide model on q/k/v/o up to 597).
 */
export const ACTIVATION_BUDGET_BYTES = 256 * 2 ** 20;

/** Trained positions of a sample as indices into its targets (ids[1..]); RangeError when malformed. */
export function trainedPositions(s: GrpoSample): number[] {
  const n = s.ids.length;
  const given = [s.spans, s.mask, s.promptLen].filter((x) => x !== undefined).length;
  if (given !== 1) throw new RangeError('A training sample needs exactly one of spans, mask or promptLen');
  const out: number[] = [];
  if (s.mask) {
    if (s.mask.length !== n) throw new RangeError(`mask has ${s.mask.length} entries for ${n} ids`);
    if (s.mask[0]) throw new RangeError('mask[0] is set: the first id has no context to predict it from');
    s.mask.forEach((m, i) => m && out.push(i - 1));
  } else {
    const spans = s.spans ?? [[s.promptLen!, n]];
    let last = 1;
    for (const [a, b] of spans) {
      if (!(Number.isInteger(a) && Number.isInteger(b) && a >= last && b >= a && b <= n))
        throw new RangeError(`span [${a}, ${b}) is not an ordered range within the ${n} ids (and after id 0)`);
      for (let i = a; i < b; i++) out.push(i - 1);
      last = b;
    }
  }
  if (s.oldLogprobs && s.oldLogprobs.length !== out.length)
    throw new RangeError(`${s.oldLogprobs.length} old log-probs for ${out.length} trained tokens`);
  if (s.learnerLogprobs && s.learnerLogprobs.length !== out.length)
    throw new RangeError(`${s.learnerLogprobs.length} learner log-probs for ${out.length} trained tokens`);
  return out;
}

export class LoraTrainer<X> {
  step = 0;
  private readonly m = new Map<string, X>();
  private readonly v = new Map<string, X>();
  private biasKey = '';
  private bias: X | undefined;
  private readonly spikes = new SpikeGuard();

  constructor(
    readonly model: LlamaModel<X>,
    readonly opts: TrainOptions = {},
  ) {
    if (!model.lora) throw new Error('LoraTrainer: the model has no LoRA adapter; call initLora() first');
    const budget = opts.activationBudgetBytes;
    if (budget !== undefined && !(budget >= 0))
      throw new RangeError(
        `LoraTrainer: activationBudgetBytes must be a number of bytes ≥ 0 (Infinity: never checkpoint); got ${budget}`,
      );
    for (const [k, p] of model.lora.w) {
      this.m.set(k, model.ops.zeros([...model.ops.shape(p)]));
      this.v.set(k, model.ops.zeros([...model.ops.shape(p)]));
    }
  }

  private o<K extends keyof typeof DEFAULTS>(k: K): (typeof DEFAULTS)[K] {
    return (this.opts[k] as (typeof DEFAULTS)[K] | undefined) ?? DEFAULTS[k];
  }

  /** The allowed-token bias on the device (re-uploaded only when the list changes). */
  private biasTensor(): X | undefined {
    const key = this.opts.allowedTokens?.join(',') ?? '';
    if (key !== this.biasKey) {
      if (this.bias) this.model.ops.free(this.bias);
      const b = allowedTokenBias(this.model.cfg.vocabSize, this.opts.allowedTokens);
      this.bias = b ? this.model.ops.upload([b.length], b) : undefined;
      this.biasKey = key;
    }
    return this.bias;
  }

  private prepare(s: GrpoSample): Prepared {
    const positions = trainedPositions(s);
    const tisOn = this.o('tisCap') > 0;
    const learner = s.learnerLogprobs;
    return {
      input: s.ids.slice(0, -1),
      targets: s.ids.slice(1),
      positions,
      old: tisOn ? (learner ?? s.oldLogprobs) : (s.oldLogprobs ?? learner),
      tis: tisOn && learner && s.oldLogprobs ? tisRatios(learner, s.oldLogprobs) : undefined,
      advantage: s.advantage,
      temperature: policyTemperature(s.temperature ?? this.o('temperature')),
    };
  }

  /** Policy logits z = (logits + bias) / T (a new tensor unless neither applies). (L, V) */
  private policyLogits(logits: X, t: number): X {
    const ops = this.model.ops;
    const bias = this.biasTensor();
    let z = logits;
    if (bias) z = ops.addBias(z, bias);
    if (t !== 1) {
      const s = ops.scale(z, 1 / t);
      if (z !== logits) ops.free(z);
      z = s;
    }
    return z;
  }

  /**
   * The LM head over hn (L, C) in chunks of rows: for each chunk [r0, r0 + R), the policy logits
   * z (R, V) and nll's log π and lse (R,) of its targets, handed to `each`, then freed (`each` may
   * overwrite z in place but must free anything else it makes).
   */
  private headChunks(hn: X, p: Prepared, each: (r0: number, R: number, z: X, logp: X, lse: X) => void): void {
    const { model } = this;
    const ops = model.ops;
    const L = p.input.length;
    const rows = this.chunkRows(L);
    for (let r0 = 0; r0 < L; r0 += rows) {
      const R = Math.min(rows, L - r0);
      const hc = R === L ? hn : ops.rows(hn, r0, R); // (R, C)
      const logits = model.headLogits(hc); // (R, V)
      if (hc !== hn) ops.free(hc);
      const z = this.policyLogits(logits, p.temperature);
      if (z !== logits) ops.free(logits);
      const r = ops.nll(z, p.targets.slice(r0, r0 + R), new Float32Array(R));
      each(r0, R, z, r.logprobs, r.lse);
      ops.free(r.loss, r.logprobs, r.lse, z);
    }
  }

  /** The activation budget of one forward (TrainOptions.activationBudgetBytes). */
  activationBudget(): number {
    return this.opts.activationBudgetBytes ?? Math.min(ACTIVATION_BUDGET_BYTES, this.model.ops.maxTensorBytes);
  }

  /** Whether a training forward over L tokens (packed or not) keeps only each layer's input (opts.checkpoint). */
  checkpointFor(L: number): boolean {
    return this.opts.checkpoint ?? this.model.activationBytes(L).full > this.activationBudget();
  }

  /** LM-head rows per chunk for L positions: at most headChunkRows, as even as whole chunks allow (L 10, at most 4: 4, 4, 2). */
  private chunkRows(L: number): number {
    const most = Math.min(L, this.opts.headChunkRows ?? this.model.headChunkRows());
    return Math.ceil(L / Math.ceil(L / most));
  }

  /**
   * The minibatch's forwards: unpacked, one per sample; packed, consecutive samples together while
   * their packed length is at most packTokens and, unless `checkpoint` is true (every layer's input
   * is all a forward keeps then), its full tape fits the activation budget (a sample over either alone).
   */
  private forwardGroups(used: Prepared[]): Prepared[][] {
    if (!(this.opts.pack ?? true)) return used.map((p) => [p]);
    const budget = this.activationBudget();
    const most = this.o('packTokens');
    const fits = (L: number) =>
      L <= most && (this.opts.checkpoint === true || this.model.activationBytes(L).full <= budget);
    const out: Prepared[][] = [];
    let cur: Prepared[] = [];
    let L = 0;
    for (const p of used) {
      const n = p.input.length;
      if (cur.length && !fits(L + n)) {
        out.push(cur);
        cur = [];
        L = 0;
      }
      cur.push(p);
      L += n;
    }
    if (cur.length) out.push(cur);
    return out;
  }

  /**
   * The sample restricted to its trained positions: `input` and `targets` of those positions only,
   * for the LM head and the NLL (the other positions carry weight 0 and need no logits).
   */
  private trainedRows(p: Prepared): Prepared {
    return {
      ...p,
      input: p.positions.map((t) => p.input[t]!),
      targets: p.positions.map((t) => p.targets[t]!),
      positions: p.positions.map((_, j) => j),
    };
  }

  /** Rows `positions` of x (L, C) as (P, C) (x itself when every row is trained). */
  private gatherRows(x: X, positions: number[], L: number): X {
    return positions.length === L ? x : this.model.ops.embedding(x, positions);
  }

  /**
   * (L, C) zeros with the rows of x (P, C) at `positions`, one copy per run of consecutive
   * positions, or those rows written into `into` (L, C); frees x.
   */
  private scatterRows(x: X, positions: number[], L: number, into?: X): X {
    const ops = this.model.ops;
    if (!into && positions.length === L) return x;
    const out = into ?? ops.zeros([L, ops.shape(x)[1]!]);
    for (let j = 0; j < positions.length;) {
      let n = 1;
      while (j + n < positions.length && positions[j + n] === positions[j]! + n) n++;
      ops.copyRows(x, j, out, positions[j]!, n);
      j += n;
    }
    ops.free(x);
    return out;
  }

  /**
   * log π (P,) of each sample's trained positions' targets under the current adapter (or the base
   * model with `base`), no gradient, on the backend: one forward over the group packed (as
   * gradientsOf packs it), then the LM head on each sample's trained rows only.
   */
  private logprobsTensors(group: Prepared[], base = false): X[] {
    const { model } = this;
    const ops = model.ops;
    const saved = model.lora;
    if (base) model.lora = null;
    try {
      const lengths = group.map((p) => p.input.length);
      const L = lengths.reduce((a, n) => a + n, 0);
      const hn = model.hiddenStates(
        group.flatMap((p) => p.input),
        lengths,
      ); // (L, C)
      let off = 0;
      const outs = group.map((p) => {
        const at = off === 0 ? p.positions : p.positions.map((t) => off + t);
        off += p.input.length;
        const hnT = this.gatherRows(hn, at, L); // (P, C)
        let out = ops.zeros([p.positions.length]);
        this.headChunks(hnT, this.trainedRows(p), (r0, _R, _z, logp) => (out = ops.appendRows(out, r0, logp)));
        if (hnT !== hn) ops.free(hnT);
        return out;
      });
      ops.free(hn);
      return outs;
    } finally {
      if (base) model.lora = saved; // only when swapped: setting it bumps adapterVersion (drops cached k/v)
    }
  }

  /**
   * log π_old of each sample's trained tokens under the current adapter, the learner's (no
   * gradient; one forward per group of samples packed as for training, one read for the batch). A
   * training round takes them before its first update and passes them as the samples' learnerLogprobs.
   */
  async learnerLogprobs(samples: GrpoSample[]): Promise<number[][]> {
    const ops = this.model.ops;
    const batch = samples.map((s) => this.prepare(s));
    const used = batch.filter((p) => p.positions.length > 0);
    if (!used.length) return batch.map(() => []);
    let all = ops.zeros([used.reduce((a, p) => a + p.positions.length, 0)]);
    let row = 0;
    for (const group of this.forwardGroups(used)) {
      for (const [i, t] of this.logprobsTensors(group).entries()) {
        all = ops.appendRows(all, row, t); // (P,): the trained positions'
        ops.free(t);
        row += group[i]!.positions.length;
      }
      ops.flush(); // a submit: the next group is recorded while this one runs
    }
    const lp = await ops.read(all);
    ops.free(all);
    ops.flush();
    row = 0;
    return batch.map((p) => {
      const out = Array.from(lp.subarray(row, row + p.positions.length));
      row += p.positions.length;
      return out;
    });
  }

  /**
   * One sample of a packed forward (its rows from `off`; L rows in all): the LM head, the NLL and the
   * GRPO weights on its P trained positions only, chunk by chunk, each chunk's loss terms appended
   * to `stats` from row `row0`, and ∂L/∂hn at those rows scattered into `dhn` (L, C) (made when
   * undefined). `base`: log π_base of the sample (the KL term), freed here. Returns stats and dhn.
   */
  private sampleGrad(
    p: Prepared,
    hn: X,
    off: number,
    L: number,
    base: X | undefined,
    invN: number,
    stats: X,
    row0: number,
    dhn: X | undefined,
  ): { stats: X; dhn: X } {
    const { model } = this;
    const ops = model.ops;
    const beta = this.o('klCoef');
    const cap = this.o('tisCap');
    const C = model.cfg.hiddenSize;
    // the LM head, the NLL and the GRPO weights run on the P trained positions only
    const q = this.trainedRows(p);
    const P = q.input.length;
    const at = off === 0 ? p.positions : p.positions.map((t) => off + t); // rows of the forward
    const info = new Float32Array(3 * P); // (P, 3): trained 1, log π_old, TIS weight
    p.positions.forEach((_, j) => {
      info[3 * j] = 1;
      info[3 * j + 1] = p.old ? p.old[j]! : 0;
      info[3 * j + 2] = p.tis ? tisWeight(p.tis[j]!, cap) : 1;
    });
    const infoT = ops.upload([P, 3], info);
    const w: GrpoWeightOptions = {
      advantage: p.advantage,
      invN,
      clipLow: this.o('clipLow'),
      clipHigh: this.o('clipHigh'),
      beta,
      onPolicy: !p.old,
      maxLogRatio: MAX_LOG_RATIO,
    };
    const hnT = this.gatherRows(hn, at, L); // (P, C)
    let dhT: X | undefined; // ∂L/∂hn at the trained positions (P, C), filled chunk by chunk
    this.headChunks(hnT, q, (r0, R, z, logp, lse) => {
      const infoC = R === P ? infoT : ops.rows(infoT, r0, R);
      const baseC = base && R !== P ? ops.rows(base, r0, R) : base;
      const g = ops.grpoWeights(logp, infoC, baseC, w);
      stats = ops.appendRows(stats, row0 + r0, g.stats);
      // ∂L/∂z over the chunk, in place of z, with the 1/T of z = (logits + bias) / T folded in
      const dz = ops.nllBackward(z, q.targets.slice(r0, r0 + R), g.w, lse, {
        upstream: 1 / p.temperature,
        inPlace: true,
      });
      const dh = model.headBackward(dz); // (R, C)
      if (R === P) dhT = dh;
      else {
        dhT = ops.appendRows(dhT ?? ops.zeros([P, C]), r0, dh);
        ops.free(dh);
      }
      ops.free(g.w, g.stats);
      if (dz !== z) ops.free(dz);
      if (infoC !== infoT) ops.free(infoC);
      if (baseC && baseC !== base) ops.free(baseC);
    });
    if (hnT !== hn) ops.free(hnT);
    const dhnOut = this.scatterRows(dhT!, at, L, dhn);
    ops.free(infoT);
    if (base) ops.free(base);
    const rows = this.chunkRows(P);
    if (rows < P) {
      // submit, then destroy the chunk-sized buffers: idle in the pool they would add a chunk's
      // logits to the next sample's head and to the backward's peak (sizes the layers never ask for)
      ops.flush();
      ops.trim((rows - 1) * model.cfg.vocabSize * 4);
    }
    return { stats, dhn: dhnOut };
  }

  /**
   * Loss, statistics and summed gradients of one minibatch at the current adapter (no update).
   * Samples without old log-probs count as on-policy (ratio 1).
   */
  async gradients(
    samples: GrpoSample[],
  ): Promise<Omit<StepStats, 'gradNorm' | 'samples' | 'ms'> & { grads: Map<string, X> }> {
    return this.gradientsOf(samples.map((s) => this.prepare(s)));
  }

  private async gradientsOf(
    batch: Prepared[],
  ): Promise<Omit<StepStats, 'gradNorm' | 'samples' | 'ms'> & { grads: Map<string, X> }> {
    const { model } = this;
    const ops = model.ops;
    const beta = this.o('klCoef');
    const cap = this.o('tisCap');
    const C = model.cfg.hiddenSize;
    const used = batch.filter((p) => p.positions.length > 0);
    const N = used.reduce((a, p) => a + p.positions.length, 0);
    const grads = new Map<string, X>();
    for (const [k, x] of model.lora!.w) grads.set(k, ops.zeros([...ops.shape(x)]));
    // (Σ P, 4) loss terms of every trained position of the minibatch (grpo_weights.ts), read once at the end
    const rowsTotal = used.reduce((a, p) => a + p.positions.length, 0);
    let stats = ops.zeros([Math.max(1, rowsTotal), 4]);
    let row0 = 0;
    let tokens = 0;
    let checkpointed = 0;
    let longest = 0;
    const forwards = this.forwardGroups(used);
    for (const group of forwards) {
      const lengths = group.map((p) => p.input.length);
      const L = lengths.reduce((a, n) => a + n, 0);
      const checkpoint = this.checkpointFor(L);
      if (checkpoint) checkpointed += group.length;
      longest = Math.max(longest, L);
      // log π_base (P,) of each sample, before the tape exists: its forward's temporaries never add to the tape's peak
      const bases = beta > 0 ? this.logprobsTensors(group, true) : undefined;
      const tape = model.forwardHidden(group.length === 1 ? group[0]!.input : group.flatMap((p) => p.input), {
        checkpoint,
        ...(group.length > 1 ? { segments: lengths } : {}),
      });
      // ∂L/∂hn (L, C), zero at the untrained positions: each sample's rows written in turn
      let dhn: X | undefined = group.length > 1 ? ops.zeros([L, C]) : undefined;
      let off = 0; // the sample's first row in the forward
      for (const [gi, p] of group.entries()) {
        ({ stats, dhn } = this.sampleGrad(p, tape.hn, off, L, bases?.[gi], 1 / N, stats, row0, dhn));
        off += p.input.length;
        row0 += p.positions.length;
      }
      model.backwardHidden(tape, dhn!, grads);
      ops.free(dhn!);
      model.freeTape(tape);
      tokens += L;
      ops.flush(); // a submit, not a sync: the next forward is recorded while this one runs
    }
    const st = await ops.read(stats); // the one read of the step's statistics
    ops.free(stats);
    let loss = 0;
    let clipped = 0;
    let kl = 0;
    let k3sum = 0;
    for (let i = 0; i < rowsTotal; i++) {
      loss += st[4 * i]!;
      clipped += st[4 * i + 1]!;
      kl += st[4 * i + 2]!;
      k3sum += st[4 * i + 3]!;
    }
    const tis = tisStats(
      used.flatMap((p) => (p.tis ? [p.tis] : [])),
      cap,
    );
    return {
      grads,
      loss: N ? loss / N : 0,
      tokens,
      trainedTokens: N,
      checkpointed,
      activationBytes: model.activationBytes(longest).full,
      forwards: forwards.length,
      activationBudgetBytes: this.activationBudget(),
      clipFraction: N ? clipped / N : 0,
      approxKl: N ? kl / N : 0,
      ...(beta > 0 ? { klToBase: N ? k3sum / N : 0 } : {}),
      ...tis,
    };
  }

  /** One optimiser step on one minibatch (all of `samples`). */
  async trainStep(samples: GrpoSample[]): Promise<StepStats> {
    return this.stepOn(samples.map((s) => this.prepare(s)));
  }

  private async stepOn(batch: Prepared[]): Promise<StepStats> {
    const t0 = performance.now();
    const ops = this.model.ops;
    const g = await this.gradientsOf(batch);
    const sumSq = await ops.sumSquares([...g.grads.values()]);
    const { grads: _grads, ...stats } = g;
    if (!this.spikes.admit(Math.sqrt(sumSq), this.o('skipSpikes'))) {
      ops.free(...g.grads.values());
      return { ...stats, gradNorm: Math.sqrt(sumSq), skipped: true, samples: batch.length, ms: performance.now() - t0 };
    }
    const gradScale = gradClipScale(sumSq, this.o('maxGradNorm'));
    this.step++;
    for (const [k, p] of this.model.lora!.w) {
      ops.adamw(p, g.grads.get(k)!, this.m.get(k)!, this.v.get(k)!, {
        lr: this.o('lr'),
        weightDecay: this.o('weightDecay'),
        beta1: this.o('beta1'),
        beta2: this.o('beta2'),
        step: this.step,
        gradScale,
      });
    }
    ops.free(...g.grads.values());
    ops.flush();
    this.model.adapterChanged(); // cached k/v (the scheduler's prefix cache) were computed with the old adapter
    return { ...stats, gradNorm: Math.sqrt(sumSq), samples: batch.length, ms: performance.now() - t0 };
  }

  /**
   * GRPO on a batch as one training round: the learner's π_old computed before any update where a
   * sample needs it (no old log-probs, or TIS on and no learner log-probs), then `epochs` passes,
   * each one optimiser step per minibatch of at most `minibatchTokens` tokens (in the given order; a
   * sample longer than the budget is a minibatch of its own). One entry per step.
   */
  async train(samples: GrpoSample[]): Promise<StepStats[]> {
    const given = samples.filter((s) => trainedPositions(s).length > 0);
    const needs = given.filter((s) => !s.oldLogprobs || (this.o('tisCap') > 0 && !s.learnerLogprobs));
    const lps = await this.learnerLogprobs(needs);
    const learner = new Map(needs.map((s, i) => [s, lps[i]!]));
    const batch = given.map((s) => this.prepare(learner.has(s) ? { ...s, learnerLogprobs: learner.get(s) } : s));
    const budget = this.o('minibatchTokens');
    const minibatches: Prepared[][] = [];
    let cur: Prepared[] = [];
    let used = 0;
    for (const p of batch) {
      if (cur.length && used + p.input.length > budget) {
        minibatches.push(cur);
        cur = [];
        used = 0;
      }
      cur.push(p);
      used += p.input.length;
    }
    if (cur.length) minibatches.push(cur);
    const out: StepStats[] = [];
    for (let e = 0; e < this.o('epochs'); e++) for (const mb of minibatches) out.push(await this.stepOn(mb));
    return out;
  }

  /** Give AdamW's moments and the bias tensor back to the backend (the trainer is unusable after). */
  dispose(): void {
    const ops = this.model.ops;
    ops.free(...this.m.values(), ...this.v.values());
    if (this.bias) ops.free(this.bias);
    this.m.clear();
    this.v.clear();
    this.bias = undefined;
    this.biasKey = '';
  }

  /** AdamW's moments and step, copied to the host. */
  async exportState(): Promise<TrainerState> {
    const ops = this.model.ops;
    const copy = async (src: Map<string, X>) => {
      const out = new Map<string, { shape: number[]; data: Float32Array }>();
      for (const [k, x] of src) out.set(k, { shape: [...ops.shape(x)], data: Float32Array.from(await ops.read(x)) });
      return out;
    };
    return { step: this.step, m: await copy(this.m), v: await copy(this.v) };
  }

  /** Restore exportState()'s result (same adapter shapes); the adapter itself is loaded separately (PEFT). */
  importState(state: TrainerState): void {
    const ops = this.model.ops;
    for (const [name, src, dst] of [
      ['m', state.m, this.m],
      ['v', state.v, this.v],
    ] as const) {
      for (const [k, x] of dst) {
        const t = src.get(k);
        const shape = ops.shape(x);
        if (!t || t.shape.join() !== shape.join())
          throw new RangeError(
            `Optimiser state does not match the adapter: ${name}[${k}] is missing or has another shape`,
          );
        ops.free(x);
        dst.set(k, ops.upload([...shape], Float32Array.from(t.data)));
      }
    }
    this.step = state.step;
  }
}

/** The optimiser state as one safetensors file ("m.<key>", "v.<key>"; the step in the metadata). */
export function encodeTrainerState(state: TrainerState): Uint8Array {
  const out = new Map<string, TensorToWrite>();
  for (const [side, src] of [
    ['m', state.m],
    ['v', state.v],
  ] as const)
    for (const [k, t] of src) out.set(`${side}.${k}`, { dtype: 'F32', shape: t.shape, data: t.data });
  return writeSafetensors(out, { format: 'spade-adamw', step: String(state.step) });
}

/** Read encodeTrainerState's bytes back. */
export function decodeTrainerState(bytes: Uint8Array | ArrayBuffer): TrainerState {
  const file = parseSafetensors(bytes);
  const step = Number(file.metadata.step);
  if (file.metadata.format !== 'spade-adamw' || !Number.isInteger(step) || step < 0)
    throw new RangeError('This is not an optimiser state written by the trainer (format spade-adamw with a step)');
  const state: TrainerState = { step, m: new Map(), v: new Map() };
  for (const [name, info] of file.tensors) {
    const side = name.slice(0, 2);
    const map = side === 'm.' ? state.m : side === 'v.' ? state.v : null;
    if (!map) throw new RangeError(`Optimiser state: unexpected tensor "${name}"`);
    map.set(name.slice(2), { shape: [...info.shape], data: tensorF32(file, name) });
  }
  return state;
}
