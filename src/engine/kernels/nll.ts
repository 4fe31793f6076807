/**
 * nll: fused log-softmax + per-token weighted negative log-likelihood, the policy-gradient loss.
 *   logits (T, V) f32, targets (T,) u32, weights (T,) f32 →
 *   loss (T,) = −w_t · log softmax(logits_t)[target_t],  logp (T,) = log softmax(logits_t)[target_t],
 *   and lse (T,) = log Σ_j exp(logits_t,j), kept for the backward.
 * Backward: dlogits (T, V) = upstream · w_t · (softmax(logits_t) − onehot(target_t)), where
 * `upstream` is d(total)/d(loss_t), one scalar for all t (e.g. 1/T for a mean).
 * A target ≥ V marks an ignored row (padding): loss = logp = 0 and a zero gradient.
 * Numerically stable (max subtraction; online max/sum in one read of each row); V up to and past
 * 152k (each row is one workgroup looping over V).
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import shader from './nll.wgsl?raw';
import backwardShader from './nll_backward.wgsl?raw';
import { wgslOnce } from './wgsl_preprocess.ts';

const code = wgslOnce(shader, 'nll.wgsl');
const backwardCode = wgslOnce(backwardShader, 'nll_backward.wgsl');

const WG = 256;

export interface NllRow {
  loss: number;
  logp: number;
  lse: number;
}

/** CPU reference for one row, in f64 (also on Float64Array rows, for finite differences). */
export function nllRowCpu(row: ArrayLike<number>, target: number, weight: number): NllRow {
  let m = -Infinity;
  for (let j = 0; j < row.length; j++) m = Math.max(m, row[j]!);
  let s = 0;
  for (let j = 0; j < row.length; j++) s += Math.exp(row[j]! - m);
  const lse = m + Math.log(s);
  if (!(target < row.length)) return { loss: 0, logp: 0, lse };
  const logp = row[target]! - lse;
  return { loss: -weight * logp, logp, lse };
}

/** CPU reference. logits: (T, V), targets: (T,), weights: (T,) → loss, logp, lse: (T,). */
export function nllCpu(
  logits: Float32Array,
  targets: Uint32Array,
  weights: Float32Array,
  v: number,
): { loss: Float32Array; logp: Float32Array; lse: Float32Array } {
  const t = targets.length;
  if (logits.length !== t * v || weights.length !== t)
    throw new RangeError(`nll: expected logits ${t}x${v} and ${t} weights`);
  const loss = new Float32Array(t);
  const logp = new Float32Array(t);
  const lse = new Float32Array(t);
  for (let i = 0; i < t; i++) {
    const r = nllRowCpu(logits.subarray(i * v, (i + 1) * v), targets[i]!, weights[i]!);
    loss[i] = r.loss;
    logp[i] = r.logp;
    lse[i] = r.lse;
  }
  return { loss, logp, lse };
}

/** CPU reference of the backward (f64 inside). → dlogits (T, V) */
export function nllBackwardCpu(
  logits: Float32Array,
  targets: Uint32Array,
  weights: Float32Array,
  v: number,
  upstream = 1,
): Float32Array {
  const t = targets.length;
  const out = new Float32Array(t * v);
  for (let i = 0; i < t; i++) {
    const row = logits.subarray(i * v, (i + 1) * v);
    const tgt = targets[i]!;
    if (!(tgt < v)) continue;
    const { lse } = nllRowCpu(row, tgt, 1);
    const g = upstream * weights[i]!;
    for (let j = 0; j < v; j++) out[i * v + j] = g * (Math.exp(row[j]! - lse) - (j === tgt ? 1 : 0));
  }
  return out;
}

function dims(logits: Tensor, targets: Tensor, weights: Tensor): [number, number] {
  if (logits.shape.length !== 2 || logits.dtype !== 'f32') {
    throw new RangeError(`nll: logits must be (T, V) f32, got ${logits.dtype} ${JSON.stringify(logits.shape)}`);
  }
  const [t, v] = logits.shape as [number, number];
  if (targets.size !== t || weights.size !== t) throw new RangeError(`nll: targets and weights need ${t} entries`);
  if (t * v >= 2 ** 32) throw new RangeError('nll: logits too large for 32-bit indexing');
  return [t, v];
}

/** GPU forward, recorded on `e`. targets: (T,) u32 data (a tensor filled from a Uint32Array). */
export function nll(
  e: Engine,
  logits: Tensor,
  targets: Tensor,
  weights: Tensor,
): { loss: Tensor; logp: Tensor; lse: Tensor } {
  const [t, v] = dims(logits, targets, weights);
  const loss = e.tensor([t]);
  const logp = e.tensor([t]);
  const lse = e.tensor([t]);
  if (t > 0) {
    e.run({
      key: 'nll',
      code: code(),
      constants: { WG },
      bindings: [logits, targets, weights, loss, logp, lse],
      uniforms: uniforms({ u32: t }, { u32: v }),
      workgroups: grid1d(t),
    });
  }
  return { loss, logp, lse };
}

/**
 * GPU backward: dlogits (T, V) = upstream · w_t · (softmax(logits_t) − onehot(target_t)), using
 * `lse` from the forward. With `inPlace` the gradient overwrites `logits` (returned).
 */
export function nllBackward(
  e: Engine,
  logits: Tensor,
  targets: Tensor,
  weights: Tensor,
  lse: Tensor,
  upstream = 1,
  opts: { inPlace?: boolean } = {},
): Tensor {
  const [t, v] = dims(logits, targets, weights);
  if (lse.size !== t) throw new RangeError(`nll backward: lse needs ${t} entries`);
  const inPlace = opts.inPlace ?? false;
  const dlogits = inPlace ? logits : e.tensor([t, v]);
  if (t > 0) {
    e.run({
      key: 'nll_backward',
      code: backwardCode(),
      constants: { WG, IN_PLACE: inPlace ? 1 : 0 },
      // In place, the unused `logits` binding gets another read-only buffer (one buffer may not be
      // bound read-only and writable in one dispatch).
      bindings: [inPlace ? weights : logits, targets, weights, lse, dlogits],
      uniforms: uniforms({ u32: t }, { u32: v }, { f32: upstream }),
      workgroups: grid1d(t),
    });
  }
  return dlogits;
}
