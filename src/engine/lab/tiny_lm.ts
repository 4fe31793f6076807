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
 */
import { LOCAL_CHAT_DEFAULTS } from '../../core/defaults.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult, ModelCapabilities } from '../../core/llm/chat_model.ts';
import { throwIfAborted } from '../../core/llm/chat_model.ts';
import { createRng } from '../../core/rng.ts';
import type { TokenSample } from '../../core/train/grpo.ts';
import type { PolicyTrainer, UpdateStats } from '../../core/train/grpo_rounds.ts';
import { NonFiniteLogitsError } from '../../core/errors.ts';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames, type ModelConfig } from '../io/config.ts';
import { loraKey, LORA_MODULES, type LoraModule } from '../io/peft.ts';
import type { TensorStore } from '../io/safetensors.ts';
import type { TextTokenizer } from '../io/tokenizer.ts';
import { gradClipScale } from '../kernels/adamw.ts';
import { ropeFrequencies } from '../kernels/rope.ts';
import type { LlamaModel } from '../model/model.ts';
import type { CpuTensor } from '../ops/cpu_ops.ts';
import { TinyKernels, type KernelLora } from './tiny_kernels.ts';

const f32 = Math.fround;
/** A value per projection. */
const mapModules = (f: (m: LoraModule) => Float32Array) =>
  Object.fromEntries(LORA_MODULES.map((m) => [m, f(m)])) as Record<LoraModule, Float32Array>;
/**
 * swiglu.ts's sigmoid, the same expression (so the same rounding): 1 / (1 + exp(−g)) for g ≥ 0,
 * exp(g) / (1 + exp(g)) below; both exponents are −|g|, so one exp serves.
 */
const sigmoid = (g: number) => {
  const t = Math.exp(-Math.abs(g));
  return g >= 0 ? 1 / (1 + t) : t / (1 + t);
};

// --- matmuls in matmulCpu's order: out[i][j] = f32(alpha·Σ_p a·b + acc), p ascending, f64 sum ---
//
// mmNN serves the forward and dx (mmTNacc, reading a transposed, the gradients): b is (K, N)
// row-major, so a pass reads a row of b's N values contiguously and keeps eight outputs' sums in
// registers (each output still its own sum over p in order: the same values as one output at a
// time, fewer loads). The forward's x · Wᵀ reads Wᵀ, made
// once (the base) or once per adapter version (A and B).

/** out (M, N) = a (M, K) · b (K, N), or with `acc` out = f32(alpha·a·b + out). */
function mmNN(
  a: Float32Array,
  b: Float32Array,
  out: Float32Array,
  M: number,
  N: number,
  K: number,
  acc = false,
  alpha = 1,
) {
  for (let i = 0; i < M; i++) {
    const ao = i * K;
    const oo = i * N;
    let j = 0;
    for (; j + 8 <= N; j += 8) {
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let s4 = 0;
      let s5 = 0;
      let s6 = 0;
      let s7 = 0;
      for (let p = 0, bo = j; p < K; p++, bo += N) {
        const av = a[ao + p]!;
        s0 += av * b[bo]!;
        s1 += av * b[bo + 1]!;
        s2 += av * b[bo + 2]!;
        s3 += av * b[bo + 3]!;
        s4 += av * b[bo + 4]!;
        s5 += av * b[bo + 5]!;
        s6 += av * b[bo + 6]!;
        s7 += av * b[bo + 7]!;
      }
      const o = oo + j;
      if (acc) {
        out[o] = alpha * s0 + out[o]!;
        out[o + 1] = alpha * s1 + out[o + 1]!;
        out[o + 2] = alpha * s2 + out[o + 2]!;
        out[o + 3] = alpha * s3 + out[o + 3]!;
        out[o + 4] = alpha * s4 + out[o + 4]!;
        out[o + 5] = alpha * s5 + out[o + 5]!;
        out[o + 6] = alpha * s6 + out[o + 6]!;
        out[o + 7] = alpha * s7 + out[o + 7]!;
      } else {
        out[o] = alpha * s0;
        out[o + 1] = alpha * s1;
        out[o + 2] = alpha * s2;
        out[o + 3] = alpha * s3;
        out[o + 4] = alpha * s4;
        out[o + 5] = alpha * s5;
        out[o + 6] = alpha * s6;
        out[o + 7] = alpha * s7;
      }
    }
    for (; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += a[ao + p]! * b[p * N + j]!;
      const o = oo + j;
      out[o] = acc ? alpha * s + out[o]! : alpha * s;
    }
  }
}

/** out (M, N) = f32(alpha · a (K, M)ᵀ · b (K, N) + out): the adapter gradients; eight columns per pass. */
function mmTNacc(a: Float32Array, b: Float32Array, out: Float32Array, M: number, N: number, K: number, alpha: number) {
  for (let i = 0; i < M; i++) {
    let j = 0;
    for (; j + 8 <= N; j += 8) {
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let s4 = 0;
      let s5 = 0;
      let s6 = 0;
      let s7 = 0;
      for (let p = 0, ai = i, bo = j; p < K; p++, ai += M, bo += N) {
        const av = a[ai]!;
        s0 += av * b[bo]!;
        s1 += av * b[bo + 1]!;
        s2 += av * b[bo + 2]!;
        s3 += av * b[bo + 3]!;
        s4 += av * b[bo + 4]!;
        s5 += av * b[bo + 5]!;
        s6 += av * b[bo + 6]!;
        s7 += av * b[bo + 7]!;
      }
      const o = i * N + j;
      out[o] = alpha * s0 + out[o]!;
      out[o + 1] = alpha * s1 + out[o + 1]!;
      out[o + 2] = alpha * s2 + out[o + 2]!;
      out[o + 3] = alpha * s3 + out[o + 3]!;
      out[o + 4] = alpha * s4 + out[o + 4]!;
      out[o + 5] = alpha * s5 + out[o + 5]!;
      out[o + 6] = alpha * s6 + out[o + 6]!;
      out[o + 7] = alpha * s7 + out[o + 7]!;
    }
    for (; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += a[p * M + i]! * b[p * N + j]!;
      const o = i * N + j;
      out[o] = alpha * s + out[o]!;
    }
  }
}

/** Wᵀ of a (rows, cols) matrix: (cols, rows). */
function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(w.length);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) t[j * rows + i] = w[i * cols + j]!;
  return t;
}

/** ropeAppendCpu's rotation of one head's row: x[xo..] rotated by the angles at t0 into dst[dOff..]. */
function ropeRow(
  x: Float32Array,
  xo: number,
  dst: Float32Array,
  dOff: number,
  cos: Float64Array,
  sin: Float64Array,
  t0: number,
  half: number,
) {
  for (let i = 0; i < half; i++) {
    const c = cos[t0 + i]!;
    const sn = sin[t0 + i]!;
    const x1 = x[xo + i]!;
    const x2 = x[xo + i + half]!;
    dst[dOff + i] = x1 * c - x2 * sn;
    dst[dOff + i + half] = x2 * c + x1 * sn;
  }
}

