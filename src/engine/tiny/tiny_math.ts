/**
 * The Lab's fast path (tiny_lm.ts), its plain loops: matmuls, RMSNorm (and its backward), RoPE's
 * rotation of a row and SwiGLU's sigmoid, each in its CPU reference's order (matmulCpu, rmsnormCpu,
 * ropeAppendCpu, swiglu.ts) with f64 sums, so the values are the references' bit for bit.
 */
import { LORA_MODULES, type LoraModule } from '../io/peft.ts';

export const f32 = Math.fround;
/** A value per projection. */
export const mapModules = (f: (m: LoraModule) => Float32Array) =>
  Object.fromEntries(LORA_MODULES.map((m) => [m, f(m)])) as Record<LoraModule, Float32Array>;
/**
 * swiglu.ts's sigmoid, the same expression (so the same rounding): 1 / (1 + exp(−g)) for g ≥ 0,
 * exp(g) / (1 + exp(g)) below; both exponents are −|g|, so one exp serves.
 */
export const sigmoid = (g: number) => {
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
export function mmNN(
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
export function mmTNacc(
  a: Float32Array,
  b: Float32Array,
  out: Float32Array,
  M: number,
  N: number,
  K: number,
  alpha: number,
) {
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
export function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(w.length);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) t[j * rows + i] = w[i * cols + j]!;
  return t;
}

/** ropeAppendCpu's rotation of one head's row: x[xo..] rotated by the angles at t0 into dst[dOff..]. */
export function ropeRow(
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
export function rmsnorm(x: Float32Array, w: Float32Array, out: Float32Array, R: number, C: number, eps: number) {
  for (let r = 0; r < R; r++) {
    const o = r * C;
    let ss = 0;
    for (let i = 0; i < C; i++) ss += x[o + i]! ** 2;
    const rstd = 1 / Math.sqrt(ss / C + eps);
    for (let i = 0; i < C; i++) out[o + i] = x[o + i]! * rstd * w[i]!;
  }
}

/** rmsnormBackwardCpu's dx over R rows. */
export function rmsnormBack(
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
