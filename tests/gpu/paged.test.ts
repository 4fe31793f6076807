// The paged-KV decode kernels on the software adapter: rope_append and attention_paged
// against their CPU references (Qwen3 q/k norm, GQA Hq=4/Hkv=2, rows of 3 sequences of different
// lengths, pages in shuffled order, a row at position 0), attention_paged against the contiguous
// attention kernel and, GQA-packed, for groups of 7 (Qwen2.5-0.5B), 8 of 16 and 1 with and without
// splits, and GpuOps' per-step index upload (once per step, re-made after a flush).
import { describe, expect, it, vi } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { attention } from '../../src/engine/kernels/attention.ts';
import {
  attentionPaged,
  attentionPagedCpu,
  groupWidth,
  packPagedIndex,
} from '../../src/engine/kernels/attention_paged.ts';
import { rope, ropeCpu, ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import { ropeAppendCpu } from '../../src/engine/kernels/rope_append.ts';
import type { PagedBatch } from '../../src/engine/model/kv_pages.ts';
import { CpuOps, GpuOps, type Ops } from '../../src/engine/ops/ops.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { pagedFixture } from '../helpers/paged_fixture.ts';
import { randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const Hq = 4;
const Hkv = 2;

/** Largest |a − b| over two arrays of the same length. */
const maxAbsDiff = (a: Float32Array, b: Float32Array) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe.skipIf(!ctx)(`paged decode kernels on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    { D: 16, norm: false, theta: 1e4 },
    { D: 16, norm: true, theta: 1e6 }, // Qwen3: per-head q/k RMSNorm before the rotation
    { D: 130, norm: true, theta: 1e4 }, // D/2 > WG: each invocation rotates two pairs
  ])(
    'ropeAppend D=$D norm=$norm equals its CPU reference (q out, k and v in the stores)',
    async ({ D, norm, theta }) => {
      const rng = createRng(D + (norm ? 1 : 0));
      const N = 6;
      const rows = 16;
      const width = (Hq + 2 * Hkv) * D;
      const freqs = ropeFrequencies({ headDim: D, theta });
      const qkv = randomArray(N * width, rng, -2, 2);
      const kStore = randomArray(rows * Hkv * D, rng);
      const vStore = randomArray(rows * Hkv * D, rng);
      const qNorm = randomArray(D, rng, 0.5, 1.5);
      const kNorm = randomArray(D, rng, 0.5, 1.5);
      const b: PagedBatch = {
        pageSize: 4,
        maxPages: 1,
        pos: Uint32Array.from([0, 5, 1, 37, 5000, 2]),
        dest: Uint32Array.from([7, 0, 15, 3, 8, 12]),
        seq: new Uint32Array(N),
        pages: new Uint32Array(1),
      };
      const eps = 1e-6;
      const ops = new GpuOps(new Engine(gpu));
      const t = (shape: number[], x: Float32Array) => ops.upload(shape, x);
      const [kt, vt] = [t([rows, Hkv, D], kStore), t([rows, Hkv, D], vStore)];
      const q = ops.ropeAppend(t([N, width], qkv), t([D / 2], freqs), kt, vt, b, {
        Hq,
        Hkv,
        ...(norm ? { qNorm: t([D], qNorm), kNorm: t([D], kNorm), eps } : {}),
      });
      expect(q.shape).toEqual([N, Hq, D]);
      const [gq, gk, gv] = [await ops.read(q), await ops.read(kt), await ops.read(vt)];
      const wantK = kStore.slice();
      const wantV = vStore.slice();
      const wantQ = ropeAppendCpu(qkv, freqs, wantK, wantV, b, { N, Hq, Hkv, D }, norm ? { qNorm, kNorm, eps } : {});
      const errs = [maxAbsDiff(gq, wantQ), maxAbsDiff(gk, wantK)];
      console.log(
        `ropeAppend D=${D} norm=${norm}: max |GPU − CPU| q ${errs[0]!.toExponential(2)}, k ${errs[1]!.toExponential(2)}`,
      );
      // values are O(1) (norm weights ≤ 1.5): f32 rounding of the norm and rotation, angles up to 5000 rad
      for (const err of errs) expect(err).toBeLessThan(2e-6);
      expect(gv).toEqual(wantV); // copied, untouched rows included
    },
  );

  it('ropeAppend without norm rotates like the rope kernel at the same position', async () => {
    const D = 16;
    const freqs = ropeFrequencies({ headDim: D, theta: 1e4 });
    const width = (Hq + 2 * Hkv) * D;
    const qkv = randomArray(width, 5);
    const e = new Engine(gpu);
    const ops = new GpuOps(e);
    const f = e.tensor([D / 2], freqs);
    const kt = ops.zeros([4, Hkv, D]);
    const b: PagedBatch = {
      pageSize: 4,
      maxPages: 1,
      pos: Uint32Array.from([123]),
      dest: Uint32Array.from([2]),
      seq: new Uint32Array(1),
      pages: new Uint32Array(1),
    };
    const q = await ops.read(ops.ropeAppend(e.tensor([1, width], qkv), f, kt, ops.zeros([4, Hkv, D]), b, { Hq, Hkv }));
    const viaRope = await e.read(rope(e, e.tensor([1, Hq, D], qkv.slice(0, Hq * D)), f, 123));
    expect(q).toEqual(viaRope); // the same cosSin and the same f32 operations
    expect(maxAbsDiff(q, ropeCpu(qkv.slice(0, Hq * D), [1, Hq, D], freqs, 123))).toBeLessThan(1e-6);
  });

  it.each([{ D: 16 }, { D: 130 }])(
    'attentionPaged D=$D: 3 sequences (70, 1, 9 keys) in shuffled pages of 4 equal the CPU reference and the contiguous kernel',
    async ({ D }) => {
      const f = pagedFixture({ lengths: [70, 1, 9], pageSize: 4, Hkv, D, spare: 3, seed: D });
      const rowsOf: [number, number][] = [
        [0, 69], // two workgroup chunks of keys
        [1, 0], // a row at position 0: its only key
        [2, 8],
        [0, 64],
        [2, 0],
        [0, 3],
      ];
      const N = rowsOf.length;
      const b = f.batch(rowsOf);
      const q = randomArray(N * Hq * D, D + 1, -3, 3);
      const e = new Engine(gpu);
      const ops = new GpuOps(e);
      const rows = f.kStore.length / (Hkv * D);
      const out = await e.read(
        ops.attentionPaged(
          e.tensor([N, Hq, D], q),
          e.tensor([rows, Hkv, D], f.kStore),
          e.tensor([rows, Hkv, D], f.vStore),
          b,
        ),
      );
      const want = attentionPagedCpu(q, f.kStore, f.vStore, b, { N, Hq, Hkv, D });
      const errCpu = relError(out, want, 1); // |error| relative to max |want|
      // the contiguous kernel, one row at a time over its sequence's keys 0 ..= pos
      let errContig = 0;
      for (const [n, [s, p]] of rowsOf.entries()) {
        const S = p + 1;
        const r = attention(
          e,
          e.tensor([1, Hq, D], q.slice(n * Hq * D, (n + 1) * Hq * D)),
          e.tensor([S, Hkv, D], f.k[s]!.slice(0, S * Hkv * D)),
          e.tensor([S, Hkv, D], f.v[s]!.slice(0, S * Hkv * D)),
        );
        errContig = Math.max(errContig, maxAbsDiff(out.slice(n * Hq * D, (n + 1) * Hq * D), await e.read(r.out)));
      }
      console.log(
        `attentionPaged D=${D}: rel. error vs CPU ${errCpu.toExponential(2)}, max |paged − contiguous| ${errContig.toExponential(2)}`,
      );
      expect(errCpu).toBeLessThan(2e-6);
      expect(errContig).toBeLessThan(1e-6);
    },
  );

  it('groups the query heads of a KV head into workgroups of up to 8', () => {
    expect(groupWidth(14, 2)).toBe(7); // Qwen2.5-0.5B: one workgroup reads a KV head for 7 heads
    expect(groupWidth(9, 3)).toBe(3);
    expect(groupWidth(32, 2)).toBe(8); // 16 per KV head: two workgroups of 8
    expect(groupWidth(8, 8)).toBe(1);
  });

  // GQA-packed: per head the arithmetic of one workgroup per head, so within f32 rounding of the
  // CPU; groups of 7 (Qwen2.5-0.5B), 8 of 16 (two workgroups per KV head) and 1 (MHA), single pass
  // and split.
  it.each([
    { Hq: 14, Hkv: 2, D: 64, splitKeys: undefined },
    { Hq: 14, Hkv: 2, D: 64, splitKeys: 32 },
    { Hq: 16, Hkv: 1, D: 40, splitKeys: undefined },
    { Hq: 3, Hkv: 3, D: 130, splitKeys: 50 },
  ])('attentionPaged Hq=$Hq Hkv=$Hkv D=$D splitKeys=$splitKeys equals the CPU reference', async (c) => {
    const { Hq: hq, Hkv: hkv, D } = c;
    const f = pagedFixture({ lengths: [150, 3], pageSize: 8, Hkv: hkv, D, spare: 2, seed: hq + D });
    const rowsOf: [number, number][] = [
      [0, 149],
      [1, 2],
      [0, 63],
      [1, 0],
    ];
    const b = f.batch(rowsOf);
    const N = rowsOf.length;
    const q = randomArray(N * hq * D, hq * D, -3, 3);
    const e = new Engine(gpu);
    const rows = f.kStore.length / (hkv * D);
    const { data, ...offsets } = packPagedIndex(b);
    const out = await e.read(
      attentionPaged(
        e,
        e.tensor([N, hq, D], q),
        e.tensor([rows, hkv, D], f.kStore),
        e.tensor([rows, hkv, D], f.vStore),
        b,
        { tensor: e.tensor([data.length], data), ...offsets },
        { splitKeys: c.splitKeys },
      ),
    );
    const err = relError(out, attentionPagedCpu(q, f.kStore, f.vStore, b, { N, Hq: hq, Hkv: hkv, D }), 1);
    expect(err).toBeLessThan(2e-6);
  });

  it('GpuOps uploads the batch index once per step, keeps it through the step, and again after a flush', async () => {
    const D = 8;
    const e = new Engine(gpu);
    const ops = new GpuOps(e);
    const f = pagedFixture({ lengths: [5, 2], pageSize: 2, Hkv, D, spare: 1, seed: 3 });
    const rowsOf: [number, number][] = [
      [0, 4],
      [1, 1],
    ];
    const b = f.batch(rowsOf);
    const rows = f.kStore.length / (Hkv * D);
    const q = randomArray(2 * Hq * D, 9);
    const want = attentionPagedCpu(q, f.kStore, f.vStore, b, { N: 2, Hq, Hkv, D });
    const [qt, kt, vt] = [
      e.tensor([2, Hq, D], q),
      e.tensor([rows, Hkv, D], f.kStore),
      e.tensor([rows, Hkv, D], f.vStore),
    ];
    const spy = vi.spyOn(e, 'tensor');
    const released = vi.spyOn(e, 'release');
    const indexTensors = () =>
      spy.mock.calls.flatMap(([, data], i) => (data instanceof Uint32Array ? [spy.mock.results[i]!.value] : []));
    const o1 = ops.attentionPaged(qt, kt, vt, b);
    // a GPU-written temporary of the index's size in the same step must not get the index's buffer
    const z = ops.zeros([3 * 2 + b.pages.length]);
    const o2 = ops.attentionPaged(qt, kt, vt, b); // a second layer of the same step
    expect(indexTensors().length).toBe(1);
    expect(relError(await e.read(o1), want, 1)).toBeLessThan(1e-5);
    expect(relError(await e.read(o2), want, 1)).toBeLessThan(1e-5);
    // after the flush the batch may change (row 0 one key shorter): it is uploaded again
    b.pos[0] = 3;
    const want3 = attentionPagedCpu(q, f.kStore, f.vStore, b, { N: 2, Hq, Hkv, D });
    const o3 = ops.attentionPaged(qt, kt, vt, b);
    expect(indexTensors().length).toBe(2);
    expect(released).toHaveBeenCalledWith(indexTensors()[0]); // the previous step's index, not leaked
    expect(relError(await e.read(o3), want3, 1)).toBeLessThan(1e-5);
    ops.free(z);
    spy.mockRestore();
    released.mockRestore();
  });

  it('GpuOps steps over 2 sequences (prefill chunks, then decode) with Qwen3 norm equal CpuOps', async () => {
    const D = 16;
    const rng = createRng(31);
    const lengths = [7, 3];
    const pageSize = 2;
    const pageLists = [
      [4, 1, 6, 2],
      [0, 5],
    ];
    const maxPages = 4;
    const pages = new Uint32Array(2 * maxPages);
    pageLists.forEach((l, s) => pages.set(l, s * maxPages));
    const width = (Hq + 2 * Hkv) * D;
    const freqs = ropeFrequencies({ headDim: D, theta: 1e6 });
    const qNorm = randomArray(D, rng, 0.5, 1.5);
    const kNorm = randomArray(D, rng, 0.5, 1.5);
    // new tokens of each sequence per step: a first chunk of 3 and 2 rows in one batch, then fewer
    const schedule = [
      [3, 2],
      [1, 1],
      [1, 0],
      [2, 0],
    ];
    const done = [0, 0];
    const steps = schedule.map((counts) => {
      const rowsOf = counts.flatMap((c, s) => Array.from({ length: c }, (_, i) => [s, done[s]! + i] as const));
      counts.forEach((c, s) => (done[s]! += c));
      const b: PagedBatch = {
        pageSize,
        maxPages,
        pages,
        seq: Uint32Array.from(rowsOf, ([s]) => s),
        pos: Uint32Array.from(rowsOf, ([, p]) => p),
        dest: Uint32Array.from(
          rowsOf,
          ([s, p]) => pageLists[s]![Math.floor(p / pageSize)]! * pageSize + (p % pageSize),
        ),
      };
      return { b, qkv: randomArray(rowsOf.length * width, rng) };
    });
    expect(done).toEqual(lengths);
    /** Every step's attention output on one backend. */
    async function decode<X>(ops: Ops<X>): Promise<Float32Array[]> {
      const k = ops.zeros([7 * pageSize, Hkv, D]);
      const v = ops.zeros([7 * pageSize, Hkv, D]);
      const f = ops.upload([D / 2], freqs);
      const norm = { qNorm: ops.upload([D], qNorm), kNorm: ops.upload([D], kNorm), eps: 1e-6 };
      const outs: Float32Array[] = [];
      for (const { b, qkv } of steps) {
        const qr = ops.ropeAppend(ops.upload([b.pos.length, width], qkv), f, k, v, b, { Hq, Hkv, ...norm });
        outs.push((await ops.read(ops.attentionPaged(qr, k, v, b))).slice());
      }
      return outs;
    }
    const want = await decode(new CpuOps());
    const got = await decode(new GpuOps(new Engine(gpu)));
    want.forEach((w, t) => expect(relError(got[t]!, w, 1), `step ${t}`).toBeLessThan(1e-5));
  });
});
