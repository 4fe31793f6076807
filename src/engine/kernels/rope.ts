/**
 * rope: rotary position embeddings on q or k laid out (T, H, D), HF "rotate_half" convention
 * (dim i pairs with i + D/2), positions pos0, pos0 + 1, ... (pos0 = tokens already in the KV
 * cache). The inverse frequencies are computed here on the CPU (`ropeFrequencies`: plain, linear
 * or Llama-3 scaling) and uploaded once as a (D/2,) tensor.
 *
 * The angle is pos * freq rounded to f32, like HF's float32 `inv_freq @ position_ids`. The shader
 * computes cos/sin itself (exact range reduction, then polynomials): WGSL's built-ins are only
 * bounded to 2^-11 on [-pi, pi] (SwiftShader is off by ~2e-4) and unbounded beyond it.
 * Backward: the transpose of a rotation is the rotation by the negative angle. f32 tensors only.
 * A packed sequence (segments.ts) passes its segment bounds: positions restart at pos0 in each
 * segment, as if each were rotated alone.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { gridChecked } from './dispatch_grid.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import ropeShader from './rope.wgsl?raw';
import { checkBounds } from './segments.ts';

/** The whole kernel (rope_append.ts takes only its cosSin, with ROPE_KERNEL false). */
const shader = preprocessWgsl(ropeShader, { ROPE_KERNEL: true }, 'rope.wgsl');

const WG = 64;

type RopeScaling =
  /** All frequencies divided by `factor` (position interpolation). */
  | { type: 'linear'; factor: number }
  /** Llama 3.1+: long wavelengths divided by `factor`, short ones kept, a smooth blend between. */
  | {
      type: 'llama3';
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    };

export interface RopeConfig {
  /** D, the rotated head dimension (even). */
  headDim: number;
  /** Base of the frequencies (HF rope_theta): 1e4 for Llama 2, 5e5 for Llama 3, 1e6 for Qwen3. */
  theta: number;
  scaling?: RopeScaling | null;
}

/** Inverse frequencies (D/2,): theta^(-2i/D), then the configured scaling. */
export function ropeFrequencies(config: RopeConfig): Float32Array {
  const { headDim: d, theta, scaling } = config;
  if (!(d >= 2) || d % 2 !== 0) throw new RangeError(`rope: head dim must be even, got ${d}`);
  if (!(theta > 1)) throw new RangeError(`rope: theta must be > 1, got ${theta}`);
  const out = new Float32Array(d / 2);
  for (let i = 0; i < d / 2; i++) {
    let f = 1 / theta ** ((2 * i) / d);
    if (scaling?.type === 'linear') {
      f /= scaling.factor;
    } else if (scaling?.type === 'llama3') {
      const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldLen } = scaling;
      const wavelen = (2 * Math.PI) / f;
      const lowFreqWavelen = oldLen / lowFreqFactor; // longer than this: fully scaled
      const highFreqWavelen = oldLen / highFreqFactor; // shorter than this: untouched
      if (wavelen > lowFreqWavelen) {
        f /= factor;
      } else if (wavelen >= highFreqWavelen) {
        const smooth = (oldLen / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        f = (1 - smooth) * (f / factor) + smooth * f;
      }
    }
    out[i] = f;
  }
  return out;
}

/**
 * RopeConfig from a Hugging Face config.json: rope_theta, head_dim (or hidden_size /
 * num_attention_heads) and rope_scaling, or the newer rope_parameters block.
 */
export function ropeConfigFromHf(cfg: Record<string, unknown>): RopeConfig {
  const params = (cfg.rope_parameters ?? cfg.rope_scaling ?? null) as Record<string, unknown> | null;
  const num = (v: unknown, what: string): number => {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new RangeError(`rope: config.json lacks a numeric ${what}`);
    return v;
  };
  const headDim =
    typeof cfg.head_dim === 'number'
      ? cfg.head_dim
      : num(cfg.hidden_size, 'hidden_size') / num(cfg.num_attention_heads, 'num_attention_heads');
  const partial = cfg.partial_rotary_factor ?? params?.partial_rotary_factor ?? 1;
  if (partial !== 1) throw new RangeError(`rope: partial_rotary_factor ${String(partial)} is not supported`);
  const theta = num(cfg.rope_theta ?? params?.rope_theta ?? 10000, 'rope_theta');
  const type = (params?.rope_type ?? params?.type ?? 'default') as string;
  if (type === 'default') return { headDim, theta, scaling: null };
  if (type === 'linear') return { headDim, theta, scaling: { type, factor: num(params!.factor, 'rope factor') } };
  if (type === 'llama3') {
    return {
      headDim,
      theta,
      scaling: {
        type,
        factor: num(params!.factor, 'rope factor'),
        lowFreqFactor: num(params!.low_freq_factor, 'low_freq_factor'),
        highFreqFactor: num(params!.high_freq_factor, 'high_freq_factor'),
        originalMaxPositionEmbeddings: num(
          params!.original_max_position_embeddings,
          'original_max_position_embeddings',
        ),
      },
    };
  }
  throw new RangeError(`rope: rope_type "${type}" is not supported (default, linear and llama3 are)`);
}

