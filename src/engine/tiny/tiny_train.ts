/**
 * The Lab's fast path (tiny_lm.ts), its GRPO step: LoraTrainer.trainStep's arithmetic for what the
 * Lab asks — a packed training forward that keeps every activation (forwardHidden with segments),
 * the trainer's head over the allowed ids (log π, the GRPO weights, ∂L/∂z), the backward into the
 * adapter's gradients (backwardHidden), the global-norm clip and AdamW on the adapter's arrays in
 * place — each in the references' order, so the adapter after a step equals theirs bit for bit
 * (tests/unit/tiny_lm.test.ts). Also the learner's log-probs of a given reply (policyLogprobs).
 */
import type { TokenSample } from '../../core/train/grpo.ts';
import type { PolicyTrainer, UpdateStats } from '../../core/train/grpo_rounds.ts';
import { loraKey, type LoraModule } from '../io/peft.ts';
import { gradClipScale, SpikeGuard } from '../kernels/adamw.ts';
import { attentionBack, probOffsets, segmentAttention } from './tiny_attention.ts';
import type { Lora, TinyLm } from './tiny_lm.ts';
import { f32, mmNN, mmTNacc, rmsnorm, rmsnormBack, sigmoid } from './tiny_math.ts';

/** The trainer's packTokens default (train.ts): a packed forward holds at most this many tokens. */
const PACK_TOKENS = 1024;
/** train.ts's MAX_LOG_RATIO. */
const MAX_LOG_RATIO = 20;
/** adamw.ts's default eps. */
const ADAM_EPS = 1e-8;

/** What the Lab's trainer takes (LoraTrainer's options as the Lab sets them; the rest its defaults). */
export interface TinyTrainOptions {
  lr: number;
  temperature: number;
  /** The policy's vocabulary, ascending. */
  allowed: number[];
  clipLow: number;
  clipHigh: number;
  maxGradNorm: number;
  beta1: number;
  beta2: number;
  /** AdamW's decoupled weight decay on the adapter (LoraTrainer's weightDecay; the Lab's default 0). */
  weightDecay: number;
  /**
   * β of the k3 KL to the base policy (LoraTrainer's klCoef; default 0, no term): each trained token
   * adds β·(e^δ − δ − 1), δ = log π_base − log π_θ, base = the adapter off.
   */
  klCoef: number;
  /** LoraTrainer's skipSpikes (SpikeGuard's ratio; default 0, off). */
  skipSpikes: number;
}

/** LoraTrainer's defaults for what the Lab does not set (train.ts DEFAULTS). */
export const TINY_TRAIN_DEFAULTS = {
  clipLow: 0.2,
  clipHigh: 0.28,
  maxGradNorm: 1,
  beta1: 0.9,
  beta2: 0.999,
  weightDecay: 0,
  klCoef: 0,
  skipSpikes: 0,
} as const;

