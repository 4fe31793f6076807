/**
 * matmul: C = alpha · op(A) · op(B), or C += alpha · op(A) · op(B) (accumulate), row-major,
 * op(X) = X or Xᵀ (transA / transB). Optionally batched over a leading dim: a 3-D operand holds
 * one matrix per batch, a 2-D operand is shared by all batches.
 *
 * Storage: f32 or f16 per operand (the tensor's dtype picks the variant; f16 needs the
 * device's `shader-f16`), accumulation always in f32, output f32.
 *
 * Backward (there is no separate kernel: it is two more matmuls with other transpose flags).
 * For C = alpha · op(A) · op(B) with upstream gradient dC (same shape as C):
 *   d op(A) = alpha · dC · op(B)ᵀ          d op(B) = alpha · op(A)ᵀ · dC
 * and un-transposing where the operand was stored transposed:
 *   dA = matmul(dC, B, {transB: !transB})              if !transA   (dA is (M, K))
 *   dA = matmul(B, dC, {transA: transB, transB: true}) if transA    (dA is (K, M) = op(B) · dCᵀ)
 *   dB = matmul(A, dC, {transA: !transA})              if !transB   (dB is (K, N))
 *   dB = matmul(dC, A, {transA: true, transB: transA}) if transB    (dB is (N, K) = dCᵀ · op(A))
 * each with the same alpha. `matmulBackward` records exactly these (with `accumulate` for
 * gradient accumulation).
 *
 * Split-K (option `splitK`): a product whose output has few tiles but whose K is long (the LM-head
 * backward dh = dlogits · W, K = vocabulary) keeps few workgroups busy for a long K loop. With S
 * slices, S · tiles workgroups each walk a 1/S share of K into an (S, batch, M, N) partials
 * scratch, then splitk_reduce.wgsl sums the S partials of each element in slice order (no atomics,
 * so every run gives the same bits). `splitK: 'auto'` picks S from the shape and the adapter
 * (autoSplitK).
 */
import { isSoftwareAdapter, type GpuReport } from '../runtime/device.ts';
import { f32ToF16 } from '../io/float16.ts';
import { grid1d, gridChecked } from './dispatch_grid.ts';
import { preprocessWgsl, wgslOnce } from './wgsl_preprocess.ts';
import { Engine, numel, uniforms, type Tensor } from '../runtime/runtime.ts';
import shader from './matmul.wgsl?raw';
import reduceShader from './splitk_reduce.wgsl?raw';

export interface MatmulOptions {
  transA?: boolean;
  transB?: boolean;
  /** Scale of the product (default 1). */
  alpha?: number;
  /** Write into this tensor instead of a new one (needed with `accumulate`). */
  out?: Tensor;
  /** out += alpha · op(A) · op(B) (needs `out`). */
  accumulate?: boolean;
  /** Tile override (threads along N and M, K slab); normally chosen from the shape. */
  tile?: MatmulTile;
  /** Split-K slices (default 1: none), or 'auto' (autoSplitK). See the header. */
  splitK?: SplitK;
  /** Double-buffered tiles; normally chosen per adapter (doubleBufferFor). */
  doubleBuffer?: boolean;
}

/** Split-K slices of a product: a count (1 = no split), or 'auto' to choose from the shape and adapter. */
export type SplitK = number | 'auto';

export interface MatmulTile {
  /** Threads along N and M. */
  wgX: number;
  wgY: number;
  /** K slab staged per step (a multiple of 4). */
  bk: number;
  /** Rows of C per thread, 4 (default) or 8: each thread holds tm × 4 outputs. */
  tm?: 4 | 8;
}

/** Rows × columns of C a workgroup computes with this tile. */
export const tileSize = (t: MatmulTile) => ({ bm: (t.tm ?? 4) * t.wgY, bn: 4 * t.wgX });

/** Bytes of workgroup memory the tile stages (matmul_tile.wgsl: rows padded by one word), twice with double buffering. */
const tileBytes = (t: MatmulTile, doubleBuf = false) => {
  const { bm, bn } = tileSize(t);
  return t.bk * (bm + 1 + bn + 1) * 4 * (doubleBuf ? 2 : 1);
};

