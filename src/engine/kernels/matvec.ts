/**
 * matvec: y (M, N) = alpha · x (M, K) · W (N, K)ᵀ for M ≤ 16 — the decode-step shape of every
 * linear layer — and its fused decode-step variants, all one parameterised kernel (matvec.wgsl):
 *   matvec        f32 W (GpuOps.matmul routes here); matvec_packed.ts: a packed bf16/f16/q4 W
 *   matvecFused   y (M, Σnⱼ) = [x·W₀ᵀ + b₀ | x·W₁ᵀ + b₁ | x·W₂ᵀ + b₂], ≤ 3 weights (Ops.linearFused)
 *   gluMatvec     s (M, F) = silu(x·W_gᵀ) ⊙ (x·W_uᵀ) (Ops.gluLinear)
 * Each is one dispatch. A column's dot product is computed the same way in every variant and for
 * every M (the same per-thread order and reduction tree), so a fused column is bit-identical to
 * a plain matvec of its weight (plus the bias), and row r of an M-row call to row r alone.
 * CPU references: matmulCpu with transB (and unpackWeight for packed weights), swigluCpu.
 */
import { unpackWeight, type PackedWeight } from '../io/pack.ts';
import { numel, uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { isSoftwareAdapter } from '../runtime/device.ts';
import { grid1d } from './dispatch_grid.ts';
import { matmulCpu } from './matmul.ts';
import { isPacked, type PackedFormat, type PackedTensor } from './packed_weight.ts';
import { swigluCpu } from './swiglu.ts';
import { preprocessWgsl } from './wgsl_preprocess.ts';
import shader from './matvec.wgsl?raw';
import packedLib from './packed_weight.wgsl?raw';

/**
 * Most rows of x: a decode step of up to 16 sequences (DecodeScheduler's batch) stays on this path;
 * more rows go to the tiled matmul, which then fills its 64-row tiles well enough. = MAX_ROWS in
 * matvec.wgsl (the per-thread accumulator arrays).
 */
export const MATVEC_MAX_ROWS = 16;
/** Threads per workgroup at most (fewer when the partial sums would pass WORKGROUP_BYTES). */
const WG_MAX = 256;
/** Workgroup memory the partial sums may use: WebGPU's guaranteed maxComputeWorkgroupStorageSize. */
const WORKGROUP_BYTES = 16 * 1024;
/**
 * Threads per column. On a real GPU 32 lanes read a column's weights contiguously (coalesced);
 * on a software adapter (CPU SIMD lanes) one thread per column running down K is ~8× faster.
 */
const lanesFor = (e: Engine): number => (isSoftwareAdapter(e.ctx.report) ? 1 : 32);

export interface MatvecOpts {
  alpha?: number;
  out?: Tensor;
  accumulate?: boolean;
  /** Threads per column (a power of two ≤ 256); default: 32 on a GPU, 1 on a software adapter. Tests set it. */
  lanes?: number;
}

type Mode = 'plain' | 'fused' | 'glu';

/** Workgroup size for `rows` rows with `nacc` sums each: the largest power of two ≤ 256 whose partials fit. */
export function matvecWorkgroupSize(rows: number, nacc: number, lanes: number): number {
  let wg = WG_MAX;
  while (wg > lanes && nacc * rows * wg * 4 > WORKGROUP_BYTES) wg /= 2;
  return wg;
}

const variants = new Map<string, string>();
function kernelCode(mode: Mode, format: 'f32' | PackedFormat): string {
  const key = `${mode}_${format}`;
  let code = variants.get(key);
  if (!code) {
    const packed = format !== 'f32';
    const flags: Record<string, boolean> = { PACKED: packed, FUSED: mode === 'fused', GLU: mode === 'glu' };
    if (packed) Object.assign(flags, { BF16: format === 'bf16', F16: format === 'f16', Q4: format === 'q4' });
    code = preprocessWgsl(packed ? `${shader}\n${packedLib}` : shader, flags, `matvec.wgsl (${key})`);
    variants.set(key, code);
  }
  return code;
}

/** A weight's (N, K), format and q4 scale offset; f32 tensors and packed tensors alike. */
function weightInfo(w: Tensor, what: string): { n: number; k: number; format: 'f32' | PackedFormat; soff: number } {
  if (isPacked(w)) {
    const { rows, cols, format, scaleOffset } = (w as PackedTensor).packed;
    return { n: rows, k: cols, format, soff: scaleOffset };
  }
  if (w.shape.length !== 2 || w.dtype !== 'f32') throw new RangeError(`${what}: W must be an f32 (N, K) tensor`);
  return { n: w.shape[0]!, k: w.shape[1]!, format: 'f32', soff: 0 };
}

/** The shared checks and the dispatch. ws: 1 (plain), 1–3 (fused) or 2 (glu) weights of one format. */
function record(
  e: Engine,
  what: string,
  mode: Mode,
  x: Tensor,
  ws: Tensor[],
  biases: (Tensor | undefined)[],
  opts: MatvecOpts,
): Tensor {
  const info = ws.map((w) => weightInfo(w, what));
  const { k, format } = info[0]!;
  const m = x.size / k;
  for (const wi of info) {
    if (wi.k !== k) throw new RangeError(`${what}: the weights have different input sizes (${wi.k} vs ${k})`);
    if (wi.format !== format)
      throw new RangeError(`${what}: all weights of one call must share a format (${wi.format} vs ${format})`);
  }
  if (!Number.isInteger(m) || x.shape[x.shape.length - 1] !== k || x.dtype !== 'f32')
    throw new RangeError(`${what}: x ${JSON.stringify(x.shape)} does not match W (${info[0]!.n}, ${k})`);
  if (m > MATVEC_MAX_ROWS) throw new RangeError(`${what}: ${m} rows; at most ${MATVEC_MAX_ROWS}`);
  if (format !== 'f32' && k % 8 !== 0) throw new RangeError(`${what}: K = ${k} must be a multiple of 8`);
  biases.forEach((b, i) => {
    if (b && b.size !== info[i]!.n)
      throw new RangeError(`${what}: bias ${i} has ${b.size} values; W has ${info[i]!.n} rows`);
  });
  const n = info.map((wi) => wi.n);
  const width = mode === 'fused' ? n.reduce((a, b) => a + b, 0) : n[0]!;
  if (mode === 'glu' && n[1] !== n[0]) throw new RangeError(`${what}: gate has ${n[0]} rows, up ${n[1]}`);
  const out = opts.out ?? e.tensor([m, width]);
  if (out.size !== numel([m, width])) throw new RangeError(`${what}: out must hold ${m}×${width}`);
  if (opts.accumulate && !opts.out) throw new RangeError(`${what}: accumulate needs \`out\``);
  const lanes = opts.lanes ?? lanesFor(e);
  const nacc = mode === 'glu' ? 2 : 1;
  const wg = matvecWorkgroupSize(m, nacc, lanes);
  if (!(lanes >= 1 && lanes <= wg && (lanes & (lanes - 1)) === 0))
    throw new RangeError(`${what}: lanes = ${lanes} must be a power of two ≤ ${wg}`);
  const cols = wg / lanes;
  const groups = mode === 'fused' ? n.reduce((a, b) => a + Math.ceil(b / cols), 0) : Math.ceil(n[0]! / cols);
  // absent weights / biases bind W0 (never read); the kernel's bindings are fixed per variant
  const w0 = ws[0]!;
  const bindings =
    mode === 'fused'
      ? [x, w0, ws[1] ?? w0, ws[2] ?? w0, biases[0] ?? w0, biases[1] ?? w0, biases[2] ?? w0, out]
      : [x, ...ws, out];
  const biasMask = biases.reduce((mask, b, i) => (b ? mask | (1 << i) : mask), 0);
  e.run({
    key: `matvec_${mode}_${format}`,
    code: kernelCode(mode, format),
    constants: { WG: wg, LANES: lanes, ROWS: m },
    bindings,
    uniforms: uniforms(
      { u32: m },
      { u32: k },
      { f32: opts.alpha ?? 1 },
      { u32: opts.accumulate ? 1 : 0 },
      { u32: n[0]! },
      { u32: n[1] ?? 0 },
      { u32: n[2] ?? 0 },
      { u32: biasMask },
      { u32: info[0]!.soff },
      { u32: info[1]?.soff ?? 0 },
      { u32: info[2]?.soff ?? 0 },
    ),
    workgroups: grid1d(groups),
  });
  return out;
}

/** CPU reference. x: (M, K), w: (N, K) → (M, N). */
export function matvecCpu(x: Float32Array, w: Float32Array, m: number, n: number, k: number, alpha = 1): Float32Array {
  return matmulCpu(x, [m, k], w, [n, k], { transB: true, alpha });
}

/** GPU version (f32 W), recorded on `e`. With `out` and `accumulate`, out += alpha · x·Wᵀ. */
export function matvec(e: Engine, x: Tensor, w: Tensor, opts: MatvecOpts = {}): Tensor {
  if (isPacked(w)) throw new RangeError('matvec: W is packed; use matvecPacked');
  return record(e, 'matvec', 'plain', x, [w], [], opts);
}

/** Internal: matvec_packed.ts's entry (a packed W); same kernel, PACKED variant. */
export function matvecPackedRecord(e: Engine, x: Tensor, w: PackedTensor, opts: MatvecOpts): Tensor {
  return record(e, 'matvec_packed', 'plain', x, [w], [], opts);
}

/** A weight for the CPU references: f32 values (N, K) or a packed weight (dequantised). */
export type CpuWeight = { data: Float32Array; n: number } | PackedWeight;
const cpuWeight = (w: CpuWeight): { data: Float32Array; n: number } =>
  'words' in w ? { data: unpackWeight(w), n: w.rows } : w;

/** CPU reference of matvecFused. x: (M, K) → (M, Σ nⱼ). */
export function matvecFusedCpu(
  x: Float32Array,
  ws: CpuWeight[],
  biases: (Float32Array | undefined)[],
  m: number,
  k: number,
): Float32Array {
  const parts = ws.map(cpuWeight).map(({ data, n }, j) => {
    const y = matvecCpu(x, data, m, n, k);
    const b = biases[j];
    if (b) for (let i = 0; i < y.length; i++) y[i]! += b[i % n]!;
    return { y, n };
  });
  const width = parts.reduce((a, p) => a + p.n, 0);
  const out = new Float32Array(m * width);
  for (let r = 0; r < m; r++) {
    let off = r * width;
    for (const { y, n } of parts) {
      out.set(y.subarray(r * n, (r + 1) * n), off);
      off += n;
    }
  }
  return out;
}

/**
 * GPU: y (M, Σ nⱼ) = [x·W₀ᵀ + b₀ | …] for 1–3 weights Wⱼ (nⱼ, K) of one format (f32 or packed) and
 * optional biases bⱼ (nⱼ,), M ≤ MATVEC_MAX_ROWS, in one dispatch.
 */
export function matvecFused(
  e: Engine,
  x: Tensor,
  ws: Tensor[],
  biases: (Tensor | undefined)[] = [],
  opts: Pick<MatvecOpts, 'lanes'> = {},
): Tensor {
  if (ws.length < 1 || ws.length > 3) throw new RangeError(`matvec_fused: 1 to 3 weights, got ${ws.length}`);
  if (biases.length > ws.length) throw new RangeError('matvec_fused: more biases than weights');
  return record(e, 'matvec_fused', 'fused', x, ws, biases, opts);
}

/** CPU reference of gluMatvec. x: (M, K), gate and up (F, K) → (M, F). */
export function gluMatvecCpu(x: Float32Array, wg: CpuWeight, wu: CpuWeight, m: number, k: number): Float32Array {
  const g = cpuWeight(wg);
  const u = cpuWeight(wu);
  return swigluCpu(matvecCpu(x, g.data, m, g.n, k), matvecCpu(x, u.data, m, u.n, k));
}

/** GPU: s (M, F) = silu(x·W_gᵀ) ⊙ (x·W_uᵀ) for W_g, W_u (F, K) of one format, M ≤ MATVEC_MAX_ROWS, one dispatch. */
export function gluMatvec(e: Engine, x: Tensor, wg: Tensor, wu: Tensor, opts: Pick<MatvecOpts, 'lanes'> = {}): Tensor {
  return record(e, 'glu_matvec', 'glu', x, [wg, wu], [], opts);
}
