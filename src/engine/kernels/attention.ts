/**
 * attention: causal scaled-dot-product attention with grouped-query heads and a KV-cache prefix.
 *
 *   q: (T, Hq, D)   k, v: (S, Hkv, D), S >= T   →   out: (T, Hq, D), lse: (Hq, T)
 *
 * The T queries are the last T positions of the S keys: query t sees keys 0 ..= S - T + t (so
 * T = 1, S = n is a decode step against n - 1 cached tokens, T = S is a plain prefill). Query head
 * h uses KV head h / (Hq / Hkv). Scores are q.k / sqrt(D).
 *
 * Packed sequences (segments.ts): with segment bounds (T, 2) and S = T, query t sees only keys
 * start(t) ..= t of its own segment, forward and backward — several sequences in one call, each
 * exactly as if run alone.
 *
 * What the backward keeps: only lse[h, t] = log(sum_j exp(score_j)), the softmax row's
 * log-sum-exp (Hq * T floats). The backward recomputes p = exp(score - lse) from q and k instead
 * of storing the (Hq, T, S) probabilities, so memory stays linear in S (flash-attention style);
 * it also needs the forward's `out` (for delta = rowsum(dout * out)).
 *
 * GPU: the forward is one workgroup per (head, query) with an online softmax over key chunks,
 * fine for decode and modest prefill lengths; the backward is two dispatches, dq (+ delta) per
 * (head, query) and dk/dv per (kv head, key), with no atomics. f32 tensors only, D ≤ 256.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { gridChecked } from './dispatch_grid.ts';
import attentionShader from './attention.wgsl?raw';
import { wgslOnce } from './wgsl_preprocess.ts';
import { checkBounds } from './segments.ts';
import { dot } from './matmul.ts';
import backwardShader from './attention_backward.wgsl?raw';
import dkvShader from './attention_backward_dkv.wgsl?raw';

const shader = wgslOnce(attentionShader, 'attention.wgsl');
const backwardCode = wgslOnce(backwardShader, 'attention_backward.wgsl');
const dkvCode = wgslOnce(dkvShader, 'attention_backward_dkv.wgsl');

const WG = 64;
const MAX_D = 256;

export interface AttentionDims {
  /** Queries (new tokens). */
  T: number;
  /** Keys/values, cache prefix included (S ≥ T). */
  S: number;
  /** Query heads, a multiple of Hkv. */
  Hq: number;
  /** Key/value heads. */
  Hkv: number;
  /** Head dimension. */
  D: number;
}

function checkDims({ T, S, Hq, Hkv, D }: AttentionDims): void {
  for (const [name, n] of Object.entries({ T, S, Hq, Hkv, D })) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`attention: ${name} must be a whole number ≥ 1, got ${n}`);
  }
  if (S < T) throw new RangeError(`attention: S=${S} keys cannot be fewer than T=${T} queries`);
  if (Hq % Hkv !== 0) throw new RangeError(`attention: Hq=${Hq} is not a multiple of Hkv=${Hkv}`);
}

function checkLen(what: string, got: number, want: number): void {
  if (got !== want) throw new RangeError(`attention: ${what} has ${got} values, expected ${want}`);
}

/** Segment bounds (segments.ts) fit T rows, and the call has no KV-cache prefix (S = T). */
function checkSegments({ T, S }: AttentionDims, bounds: ArrayLike<number>): void {
  if (S !== T)
    throw new RangeError(`attention: a packed sequence (segments) takes no KV-cache prefix, got S=${S}, T=${T}`);
  checkBounds('attention', bounds, T);
}

/**
 * Causally visible scores of one query row, scaled, with their log-sum-exp: keys lo ..= S - T + t
 * (lo: the start of the row's segment, 0 unpacked), s[j] for key lo + j.
 */
function scoreRow(q: Float32Array, k: Float32Array, dims: AttentionDims, t: number, h: number, lo: number) {
  const { T, S, Hq, Hkv, D } = dims;
  const kvh = Math.floor(h / (Hq / Hkv));
  const nKeys = S - T + t + 1 - lo;
  const scale = 1 / Math.sqrt(D);
  const s = new Float64Array(nKeys);
  const qRow = (t * Hq + h) * D;
  for (let j = 0; j < nKeys; j++) {
    s[j] = dot(q, qRow, k, ((lo + j) * Hkv + kvh) * D, D) * scale;
  }
  let m = -Infinity;
  for (const x of s) m = Math.max(m, x);
  let sum = 0;
  for (let j = 0; j < nKeys; j++) sum += Math.exp(s[j]! - m);
  return { s, lse: m + Math.log(sum), kvh, scale };
}