/** AdamW's moments per adapter key, the step count and the spike guard. */
interface AdamState {
  step: number;
  spikes: SpikeGuard;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

/** The fast path's PolicyTrainer: trainStep with its own AdamW state. */
export function tinyTrainer(lm: TinyLm, o: TinyTrainOptions): PolicyTrainer {
  const state: AdamState = { step: 0, spikes: new SpikeGuard(), m: new Map(), v: new Map() };
  const opts = { ...o };
  return {
    step: async (mb) => trainStep(lm, mb, opts, state),
    scaleLr: (factor) => {
      opts.lr = o.lr * factor;
    },
  };
}

/**
 * One GRPO step on a minibatch, as LoraTrainer.trainStep with the Lab's options (TIS on but no
 * learner log-probs: the ratio against the sampler's; the k3 KL to the base when klCoef > 0;
 * AdamW), on the adapter's arrays in place. `allowed` ascending.
 */
function trainStep(
  lm: TinyLm,
  samples: TokenSample[],
  o: TinyTrainOptions,
  state: AdamState,
): Omit<UpdateStats, 'role'> {
  const t0 = performance.now();
  const lora = lm.lora();
  if (!lora) throw new Error('TinyLm.trainStep: no LoRA adapter');
  const prepared = samples.map((x) => prepare(x, o.temperature));
  const used = prepared.filter((p) => p.positions.length > 0);
  const N = used.reduce((a, p) => a + p.positions.length, 0);
  const grads = zeroGrads(lm);
  let loss = 0;
  let clipped = 0;
  let kl = 0;
  let k3sum = 0;
  let tokens = 0;
  const stats: number[] = [];
  for (const group of packGroups(used)) tokens += groupGradients(lm, group, 1 / N, o, lora, grads, stats);
  for (let i = 0; i < stats.length; i += 4) {
    loss += stats[i]!;
    clipped += stats[i + 1]!;
    kl += stats[i + 2]!;
    k3sum += stats[i + 3]!;
  }
  const { sumSq, skipped } = adamw(lm, grads, o, state);
  if (!skipped) lm.llm.adapterChanged();
  return {
    loss: N ? loss / N : 0,
    clipFraction: N ? clipped / N : 0,
    approxKl: N ? kl / N : 0,
    ...(o.klCoef > 0 ? { klToBase: N ? k3sum / N : 0 } : {}),
    gradNorm: Math.sqrt(sumSq),
    ...(skipped ? { skipped } : {}),
    tokens,
    ms: performance.now() - t0,
  };
}

/** The trainer's forward groups: consecutive samples packed while ≤ PACK_TOKENS tokens. */
function packGroups(used: Prep[]): Prep[][] {
  const groups: Prep[][] = [];
  let cur: Prep[] = [];
  let len = 0;
  for (const p of used) {
    if (cur.length && len + p.input.length > PACK_TOKENS) {
      groups.push(cur);
      cur = [];
      len = 0;
    }
    cur.push(p);
    len += p.input.length;
  }
  if (cur.length) groups.push(cur);
  return groups;
}

/**
 * One packed forward of `group` (each sample its own segment), the head of each sample and the
 * backward: the adapter gradients added into `grads`, each trained token's figures appended to
 * `stats` (headGrad). Returns the tokens the forward held.
 */
function groupGradients(
  lm: TinyLm,
  group: Prep[],
  invN: number,
  o: TinyTrainOptions,
  lora: Lora,
  grads: Map<string, Float32Array>,
  stats: number[],
): number {
  const ids = group.flatMap((p) => p.input);
  const T = ids.length;
  const segStart = new Int32Array(T);
  let off = 0;
  for (const p of group) {
    segStart.fill(off, off, off + p.input.length);
    off += p.input.length;
  }
  // log π_base of the trained tokens (the adapter off), before the tape, as LoraTrainer takes it
  const baseHn = o.klCoef > 0 ? forwardTape(lm, ids, segStart, null).hn : null;
  const tape = forwardTape(lm, ids, segStart, lora);
  const dhn = new Float32Array(T * lm.C);
  off = 0;
  for (const p of group) {
    const base = baseHn && p.positions.map((pos) => headRow(lm, baseHn, (off + pos) * lm.C, p, pos, o.allowed).lp);
    headGrad(lm, tape.hn, off, p, invN, o, dhn, stats, base);
    off += p.input.length;
  }
  backward(lm, tape, dhn, segStart, lora, grads);
  return T;
}

/**
 * The global-norm clip and AdamW, in the adapter's key order (sumSquaresCpu, adamwCpu), on the
 * adapter's arrays in place, unless the spike guard skips the step; returns the gradients' sum of
 * squares (before the clip) and whether the step was skipped.
 */
function adamw(
  lm: TinyLm,
  grads: Map<string, Float32Array>,
  o: TinyTrainOptions,
  state: AdamState,
): { sumSq: number; skipped: boolean } {
  const keys = [...lm.llm.lora!.w.keys()];
  let sumSq = 0;
  for (const key of keys) {
    const gk = grads.get(key)!;
    for (let i = 0; i < gk.length; i++) sumSq += gk[i]! * gk[i]!;
  }
  if (!state.spikes.admit(Math.sqrt(sumSq), o.skipSpikes)) return { sumSq, skipped: true };
  const gradScale = gradClipScale(sumSq, o.maxGradNorm);
  state.step++;
  const b1 = o.beta1;
  const b2 = o.beta2;
  const bc1 = 1 - b1 ** state.step;
  const bc2 = 1 - b2 ** state.step;
  for (const key of keys) {
    const p = lm.llm.lora!.w.get(key)!.data;
    const gk = grads.get(key)!;
    let m = state.m.get(key);
    let v = state.v.get(key);
    if (!m || !v) {
      m = new Float32Array(p.length);
      v = new Float32Array(p.length);
      state.m.set(key, m);
      state.v.set(key, v);
    }
    for (let i = 0; i < p.length; i++) {
      const gi = gk[i]! * gradScale;
      m[i] = b1 * m[i]! + (1 - b1) * gi;
      v[i] = b2 * v[i]! + (1 - b2) * gi * gi;
      const decayed = p[i]! * (1 - o.lr * o.weightDecay);
      p[i] = decayed - (o.lr * (m[i]! / bc1)) / (Math.sqrt(v[i]! / bc2) + ADAM_EPS);
    }
  }
  return { sumSq, skipped: false };
}

/**
 * log π of ids[t + 1] at each of `positions` (indices into ids[1..]) under the current adapter:
 * LoraTrainer.learnerLogprobs' arithmetic (a training forward, the head over the allowed ids,
 * z = logits / T, rounded to f32).
 */
export function policyLogprobs(
  lm: TinyLm,
  ids: number[],
  positions: number[],
  allowed: readonly number[],
  temperature: number,
): number[] {
  const lora = lm.lora();
  if (!lora) throw new Error('TinyLm.policyLogprobs: no LoRA adapter');
  const input = ids.slice(0, -1);
  const tape = forwardTape(lm, input, new Int32Array(input.length), lora);
  const t = temperature > 0 ? temperature : 1;
  const C = lm.C;
  return positions.map((pos) => {
    const z = allowed.map((id) => {
      let s = 0;
      for (let c = 0; c < C; c++) s += tape.hn[pos * C + c]! * lm.head[id * C + c]!;
      const l = f32(s);
      return t !== 1 ? f32(l * (1 / t)) : l;
    });
    const ti = allowed.indexOf(ids[pos + 1]!);
    if (ti < 0) throw new RangeError(`TinyLm: token ${ids[pos + 1]} is not one of the allowed ids`);
    let m = -Infinity;
    for (const x of z) m = Math.max(m, x);
    let sum = 0;
    for (const x of z) sum += Math.exp(x - m);
    return f32(z[ti]! - (m + Math.log(sum)));
  });
}

function zeroGrads(lm: TinyLm): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const key of lm.llm.lora!.w.keys()) out.set(key, new Float32Array(lm.llm.lora!.w.get(key)!.data.length));
  return out;
}