/** rmsnormCpu over R rows of width C into out. */
function rmsnorm(x: Float32Array, w: Float32Array, out: Float32Array, R: number, C: number, eps: number) {
  for (let r = 0; r < R; r++) {
    const o = r * C;
    let ss = 0;
    for (let i = 0; i < C; i++) ss += x[o + i]! ** 2;
    const rstd = 1 / Math.sqrt(ss / C + eps);
    for (let i = 0; i < C; i++) out[o + i] = x[o + i]! * rstd * w[i]!;
  }
}

/** rmsnormBackwardCpu's dx over R rows. */
function rmsnormBack(
  x: Float32Array,
  w: Float32Array,
  dy: Float32Array,
  out: Float32Array,
  R: number,
  C: number,
  eps: number,
) {
  for (let r = 0; r < R; r++) {
    const o = r * C;
    let ss = 0;
    let gx = 0;
    for (let i = 0; i < C; i++) {
      ss += x[o + i]! ** 2;
      gx += dy[o + i]! * w[i]! * x[o + i]!;
    }
    const rstd = 1 / Math.sqrt(ss / C + eps);
    for (let i = 0; i < C; i++) {
      const xi = x[o + i]!;
      out[o + i] = rstd * (dy[o + i]! * w[i]! - (xi * rstd * rstd * gx) / C);
    }
  }
}

/**
 * attentionPagedCpu's sums for one row over its sequence's keys 0..nKeys − 1, every head: scores
 * q·k·sc (summed over d in order, four keys per pass over q), their exponentials once per key
 * (less the max), and Σ_j e_j·v_j / Σ_j e_j (each channel summed over j in order, four per pass).
 * q and att: rows of Hq·D; ks, vs: the sequence's (pos, Hkv·D) rows; e: scratch of ≥ nKeys.
 */
function attendRow(
  qr: Float32Array,
  ks: Float32Array,
  vs: Float32Array,
  att: Float32Array,
  row: number,
  nKeys: number,
  Hq: number,
  Hkv: number,
  D: number,
  sc: number,
  e: Float64Array,
) {
  const stride = Hkv * D;
  for (let hh = 0; hh < Hq; hh++) {
    const kvh = Math.floor(hh / (Hq / Hkv));
    const qo = (row * Hq + hh) * D;
    let m = -Infinity;
    let j = 0;
    for (; j + 4 <= nKeys; j += 4) {
      const k0 = (j * Hkv + kvh) * D;
      const k1 = k0 + stride;
      const k2 = k1 + stride;
      const k3 = k2 + stride;
      let d0 = 0;
      let d1 = 0;
      let d2 = 0;
      let d3 = 0;
      for (let d = 0; d < D; d++) {
        const qv = qr[qo + d]!;
        d0 += qv * ks[k0 + d]!;
        d1 += qv * ks[k1 + d]!;
        d2 += qv * ks[k2 + d]!;
        d3 += qv * ks[k3 + d]!;
      }
      const x0 = d0 * sc;
      const x1 = d1 * sc;
      const x2 = d2 * sc;
      const x3 = d3 * sc;
      e[j] = x0;
      e[j + 1] = x1;
      e[j + 2] = x2;
      e[j + 3] = x3;
      m = Math.max(m, x0);
      m = Math.max(m, x1);
      m = Math.max(m, x2);
      m = Math.max(m, x3);
    }
    for (; j < nKeys; j++) {
      const ko = (j * Hkv + kvh) * D;
      let dot = 0;
      for (let d = 0; d < D; d++) dot += qr[qo + d]! * ks[ko + d]!;
      const x = dot * sc;
      e[j] = x;
      m = Math.max(m, x);
    }
    let sum = 0;
    for (let jj = 0; jj < nKeys; jj++) {
      const x = Math.exp(e[jj]! - m);
      e[jj] = x;
      sum += x;
    }
    let d = 0;
    for (; d + 4 <= D; d += 4) {
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      let a3 = 0;
      let vo = kvh * D + d;
      for (let jj = 0; jj < nKeys; jj++, vo += stride) {
        const ej = e[jj]!;
        a0 += ej * vs[vo]!;
        a1 += ej * vs[vo + 1]!;
        a2 += ej * vs[vo + 2]!;
        a3 += ej * vs[vo + 3]!;
      }
      att[qo + d] = a0 / sum;
      att[qo + d + 1] = a1 / sum;
      att[qo + d + 2] = a2 / sum;
      att[qo + d + 3] = a3 / sum;
    }
    for (; d < D; d++) {
      let a = 0;
      for (let jj = 0; jj < nKeys; jj++) a += e[jj]! * vs[(jj * Hkv + kvh) * D + d]!;
      att[qo + d] = a / sum;
    }
  }
}

/**
 * attendRow for D = 16 (the Lab's models: hidden 16 with one head, or 32 with two): the same sums
 * in the same order, with the row's q and the sixteen weighted sums held in locals.
 */
function attendRow16(
  qr: Float32Array,
  ks: Float32Array,
  vs: Float32Array,
  att: Float32Array,
  row: number,
  nKeys: number,
  Hq: number,
  Hkv: number,
  sc: number,
  e: Float64Array,
) {
  const stride = Hkv * 16;
  for (let hh = 0; hh < Hq; hh++) {
    const kvh = Math.floor(hh / (Hq / Hkv));
    const qo = (row * Hq + hh) * 16;
    const q0 = qr[qo]!;
    const q1 = qr[qo + 1]!;
    const q2 = qr[qo + 2]!;
    const q3 = qr[qo + 3]!;
    const q4 = qr[qo + 4]!;
    const q5 = qr[qo + 5]!;
    const q6 = qr[qo + 6]!;
    const q7 = qr[qo + 7]!;
    const q8 = qr[qo + 8]!;
    const q9 = qr[qo + 9]!;
    const q10 = qr[qo + 10]!;
    const q11 = qr[qo + 11]!;
    const q12 = qr[qo + 12]!;
    const q13 = qr[qo + 13]!;
    const q14 = qr[qo + 14]!;
    const q15 = qr[qo + 15]!;
    let m = -Infinity;
    for (let j = 0, k = kvh * 16; j < nKeys; j++, k += stride) {
      let d = 0;
      d += q0 * ks[k]!;
      d += q1 * ks[k + 1]!;
      d += q2 * ks[k + 2]!;
      d += q3 * ks[k + 3]!;
      d += q4 * ks[k + 4]!;
      d += q5 * ks[k + 5]!;
      d += q6 * ks[k + 6]!;
      d += q7 * ks[k + 7]!;
      d += q8 * ks[k + 8]!;
      d += q9 * ks[k + 9]!;
      d += q10 * ks[k + 10]!;
      d += q11 * ks[k + 11]!;
      d += q12 * ks[k + 12]!;
      d += q13 * ks[k + 13]!;
      d += q14 * ks[k + 14]!;
      d += q15 * ks[k + 15]!;
      const x = d * sc;
      e[j] = x;
      m = Math.max(m, x);
    }
    let sum = 0;
    for (let j = 0; j < nKeys; j++) {
      const x = Math.exp(e[j]! - m);
      e[j] = x;
      sum += x;
    }
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    let a4 = 0;
    let a5 = 0;
    let a6 = 0;
    let a7 = 0;
    let a8 = 0;
    let a9 = 0;
    let a10 = 0;
    let a11 = 0;
    let a12 = 0;
    let a13 = 0;
    let a14 = 0;
    let a15 = 0;
    for (let j = 0, v = kvh * 16; j < nKeys; j++, v += stride) {
      const ej = e[j]!;
      a0 += ej * vs[v]!;
      a1 += ej * vs[v + 1]!;
      a2 += ej * vs[v + 2]!;
      a3 += ej * vs[v + 3]!;
      a4 += ej * vs[v + 4]!;
      a5 += ej * vs[v + 5]!;
      a6 += ej * vs[v + 6]!;
      a7 += ej * vs[v + 7]!;
      a8 += ej * vs[v + 8]!;
      a9 += ej * vs[v + 9]!;
      a10 += ej * vs[v + 10]!;
      a11 += ej * vs[v + 11]!;
      a12 += ej * vs[v + 12]!;
      a13 += ej * vs[v + 13]!;
      a14 += ej * vs[v + 14]!;
      a15 += ej * vs[v + 15]!;
    }
    att[qo] = a0 / sum;
    att[qo + 1] = a1 / sum;
    att[qo + 2] = a2 / sum;
    att[qo + 3] = a3 / sum;
    att[qo + 4] = a4 / sum;
    att[qo + 5] = a5 / sum;
    att[qo + 6] = a6 / sum;
    att[qo + 7] = a7 / sum;
    att[qo + 8] = a8 / sum;
    att[qo + 9] = a9 / sum;
    att[qo + 10] = a10 / sum;
    att[qo + 11] = a11 / sum;
    att[qo + 12] = a12 / sum;
    att[qo + 13] = a13 / sum;
    att[qo + 14] = a14 / sum;
    att[qo + 15] = a15 / sum;
  }
}