/** Compile-time choices of the tile shader (matmul_tile.wgsl's flags). */
export interface TileFlags {
  /** 8 rows per thread instead of 4. */
  TM8: boolean;
  /** op(A) / op(B) staged four stored words at a time (f32, contiguous length a multiple of 4). */
  VEC4_A: boolean;
  VEC4_B: boolean;
  /** Double-buffered tiles: stage the next K slab while multiplying the current one (one barrier per slab). */
  DOUBLE_BUF?: boolean;
}

/** Shapes of a matmul, resolved from the stored shapes of A and B. */
export interface MatmulDims {
  batch: number;
  m: number;
  n: number;
  k: number;
  /** Elements between consecutive batches of A / B (0 when shared). */
  strideA: number;
  strideB: number;
  outShape: number[];
}

/** Resolve M, N, K and batching from stored shapes (2-D, or 3-D with a leading batch). */
export function matmulDims(
  aShape: readonly number[],
  bShape: readonly number[],
  transA = false,
  transB = false,
): MatmulDims {
  const rank = (s: readonly number[], name: string) => {
    if (s.length !== 2 && s.length !== 3)
      throw new RangeError(`matmul: ${name} must be 2-D or 3-D, got shape ${JSON.stringify(s)}`);
  };
  rank(aShape, 'A');
  rank(bShape, 'B');
  const [ar, ac] = aShape.slice(-2) as [number, number];
  const [br, bc] = bShape.slice(-2) as [number, number];
  const [m, ka] = transA ? [ac, ar] : [ar, ac];
  const [kb, n] = transB ? [bc, br] : [br, bc];
  if (ka !== kb) throw new RangeError(`matmul: inner dims differ (op(A) is ${m}x${ka}, op(B) is ${kb}x${n})`);
  const batchA = aShape.length === 3 ? aShape[0]! : 1;
  const batchB = bShape.length === 3 ? bShape[0]! : 1;
  if (batchA !== batchB && batchA !== 1 && batchB !== 1)
    throw new RangeError(`matmul: batch sizes differ (${batchA} vs ${batchB})`);
  const batch = Math.max(batchA, batchB);
  const batched = aShape.length === 3 || bShape.length === 3;
  return {
    batch,
    m,
    n,
    k: ka,
    strideA: batchA > 1 ? m * ka : 0,
    strideB: batchB > 1 ? ka * n : 0,
    outShape: batched ? [batch, m, n] : [m, n],
  };
}

export interface MatmulCpuOptions {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  /** Initial C to accumulate onto (not modified; the sum is returned). */
  accumulate?: Float32Array;
}

/**
 * Σ x[xi + p] · y[yi + p] over p = 0 .. k-1, added in that order in f64: four products a pass (fewer
 * loop tests; the same additions in the same order as one a pass).
 */
export function dot(x: Float32Array, xi: number, y: Float32Array, yi: number, k: number): number {
  let s = 0;
  let p = 0;
  for (; p + 4 <= k; p += 4) {
    s += x[xi + p]! * y[yi + p]!;
    s += x[xi + p + 1]! * y[yi + p + 1]!;
    s += x[xi + p + 2]! * y[yi + p + 2]!;
    s += x[xi + p + 3]! * y[yi + p + 3]!;
  }
  for (; p < k; p++) s += x[xi + p]! * y[yi + p]!;
  return s;
}

/** CPU reference (f64 sums). a, b: stored as `aShape`, `bShape` → (batch?, M, N). */
export function matmulCpu(
  a: Float32Array,
  aShape: readonly number[],
  b: Float32Array,
  bShape: readonly number[],
  opts: MatmulCpuOptions = {},
): Float32Array {
  const { transA = false, transB = false, alpha = 1 } = opts;
  const d = matmulDims(aShape, bShape, transA, transB);
  const { batch, m, n, k } = d;
  if (a.length !== numel(aShape) || b.length !== numel(bShape))
    throw new RangeError('matmul: data length does not match shape');
  const out = new Float32Array(batch * m * n);
  // Row i's sums, each over p = 0 .. k-1 in order, in f64: the same additions whichever loop runs
  // innermost, so the two orders below give bit-identical results. With B transposed, both operands
  // of a dot are contiguous (j outside p); otherwise B's rows are, and row i's n sums advance together
  // (p outside j) instead of reading B a column at a time.
  const row = new Float64Array(n);
  const acc = opts.accumulate;
  for (let z = 0; z < batch; z++) {
    const oa = z * d.strideA;
    const ob = z * d.strideB;
    for (let i = 0; i < m; i++) {
      if (transB) {
        for (let j = 0; j < n; j++) {
          const bj = ob + j * k;
          let s = 0;
          if (transA) for (let p = 0; p < k; p++) s += a[oa + p * m + i]! * b[bj + p]!;
          else s = dot(a, oa + i * k, b, bj, k);
          row[j] = s;
        }
      } else {
        row.fill(0);
        for (let p = 0; p < k; p++) {
          const av = transA ? a[oa + p * m + i]! : a[oa + i * k + p]!;
          const bp = ob + p * n;
          for (let j = 0; j < n; j++) row[j]! += av * b[bp + j]!;
        }
      }
      const o = z * m * n + i * n;
      for (let j = 0; j < n; j++) out[o + j] = alpha * row[j]! + (acc ? acc[o + j]! : 0);
    }
  }
  return out;
}