/**
 * forwardHidden with segments: every activation the backward reads. `lora` null: the base model
 * (the adapter off, as LoraTrainer's KL term reads it; only `hn` is used then).
 */
function forwardTape(lm: TinyLm, ids: number[], segStart: Int32Array, lora: Lora | null): Tape {
  const { C, F, qd, kvd, eps } = lm;
  const T = ids.length;
  const r = lora?.r ?? 0;
  let h = new Float32Array(T * C);
  ids.forEach((id, t) => h.set(lm.embed.subarray(id * C, (id + 1) * C), t * C));
  const layers: LayerTape[] = [];
  const pOff = probOffsets(T, lm.Hq, segStart);
  for (let li = 0; li < lm.layers.length; li++) {
    const L = lm.layers[li]!;
    const t: LayerTape = {
      h0: h,
      a1: new Float32Array(T * C),
      qr: new Float32Array(T * qd),
      kr: new Float32Array(T * kvd),
      v: new Float32Array(T * kvd),
      o: new Float32Array(T * qd),
      h1: new Float32Array(T * C),
      a2: new Float32Array(T * C),
      g: new Float32Array(T * F),
      u: new Float32Array(T * F),
      s: new Float32Array(T * F),
      p: new Float64Array(0),
      xa: {} as Record<LoraModule, Float32Array>,
    };
    const linear = (x: Float32Array, m: LoraModule, nOut: number, nIn: number, y: Float32Array) => {
      if (!lora) return mmNN(x, L.wt[m], y, T, nOut, nIn);
      const xa = (t.xa[m] = new Float32Array(T * r));
      if (L.wk && lora.k && nOut % 8 === 0) {
        lm.kernel!.linear(x, T, nIn, nOut, y, false, L.wk[m].t, lora.k[li]![m], xa);
        return;
      }
      mmNN(x, L.wt[m], y, T, nOut, nIn);
      mmNN(x, lora.At[li]![m], xa, T, r, nIn);
      mmNN(xa, lora.Bt[li]![m], y, T, nOut, r, true, lora.scale);
    };
    rmsnorm(h, L.inNorm, t.a1, T, C, eps);
    const q = new Float32Array(T * qd);
    const k = new Float32Array(T * kvd);
    linear(t.a1, 'q_proj', qd, C, q);
    linear(t.a1, 'k_proj', kvd, C, k);
    linear(t.a1, 'v_proj', kvd, C, t.v);
    rotate(lm, q, t.qr, T, lm.Hq, segStart, 1);
    rotate(lm, k, t.kr, T, lm.Hkv, segStart, 1);
    t.p =
      lm.kernel && lm.D === 16
        ? lm.kernel.segmentAttention16(t.qr, t.kr, t.v, t.o, T, segStart, pOff, lm.Hq, lm.Hkv)
        : segmentAttention(lm, t.qr, t.kr, t.v, t.o, T, segStart, pOff);
    const oo = new Float32Array(T * C);
    linear(t.o, 'o_proj', C, qd, oo);
    for (let i = 0; i < T * C; i++) t.h1[i] = h[i]! + oo[i]!;
    rmsnorm(t.h1, L.postNorm, t.a2, T, C, eps);
    linear(t.a2, 'gate_proj', F, C, t.g);
    linear(t.a2, 'up_proj', F, C, t.u);
    for (let i = 0; i < T * F; i++) t.s[i] = t.g[i]! * sigmoid(t.g[i]!) * t.u[i]!;
    const d = new Float32Array(T * C);
    linear(t.s, 'down_proj', C, F, d);
    const next = new Float32Array(T * C);
    for (let i = 0; i < T * C; i++) next[i] = t.h1[i]! + d[i]!;
    layers.push(t);
    h = next;
  }
  const hn = new Float32Array(T * C);
  rmsnorm(h, lm.norm, hn, T, C, eps);
  return { layers, hFinal: h, hn };
}

