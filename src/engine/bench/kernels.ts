/**
 * Kernel benchmarks for `spade bench engine`: matmul throughput and the device's pure-FMA peak,
 * both in GFLOP/s, and the LM-head backward's product with and without split-K, in ms. Each
 * measurement warms up once (pipeline compilation, first-touch), then times whole submissions:
 * record, flush, and wait for queue.onSubmittedWorkDone().
 */
import { Engine, uniforms } from '../runtime/runtime.ts';
import { MAX_GROUPS_PER_DIM } from '../kernels/dispatch_grid.ts';
import { matmul, pickTile, resolveSplitK, tileSize, type MatmulOptions } from '../kernels/matmul.ts';
import { isSoftwareAdapter } from '../runtime/device.ts';
import fmaShader from '../kernels/fma_peak.wgsl?raw';

/** The runtime every benchmark takes, for `spade bench engine` (the CLI reaches the engine's rooms through engine/bench only). */
export { Engine };

const FMA_WG = 256;
const FMA_FLOPS_PER_ITER = 32; // 16 fma per thread per round

/** Wait until everything submitted so far has run. */
async function drain(e: Engine): Promise<void> {
  e.flush();
  await e.device.queue.onSubmittedWorkDone();
  e.ctx.throwIfLost();
}

/**
 * Random-ish f32 data without an RNG dependency (xorshift32, values in [-1, 1)); bench/peer.ts
 * feeds the peer library the same data.
 */
export function filler(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = (s >>> 0) / 2 ** 31 - 1;
  }
  return out;
}

/**
 * GFLOP/s of C (m×n) = A (m×k) · B (k×n) in f32 over `reps` products submitted together and
 * waited for once, after one warm-up. 2·m·n·k flops per product.
 */
export async function benchMatmul(
  e: Engine,
  m: number,
  n: number,
  k: number,
  reps = 5,
  opts: Pick<MatmulOptions, 'tile'> = {},
): Promise<number> {
  if (!(m > 0 && n > 0 && k > 0 && reps > 0)) throw new RangeError('benchMatmul: sizes and reps must be positive');
  const a = e.tensor([m, k], filler(m * k, 1));
  const b = e.tensor([k, n], filler(k * n, 2));
  const c = e.tensor([m, n]);
  matmul(e, a, b, { ...opts, out: c });
  await drain(e);
  // throughput: `reps` products recorded into one submission, then one wait (a per-product wait
  // would measure the queue's round trip, ~1 ms, not the kernel, for products under a few GFLOP)
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) matmul(e, a, b, { ...opts, out: c });
  await drain(e);
  const secs = (performance.now() - t0) / 1000;
  for (const t of [a, b, c]) e.release(t);
  e.flush();
  return (2 * m * n * k * reps) / secs / 1e9;
}

/**
 * Milliseconds per product C (m×n) = A (m×k) · B (k×n), f32, for each option set in `variants`,
 * measured in the same run: after one warm-up each, `rounds` rounds time every variant in turn
 * (`reps` products in one submission, then one wait), so drift hits all alike; the fastest round
 * of each is kept.
 */
async function benchMatmulMs(
  e: Engine,
  m: number,
  n: number,
  k: number,
  variants: Pick<MatmulOptions, 'splitK' | 'doubleBuffer' | 'tile'>[],
  reps = 3,
  rounds = 3,
): Promise<number[]> {
  if (!(m > 0 && n > 0 && k > 0 && reps > 0 && rounds > 0))
    throw new RangeError('benchMatmulMs: sizes, reps and rounds must be positive');
  const a = e.tensor([m, k], filler(m * k, 1));
  const b = e.tensor([k, n], filler(k * n, 2));
  const c = e.tensor([m, n]);
  for (const v of variants) matmul(e, a, b, { ...v, out: c });
  await drain(e);
  const best = variants.map(() => Infinity);
  for (let r = 0; r < rounds; r++) {
    for (const [i, v] of variants.entries()) {
      const t0 = performance.now();
      for (let j = 0; j < reps; j++) matmul(e, a, b, { ...v, out: c });
      await drain(e);
      best[i] = Math.min(best[i]!, (performance.now() - t0) / reps);
    }
  }
  for (const t of [a, b, c]) e.release(t);
  e.flush();
  return best;
}

/**
 * The LM-head backward's product dh (rows, hidden) = dlogits (rows, vocab) · W (vocab, hidden)
 * (model.headBackward; Qwen2.5-0.5B: vocab 151,936, hidden 896, about 55 rows a chunk) without
 * split-K and with the automatic split, ms per product, timed alternately (benchMatmulMs).
 */
export async function benchHeadBackwardSplitK(
  e: Engine,
  rows = 55,
  vocab = 151936,
  hidden = 896,
  reps = 3,
): Promise<{ slices: number; msNoSplit: number; msAuto: number }> {
  const tile = pickTile(rows, hidden, isSoftwareAdapter(e.ctx.report));
  const { bm, bn } = tileSize(tile);
  const tiles = Math.ceil(rows / bm) * Math.ceil(hidden / bn);
  const { slices } = resolveSplitK(e, 'auto', tiles, vocab, tile.bk);
  const [msNoSplit, msAuto] = await benchMatmulMs(e, rows, hidden, vocab, [{ splitK: 1 }, { splitK: 'auto' }], reps);
  return { slices, msNoSplit: msNoSplit!, msAuto: msAuto! };
}

/**
 * GFLOP/s of a pure-FMA kernel (fma_peak.wgsl): the arithmetic ceiling that matmul's figure can
 * be compared with. The dispatch grows until one timed submission takes at least `minMs`.
 */
export async function benchFmaPeak(e: Engine, minMs = 100): Promise<number> {
  const iters = 4096;
  let groups = 64;
  const maxGroups = MAX_GROUPS_PER_DIM;
  for (;;) {
    const out = e.tensor([groups * FMA_WG]);
    const run = () =>
      e.run({
        key: 'fma_peak',
        code: fmaShader,
        constants: { WG: FMA_WG },
        bindings: [out],
        uniforms: uniforms({ u32: iters }, { f32: 0.999999 }, { f32: 1e-7 }),
        workgroups: [groups],
      });
    run();
    await drain(e);
    const t0 = performance.now();
    run();
    await drain(e);
    const ms = performance.now() - t0;
    e.release(out);
    e.flush();
    if (ms >= minMs || groups >= maxGroups) {
      return (groups * FMA_WG * iters * FMA_FLOPS_PER_ITER) / (ms / 1000) / 1e9;
    }
    groups = Math.min(maxGroups, groups * Math.max(2, Math.ceil(minMs / Math.max(ms, 1))));
  }
}