/**
 * f32 → f16 data for an f16 weight tensor (`e.tensor(shape, packF16(w), 'f16')`): IEEE binary16,
 * round to nearest even, little-endian, element i at byte 2i (the layout of WGSL's array<f16>),
 * padded with zeros to an even count so the upload is a whole number of 4-byte words
 * (GPUQueue.writeBuffer needs that).
 */
export function packF16(x: Float32Array): Uint16Array {
  const out = new Uint16Array(x.length + (x.length & 1));
  out.set(f32ToF16(x));
  return out;
}

const variants = new Map<string, string>();
const NO_TILE_FLAGS: TileFlags = { TM8: false, VEC4_A: false, VEC4_B: false, DOUBLE_BUF: false };

/** The shader for these storage types and tile flags (each variant preprocessed once). */
export function matmulVariantCode(ta: 'f32' | 'f16', tb: 'f32' | 'f16', tile: TileFlags = NO_TILE_FLAGS): string {
  if ((tile.VEC4_A && ta !== 'f32') || (tile.VEC4_B && tb !== 'f32'))
    throw new RangeError('matmul: vec4 staging is for f32 operands only');
  const key = `${ta}${tb}${variantKey(tile)}`;
  let code = variants.get(key);
  if (!code) {
    const flags = {
      F16: ta === 'f16' || tb === 'f16',
      F16_A: ta === 'f16',
      F16_B: tb === 'f16',
      ...tile,
      DOUBLE_BUF: tile.DOUBLE_BUF ?? false,
    };
    code = preprocessWgsl(shader, flags, 'matmul.wgsl');
    variants.set(key, code);
  }
  return code;
}

/** A short name of the tile flags, for pipeline keys. */
export const variantKey = (f: TileFlags) =>
  `_tm${f.TM8 ? 8 : 4}${f.VEC4_A ? '_va' : ''}${f.VEC4_B ? '_vb' : ''}${f.DOUBLE_BUF ? '_db' : ''}`;

/**
 * Whether an operand can be staged as vec4: f32, its stored rows (the contiguous dimension) a
 * multiple of 4 long, and the K slab too (groups of four along K must not straddle a slab).
 */
export const vec4Ok = (dtype: string, rowLength: number, bk: number) =>
  dtype === 'f32' && rowLength % 4 === 0 && bk % 4 === 0;

/** Workgroups of 128 × 64 below which a product takes the 64 × 64 tile (more, smaller workgroups). */
const MIN_LARGE_TILES = 96;

/**
 * Tile for a shape. Skinny outputs: wide-and-short / narrow-and-tall. Otherwise 128 × 64 (8 rows ×
 * 4 columns per thread, 12.4 KiB of workgroup memory) when that still makes enough workgroups to
 * fill a GPU, else 64 × 64 (4 × 4 per thread). On software adapters 64 × 32 (8 × 4 per thread)
 * with a 16-deep slab, 6.3 KiB: SwiftShader's compile time grows steeply with the workgroup memory
 * (seconds for 8 KiB), and there this tile measured 1.5–2× the 32 × 32 × 8 one at 512³ (fewer
 * barriers and shared-memory reads per multiply-add).
 */