/**
 * CPU reference. q: (T, Hq, D), k, v: (S, Hkv, D) → out: (T, Hq, D), lse: (Hq, T); `seg`: the
 * segment bounds (T, 2) of a packed sequence (segments.ts; S = T).
 */
export function attentionCpu(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  dims: AttentionDims,
  seg?: ArrayLike<number>,
): { out: Float32Array; lse: Float32Array } {
  const { T, S, Hq, Hkv, D } = dims;
  checkDims(dims);
  if (seg) checkSegments(dims, seg);
  checkLen('q', q.length, T * Hq * D);
  checkLen('k', k.length, S * Hkv * D);
  checkLen('v', v.length, S * Hkv * D);
  const out = new Float32Array(T * Hq * D);
  const lse = new Float32Array(Hq * T);
  // out[d] = Σ_j p_j v_j[d], each sum over j in order in f64; p_j is computed once per key, not per d
  const acc = new Float64Array(D);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < Hq; h++) {
      const lo = seg ? seg[2 * t]! : 0;
      const row = scoreRow(q, k, dims, t, h, lo);
      lse[h * T + t] = row.lse;
      acc.fill(0);
      for (let j = 0; j < row.s.length; j++) {
        const p = Math.exp(row.s[j]! - row.lse);
        const vRow = ((lo + j) * Hkv + row.kvh) * D;
        for (let d = 0; d < D; d++) acc[d]! += p * v[vRow + d]!;
      }
      out.set(acc, (t * Hq + h) * D);
    }
  }
  return { out, lse };
}

/** CPU reference of the backward. q, dout: (T, Hq, D), k, v: (S, Hkv, D), `seg` as attentionCpu → dq, dk, dv. */
export function attentionBackwardCpu(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  dout: Float32Array,
  dims: AttentionDims,
  seg?: ArrayLike<number>,
): { dq: Float32Array; dk: Float32Array; dv: Float32Array } {
  const { T, S, Hq, Hkv, D } = dims;
  checkDims(dims);
  if (seg) checkSegments(dims, seg);
  checkLen('q', q.length, T * Hq * D);
  checkLen('k', k.length, S * Hkv * D);
  checkLen('v', v.length, S * Hkv * D);
  checkLen('dout', dout.length, T * Hq * D);
  const dq = new Float64Array(q.length);
  const dk = new Float64Array(k.length);
  const dv = new Float64Array(v.length);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < Hq; h++) {
      const lo = seg ? seg[2 * t]! : 0;
      const { s, lse, kvh, scale } = scoreRow(q, k, dims, t, h, lo);
      const qRow = (t * Hq + h) * D;
      const p = s.map((x) => Math.exp(x - lse));
      // dp_j = dout . v_j; softmax backward: ds_j = p_j (dp_j - sum_i p_i dp_i)
      const dp = new Float64Array(p.length);
      for (let j = 0; j < p.length; j++) {
        dp[j] = dot(dout, qRow, v, ((lo + j) * Hkv + kvh) * D, D);
      }
      let pdp = 0;
      for (let j = 0; j < p.length; j++) pdp += p[j]! * dp[j]!;
      for (let j = 0; j < p.length; j++) {
        const pj = p[j]!;
        const dss = pj * (dp[j]! - pdp) * scale; // ds_j · scale, as (ds_j · scale) · k and · q below
        const kvRow = ((lo + j) * Hkv + kvh) * D;
        for (let d = 0; d < D; d++) {
          dv[kvRow + d]! += pj * dout[qRow + d]!;
          dq[qRow + d]! += dss * k[kvRow + d]!;
          dk[kvRow + d]! += dss * q[qRow + d]!;
        }
      }
    }
  }
  return { dq: Float32Array.from(dq), dk: Float32Array.from(dk), dv: Float32Array.from(dv) };
}

