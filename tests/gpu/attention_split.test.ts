// The split (flash-decoding) path of attentionPaged on the software adapter: pass 1
// (attention.wgsl's SPLIT variant) writes a partial softmax per (row, head, split) and
// attention_merge combines them. Checked: splitPlan's thresholds; the merge's CPU reference against
// a direct softmax (empty splits included); split outputs against the single pass and the CPU
// reference for forced and automatic splits (GQA Hq=4/Hkv=2, D=64, shuffled pages of 16, rows
// shorter than a split, at a split boundary, and ~700 keys); the GPU merge against its CPU
// reference on the GPU's own partials; and the dispatches each path records.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { attentionMerge, attentionMergeCpu, MAX_SPLITS } from '../../src/engine/kernels/attention_merge.ts';
import {
  packPagedIndex,
  attentionPaged,
  attentionPagedCpu,
  attentionPagedPartials,
  splitPlan,
  type PagedIndexTensor,
} from '../../src/engine/kernels/attention_paged.ts';
import type { PagedBatch } from '../../src/engine/model/kv_pages.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { pagedFixture } from '../helpers/paged_fixture.ts';
import { randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/**
 * Split vs single pass, and either vs the CPU reference, relative to max |want| (relError floor 1):
 * both GPU paths add the same f32 terms, the split one in a different grouping plus one rescale by
 * exp(m_s − M) per split, so they differ by a few f32 roundings of O(1) values (measured ≤ 1.5e-7 apart, ≤ 2.2e-7 from the CPU).
 */
const TOL = 1e-6;

/** Largest |a − b| over two arrays of the same length. */
const maxAbsDiff = (a: Float32Array, b: Float32Array) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

/** The batch as one u32 tensor [pos | dest | seq | pages] (GpuOps.batchIndex's layout). */
function uploadIndex(e: Engine, b: PagedBatch): PagedIndexTensor {
  const { data, ...offsets } = packPagedIndex(b);
  return { tensor: e.tensor([data.length], data), ...offsets };
}

describe('splitPlan', () => {
  it('splits only few workgroups over long keys, into ≥ 256 keys per split and ≤ 32 splits', () => {
    // Qwen2.5-0.5B at batch 1: 14 heads, 14 workgroups
    expect(splitPlan(14, 1, 511)).toBeUndefined(); // < 2 splits of 256 keys
    expect(splitPlan(14, 1, 512)).toEqual({ splits: 2, splitKeys: 256 });
    expect(splitPlan(14, 1, 700)).toEqual({ splits: 2, splitKeys: 384 }); // 350 rounded up to 64s
    expect(splitPlan(14, 1, 4096)).toEqual({ splits: 16, splitKeys: 256 });
    expect(splitPlan(14, 1, 100_000)).toEqual({ splits: 32, splitKeys: 3136 });
    expect(splitPlan(14, 18, 4096)).toEqual({ splits: 16, splitKeys: 256 }); // 252 workgroups
    expect(splitPlan(14, 19, 4096)).toBeUndefined(); // 266 workgroups: enough already
    expect(splitPlan(2, 128, 4096)).toBeUndefined(); // 256
    for (const keys of [512, 1000, 5000, 8191, 9000, 65_536, 1e6]) {
      const p = splitPlan(2, 1, keys)!;
      expect(p.splits).toBeLessThanOrEqual(MAX_SPLITS);
      expect(p.splitKeys % 64).toBe(0);
      expect(p.splits * p.splitKeys).toBeGreaterThanOrEqual(keys); // every key is in a split
      expect((p.splits - 1) * p.splitKeys).toBeLessThan(keys); // and no split of the longest row is empty
      expect(keys / p.splits).toBeGreaterThanOrEqual(256);
    }
  });
});

describe('attentionMergeCpu', () => {
  it('rescales each split to the overall max: equals one softmax over all the keys; empty splits add nothing', () => {
    const rng = createRng(4);
    const D = 3;
    const scores = Array.from({ length: 11 }, () => 8 * rng.next() - 4);
    const values = scores.map(() => [0, 1, 2].map(() => 2 * rng.next() - 1));
    // direct softmax
    const mx = Math.max(...scores);
    const w = scores.map((s) => Math.exp(s - mx));
    const sum = w.reduce((a, b) => a + b, 0);
    const want = [0, 1, 2].map((d) => w.reduce((a, wj, j) => a + wj * values[j]![d]!, 0) / sum);
    // splits of keys [0, 4), [4, 9), [9, 11), and one empty split (pass 1's (−3e38, 0, 0))
    const part = new Float32Array(4 * (2 + D));
    const bounds: [number, number][] = [
      [0, 4],
      [4, 9],
      [9, 11],
      [11, 11],
    ];
    bounds.forEach(([a, b], s) => {
      const at = s * (2 + D);
      const mine = scores.slice(a, b);
      const m = mine.length ? Math.max(...mine) : -3e38;
      let l = 0;
      const acc = [0, 0, 0];
      for (let j = a; j < b; j++) {
        const e = Math.exp(scores[j]! - m);
        l += e;
        for (let d = 0; d < D; d++) acc[d]! += e * values[j]![d]!;
      }
      part.set([m, l, ...acc], at);
    });
    const got = attentionMergeCpu(part, { N: 1, Hq: 1, D, splits: 4 });
    expect(relError(got, want, 1)).toBeLessThan(1e-6);
    expect(() => attentionMergeCpu(part, { N: 1, Hq: 1, D, splits: 3 })).toThrow(/expected/);
  });
});

describe.skipIf(!ctx)(`split paged attention on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;
  const Hq = 4;
  const Hkv = 2;

  /** 3 sequences in shuffled pages of 16, and 7 rows of 1 .. 700 keys. */
  function setup(D: number, seed: number) {
    const f = pagedFixture({ lengths: [700, 64, 129], pageSize: 16, Hkv, D, spare: 3, seed });
    const rowsOf: [number, number][] = [
      [0, 699], // ~700 keys: every split, the last one partly filled
      [1, 63], // 64 keys: exactly one split of 64 (a split boundary)
      [2, 127], // 128 keys: exactly two splits of 64
      [2, 128], // 129 keys: one key into the next split
      [0, 20], // below one split
      [1, 0], // position 0: its only key
      [0, 383], // 384 keys: the automatic plan's split boundary
    ];
    const N = rowsOf.length;
    const b = f.batch(rowsOf);
    const q = randomArray(N * Hq * D, seed + 1, -3, 3);
    const e = new Engine(gpu);
    const rows = f.kStore.length / (Hkv * D);
    const t = {
      q: e.tensor([N, Hq, D], q),
      k: e.tensor([rows, Hkv, D], f.kStore),
      v: e.tensor([rows, Hkv, D], f.vStore),
    };
    const idx = uploadIndex(e, b);
    const want = attentionPagedCpu(q, f.kStore, f.vStore, b, { N, Hq, Hkv, D });
    const run = (splitKeys?: number) => e.read(attentionPaged(e, t.q, t.k, t.v, b, idx, { splitKeys }));
    return { e, b, N, t, idx, want, run };
  }

  it.each([{ D: 64 }, { D: 130 }])(
    'D=$D: forced and automatic splits equal the single pass and the CPU reference (rows of 1 .. 700 keys)',
    async ({ D }) => {
      const { want, run } = setup(D, D);
      const single = await run(700); // one split of the longest row: the single pass
      expect(relError(single, want, 1)).toBeLessThan(TOL);
      // 64: splits on chunk bounds; 100: splits across chunks and pages; 22: 32 splits (the most);
      // undefined: splitPlan(4, 7, 700) = 2 splits of 384
      for (const splitKeys of [64, 100, 22, undefined]) {
        const split = await run(splitKeys);
        const vsSingle = relError(split, single, 1);
        const vsCpu = relError(split, want, 1);
        console.log(
          `split D=${D} splitKeys=${splitKeys ?? 'auto'}: rel. error vs single pass ${vsSingle.toExponential(2)} ` +
            `(max abs ${maxAbsDiff(split, single).toExponential(2)}), vs CPU ${vsCpu.toExponential(2)}`,
        );
        expect(vsSingle).toBeLessThan(TOL);
        expect(vsCpu).toBeLessThan(TOL);
      }
    },
  );

  it('the GPU merge equals its CPU reference on the GPU partials; empty splits are (−3e38, 0, 0)', async () => {
    const D = 64;
    const { e, b, N, t, idx, want } = setup(D, 7);
    const plan = { splits: 11, splitKeys: 64 };
    const part = attentionPagedPartials(e, t.q, t.k, t.v, b, idx, plan);
    expect(part.shape).toEqual([N, Hq, 11, 2 + D]);
    const partials = await e.read(part);
    const dims = { N, Hq, D, splits: 11 };
    const gpuMerged = await e.read(attentionMerge(e, part, dims));
    const cpuMerged = attentionMergeCpu(partials, dims);
    console.log(`merge: rel. error GPU vs CPU merge ${relError(gpuMerged, cpuMerged, 1).toExponential(2)}`);
    expect(relError(gpuMerged, cpuMerged, 1)).toBeLessThan(TOL);
    expect(relError(cpuMerged, want, 1)).toBeLessThan(TOL);
    // row 4 (21 keys) fills split 0 only; row 0 (700 keys) fills all 11
    const W = 2 + D;
    for (let h = 0; h < Hq; h++) {
      const at = (n: number, s: number) => ((n * Hq + h) * 11 + s) * W;
      expect(partials[at(4, 0) + 1]).toBeGreaterThan(0);
      for (let s = 1; s < 11; s++) {
        expect(partials[at(4, s)]).toBeLessThan(-1e38);
        expect(partials.subarray(at(4, s) + 1, at(4, s) + W).every((x) => x === 0)).toBe(true);
      }
      for (let s = 0; s < 11; s++) expect(partials[at(0, s) + 1]).toBeGreaterThanOrEqual(1); // l ≥ exp(0)
    }
  });

  it('records one dispatch for short rows and two (pass 1 + merge) when splitPlan splits', async () => {
    const { e, b, t, idx } = setup(16, 3);
    const count = (f: () => void) => {
      const d0 = e.dispatches;
      f();
      return e.dispatches - d0;
    };
    expect(count(() => attentionPaged(e, t.q, t.k, t.v, b, idx))).toBe(2); // 28 workgroups, 700 keys
    const short = { ...b, pos: b.pos.map((p) => Math.min(p, 510)) }; // ≤ 511 keys
    expect(count(() => attentionPaged(e, t.q, t.k, t.v, short, uploadIndex(e, short)))).toBe(1);
    expect(() => attentionPaged(e, t.q, t.k, t.v, b, idx, { splitKeys: 21 })).toThrow(/at most 32/);
    e.flush();
  });
});