export function pickTile(m: number, n: number, software = false): MatmulTile {
  if (software) return { wgX: 8, wgY: 8, bk: 16, tm: 8 };
  if (m <= 16 && n > m) return { wgX: 64, wgY: 4, bk: 8 }; // 16 × 256 (decode, M = tokens)
  if (n <= 16 && m > n) return { wgX: 4, wgY: 64, bk: 8 }; // 256 × 16 (LoRA rank outputs)
  if (Math.ceil(m / 128) * Math.ceil(n / 64) >= MIN_LARGE_TILES) return { wgX: 16, wgY: 16, bk: 16, tm: 8 };
  return { wgX: 16, wgY: 16, bk: 16 }; // 64 × 64 (8.3 KiB of workgroup memory)
}

/** Whether the device can run a tile (invocations and workgroup memory). */
export function tileFits(
  t: MatmulTile,
  limits: { maxComputeInvocationsPerWorkgroup: number; maxComputeWorkgroupStorageSize: number },
  doubleBuf = false,
): boolean {
  return (
    t.wgX * t.wgY <= limits.maxComputeInvocationsPerWorkgroup &&
    tileBytes(t, doubleBuf) <= limits.maxComputeWorkgroupStorageSize
  );
}

/** Shortest share of K the automatic split gives a slice (shorter slices spend more on the reduce than they save). */
export const MIN_SLICE_K = 256;
/** Most slices the automatic split makes (the partials scratch is slices × the output). */
export const MAX_AUTO_SPLIT_K = 32;

/**
 * Automatic split-K slices for a product of `tiles` output workgroups and inner dimension `k` on
 * an adapter with about `units` compute units (likelyComputeUnits): enough slices for 2 · units
 * workgroups, but each slice at least MIN_SLICE_K long, and at most MAX_AUTO_SPLIT_K slices.
 * 1 (no split) when the tiles alone fill the adapter.
 */
export function autoSplitK(tiles: number, k: number, units: number): number {
  const want = Math.ceil((2 * units) / Math.max(1, tiles));
  return Math.max(1, Math.min(want, Math.floor(k / MIN_SLICE_K), MAX_AUTO_SPLIT_K));
}

/**
 * A likely count of the adapter's compute units (SMs, CUs, cores; WebGPU does not report it), for
 * autoSplitK: the CPU threads for a software adapter, 64 for NVIDIA and AMD (discrete parts span
 * about 20 to 130), 16 for Intel and Apple (integrated parts: 8 to 40), 8 otherwise (mobile).
 */
export function likelyComputeUnits(r: GpuReport, cpuThreads = 4): number {
  if (isSoftwareAdapter(r)) return cpuThreads;
  const name = `${r.vendor} ${r.architecture} ${r.description}`;
  if (/nvidia|amd|\bati\b|radeon/i.test(name)) return 64;
  if (/intel|apple/i.test(name)) return 16;
  return 8;
}

/**
 * The K share of each slice for `slices` requested slices of a K-long product staged `bk` at a
 * time: a multiple of bk (a slab never straddles two slices), and the slices left nonempty.
 */
export function splitKPlan(k: number, slices: number, bk: number): { slices: number; kSlice: number } {
  if (!Number.isInteger(slices) || slices < 1)
    throw new RangeError(`matmul: splitK must be a positive integer or 'auto', got ${slices}`);
  const kSlice = Math.max(bk, Math.ceil(Math.ceil(k / slices) / bk) * bk);
  return { slices: Math.max(1, Math.ceil(k / kSlice)), kSlice };
}