/** rotateCpu over (T, H, D) with positions from each row's segment start; sign −1: the backward. */
function rotate(
  lm: TinyLm,
  x: Float32Array,
  y: Float32Array,
  T: number,
  H: number,
  segStart: Int32Array,
  sign: number,
) {
  const D = lm.D;
  const half = D / 2;
  for (let ti = 0; ti < T; ti++) {
    const pos = ti - segStart[ti]!;
    const [cos, sin] = lm.trig(pos);
    for (let hi = 0; hi < H; hi++) {
      const base = (ti * H + hi) * D;
      for (let i = 0; i < half; i++) {
        const c = cos[pos * half + i]!;
        const s = sign * sin[pos * half + i]!;
        const x1 = x[base + i]!;
        const x2 = x[base + i + half]!;
        y[base + i] = x1 * c - x2 * s;
        y[base + i + half] = x2 * c + x1 * s;
      }
    }
  }
}

/**
 * The trainer's head for one sample of a packed forward (rows from `off`): log π of its trained
 * targets, the GRPO weights (grpoWeightsCpu), ∂L/∂z (nllBackwardCpu) and its LM-head backward,
 * written into dhn's rows; each trained token's (ℓ, clipped, old − new, k3) appended to `stats`.
 */
function headGrad(
  lm: TinyLm,
  hn: Float32Array,
  off: number,
  p: Prep,
  invN: number,
  o: TinyTrainOptions,
  dhn: Float32Array,
  stats: number[],
  base: number[] | null = null,
) {
  const C = lm.C;
  const ids = o.allowed;
  const t = p.temperature;
  const dz = new Float32Array(ids.length);
  p.positions.forEach((pos, j) => {
    const row = (off + pos) * C;
    const { z, lse, lp, ti } = headRow(lm, hn, row, p, pos, ids);
    // grpoWeightsCpu (c = 1: no learner log-probs)
    const old = f32(p.old![j]!);
    const A = p.advantage;
    const ratio = Math.exp(Math.max(-MAX_LOG_RATIO, Math.min(MAX_LOG_RATIO, lp - old)));
    const clip = Math.min(Math.max(ratio, 1 - o.clipLow), 1 + o.clipHigh);
    const isClipped = (A > 0 && ratio > 1 + o.clipHigh) || (A < 0 && ratio < 1 - o.clipLow);
    let loss = -1 * Math.min(ratio * A, clip * A);
    let wt = isClipped ? 0 : 1 * A * ratio;
    let k3 = 0;
    if (base) {
      const d = base[j]! - lp;
      const e = Math.exp(d);
      k3 = e - d - 1;
      loss += o.klCoef * k3;
      wt -= o.klCoef * (1 - e);
    }
    const w = f32(wt * invN);
    stats.push(f32(loss), isClipped ? 1 : 0, f32(old - lp), f32(k3));
    // nllBackwardCpu with upstream 1/T, then dh = dz · W_head (headBackward)
    const gw = (1 / t) * w;
    for (let i = 0; i < ids.length; i++) dz[i] = gw * (Math.exp(z[i]! - lse) - (i === ti ? 1 : 0));
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let i = 0; i < ids.length; i++) s += dz[i]! * lm.head[ids[i]! * C + c]!;
      dhn[row + c] = s;
    }
  });
}