/**
 * attentionCpu's row for D = 16 (TinyLm.attention's loop with q and the sums in locals): the
 * scores over keys lo..t into s, their log-sum-exp, then p_j = exp(s_j − lse) into probs[po..] and
 * Σ_j p_j·v_j into out[oo..] (rounded to f32 there).
 */
function attentionRow16(
  q: Float32Array,
  qo: number,
  k: Float32Array,
  v: Float32Array,
  kvo: number,
  stride: number,
  n: number,
  s: Float64Array,
  probs: Float64Array,
  po: number,
  out: Float32Array,
) {
  const sc = 1 / Math.sqrt(16);
  const q0 = q[qo]!;
  const q1 = q[qo + 1]!;
  const q2 = q[qo + 2]!;
  const q3 = q[qo + 3]!;
  const q4 = q[qo + 4]!;
  const q5 = q[qo + 5]!;
  const q6 = q[qo + 6]!;
  const q7 = q[qo + 7]!;
  const q8 = q[qo + 8]!;
  const q9 = q[qo + 9]!;
  const q10 = q[qo + 10]!;
  const q11 = q[qo + 11]!;
  const q12 = q[qo + 12]!;
  const q13 = q[qo + 13]!;
  const q14 = q[qo + 14]!;
  const q15 = q[qo + 15]!;
  for (let j = 0, ko = kvo; j < n; j++, ko += stride) {
    let dot = 0;
    dot += q0 * k[ko]!;
    dot += q1 * k[ko + 1]!;
    dot += q2 * k[ko + 2]!;
    dot += q3 * k[ko + 3]!;
    dot += q4 * k[ko + 4]!;
    dot += q5 * k[ko + 5]!;
    dot += q6 * k[ko + 6]!;
    dot += q7 * k[ko + 7]!;
    dot += q8 * k[ko + 8]!;
    dot += q9 * k[ko + 9]!;
    dot += q10 * k[ko + 10]!;
    dot += q11 * k[ko + 11]!;
    dot += q12 * k[ko + 12]!;
    dot += q13 * k[ko + 13]!;
    dot += q14 * k[ko + 14]!;
    dot += q15 * k[ko + 15]!;
    s[j] = dot * sc;
  }
  let m = -Infinity;
  for (let j = 0; j < n; j++) m = Math.max(m, s[j]!);
  let sum = 0;
  for (let j = 0; j < n; j++) sum += Math.exp(s[j]! - m);
  const lse = m + Math.log(sum);
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  let a3 = 0;
  let a4 = 0;
  let a5 = 0;
  let a6 = 0;
  let a7 = 0;
  let a8 = 0;
  let a9 = 0;
  let a10 = 0;
  let a11 = 0;
  let a12 = 0;
  let a13 = 0;
  let a14 = 0;
  let a15 = 0;
  for (let j = 0, vo = kvo; j < n; j++, vo += stride) {
    const p = Math.exp(s[j]! - lse);
    probs[po + j] = p;
    a0 += p * v[vo]!;
    a1 += p * v[vo + 1]!;
    a2 += p * v[vo + 2]!;
    a3 += p * v[vo + 3]!;
    a4 += p * v[vo + 4]!;
    a5 += p * v[vo + 5]!;
    a6 += p * v[vo + 6]!;
    a7 += p * v[vo + 7]!;
    a8 += p * v[vo + 8]!;
    a9 += p * v[vo + 9]!;
    a10 += p * v[vo + 10]!;
    a11 += p * v[vo + 11]!;
    a12 += p * v[vo + 12]!;
    a13 += p * v[vo + 13]!;
    a14 += p * v[vo + 14]!;
    a15 += p * v[vo + 15]!;
  }
  const oo = qo;
  out[oo] = a0;
  out[oo + 1] = a1;
  out[oo + 2] = a2;
  out[oo + 3] = a3;
  out[oo + 4] = a4;
  out[oo + 5] = a5;
  out[oo + 6] = a6;
  out[oo + 7] = a7;
  out[oo + 8] = a8;
  out[oo + 9] = a9;
  out[oo + 10] = a10;
  out[oo + 11] = a11;
  out[oo + 12] = a12;
  out[oo + 13] = a13;
  out[oo + 14] = a14;
  out[oo + 15] = a15;
}

/**
 * attentionBackwardCpu's row for D = 16 (TinyLm.backward's loop): dp_j = dO·v_j, Σ p·dp, then per
 * key dv += p·dO, dq += ds·scale·k, dk += ds·scale·q — dO, q and the row's dq held in locals; every
 * accumulator still summed in the same order.
 */