function rotateCpu(
  x: Float32Array,
  shape: readonly number[],
  freqs: Float32Array,
  pos0: number,
  sign: number,
  seg: ArrayLike<number> | undefined,
) {
  const [t, h, d] = checkShape(shape, x.length, freqs.length);
  if (seg) checkBounds('rope', seg, t);
  const half = d / 2;
  const y = new Float32Array(x.length);
  for (let ti = 0; ti < t; ti++) {
    const pos = pos0 + ti - (seg ? seg[2 * ti]! : 0);
    for (let hi = 0; hi < h; hi++) {
      const base = (ti * h + hi) * d;
      for (let i = 0; i < half; i++) {
        const a = Math.fround(Math.fround(pos) * freqs[i]!); // f32, as on the GPU and in HF
        const c = Math.cos(a);
        const s = sign * Math.sin(a);
        const x1 = x[base + i]!;
        const x2 = x[base + i + half]!;
        y[base + i] = x1 * c - x2 * s;
        y[base + i + half] = x2 * c + x1 * s;
      }
    }
  }
  return y;
}

function checkShape(shape: readonly number[], size: number, nFreqs: number): [number, number, number] {
  if (shape.length !== 3) throw new RangeError(`rope: expected a (T, H, D) shape, got ${JSON.stringify(shape)}`);
  const [t, h, d] = shape as [number, number, number];
  if (t * h * d !== size) throw new RangeError(`rope: shape ${JSON.stringify(shape)} does not hold ${size} values`);
  if (d % 2 !== 0 || nFreqs !== d / 2) throw new RangeError(`rope: D=${d} needs D/2 frequencies, got ${nFreqs}`);
  return [t, h, d];
}

/**
 * CPU reference. x: (T, H, D) with shape = [T, H, D], freqs: (D/2,) → (T, H, D); `seg`: the
 * segment bounds (T, 2) of a packed sequence (segmentBounds).
 */
export function ropeCpu(
  x: Float32Array,
  shape: readonly number[],
  freqs: Float32Array,
  pos0: number,
  seg?: ArrayLike<number>,
): Float32Array {
  return rotateCpu(x, shape, freqs, pos0, 1, seg);
}

/** CPU reference of the backward. dy: (T, H, D) → dx: (T, H, D); `seg` as ropeCpu. */
export function ropeBackwardCpu(
  dy: Float32Array,
  shape: readonly number[],
  freqs: Float32Array,
  pos0: number,
  seg?: ArrayLike<number>,
) {
  return rotateCpu(dy, shape, freqs, pos0, -1, seg);
}

function rotate(e: Engine, x: Tensor, freqs: Tensor, pos0: number, sign: number, seg: Tensor | undefined): Tensor {
  if (x.dtype !== 'f32' || freqs.dtype !== 'f32') throw new TypeError('rope: f32 tensors only');
  const [t, h, d] = checkShape(x.shape, x.size, freqs.size);
  if (!Number.isInteger(pos0) || pos0 < 0) throw new RangeError(`rope: pos0 must be a whole number ≥ 0, got ${pos0}`);
  if (seg) checkBounds('rope', { length: seg.size }, t);
  const y = e.tensor(x.shape);
  e.run({
    key: 'rope',
    code: shader,
    constants: { WG },
    // unpacked, freqs stands in for seg (bound, never read)
    bindings: [x, freqs, y, seg ?? freqs],
    uniforms: uniforms({ u32: t }, { u32: h }, { u32: d }, { u32: pos0 }, { f32: sign }, { u32: seg ? 1 : 0 }),
    workgroups: gridChecked('rope', h, t),
  });
  return y;
}

/**
 * GPU forward, recorded on `e`. x: (T, H, D), freqs: (D/2,) from ropeFrequencies → (T, H, D);
 * `seg`: the segment bounds (T, 2) u32 of a packed sequence (segmentBounds).
 */
export function rope(e: Engine, x: Tensor, freqs: Tensor, pos0: number, seg?: Tensor): Tensor {
  return rotate(e, x, freqs, pos0, 1, seg);
}

/** GPU backward, recorded on `e`. dy: (T, H, D), freqs: (D/2,) → dx: (T, H, D); `seg` as rope. */
export function ropeBackward(e: Engine, dy: Tensor, freqs: Tensor, pos0: number, seg?: Tensor): Tensor {
  return rotate(e, dy, freqs, pos0, -1, seg);
}
