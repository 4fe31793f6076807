/**
 * adamw: in-place AdamW step of one f32 parameter tensor with its gradient and moment tensors
 * m, v (same size, zero-initialised before step 1). Decoupled weight decay as in PyTorch's AdamW:
 *   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
 *   p ← p − lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + eps)
 * with g = grad · gradScale. Gradient clipping by global norm: the caller computes Σ g² over all
 * parameters with reduce.ts's `sumSquares` and either reads it back and passes
 * gradScale = gradClipScale(sumSq, maxNorm) = min(1, maxNorm / norm), or (no read-back) passes the
 * (1,) tensor itself as `clip: {sumSq, maxNorm}` and the kernel applies min(1, maxNorm / norm).
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { wgslOnce } from './wgsl_preprocess.ts';
import shader from './adamw.wgsl?raw';

const code = wgslOnce(shader, 'adamw.wgsl');

const WG = 256;

export interface AdamWOptions {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** 1-based step number, for the bias corrections. */
  step: number;
  /** Multiplies the gradient (default 1), e.g. min(1, clip / norm) or 1 / accumulation steps. */
  gradScale?: number;
}

export interface AdamWGpuOptions extends AdamWOptions {
  /** Clip by global norm on the GPU: sumSq is a (1,) tensor holding Σ g² over all parameters. */
  clip?: { sumSq: Tensor; maxNorm: number };
}

const DEFAULTS = { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, gradScale: 1 };

/** min(1, maxNorm / sqrt(sumSq)): the gradient scale of clipping by global norm. */
export function gradClipScale(sumSq: number, maxNorm: number): number {
  const norm = Math.sqrt(sumSq);
  return norm > maxNorm ? maxNorm / norm : 1;
}

/** The steps whose gradient norms SpikeGuard's median reads, and how many it waits for before it judges. */
export const SPIKE_WINDOW = 64;
export const SPIKE_WARMUP = 16;

/**
 * Skips gradient spikes: a step whose global norm (before the clip) is more than `ratio` times the
 * median of the last SPIKE_WINDOW steps' norms, once SPIKE_WARMUP norms have been seen, does not
 * go ahead (no AdamW update, no step count). Every norm, skipped or not, joins the window, so a
 * lasting change of scale is followed. ratio 0: off (every step goes ahead; the window still fills,
 * so a ratio set mid-run judges at once). The clip alone does not contain a spike: after it, AdamW
 * scales each coordinate by its own second moment, so a spike in coordinates that are usually quiet
 * still moves them by several learning rates over the next steps.
 */
export class SpikeGuard {
  private readonly norms: number[] = [];

  /** Whether a step of gradient norm `norm` goes ahead under `ratio` (see the class). */
  admit(norm: number, ratio: number): boolean {
    if (!(ratio === 0 || ratio >= 1)) throw new RangeError(`skipSpikes must be 0 (off) or at least 1, got ${ratio}`);
    const seen = this.norms.length;
    let ok = true;
    if (ratio > 0 && seen >= SPIKE_WARMUP) {
      const sorted = [...this.norms].sort((a, b) => a - b);
      const med = seen % 2 ? sorted[(seen - 1) / 2]! : (sorted[seen / 2 - 1]! + sorted[seen / 2]!) / 2;
      ok = !(med > 0 && norm > ratio * med); // a median of 0 (most steps without a gradient) judges nothing
    }
    this.norms.push(norm);
    if (this.norms.length > SPIKE_WINDOW) this.norms.shift();
    return ok;
  }
}

function resolve(o: AdamWOptions) {
  // an option passed as undefined keeps its default
  const given = Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as AdamWOptions;
  const r = { ...DEFAULTS, ...given };
  if (!(r.step >= 1) || !Number.isInteger(r.step))
    throw new RangeError(`adamw: step must be an integer ≥ 1, got ${r.step}`);
  return { ...r, bc1: 1 - r.beta1 ** r.step, bc2: 1 - r.beta2 ** r.step };
}

/** CPU reference, in place on param, m, v (f64 arithmetic per element, stored as f32). */
export function adamwCpu(
  param: Float32Array,
  grad: Float32Array,
  m: Float32Array,
  v: Float32Array,
  opts: AdamWOptions,
): void {
  const n = param.length;
  if (grad.length !== n || m.length !== n || v.length !== n) throw new RangeError('adamw: size mismatch');
  const o = resolve(opts);
  for (let i = 0; i < n; i++) {
    const g = grad[i]! * o.gradScale;
    m[i] = o.beta1 * m[i]! + (1 - o.beta1) * g;
    v[i] = o.beta2 * v[i]! + (1 - o.beta2) * g * g;
    const decayed = param[i]! * (1 - o.lr * o.weightDecay);
    param[i] = decayed - (o.lr * (m[i]! / o.bc1)) / (Math.sqrt(v[i]! / o.bc2) + o.eps);
  }
}

/** GPU version, recorded on `e`: updates param, m, v in place (returns param). */
export function adamw(e: Engine, param: Tensor, grad: Tensor, m: Tensor, v: Tensor, opts: AdamWGpuOptions): Tensor {
  const n = param.size;
  for (const t of [param, grad, m, v]) {
    if (t.dtype !== 'f32') throw new RangeError('adamw: f32 tensors only');
    if (t.size !== n) throw new RangeError(`adamw: size mismatch ${n} vs ${t.size}`);
  }
  if (new Set([param.buffer, grad.buffer, m.buffer, v.buffer]).size !== 4)
    throw new RangeError('adamw: param, grad, m, v must be distinct buffers');
  const o = resolve(opts);
  const clip = opts.clip;
  if (clip && [param.buffer, m.buffer, v.buffer].includes(clip.sumSq.buffer))
    throw new RangeError('adamw: clip.sumSq must not alias the state');
  if (n === 0) return param;
  e.run({
    key: 'adamw',
    code: code(),
    constants: { WG, USE_NORM: clip ? 1 : 0 },
    bindings: [param, grad, m, v, clip ? clip.sumSq : grad],
    uniforms: uniforms(
      { u32: n },
      { f32: o.lr },
      { f32: o.beta1 },
      { f32: o.beta2 },
      { f32: 1 - o.beta1 },
      { f32: 1 - o.beta2 },
      { f32: o.eps },
      { f32: o.weightDecay },
      { f32: o.bc1 },
      { f32: o.bc2 },
      { f32: o.gradScale },
      { f32: clip ? clip.maxNorm : 0 },
    ),
    workgroups: grid1d(Math.ceil(n / WG)),
  });
  return param;
}