function attentionBackRow16(
  dof: Float32Array,
  qr: Float32Array,
  qo: number,
  kr: Float32Array,
  v: Float32Array,
  kvo: number,
  stride: number,
  n: number,
  p: Float64Array,
  po: number,
  dp: Float64Array,
  dq: Float64Array,
  dk: Float64Array,
  dv: Float64Array,
) {
  const scale = 1 / Math.sqrt(16);
  const f0 = dof[qo]!;
  const f1 = dof[qo + 1]!;
  const f2 = dof[qo + 2]!;
  const f3 = dof[qo + 3]!;
  const f4 = dof[qo + 4]!;
  const f5 = dof[qo + 5]!;
  const f6 = dof[qo + 6]!;
  const f7 = dof[qo + 7]!;
  const f8 = dof[qo + 8]!;
  const f9 = dof[qo + 9]!;
  const f10 = dof[qo + 10]!;
  const f11 = dof[qo + 11]!;
  const f12 = dof[qo + 12]!;
  const f13 = dof[qo + 13]!;
  const f14 = dof[qo + 14]!;
  const f15 = dof[qo + 15]!;
  for (let j = 0, vo = kvo; j < n; j++, vo += stride) {
    let acc = 0;
    acc += f0 * v[vo]!;
    acc += f1 * v[vo + 1]!;
    acc += f2 * v[vo + 2]!;
    acc += f3 * v[vo + 3]!;
    acc += f4 * v[vo + 4]!;
    acc += f5 * v[vo + 5]!;
    acc += f6 * v[vo + 6]!;
    acc += f7 * v[vo + 7]!;
    acc += f8 * v[vo + 8]!;
    acc += f9 * v[vo + 9]!;
    acc += f10 * v[vo + 10]!;
    acc += f11 * v[vo + 11]!;
    acc += f12 * v[vo + 12]!;
    acc += f13 * v[vo + 13]!;
    acc += f14 * v[vo + 14]!;
    acc += f15 * v[vo + 15]!;
    dp[j] = acc;
  }
  let pdp = 0;
  for (let j = 0; j < n; j++) pdp += p[po + j]! * dp[j]!;
  let g0 = dq[qo]!;
  let g1 = dq[qo + 1]!;
  let g2 = dq[qo + 2]!;
  let g3 = dq[qo + 3]!;
  let g4 = dq[qo + 4]!;
  let g5 = dq[qo + 5]!;
  let g6 = dq[qo + 6]!;
  let g7 = dq[qo + 7]!;
  let g8 = dq[qo + 8]!;
  let g9 = dq[qo + 9]!;
  let g10 = dq[qo + 10]!;
  let g11 = dq[qo + 11]!;
  let g12 = dq[qo + 12]!;
  let g13 = dq[qo + 13]!;
  let g14 = dq[qo + 14]!;
  let g15 = dq[qo + 15]!;
  for (let j = 0, r = kvo; j < n; j++, r += stride) {
    const pj = p[po + j]!;
    const ds = pj * (dp[j]! - pdp) * scale;
    dv[r]! += pj * f0;
    dv[r + 1]! += pj * f1;
    dv[r + 2]! += pj * f2;
    dv[r + 3]! += pj * f3;
    dv[r + 4]! += pj * f4;
    dv[r + 5]! += pj * f5;
    dv[r + 6]! += pj * f6;
    dv[r + 7]! += pj * f7;
    dv[r + 8]! += pj * f8;
    dv[r + 9]! += pj * f9;
    dv[r + 10]! += pj * f10;
    dv[r + 11]! += pj * f11;
    dv[r + 12]! += pj * f12;
    dv[r + 13]! += pj * f13;
    dv[r + 14]! += pj * f14;
    dv[r + 15]! += pj * f15;
    g0 += ds * kr[r]!;
    g1 += ds * kr[r + 1]!;
    g2 += ds * kr[r + 2]!;
    g3 += ds * kr[r + 3]!;
    g4 += ds * kr[r + 4]!;
    g5 += ds * kr[r + 5]!;
    g6 += ds * kr[r + 6]!;
    g7 += ds * kr[r + 7]!;
    g8 += ds * kr[r + 8]!;
    g9 += ds * kr[r + 9]!;
    g10 += ds * kr[r + 10]!;
    g11 += ds * kr[r + 11]!;
    g12 += ds * kr[r + 12]!;
    g13 += ds * kr[r + 13]!;
    g14 += ds * kr[r + 14]!;
    g15 += ds * kr[r + 15]!;
    dk[r]! += ds * qr[qo]!;
    dk[r + 1]! += ds * qr[qo + 1]!;
    dk[r + 2]! += ds * qr[qo + 2]!;
    dk[r + 3]! += ds * qr[qo + 3]!;
    dk[r + 4]! += ds * qr[qo + 4]!;
    dk[r + 5]! += ds * qr[qo + 5]!;
    dk[r + 6]! += ds * qr[qo + 6]!;
    dk[r + 7]! += ds * qr[qo + 7]!;
    dk[r + 8]! += ds * qr[qo + 8]!;
    dk[r + 9]! += ds * qr[qo + 9]!;
    dk[r + 10]! += ds * qr[qo + 10]!;
    dk[r + 11]! += ds * qr[qo + 11]!;
    dk[r + 12]! += ds * qr[qo + 12]!;
    dk[r + 13]! += ds * qr[qo + 13]!;
    dk[r + 14]! += ds * qr[qo + 14]!;
    dk[r + 15]! += ds * qr[qo + 15]!;
  }
  dq[qo] = g0;
  dq[qo + 1] = g1;
  dq[qo + 2] = g2;
  dq[qo + 3] = g3;
  dq[qo + 4] = g4;
  dq[qo + 5] = g5;
  dq[qo + 6] = g6;
  dq[qo + 7] = g7;
  dq[qo + 8] = g8;
  dq[qo + 9] = g9;
  dq[qo + 10] = g10;
  dq[qo + 11] = g11;
  dq[qo + 12] = g12;
  dq[qo + 13] = g13;
  dq[qo + 14] = g14;
  dq[qo + 15] = g15;
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
interface Lora {
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
/** Sequences kept for reuse after release (TinyChat's prefix cache gives back what it drops). */
const SPARE_SEQS = 16;

export class TinyLm {
  readonly cfg: ModelConfig;
  private readonly C: number;
  private readonly F: number;
  private readonly Hq: number;
  private readonly Hkv: number;
  private readonly D: number;
  private readonly kvd: number;
  private readonly qd: number;
  private readonly eps: number;
  private readonly freqs: Float32Array;
  private readonly embed: Float32Array;
  private readonly head: Float32Array;
  private readonly norm: Float32Array;
  private readonly layers: LayerW[] = [];

  /** Attention and projections on WebAssembly SIMD (null: the loops alone). */
  private readonly kernel: TinyKernels | null;

  /** `o.wasm` false: attention and projections in the JavaScript loops only (the kernels give the same values; tests compare). */
  constructor(
    readonly llm: LlamaModel<CpuTensor>,
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

  private work: {
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
  } | null = null;

  /** step()'s scratch for N rows (grown, never shrunk; every value is written before it is read). */
  private scratch(N: number, r: number) {
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
    if (wk && M >= 2 && nOut % 8 === 0 && (!lora || lora.k)) {
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
  step(items: { seq: TinySeq; ids: number[] }[]): Float32Array {
    const { C, F, Hq, Hkv, D, kvd, qd, eps } = this;
    let N = 0;
    for (const it of items) N += it.ids.length;
    const cur = this.current();
    const lora = cur.lora;
    const w = this.scratch(N, lora?.r ?? 0);
    const { h, a, q, k, v, qr, att, g, u, s, xa } = w;
    const rowSeq: TinySeq[] = [];
    const rowPos = w.pos;
    const rowId = w.ids;
    const blockLen = w.len;
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
    const { cos, sin } = this;
    const half = D / 2;
    const sc = 1 / Math.sqrt(D);
    let e = w.e;
    const rope = (x: Float32Array, xo: number, dst: Float32Array, dOff: number, pos: number) =>
      ropeRow(x, xo, dst, dOff, cos, sin, pos * half, half);
    // The last layer's attention, o-projection and MLP only matter for the rows whose logits are
    // read (each item's last row): the other rows need only their k and v there. Skipping them
    // changes no value that is used (the reference computes and drops them).
    const nItems = items.length;
    const lastRows = w.last;
    let end = 0;
    for (let i = 0; i < nItems; i++) lastRows[i] = (end += items[i]!.ids.length) - 1;
    for (let li = 0; li < this.layers.length; li++) {
      const L = this.layers[li]!;
      const top = li === this.layers.length - 1;
      // the rows that attend here (the top layer: the read rows only)
      const nq = top ? nItems : N;
      const qRow = (i: number) => (top ? lastRows[i]! : i);
      if (li === 0) {
        // layer 0's q, k and v are a function of the token id: computed once per id and adapter
        const l0 = cur.l0;
        for (let row = 0; row < N; row++) {
          const id = rowId[row]!;
          const x = (l0[id] ??= this.layer0(id, lora));
          const pos = rowPos[row]!;
          const ks = rowSeq[row]!.k[0]!;
          const vs = rowSeq[row]!.v[0]!;
          for (let hh = 0; hh < Hkv; hh++) {
            const so = (pos * Hkv + hh) * D;
            rope(x, qd + hh * D, ks, so, pos);
            for (let i = 0; i < D; i++) vs[so + i] = x[qd + kvd + hh * D + i]!;
          }
        }
        for (let i = 0; i < nq; i++) {
          const row = qRow(i);
          const x = l0[rowId[row]!]!;
          for (let hh = 0; hh < Hq; hh++) rope(x, hh * D, qr, (row * Hq + hh) * D, rowPos[row]!);
        }
      } else {
        rmsnorm(h, L.inNorm, a, N, C, eps);
        this.linear(a, N, li, 'k_proj', k, false, lora, xa);
        this.linear(a, N, li, 'v_proj', v, false, lora, xa);
        // q only for the rows that attend (the top layer: the read rows, compacted to the front of `a`)
        if (top) for (let i = 0; i < nq; i++) a.copyWithin(i * C, lastRows[i]! * C, (lastRows[i]! + 1) * C);
        this.linear(a, nq, li, 'q_proj', q, false, lora, xa);
        for (let i = 0; i < nq; i++)
          for (let hh = 0; hh < Hq; hh++) rope(q, (i * Hq + hh) * D, qr, (qRow(i) * Hq + hh) * D, rowPos[qRow(i)]!);
        // rope, then k and v into each row's sequence (ropeAppendCpu)
        for (let row = 0; row < N; row++) {
          const pos = rowPos[row]!;
          const ks = rowSeq[row]!.k[li]!;
          const vs = rowSeq[row]!.v[li]!;
          for (let hh = 0; hh < Hkv; hh++) {
            const so = (pos * Hkv + hh) * D;
            rope(k, (row * Hkv + hh) * D, ks, so, pos);
            for (let i = 0; i < D; i++) vs[so + i] = v[(row * Hkv + hh) * D + i]!;
          }
        }
      }
      // attention of each row over its sequence's keys 0..pos (attentionPagedCpu's sums); below the
      // top, an item's rows are a block of consecutive positions: on WebAssembly when it is worth the copy
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
        if (D === 16) attendRow16(qr, seq.k[li]!, seq.v[li]!, att, row, nKeys, Hq, Hkv, sc, e);
        else attendRow(qr, seq.k[li]!, seq.v[li]!, att, row, nKeys, Hq, Hkv, D, sc, e);
      }
      if (top) {
        // compact the read rows to the front, then run the rest of the layer on them alone
        for (let i = 0; i < nItems; i++) {
          const row = lastRows[i]!;
          h.copyWithin(i * C, row * C, (row + 1) * C);
          att.copyWithin(i * qd, row * qd, (row + 1) * qd);
        }
      }
      const M = nq;
      this.linear(att, M, li, 'o_proj', h, true, lora, xa);
      rmsnorm(h, L.postNorm, a, M, C, eps);
      this.linear(a, M, li, 'gate_proj', g, false, lora, xa);
      this.linear(a, M, li, 'up_proj', u, false, lora, xa);
      for (let i = 0; i < M * F; i++) s[i] = g[i]! * sigmoid(g[i]!) * u[i]!;
      this.linear(s, M, li, 'down_proj', h, true, lora, xa);
    }
    for (const it of items) for (const id of it.ids) it.seq.tokens.push(id);
    // each item's last row (now rows 0..items − 1) through the final norm
    const out = new Float32Array(nItems * C);
    rmsnorm(h, this.norm, out, nItems, C, eps);
    return out;
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

  // --- training: forwardHidden + the trainer's head + backwardHidden, in the references' order ---

  /**
   * One GRPO step on a minibatch, as LoraTrainer.trainStep with the Lab's options (TIS on but no
   * learner log-probs: the ratio against the sampler's; no KL term; AdamW), on the adapter's
   * arrays in place. `allowed` ascending.
   */
  trainStep(samples: TokenSample[], o: TinyTrainOptions, state: AdamState): Omit<UpdateStats, 'role'> {
    const t0 = performance.now();
    const lora = this.lora();
    if (!lora) throw new Error('TinyLm.trainStep: no LoRA adapter');
    const prepared = samples.map((x) => prepare(x, o.temperature));
    const used = prepared.filter((p) => p.positions.length > 0);
    const N = used.reduce((a, p) => a + p.positions.length, 0);
    const grads = this.zeroGrads(lora);
    let loss = 0;
    let clipped = 0;
    let kl = 0;
    let tokens = 0;
    // the trainer's forward groups: consecutive samples packed while ≤ PACK_TOKENS tokens
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
    const stats: number[] = [];
    for (const group of groups) {
      const ids = group.flatMap((p) => p.input);
      const T = ids.length;
      const segStart = new Int32Array(T);
      let off = 0;
      for (const p of group) {
        segStart.fill(off, off, off + p.input.length);
        off += p.input.length;
      }
      const tape = this.forwardTape(ids, segStart, lora);
      const dhn = new Float32Array(T * this.C);
      off = 0;
      for (const p of group) {
        this.headGrad(tape.hn, off, p, 1 / N, o, dhn, stats);
        off += p.input.length;
      }
      this.backward(tape, dhn, segStart, lora, grads);
      tokens += T;
    }
    for (let i = 0; i < stats.length; i += 4) {
      loss += stats[i]!;
      clipped += stats[i + 1]!;
      kl += stats[i + 2]!;
    }
    // global-norm clip and AdamW, in the adapter's key order (sumSquaresCpu, adamwCpu)
    const keys = [...this.llm.lora!.w.keys()];
    let sumSq = 0;
    for (const key of keys) {
      const gk = grads.get(key)!;
      for (let i = 0; i < gk.length; i++) sumSq += gk[i]! * gk[i]!;
    }
    const gradScale = gradClipScale(sumSq, o.maxGradNorm);
    state.step++;
    const b1 = o.beta1;
    const b2 = o.beta2;
    const bc1 = 1 - b1 ** state.step;
    const bc2 = 1 - b2 ** state.step;
    for (const key of keys) {
      const p = this.llm.lora!.w.get(key)!.data;
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
        const decayed = p[i]! * (1 - o.lr * 0);
        p[i] = decayed - (o.lr * (m[i]! / bc1)) / (Math.sqrt(v[i]! / bc2) + ADAM_EPS);
      }
    }
    this.llm.adapterChanged();
    return {
      loss: N ? loss / N : 0,
      clipFraction: N ? clipped / N : 0,
      approxKl: N ? kl / N : 0,
      gradNorm: Math.sqrt(sumSq),
      tokens,
      ms: performance.now() - t0,
    };
  }

  /**
   * log π of ids[t + 1] at each of `positions` (indices into ids[1..]) under the current adapter:
   * LoraTrainer.learnerLogprobs' arithmetic (a training forward, the head over the allowed ids,
   * z = logits / T, rounded to f32).
   */
  policyLogprobs(ids: number[], positions: number[], allowed: readonly number[], temperature: number): number[] {
    const lora = this.lora();
    if (!lora) throw new Error('TinyLm.policyLogprobs: no LoRA adapter');
    const input = ids.slice(0, -1);
    const tape = this.forwardTape(input, new Int32Array(input.length), lora);
    const t = temperature > 0 ? temperature : 1;
    const C = this.C;
    return positions.map((pos) => {
      const z = allowed.map((id) => {
        let s = 0;
        for (let c = 0; c < C; c++) s += tape.hn[pos * C + c]! * this.head[id * C + c]!;
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

  private zeroGrads(lora: Lora): Map<string, Float32Array> {
    const out = new Map<string, Float32Array>();
    for (const key of this.llm.lora!.w.keys()) out.set(key, new Float32Array(this.llm.lora!.w.get(key)!.data.length));
    void lora;
    return out;
  }

  /** forwardHidden with segments: every activation the backward reads. */
  private forwardTape(ids: number[], segStart: Int32Array, lora: Lora): Tape {
    const { C, F, qd, kvd, eps } = this;
    const T = ids.length;
    const r = lora.r;
    let h = new Float32Array(T * C);
    ids.forEach((id, t) => h.set(this.embed.subarray(id * C, (id + 1) * C), t * C));
    const layers: LayerTape[] = [];
    const pOff = this.probOffsets(T, segStart);
    for (let li = 0; li < this.layers.length; li++) {
      const L = this.layers[li]!;
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
        const xa = (t.xa[m] = new Float32Array(T * r));
        if (L.wk && lora.k && nOut % 8 === 0) {
          this.kernel!.linear(x, T, nIn, nOut, y, false, L.wk[m].t, lora.k[li]![m], xa);
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
      this.rotate(q, t.qr, T, this.Hq, segStart, 1);
      this.rotate(k, t.kr, T, this.Hkv, segStart, 1);
      t.p = this.attention(t.qr, t.kr, t.v, t.o, T, segStart, pOff);
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
    rmsnorm(h, this.norm, hn, T, C, eps);
    return { layers, hFinal: h, hn };
  }

  /** rotateCpu over (T, H, D) with positions from each row's segment start; sign −1: the backward. */
  private rotate(x: Float32Array, y: Float32Array, T: number, H: number, segStart: Int32Array, sign: number) {
    const D = this.D;
    const half = D / 2;
    for (let ti = 0; ti < T; ti++) {
      const pos = ti - segStart[ti]!;
      const [cos, sin] = this.trig(pos);
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

  /** scoreRow of attentionCpu: the row's scaled scores in `s` (keys lo..t) and its lse. */
  private scores(q: Float32Array, k: Float32Array, t: number, h: number, lo: number, s: Float64Array): number {
    const { Hq, Hkv, D } = this;
    const kvh = Math.floor(h / (Hq / Hkv));
    const nKeys = t + 1 - lo;
    const sc = 1 / Math.sqrt(D);
    const qo = (t * Hq + h) * D;
    for (let j = 0; j < nKeys; j++) {
      const ko = ((lo + j) * Hkv + kvh) * D;
      let dot = 0;
      for (let d = 0; d < D; d++) dot += q[qo + d]! * k[ko + d]!;
      s[j] = dot * sc;
    }
    let m = -Infinity;
    for (let j = 0; j < nKeys; j++) m = Math.max(m, s[j]!);
    let sum = 0;
    for (let j = 0; j < nKeys; j++) sum += Math.exp(s[j]! - m);
    return m + Math.log(sum);
  }

  /** Offsets of each (row, head)'s attention probabilities in a tape's `p` (keys lo..t of the row). */
  private probOffsets(T: number, segStart: Int32Array): Int32Array {
    const off = new Int32Array(T + 1);
    for (let t = 0; t < T; t++) off[t + 1] = off[t]! + (t + 1 - segStart[t]!) * this.Hq;
    return off;
  }

  /**
   * attentionCpu with segments (S = T): out = Σ exp(s − lse)·v; the probabilities exp(s − lse) kept
   * in `p` (attentionBackwardCpu computes the same values again from scoreRow: reading them is exact).
   */
  private attention(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    T: number,
    segStart: Int32Array,
    pOff: Int32Array,
  ): Float64Array {
    const { Hq, Hkv, D } = this;
    const s = new Float64Array(T);
    const acc = new Float64Array(D);
    const probs = new Float64Array(pOff[T]!);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < Hq; h++) {
        const lo = segStart[t]!;
        const n = t + 1 - lo;
        if (D === 16) {
          const kvo = (lo * Hkv + Math.floor(h / (Hq / Hkv))) * D;
          attentionRow16(q, (t * Hq + h) * D, k, v, kvo, Hkv * D, n, s, probs, pOff[t]! + h * n, out);
          continue;
        }
        const lse = this.scores(q, k, t, h, lo, s);
        const kvh = Math.floor(h / (Hq / Hkv));
        const po = pOff[t]! + h * n;
        acc.fill(0);
        for (let j = 0; j < n; j++) {
          const p = Math.exp(s[j]! - lse);
          probs[po + j] = p;
          const vo = ((lo + j) * Hkv + kvh) * D;
          for (let d = 0; d < D; d++) acc[d]! += p * v[vo + d]!;
        }
        out.set(acc, (t * Hq + h) * D);
      }
    return probs;
  }

  /**
   * The trainer's head for one sample of a packed forward (rows from `off`): log π of its trained
   * targets, the GRPO weights (grpoWeightsCpu), ∂L/∂z (nllBackwardCpu) and its LM-head backward,
   * written into dhn's rows; each trained token's (ℓ, clipped, old − new, k3) appended to `stats`.
   */
  private headGrad(
    hn: Float32Array,
    off: number,
    p: Prep,
    invN: number,
    o: TinyTrainOptions,
    dhn: Float32Array,
    stats: number[],
  ) {
    const C = this.C;
    const ids = o.allowed;
    const t = p.temperature;
    const z = new Float64Array(ids.length);
    const dz = new Float32Array(ids.length);
    p.positions.forEach((pos, j) => {
      const row = (off + pos) * C;
      // z = (logits + bias) / T over the allowed ids (the rest are −1e9: exp gives 0)
      ids.forEach((id, i) => {
        let s = 0;
        for (let c = 0; c < C; c++) s += hn[row + c]! * this.head[id * C + c]!;
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
      const lp = f32(z[ti]! - lse);
      // grpoWeightsCpu (c = 1: no learner log-probs)
      const old = f32(p.old![j]!);
      const A = p.advantage;
      const ratio = Math.exp(Math.max(-MAX_LOG_RATIO, Math.min(MAX_LOG_RATIO, lp - old)));
      const clip = Math.min(Math.max(ratio, 1 - o.clipLow), 1 + o.clipHigh);
      const isClipped = (A > 0 && ratio > 1 + o.clipHigh) || (A < 0 && ratio < 1 - o.clipLow);
      const loss = -1 * Math.min(ratio * A, clip * A);
      const wt = isClipped ? 0 : 1 * A * ratio;
      const w = f32(wt * invN);
      stats.push(f32(loss), isClipped ? 1 : 0, f32(old - lp), 0);
      // nllBackwardCpu with upstream 1/T, then dh = dz · W_head (headBackward)
      const gw = (1 / t) * w;
      for (let i = 0; i < ids.length; i++) dz[i] = gw * (Math.exp(z[i]! - lse) - (i === ti ? 1 : 0));
      for (let c = 0; c < C; c++) {
        let s = 0;
        for (let i = 0; i < ids.length; i++) s += dz[i]! * this.head[ids[i]! * C + c]!;
        dhn[row + c] = s;
      }
    });
  }

  /** backwardHidden: the adapter gradients added into `grads`. */
  private backward(tape: Tape, dhn: Float32Array, segStart: Int32Array, lora: Lora, grads: Map<string, Float32Array>) {
    const { C, F, qd, kvd, Hq, Hkv, D, eps } = this;
    const T = segStart.length;
    const r = lora.r;
    const sc = lora.scale;
    let dh = new Float32Array(T * C);
    rmsnormBack(tape.hFinal, this.norm, dhn, dh, T, C, eps);
    for (let li = this.layers.length - 1; li >= 0; li--) {
      const L = this.layers[li]!;
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
          this.kernel!.linearBack(
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
      const dq = new Float64Array(T * qd);
      const dk = new Float64Array(T * kvd);
      const dv = new Float64Array(T * kvd);
      const dp = new Float64Array(T);
      const pOff = this.probOffsets(T, segStart);
      const scale = 1 / Math.sqrt(D);
      for (let ti = 0; ti < T; ti++)
        for (let h = 0; h < Hq; h++) {
          const lo = segStart[ti]!;
          const kvh = Math.floor(h / (Hq / Hkv));
          const qRow = (ti * Hq + h) * D;
          const nKeys = ti + 1 - lo;
          const po = pOff[ti]! + h * nKeys;
          const p = t.p;
          if (D === 16) {
            const kvo = (lo * Hkv + kvh) * D;
            attentionBackRow16(dof, t.qr, qRow, t.kr, t.v, kvo, Hkv * D, nKeys, p, po, dp, dq, dk, dv);
            continue;
          }
          for (let j = 0; j < nKeys; j++) {
            let acc = 0;
            const vo = ((lo + j) * Hkv + kvh) * D;
            for (let d = 0; d < D; d++) acc += dof[qRow + d]! * t.v[vo + d]!;
            dp[j] = acc;
          }
          let pdp = 0;
          for (let j = 0; j < nKeys; j++) pdp += p[po + j]! * dp[j]!;
          for (let j = 0; j < nKeys; j++) {
            const pj = p[po + j]!;
            const dsj = pj * (dp[j]! - pdp);
            const kvRow = ((lo + j) * Hkv + kvh) * D;
            for (let d = 0; d < D; d++) {
              dv[kvRow + d]! += pj * dof[qRow + d]!;
              dq[qRow + d]! += dsj * scale * t.kr[kvRow + d]!;
              dk[kvRow + d]! += dsj * scale * t.qr[qRow + d]!;
            }
          }
        }
      const dqn = new Float32Array(T * qd);
      const dkn = new Float32Array(T * kvd);
      this.rotate(Float32Array.from(dq), dqn, T, Hq, segStart, -1);
      this.rotate(Float32Array.from(dk), dkn, T, Hkv, segStart, -1);
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
}

/** LoraTrainer's defaults for what the Lab does not set (train.ts DEFAULTS). */
export const TINY_TRAIN_DEFAULTS = { clipLow: 0.2, clipHigh: 0.28, maxGradNorm: 1, beta1: 0.9, beta2: 0.999 } as const;

/** AdamW's moments per adapter key and the step count. */
export interface AdamState {
  step: number;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

/** The fast path's PolicyTrainer: TinyLm.trainStep with its own AdamW state. */
export function tinyTrainer(lm: TinyLm, o: TinyTrainOptions): PolicyTrainer {
  const state: AdamState = { step: 0, m: new Map(), v: new Map() };
  return { step: async (mb) => lm.trainStep(mb, o, state) };
}

// --- the chat model ---

/** Sequences kept for prefix reuse (a cycle's plays of one level, and the probe's, fit). */
const PREFIX_SEQS = 64;
/** Earlier calls remembered for continuation (as LocalChatModel's CONTINUATIONS). */
const CONTINUATIONS = 256;

interface Seen {
  messages: { role: string; content: string }[];
  reply: string;
  ids: number[];
}

/**
 * A ChatModel on TinyLm with LocalChatModel's contract for what the Lab asks (ChatML prompts built
 * as the byte tokenizer encodes them, continuation of an earlier call's exact ids, seeded sampling
 * with one uniform per token, the vocabulary constraint, log π of each sampled id): the same replies
 * and token records as LocalChatModel over the same LlamaModel.
 */
export class TinyChat implements ChatModel {
  readonly backend = 'local';
  readonly capabilities: ModelCapabilities;
  private readonly seen: Seen[] = [];
  private cache: TinySeq[] = [];
  private cacheVersion = -1;
  private readonly encoded = new Map<string, number[]>();
  private readonly decoded = new Map<number, string>();
  /** The allowed ids, ascending. */
  readonly allowed: number[];
  /** Counts for the bench: prompt tokens computed and reused from the prefix cache. */
  readonly counts = { computed: 0, reused: 0, calls: 0 };

  constructor(
    readonly model: string,
    readonly lm: TinyLm,
    readonly tokenizer: TextTokenizer,
    allowed: readonly number[],
  ) {
    if (!allowed.length) throw new RangeError('TinyChat: list the allowed ids (the fast path samples among them)');
    this.allowed = [...allowed].sort((a, b) => a - b);
    this.capabilities = {
      streaming: false,
      logprobs: true,
      trainable: true,
      contextWindow: Math.min(lm.cfg.maxPositionEmbeddings, 32768),
    };
  }

  private encode(text: string): number[] {
    let ids = this.encoded.get(text);
    if (!ids) {
      ids = this.tokenizer.encode(text, { addSpecialTokens: false });
      if (this.encoded.size > 4096) this.encoded.clear();
      this.encoded.set(text, ids);
    }
    return ids;
  }

  private decode(id: number): string {
    let s = this.decoded.get(id);
    if (s === undefined) this.decoded.set(id, (s = this.tokenizer.decode([id], { skipSpecialTokens: true })));
    return s;
  }

  /** ChatML (io/init_checkpoint.ts CHATML_TEMPLATE) with the generation prompt, as ids. */
  private render(ms: { role: string; content: string }[]): number[] {
    const out: number[] = [];
    for (const m of ms) out.push(...this.encode(`<|im_start|>${m.role}\n${m.content}<|im_end|>\n`));
    out.push(...this.encode('<|im_start|>assistant\n'));
    return out;
  }

  /** The prompt ids: an earlier call's ids + the template after its reply, else the whole render. */
  promptIds(messages: ChatMessage[]): number[] {
    const ms = messages.map((m) => ({ role: m.role, content: m.content }));
    let best: Seen | undefined;
    const longest = ms.findLastIndex((m) => m.role === 'assistant'); // where the longest continuation's reply is
    for (let i = this.seen.length - 1; i >= 0; i--) {
      const e = this.seen[i]!;
      const n = e.messages.length;
      if (ms.length <= n || (best && best.messages.length >= n)) continue;
      const reply = ms[n]!;
      if (reply.role !== 'assistant' || reply.content !== e.reply) continue;
      if (e.messages.every((m, j) => m.role === ms[j]!.role && m.content === ms[j]!.content)) {
        best = e;
        if (n === longest) break; // none can be longer (and the newest of the longest wins, as before)
      }
    }
    if (!best) return this.render(ms);
    const rest = ms.slice(best.messages.length + 1);
    const tail = [...this.encode('<|im_end|>\n')];
    for (const m of rest) tail.push(...this.encode(`<|im_start|>${m.role}\n${m.content}<|im_end|>\n`));
    tail.push(...this.encode('<|im_start|>assistant\n'));
    return [...best.ids, ...tail];
  }

  /** A sequence holding the longest cached prefix of `prompt` (at most all but its last token). */
  private admit(prompt: number[]): TinySeq {
    if (this.cacheVersion !== this.lm.llm.adapterVersion) {
      for (const seq of this.cache) this.lm.release(seq);
      this.cache = [];
      this.cacheVersion = this.lm.llm.adapterVersion;
    }
    const cap = prompt.length - 1;
    let best = 0;
    let from = -1;
    for (let c = this.cache.length - 1; c >= 0; c--) {
      const t = this.cache[c]!.tokens;
      const n = Math.min(t.length, cap);
      if (n <= best || t[best] !== prompt[best]) continue; // it cannot match more than `best` tokens
      let i = 0;
      while (i < n && t[i] === prompt[i]) i++;
      if (i > best) [best, from] = [i, c];
    }
    if (from < 0) return this.lm.newSeq();
    const src = this.cache[from]!;
    this.counts.reused += best;
    // the whole cached sequence is the prompt's prefix: extend it in place (it still holds that prefix for others)
    if (best === src.tokens.length) {
      this.cache.splice(from, 1);
      return src;
    }
    return this.lm.fork(src, best);
  }

  private keep(seq: TinySeq): void {
    this.cache.push(seq);
    if (this.cache.length > PREFIX_SEQS) this.lm.release(this.cache.shift()!);
  }

  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(o.signal);
    const t0 = performance.now();
    if ((o.top_p ?? 1) < 1) throw new RangeError('TinyChat: the fast path samples without top-p');
    const prompt = this.promptIds(messages);
    const maxNew = Math.max(
      1,
      Math.min(o.max_tokens ?? LOCAL_CHAT_DEFAULTS.maxTokens, this.capabilities.contextWindow - prompt.length),
    );
    const temperature = o.temperature ?? LOCAL_CHAT_DEFAULTS.temperature;
    const rng = createRng(o.seed ?? 0);
    const stops = this.lm.cfg.eosTokenIds;
    this.counts.calls++;
    const seq = this.admit(prompt);
    const out: number[] = [];
    const logprobs: number[] = [];
    let next = prompt.slice(seq.tokens.length);
    this.counts.computed += next.length;
    while (out.length < maxNew) {
      const hn = this.lm.step([{ seq, ids: next }]);
      const logits = this.lm.logits(hn, this.allowed);
      const u = temperature > 0 ? rng.next() : 0;
      const id = this.sample(logits, temperature, u);
      logprobs.push(this.logprob(logits, id, temperature));
      out.push(id);
      if (stops.includes(id)) break;
      next = [id];
    }
    this.keep(seq);
    const text = out
      .filter((id) => !stops.includes(id))
      .map((id) => this.decode(id))
      .join('');
    const ended = out.length > 0 && stops.includes(out[out.length - 1]!);
    this.seen.push({
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      reply: text,
      ids: [...prompt, ...out],
    });
    if (this.seen.length > CONTINUATIONS) this.seen.shift();
    return {
      text,
      finishReason: ended ? 'stop' : out.length >= maxNew ? 'length' : 'stop',
      usage: { promptTokens: prompt.length, completionTokens: out.length },
      tokens: { prompt, completion: out, logprobs },
      ms: performance.now() - t0,
    };
  }

  /**
   * The token record of `reply` after `messages` as this policy would have written it: its ids and
   * log π under the current adapter at `temperature` (the learned designer's trained edit slot).
   */
  score(
    messages: ChatMessage[],
    reply: string,
    temperature: number,
  ): { ids: number[]; spans: [number, number][]; logprobs: number[] } {
    const prompt = this.promptIds(messages);
    const tail = this.encode(reply);
    const ids = [...prompt, ...tail];
    const positions = tail.map((_, i) => prompt.length - 1 + i);
    return {
      ids,
      spans: [[prompt.length, ids.length]],
      logprobs: this.lm.policyLogprobs(ids, positions, this.allowed, temperature),
    };
  }

  /** sampleTokenU's walk (no filters) over the allowed ids; temperature ≤ 0: argmax. */
  private sample(logits: Float32Array, t: number, u: number): number {
    const ids = this.allowed;
    for (let i = 0; i < logits.length; i++)
      if (logits[i]! - logits[i]! !== 0)
        throw new NonFiniteLogitsError(
          `The tiny model produced a non-finite logit (${logits[i]} for token ${ids[i]})`,
          {
            row: 0,
            id: ids[i]!,
            value: String(logits[i]),
          },
        );
    if (!(t > 0)) {
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
      return ids[best]!;
    }
    let max = -Infinity;
    for (const v of logits) if (v > max) max = v;
    const p = new Float64Array(logits.length);
    let sum = 0;
    for (let i = 0; i < logits.length; i++) sum += p[i] = Math.exp((logits[i]! - max) / t);
    let r = u * sum;
    if (r <= 0) return 0; // the reference's walk stops at id 0 when u·Σ = 0
    for (let i = 0; i < ids.length; i++) {
      r -= p[i]!;
      if (r <= 0) return ids[i]!;
    }
    return this.lm.cfg.vocabSize - 1;
  }

  /** log π(id) under log_softmax(z), z = logits / T (T = 1 when greedy): nllRowCpu's arithmetic, rounded to f32. */
  private logprob(logits: Float32Array, id: number, temperature: number): number {
    const t = temperature > 0 ? temperature : 1;
    const z = t !== 1 ? Float32Array.from(logits, (x) => x * (1 / t)) : logits;
    let m = -Infinity;
    for (let i = 0; i < z.length; i++) m = Math.max(m, z[i]!);
    let s = 0;
    for (let i = 0; i < z.length; i++) s += Math.exp(z[i]! - m);
    const lse = m + Math.log(s);
    return f32(z[this.allowed.indexOf(id)]! - lse);
  }
}