/** Dims from tensor shapes, checked for the GPU kernels. */
function dimsOf(q: Tensor, k: Tensor, v: Tensor): AttentionDims {
  for (const t of [q, k, v]) {
    if (t.dtype !== 'f32') throw new TypeError(`attention: f32 tensors only, got ${t.dtype}`);
    if (t.shape.length !== 3)
      throw new RangeError(`attention: expected (rows, heads, D) shapes, got ${JSON.stringify(t.shape)}`);
  }
  const [T, Hq, D] = q.shape as [number, number, number];
  const [S, Hkv, Dk] = k.shape as [number, number, number];
  if (Dk !== D || v.shape.join() !== k.shape.join()) {
    throw new RangeError(
      `attention: q ${JSON.stringify(q.shape)}, k ${JSON.stringify(k.shape)}, v ${JSON.stringify(v.shape)} do not fit`,
    );
  }
  const dims = { T, S, Hq, Hkv, D };
  checkDims(dims);
  if (D > MAX_D) throw new RangeError(`attention: D=${D} exceeds ${MAX_D}`);
  return dims;
}

const params = ({ T, S, Hq, Hkv, D }: AttentionDims, seg: Tensor | undefined) =>
  uniforms(
    { u32: T },
    { u32: S },
    { u32: Hq },
    { u32: Hkv },
    { u32: D },
    { f32: 1 / Math.sqrt(D) },
    { u32: seg ? 1 : 0 },
  );

/** The segment bounds (T, 2) u32 of a packed call, checked; unpacked, q stands in (bound, never read). */
function segBinding(dims: AttentionDims, q: Tensor, seg: Tensor | undefined): Tensor {
  if (!seg) return q;
  checkSegments(dims, { length: seg.size });
  return seg;
}

/**
 * GPU forward, recorded on `e`. q: (T, Hq, D), k, v: (S, Hkv, D) → out: (T, Hq, D), lse: (Hq, T);
 * `seg`: the segment bounds (T, 2) of a packed sequence as u32 (segmentBounds; S = T).
 */
export function attention(e: Engine, q: Tensor, k: Tensor, v: Tensor, seg?: Tensor): { out: Tensor; lse: Tensor } {
  const dims = dimsOf(q, k, v);
  const segT = segBinding(dims, q, seg);
  const out = e.tensor([dims.T, dims.Hq, dims.D]);
  const lse = e.tensor([dims.Hq, dims.T]);
  e.run({
    key: 'attention',
    code: shader(),
    constants: { WG },
    bindings: [q, k, v, out, lse, segT],
    uniforms: params(dims, seg),
    workgroups: gridChecked('attention', dims.Hq, dims.T),
  });
  return { out, lse };
}

/**
 * GPU backward, recorded on `e`. q: (T, Hq, D), k, v: (S, Hkv, D), and from the forward out:
 * (T, Hq, D) and lse: (Hq, T); dout: (T, Hq, D) → dq: (T, Hq, D), dk, dv: (S, Hkv, D). `seg` as
 * in the forward.
 */
export function attentionBackward(
  e: Engine,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  out: Tensor,
  lse: Tensor,
  dout: Tensor,
  seg?: Tensor,
): { dq: Tensor; dk: Tensor; dv: Tensor } {
  const dims = dimsOf(q, k, v);
  const segT = segBinding(dims, q, seg);
  checkLen('out', out.size, q.size);
  checkLen('dout', dout.size, q.size);
  checkLen('lse', lse.size, dims.Hq * dims.T);
  const dq = e.tensor(q.shape);
  const dk = e.tensor(k.shape);
  const dv = e.tensor(v.shape);
  // (2, Hq, T): lse, then delta (part 1 writes it): one binding keeps both kernels at 8 storage buffers
  const stats = e.tensor([2, dims.Hq, dims.T]);
  e.copy(lse, 0, stats, 0, dims.Hq * dims.T);
  const u = params(dims, seg);
  e.run({
    key: 'attention_backward',
    code: backwardCode(),
    constants: { WG },
    bindings: [q, k, v, out, dout, stats, dq, segT],
    uniforms: u,
    workgroups: gridChecked('attention', dims.Hq, dims.T),
  });
  e.run({
    key: 'attention_backward_dkv',
    code: dkvCode(),
    constants: { WG },
    bindings: [q, k, v, dout, stats, dk, dv, segT],
    uniforms: u,
    workgroups: gridChecked('attention backward', dims.Hkv, dims.S),
  });
  e.release(stats);
  return { dq, dk, dv };
}