/**
 * The trainer's head on one row of `hn` (from `row`): z = (logits + bias) / T over the allowed ids
 * (the rest are −1e9: exp gives 0), its log-sum-exp and log π of the sample's target at `pos`.
 */
function headRow(lm: TinyLm, hn: Float32Array, row: number, p: Prep, pos: number, ids: readonly number[]) {
  const C = lm.C;
  const t = p.temperature;
  const z = new Float64Array(ids.length);
  ids.forEach((id, i) => {
    let s = 0;
    for (let c = 0; c < C; c++) s += hn[row + c]! * lm.head[id * C + c]!;
    const l = f32(s);
    z[i] = t !== 1 ? f32(l * (1 / t)) : l;
  });
  const target = p.targets[pos]!;
  const ti = ids.indexOf(target);
  if (ti < 0) throw new RangeError(`TinyLm: trained token ${target} is not one of the allowed ids`);
  let m = -Infinity;
  for (let i = 0; i < ids.length; i++) m = Math.max(m, z[i]!);
  let sum = 0;
  for (let i = 0; i < ids.length; i++) sum += Math.exp(z[i]! - m);
  const lse = m + Math.log(sum);
  return { z, lse, lp: f32(z[ti]! - lse), ti };
}

/** backwardHidden: the adapter gradients added into `grads`. */
function backward(
  lm: TinyLm,
  tape: Tape,
  dhn: Float32Array,
  segStart: Int32Array,
  lora: Lora,
  grads: Map<string, Float32Array>,
) {
  const { C, F, qd, kvd, Hq, Hkv, eps } = lm;
  const T = segStart.length;
  const r = lora.r;
  const sc = lora.scale;
  let dh = new Float32Array(T * C);
  rmsnormBack(tape.hFinal, lm.norm, dhn, dh, T, C, eps);
  for (let li = lm.layers.length - 1; li >= 0; li--) {
    const L = lm.layers[li]!;
    const t = tape.layers[li]!;
    const A = lora.A[li]!;
    const B = lora.B[li]!;
    /**
     * linBack: dx = dy·W (+ into), dB += s·dyᵀ·xa, dyB = dy·B, dA += s·dyBᵀ·x, dx += s·dyB·A.
     * `dx` false: the input gradient is not wanted (layer 0's q/k/v: the embeddings are frozen).
     */
    const linBack = (
      m: LoraModule,
      x: Float32Array,
      dy: Float32Array,
      nOut: number,
      nIn: number,
      into?: Float32Array,
      dx = true,
    ) => {
      const out = into ?? new Float32Array(dx ? T * nIn : 0);
      if (L.wk && lora.k && nIn % 8 === 0) {
        const gA = grads.get(loraKey(li, m, 'A'))!;
        const gB = grads.get(loraKey(li, m, 'B'))!;
        lm.kernel!.linearBack(
          T,
          nIn,
          nOut,
          x,
          dy,
          t.xa[m],
          dx ? out : null,
          Boolean(into),
          L.wk[m].n,
          lora.k[li]![m],
          gA,
          gB,
        );
        return out;
      }
      if (dx) mmNN(dy, L.w[m], out, T, nIn, nOut, Boolean(into));
      mmTNacc(dy, t.xa[m], grads.get(loraKey(li, m, 'B'))!, nOut, r, T, sc);
      const dyB = new Float32Array(T * r);
      mmNN(dy, B[m], dyB, T, r, nOut);
      mmTNacc(dyB, x, grads.get(loraKey(li, m, 'A'))!, r, nIn, T, sc);
      if (dx) mmNN(dyB, A[m], out, T, nIn, r, true, sc);
      return out;
    };
    const ds = linBack('down_proj', t.s, dh, C, F);
    const dgate = new Float32Array(T * F);
    const dup = new Float32Array(T * F);
    for (let i = 0; i < T * F; i++) {
      const g = t.g[i]!;
      const s = sigmoid(g);
      dgate[i] = ds[i]! * t.u[i]! * s * (1 + g * (1 - s));
      dup[i] = ds[i]! * g * s;
    }
    const da2 = linBack('gate_proj', t.a2, dgate, F, C);
    linBack('up_proj', t.a2, dup, F, C, da2);
    const dh1 = new Float32Array(T * C);
    rmsnormBack(t.h1, L.postNorm, da2, dh1, T, C, eps);
    for (let i = 0; i < T * C; i++) dh1[i] = dh1[i]! + dh[i]!;
    const dof = linBack('o_proj', t.o, dh1, C, qd);
    // attentionBackwardCpu (f64 accumulators), then the rope backward
    const { dq, dk, dv } =
      lm.kernel && lm.D === 16
        ? lm.kernel.attentionBack16(dof, t, segStart, Hq, Hkv)
        : attentionBack(lm, dof, t, segStart);
    const dqn = new Float32Array(T * qd);
    const dkn = new Float32Array(T * kvd);
    rotate(lm, Float32Array.from(dq), dqn, T, Hq, segStart, -1);
    rotate(lm, Float32Array.from(dk), dkn, T, Hkv, segStart, -1);
    if (li === 0) {
      // the layer's input is the frozen embedding: only the adapter gradients are wanted
      linBack('q_proj', t.a1, dqn, qd, C, undefined, false);
      linBack('k_proj', t.a1, dkn, kvd, C, undefined, false);
      linBack('v_proj', t.a1, Float32Array.from(dv), kvd, C, undefined, false);
      break;
    }
    const da1 = linBack('q_proj', t.a1, dqn, qd, C);
    linBack('k_proj', t.a1, dkn, kvd, C, da1);
    linBack('v_proj', t.a1, Float32Array.from(dv), kvd, C, da1);
    const dh0 = new Float32Array(T * C);
    rmsnormBack(t.h0, L.inNorm, da1, dh0, T, C, eps);
    for (let i = 0; i < T * C; i++) dh0[i] = dh0[i]! + dh1[i]!;
    dh = dh0;
  }
}