/** CPU threads, where the platform says (software adapters run workgroups on them). */
const cpuThreads = () =>
  (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;

/** Slices and K share for a product: opts' count, or the automatic choice for `tiles` output workgroups. */
export function resolveSplitK(
  e: Engine,
  splitK: SplitK | undefined,
  tiles: number,
  k: number,
  bk: number,
): { slices: number; kSlice: number } {
  const s = splitK === 'auto' ? autoSplitK(tiles, k, likelyComputeUnits(e.ctx.report, cpuThreads())) : (splitK ?? 1);
  return splitKPlan(k, s, bk);
}

const reduceCode = wgslOnce(reduceShader, 'splitk_reduce.wgsl');
const REDUCE_WG = 256;

/**
 * Second pass of a split-K product: out = Σ_s parts[s] (+ out with accumulate), parts holding
 * `slices` partials of out's size, summed in slice order. Releases parts (recorded reads only).
 */
export function splitKReduce(e: Engine, parts: Tensor, out: Tensor, slices: number, accumulate: boolean): void {
  e.run({
    key: 'splitk_reduce',
    code: reduceCode(),
    constants: { WG: REDUCE_WG, ACCUMULATE: accumulate ? 1 : 0 },
    bindings: [parts, out],
    uniforms: uniforms({ u32: out.size }, { u32: slices }),
    workgroups: grid1d(Math.ceil(out.size / REDUCE_WG)),
  });
  e.release(parts);
}

/**
 * Double-buffered tiles (matmul_tile.wgsl's DOUBLE_BUF) on this adapter: on hardware GPUs, where
 * the tile fits twice in workgroup memory (a 64 × 64 tile needs 16.3 KiB, over WebGPU's default
 * 16 KiB; adapters that allow 32 KiB take it). Not on software adapters: on SwiftShader (2 cores,
 * its 64 × 32 tile) it measured 0.9–1.2× the single-buffered time (19×896·896×4864: 3.21 s vs
 * 2.99 s; 55×4096·4096×896: 2.10 vs 1.72; 256³: 201 vs 163 ms; 19×4864·4864×896: 2.30 vs 2.55) and
 * compiles several times slower (twice the workgroup memory).
 */
export function doubleBufferFor(r: GpuReport, t: MatmulTile): boolean {
  return !isSoftwareAdapter(r) && tileFits(t, r.limits, true);
}

/** GPU version, recorded on `e`. A, B stored as their shapes say → (batch?, M, N) f32. */
export function matmul(e: Engine, a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const { transA = false, transB = false, alpha = 1, accumulate = false } = opts;
  let d = matmulDims(a.shape, b.shape, transA, transB);
  if ((a.dtype === 'f16' || b.dtype === 'f16') && !e.f16) {
    throw new Error(
      "matmul: f16 tensors need the device feature 'shader-f16', which this adapter lacks; store them as f32",
    );
  }
  let out: Tensor;
  if (opts.out) {
    out = opts.out;
    if (out.dtype !== 'f32' || out.size !== numel(d.outShape)) {
      throw new RangeError(
        `matmul: out must be f32 with ${numel(d.outShape)} elements, got ${out.dtype} ${JSON.stringify(out.shape)}`,
      );
    }
  } else {
    if (accumulate) throw new RangeError('matmul: accumulate needs an existing `out` tensor');
    out = e.tensor(d.outShape);
  }
  if (out.buffer === a.buffer || out.buffer === b.buffer) throw new RangeError('matmul: out must not alias an input');
  // A batch of non-transposed A against one shared B is a single (batch·M, K) product.
  if (d.batch > 1 && d.strideB === 0 && d.strideA !== 0 && !transA) {
    d = { ...d, m: d.batch * d.m, batch: 1, strideA: 0 };
  }
  if (d.m === 0 || d.n === 0) return out;
  const tile = opts.tile ?? pickTile(d.m, d.n, isSoftwareAdapter(e.ctx.report));
  if (!tileFits(tile, e.ctx.report.limits))
    throw new RangeError(`matmul: tile ${JSON.stringify(tile)} exceeds the device's workgroup limits`);
  const { bm, bn } = tileSize(tile);
  const flags: TileFlags = {
    TM8: tile.tm === 8,
    VEC4_A: vec4Ok(a.dtype, transA ? d.m : d.k, tile.bk),
    VEC4_B: vec4Ok(b.dtype, transB ? d.k : d.n, tile.bk),
    DOUBLE_BUF: opts.doubleBuffer ?? doubleBufferFor(e.ctx.report, tile),
  };
  if (flags.DOUBLE_BUF && !tileFits(tile, e.ctx.report.limits, true))
    throw new RangeError(`matmul: tile ${JSON.stringify(tile)} does not fit twice in workgroup memory (doubleBuffer)`);
  const [gx, gy] = [Math.ceil(d.n / bn), Math.ceil(d.m / bm)];
  const { slices, kSlice } = resolveSplitK(e, opts.splitK, gx * gy * d.batch, d.k, tile.bk);
  const parts = slices > 1 ? e.tensor([slices * d.batch * d.m * d.n]) : out;
  e.run({
    key: `matmul_${a.dtype}_${b.dtype}${variantKey(flags)}`,
    code: matmulVariantCode(a.dtype, b.dtype, flags),
    constants: {
      WG_X: tile.wgX,
      WG_Y: tile.wgY,
      BK: tile.bk,
      TRANS_A: transA ? 1 : 0,
      TRANS_B: transB ? 1 : 0,
      ACCUMULATE: accumulate && slices === 1 ? 1 : 0,
    },
    bindings: [a, b, parts],
    uniforms: uniforms(
      { u32: d.m },
      { u32: d.n },
      { u32: d.k },
      { u32: d.strideA },
      { u32: d.strideB },
      { u32: d.m * d.n },
      { f32: alpha },
      { u32: d.batch },
      { u32: kSlice },
    ),
    workgroups: gridChecked('matmul', gx, gy, d.batch * slices),
  });
  if (slices > 1) splitKReduce(e, parts, out, slices, accumulate);
  return out;
}

export interface MatmulBackwardOptions {
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  /** Which gradients to compute (default both). The frozen base needs dA only. */
  needA?: boolean;
  needB?: boolean;
  /** Accumulate into these instead of returning new tensors. */
  dA?: Tensor;
  dB?: Tensor;
}

/** CPU reference of the backward: the formulas of the header on the CPU matmul. */
export function matmulBackwardCpu(
  a: Float32Array,
  aShape: readonly number[],
  b: Float32Array,
  bShape: readonly number[],
  dC: Float32Array,
  opts: { transA?: boolean; transB?: boolean; alpha?: number } = {},
): { dA: Float32Array; dB: Float32Array } {
  const { transA = false, transB = false, alpha = 1 } = opts;
  const d = matmulDims(aShape, bShape, transA, transB);
  let dcShape = d.outShape;
  if (aShape.length === 3 && bShape.length === 2 && !transA) {
    // A shared B: flatten the batch into M so that dB sums over it.
    aShape = [d.batch * d.m, d.k];
    dcShape = [d.batch * d.m, d.n];
  }
  const dA = transA
    ? matmulCpu(b, bShape, dC, dcShape, { transA: transB, transB: true, alpha })
    : matmulCpu(dC, dcShape, b, bShape, { transB: !transB, alpha });
  const dB = transB
    ? matmulCpu(dC, dcShape, a, aShape, { transA: true, transB: transA, alpha })
    : matmulCpu(a, aShape, dC, dcShape, { transA: !transA, alpha });
  return { dA, dB };
}

/**
 * Gradients of C = alpha · op(A) · op(B): dA (A's stored shape) and dB (B's stored shape).
 * Supported: 2-D × 2-D, equal batches, and a 3-D A (not transposed) times a shared 2-D B (then
 * dB sums over the batch, done by flattening A to (batch·M, K)).
 */
export function matmulBackward(
  e: Engine,
  a: Tensor,
  b: Tensor,
  dC: Tensor,
  opts: MatmulBackwardOptions = {},
): { dA: Tensor | null; dB: Tensor | null } {
  const { transA = false, transB = false, alpha = 1, needA = true, needB = true } = opts;
  const d = matmulDims(a.shape, b.shape, transA, transB);
  if (dC.size !== numel(d.outShape))
    throw new RangeError(`matmul backward: dC has ${dC.size} elements, C has ${numel(d.outShape)}`);
  let av = a;
  let dc: Tensor = { ...dC, shape: d.outShape };
  if (a.shape.length === 3 && b.shape.length === 2) {
    if (transA) throw new RangeError('matmul backward: a transposed batched A with a shared B is not supported');
    av = { ...a, shape: [d.batch * d.m, d.k] };
    dc = { ...dC, shape: [d.batch * d.m, d.n] };
  } else if (a.shape.length !== b.shape.length) {
    throw new RangeError('matmul backward: a shared A with a batched B is not supported');
  }
  const acc = (t: Tensor | undefined) => (t ? { out: t, accumulate: true } : {});
  let dA: Tensor | null = null;
  let dB: Tensor | null = null;
  if (needA) {
    dA = transA
      ? matmul(e, b, dc, { transA: transB, transB: true, alpha, ...acc(opts.dA) })
      : matmul(e, dc, b, { transB: !transB, alpha, ...acc(opts.dA) });
    dA = { ...dA, shape: [...a.shape] };
  }
  if (needB) {
    dB = transB
      ? matmul(e, dc, av, { transA: true, transB: transA, alpha, ...acc(opts.dB) })
      : matmul(e, av, dc, { transA: !transA, alpha, ...acc(opts.dB) });
    dB = { ...dB, shape: [...b.shape] };
  }
  return { dA, dB };
}
