/**
 * rmsnorm: y = x / sqrt(mean(x^2) + eps) * w over the last dim. x is any (..., C) tensor and
 * w is (C,): (T, C) hidden states, or (T, H, D) q/k heads with a (D,) weight (Qwen3's q/k norm),
 * which is normalised as T*H rows of D.
 *
 * Backward: dx from dy (the frozen base needs only that); dw on request, from a second small
 * dispatch that reuses the per-row 1/rms written by the first. f32 tensors only.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import shader from './rmsnorm.wgsl?raw';
import backwardShader from './rmsnorm_backward.wgsl?raw';
import dwShader from './rmsnorm_backward_dw.wgsl?raw';
import { wgslOnce } from './wgsl_preprocess.ts';

const code = wgslOnce(shader, 'rmsnorm.wgsl');
const backwardCode = wgslOnce(backwardShader, 'rmsnorm_backward.wgsl');

const MAX_WG = 64;

/** Workgroup size: 64, or the next power of two ≥ C for short rows (no idle invocations). */
const wgFor = (cols: number) => Math.min(MAX_WG, 2 ** Math.ceil(Math.log2(Math.max(1, cols))));

function rowsOf(xSize: number, c: number, what: string): number {
  if (c < 1 || xSize % c !== 0) throw new RangeError(`rmsnorm: ${what} has ${xSize} values, not a multiple of C=${c}`);
  return xSize / c;
}

function requireF32(...ts: Tensor[]): void {
  for (const t of ts) if (t.dtype !== 'f32') throw new TypeError(`rmsnorm: f32 tensors only, got ${t.dtype}`);
}

/** CPU reference. x: (R, C) flattened, w: (C,) → y: (R, C). */
export function rmsnormCpu(x: Float32Array, w: Float32Array, eps: number): Float32Array {
  const c = w.length;
  const rows = rowsOf(x.length, c, 'x');
  const y = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < c; i++) ss += x[r * c + i]! ** 2;
    const rstd = 1 / Math.sqrt(ss / c + eps);
    for (let i = 0; i < c; i++) y[r * c + i] = x[r * c + i]! * rstd * w[i]!;
  }
  return y;
}

/** CPU reference of the backward. x, dy: (R, C), w: (C,) → dx: (R, C) and dw: (C,). */
export function rmsnormBackwardCpu(
  x: Float32Array,
  w: Float32Array,
  dy: Float32Array,
  eps: number,
): { dx: Float32Array; dw: Float32Array } {
  const c = w.length;
  const rows = rowsOf(x.length, c, 'x');
  if (dy.length !== x.length) throw new RangeError(`rmsnorm: dy has ${dy.length} values, x has ${x.length}`);
  const dx = new Float32Array(x.length);
  const dw = new Float64Array(c);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    let gx = 0;
    for (let i = 0; i < c; i++) {
      ss += x[r * c + i]! ** 2;
      gx += dy[r * c + i]! * w[i]! * x[r * c + i]!;
    }
    const rstd = 1 / Math.sqrt(ss / c + eps);
    for (let i = 0; i < c; i++) {
      const xi = x[r * c + i]!;
      const dyi = dy[r * c + i]!;
      dx[r * c + i] = rstd * (dyi * w[i]! - (xi * rstd * rstd * gx) / c);
      dw[i]! += dyi * xi * rstd;
    }
  }
  return { dx, dw: Float32Array.from(dw) };
}

/** GPU forward, recorded on `e`. x: (..., C), w: (C,) → y with x's shape. */
export function rmsnorm(e: Engine, x: Tensor, w: Tensor, eps: number): Tensor {
  requireF32(x, w);
  const cols = w.size;
  const rows = rowsOf(x.size, cols, 'x');
  const y = e.tensor(x.shape);
  e.run({
    key: 'rmsnorm',
    code: code(),
    constants: { WG: wgFor(cols) },
    bindings: [x, w, y],
    uniforms: uniforms({ u32: rows }, { u32: cols }, { f32: eps }),
    workgroups: grid1d(rows),
  });
  return y;
}

/**
 * GPU backward, recorded on `e`. x, dy: (..., C), w: (C,) → dx with x's shape, and dw (C,) when
 * `opts.weightGrad` is set (one more dispatch; otherwise dw is undefined).
 */
export function rmsnormBackward(
  e: Engine,
  x: Tensor,
  w: Tensor,
  dy: Tensor,
  eps: number,
  opts: { weightGrad?: boolean } = {},
): { dx: Tensor; dw?: Tensor } {
  requireF32(x, w, dy);
  const cols = w.size;
  const rows = rowsOf(x.size, cols, 'x');
  if (dy.size !== x.size) throw new RangeError(`rmsnorm: dy has ${dy.size} values, x has ${x.size}`);
  const dx = e.tensor(x.shape);
  const rstd = e.tensor([rows]);
  e.run({
    key: 'rmsnorm_backward',
    code: backwardCode(),
    constants: { WG: wgFor(cols) },
    bindings: [x, w, dy, dx, rstd],
    uniforms: uniforms({ u32: rows }, { u32: cols }, { f32: eps }),
    workgroups: grid1d(rows),
  });
  let dw: Tensor | undefined;
  if (opts.weightGrad) {
    dw = e.tensor([cols]);
    e.run({
      key: 'rmsnorm_backward_dw',
      code: dwShader,
      constants: { WG: MAX_WG },
      bindings: [x, dy, rstd, dw],
      uniforms: uniforms({ u32: rows }, { u32: cols }),
      workgroups: [Math.ceil(cols / MAX_WG)],
    });
  }
  e.release(rstd);
  return dw ? { dx, dw } : { dx };
}