interface LayerTape {
  h0: Float32Array;
  a1: Float32Array;
  qr: Float32Array;
  kr: Float32Array;
  v: Float32Array;
  o: Float32Array;
  h1: Float32Array;
  a2: Float32Array;
  g: Float32Array;
  u: Float32Array;
  s: Float32Array;
  /** Attention probabilities per (row, head), at probOffsets. */
  p: Float64Array;
  xa: Record<LoraModule, Float32Array>;
}

interface Tape {
  layers: LayerTape[];
  hFinal: Float32Array;
  hn: Float32Array;
}

/** A sample as the trainer prepares it (train.ts prepare/trainedPositions for spans). */
interface Prep {
  input: number[];
  targets: number[];
  positions: number[];
  old: number[] | undefined;
  advantage: number;
  temperature: number;
}

function prepare(s: TokenSample, temperature: number): Prep {
  const n = s.ids.length;
  const positions: number[] = [];
  let last = 1;
  for (const [a, b] of s.spans) {
    if (!(Number.isInteger(a) && Number.isInteger(b) && a >= last && b >= a && b <= n))
      throw new RangeError(`span [${a}, ${b}) is not an ordered range within the ${n} ids (and after id 0)`);
    for (let i = a; i < b; i++) positions.push(i - 1);
    last = b;
  }
  if (s.logprobs.length !== positions.length)
    throw new RangeError(`${s.logprobs.length} old log-probs for ${positions.length} trained tokens`);
  return {
    input: s.ids.slice(0, -1),
    targets: s.ids.slice(1),
    positions,
    old: s.logprobs,
    advantage: s.advantage,
    temperature: temperature > 0 ? temperature : 1,
  };
}
