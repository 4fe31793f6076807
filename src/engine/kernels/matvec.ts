/**
 * matvec: y (M, N) = alpha · x (M, K) · W (N, K)ᵀ for M ≤ 16 — the decode-step shape of every
 * linear layer — and its fused decode-step variants, all one parameterised kernel (matvec.wgsl):
 *   matvec        f32 W (GpuOps.matmul routes here); matvec_packed.ts: a packed bf16/f16/q4 W
 *   matvecFused   y (M, Σnⱼ) = [x·W₀ᵀ + b₀ | x·W₁ᵀ + b₁ | x·W₂ᵀ + b₂], ≤ 3 weights (Ops.linearFused)
 *   gluMatvec     s (M, F) = silu(x·W_gᵀ) ⊙ (x·W_uᵀ) (Ops.gluLinear)
 * Each is one dispatch. A column's dot product is computed the same way in every variant and for
 * every M (the same per-thread order and reduction, fixed by K, the format and the adapter: see
 * matvecLanes), so a fused column is bit-identical to a plain matvec of its weight (plus the bias),
 * and row r of an M-row call to row r alone. The launch shape (matvecPlan) keeps the kernel at the
 * memory bandwidth: vec4 / 8-element loads, up to 4 columns per thread sharing x, K split over up to
 * 128 threads per column for skinny products, subgroup shuffles where the device has `subgroups`.
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
 * more rows go to the tiled matmul, which then fills its 64-row tiles well enough. = MAX_ACC in
 * matvec.wgsl (a thread's accumulators: columns per thread × rows ≤ 16).
 */
export const MATVEC_MAX_ROWS = 16;
/** Threads per workgroup at most (fewer when the partial sums would pass WORKGROUP_BYTES). */
const WG_MAX = 256;
/** Workgroup memory the partial sums may use: WebGPU's guaranteed maxComputeWorkgroupStorageSize. */
const WORKGROUP_BYTES = 16 * 1024;
/** Threads per column at most: the tree's partial sums of 16 rows × gate and up then fill 16 KiB. */
const LANES_MAX = 128;
/** Chunks of K each thread reads at least when K picks the lanes (fewer lanes below that). */
const CHUNKS_PER_LANE = 4;
/** Columns per thread at most (= MAX_CPT in matvec.wgsl). */
const CPT_MAX = 4;
/** Threads a dispatch should have at least before a thread takes several columns (fills a large GPU). */
const THREADS_TARGET = 65536;

export interface MatvecOpts {
  alpha?: number;
  out?: Tensor;
  accumulate?: boolean;
  /** Threads per column (a power of two ≤ 128); default: by K on a GPU, 1 on a software adapter. Tests set it. */
  lanes?: number;
  /** Reduce with subgroup shuffles (default: when the device has `subgroups`); false: the shared-memory tree. */
  subgroups?: boolean;
}

type Mode = 'plain' | 'fused' | 'glu';
type Format = 'f32' | PackedFormat;

/** Elements of K one thread reads per step: 8 (packed), 4 (f32 with K % 4 == 0: vec4), else 1. */
const matvecChunk = (format: Format, k: number): number => (format !== 'f32' ? 8 : k % 4 === 0 ? 4 : 1);

/**
 * Threads per column on a GPU, from K alone (so a column's summation order — hence its value — does
 * not depend on N, the rows or the other weights of a fused call): the largest power of two ≤ 128
 * leaving each thread ≥ 4 chunks. Long K (the down projection) gets up to 128 lanes: its K split
 * over the workgroup, so a skinny product still has N·lanes threads streaming its weight.
 */
export function matvecLanes(format: Format, k: number): number {
  const chunks = k / matvecChunk(format, k);
  let lanes = 1;
  while (lanes < LANES_MAX && chunks / (lanes * 2) >= CHUNKS_PER_LANE) lanes *= 2;
  return lanes;
}

export interface MatvecPlan {
  /** Threads per workgroup, per column block, columns per thread; b: lanes reduced by subgroup shuffles (1: none). */
  wg: number;
  lanes: number;
  cpt: number;
  b: number;
}

/**
 * The launch shape for `rows` rows of `n` columns (the widest weight), `nacc` sums per column
 * (2: GLU), `lanes` threads per column and subgroup butterflies over `b` lanes: columns per thread
 * (≤ 4, ≤ 16 accumulators, only while the dispatch keeps THREADS_TARGET threads) and the largest
 * workgroup ≤ 256 whose partial sums fit 16 KiB. None of these changes a column's value.
 */
