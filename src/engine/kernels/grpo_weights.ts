/**
 * grpo_weights: each token's GRPO weight w (the nll backward's per-row weight, −∂L/∂log π) and its
 * loss terms, from log π under the current adapter, computed where the log-probs are (train.ts has
 * the objective). Keeping this on the device lets a training step run the LM head in chunks and
 * several samples without reading log-probs back; the host reads the summed statistics once.
 *   logp (R,), info (R, 3) = (trained 0/1, log π_old, TIS weight c), base (R,) = log π_base (optional)
 *   → w (R,), stats (R, 4) = (ℓ, clipped 0/1, log π_old − log π, k3)
 * c = min(exp(log π_old − log π_sampler), C) is computed on the host (core/train/grpo.ts tisWeight;
 * 1 when TIS is off) and multiplies the clipped policy term: ℓ = −c·min(r·A, clip(r)·A) + β·k3,
 * w = (c·A·r·[not clipped] − β·(1 − exp δ)) / N.
 * CPU reference in f64 (the trainer's CPU path, and the oracle of the GPU test).
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { wgslOnce } from './wgsl_preprocess.ts';
import shader from './grpo_weights.wgsl?raw';

const code = wgslOnce(shader, 'grpo_weights.wgsl');

const WG = 64;

export interface GrpoWeightOptions {
  /** The sample's advantage A. */
  advantage: number;
  /** 1 / N, N = trained tokens of the minibatch (the token-level mean). */
  invN: number;
  clipLow: number;
  clipHigh: number;
  /** β of the k3 KL to the base policy (used only with a base). */
  beta: number;
  /** log π_old = log π (ratio 1): samples without old log-probs. */
  onPolicy: boolean;
  /** |log r| is clamped to this: a stale sample cannot overflow the ratio. */
  maxLogRatio: number;
}

/** CPU reference (f64 inside, f32 results): the same terms as the shader, row by row. */
export function grpoWeightsCpu(
  logp: Float32Array,
  info: Float32Array,
  base: Float32Array | undefined,
  o: GrpoWeightOptions,
): { w: Float32Array; stats: Float32Array } {
  const R = logp.length;
  if (info.length !== 3 * R || (base && base.length !== R))
    throw new RangeError(`grpoWeights: expected info (${R}, 3) and base (${R},)`);
  const w = new Float32Array(R);
  const stats = new Float32Array(4 * R);
  const A = o.advantage;
  for (let j = 0; j < R; j++) {
    if (!info[3 * j]) continue;
    const lp = logp[j]!;
    const old = o.onPolicy ? lp : info[3 * j + 1]!;
    const c = info[3 * j + 2]!;
    const ratio = Math.exp(Math.max(-o.maxLogRatio, Math.min(o.maxLogRatio, lp - old)));
    const clip = Math.min(Math.max(ratio, 1 - o.clipLow), 1 + o.clipHigh);
    const clipped = (A > 0 && ratio > 1 + o.clipHigh) || (A < 0 && ratio < 1 - o.clipLow);
    let loss = -c * Math.min(ratio * A, clip * A);
    let wt = clipped ? 0 : c * A * ratio;
    let k3 = 0;
    if (base) {
      const d = base[j]! - lp;
      const e = Math.exp(d);
      k3 = e - d - 1;
      loss += o.beta * k3;
      wt -= o.beta * (1 - e);
    }
    w[j] = wt * o.invN;
    stats.set([loss, clipped ? 1 : 0, old - lp, k3], 4 * j);
  }
  return { w, stats };
}

/** GPU version, recorded on `e`. */
export function grpoWeights(
  e: Engine,
  logp: Tensor,
  info: Tensor,
  base: Tensor | undefined,
  o: GrpoWeightOptions,
): { w: Tensor; stats: Tensor } {
  const R = logp.size;
  if (info.size !== 3 * R || (base && base.size !== R))
    throw new RangeError(`grpoWeights: expected info (${R}, 3) and base (${R},)`);
  const w = e.tensor([R]);
  const stats = e.tensor([R, 4]);
  if (R > 0)
    e.run({
      key: 'grpo_weights',
      code: code(),
      constants: { WG, ON_POLICY: o.onPolicy ? 1 : 0, HAS_BASE: base ? 1 : 0 },
      bindings: [logp, info, base ?? logp, w, stats],
      uniforms: uniforms(
        { u32: R },
        { f32: o.advantage },
        { f32: o.invN },
        { f32: o.clipLow },
        { f32: o.clipHigh },
        { f32: o.beta },
        { f32: o.maxLogRatio },
      ),
      workgroups: grid1d(Math.ceil(R / WG)),
    });
  return { w, stats };
}