export function matvecPlan(rows: number, nacc: number, n: number, lanes: number, b = 1): MatvecPlan {
  let cpt = CPT_MAX;
  while (cpt > 1 && (cpt * rows > MATVEC_MAX_ROWS || (n * lanes) / cpt < THREADS_TARGET)) cpt /= 2;
  let wg = WG_MAX;
  while (wg > lanes && nacc * cpt * rows * (wg / b) * 4 > WORKGROUP_BYTES) wg /= 2;
  return { wg, lanes, cpt, b };
}

/** The adapter's smallest subgroup size when the device has `subgroups` enabled, else 0. */
function subgroupMin(e: Engine): number {
  const d = e.ctx.device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number } };
  if (!d.features?.has('subgroups')) return 0;
  return d.adapterInfo?.subgroupMinSize || 4; // 4: the least WebGPU allows
}

const variants = new Map<string, string>();
function kernelCode(mode: Mode, format: Format, vec4: boolean, subgroups: boolean): string {
  const key = `${mode}_${format}_${vec4 ? 'v4' : 's'}_${subgroups ? 'sg' : 'tree'}`;
  let code = variants.get(key);
  if (!code) {
    const packed = format !== 'f32';
    const flags: Record<string, boolean> = {
      PACKED: packed,
      VEC4: vec4,
      FUSED: mode === 'fused',
      GLU: mode === 'glu',
      SUBGROUPS: subgroups,
    };
    // BF16 and Q4 also pick matvec.wgsl's own packed loads (named, as every #if, by every variant)
    if (packed) Object.assign(flags, { BF16: format === 'bf16', F16: format === 'f16', Q4: format === 'q4' });
    else Object.assign(flags, { BF16: false, Q4: false });
    code = preprocessWgsl(packed ? `${shader}\n${packedLib}` : shader, flags, `matvec.wgsl (${key})`);
    variants.set(key, code);
  }
  return code;
}

/** A weight's (N, K), format and q4 scale offset; f32 tensors and packed tensors alike. */
function weightInfo(w: Tensor, what: string): { n: number; k: number; format: Format; soff: number } {
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
  // a software adapter (CPU SIMD lanes) runs one thread per column down K ~8× faster than 32 lanes
  const lanes = opts.lanes ?? (isSoftwareAdapter(e.ctx.report) ? 1 : matvecLanes(format, k));
  if (!(lanes >= 1 && lanes <= LANES_MAX && (lanes & (lanes - 1)) === 0))
    throw new RangeError(`${what}: lanes = ${lanes} must be a power of two ≤ ${LANES_MAX}`);
  const sgMin = opts.subgroups === false ? 0 : subgroupMin(e);
  if (opts.subgroups && !sgMin)
    throw new RangeError(`${what}: subgroups asked for, but the device has no \`subgroups\``);
  const b = sgMin ? Math.min(lanes, sgMin) : 1;
  const subgroups = b > 1;
  const nacc = mode === 'glu' ? 2 : 1;
  const { wg, cpt } = matvecPlan(m, nacc, Math.max(...n), lanes, subgroups ? b : 1);
  const cols = (wg / lanes) * cpt;
  const groups = mode === 'fused' ? n.reduce((a, b) => a + Math.ceil(b / cols), 0) : Math.ceil(n[0]! / cols);
  const vec4 = format === 'f32' && matvecChunk(format, k) === 4;
  // absent weights / biases bind W0 (never read); the kernel's bindings are fixed per variant
  const w0 = ws[0]!;
  const bindings =
    mode === 'fused'
      ? [x, w0, ws[1] ?? w0, ws[2] ?? w0, biases[0] ?? w0, biases[1] ?? w0, biases[2] ?? w0, out]
      : [x, ...ws, out];
  const biasMask = biases.reduce((mask, b, i) => (b ? mask | (1 << i) : mask), 0);
  e.run({
    key: `matvec_${mode}_${format}_${vec4 ? 'v4' : 's'}_${subgroups ? 'sg' : 'tree'}`,
    code: kernelCode(mode, format, vec4, subgroups),
    constants: { WG: wg, LANES: lanes, CPT: cpt, ROWS: m, B: b },
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
  opts: Pick<MatvecOpts, 'lanes' | 'subgroups'> = {},
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
export function gluMatvec(
  e: Engine,
  x: Tensor,
  wg: Tensor,
  wu: Tensor,
  opts: Pick<MatvecOpts, 'lanes' | 'subgroups'> = {},
): Tensor {
  return record(e, 'glu_matvec', 'glu', x, [wg, wu], [], opts);
}
