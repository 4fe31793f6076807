// The paged-KV decode ops' CPU references, checked against the existing references:
// ropeAppend against rmsnormCpu + ropeCpu at the same positions (bit for bit), attentionPaged
// against attentionCpu on each row's sequence laid out contiguously; and through CpuOps.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { attentionCpu } from '../../src/engine/kernels/attention.ts';
import { attentionPagedCpu } from '../../src/engine/kernels/attention_paged.ts';
import { rmsnormCpu } from '../../src/engine/kernels/rmsnorm.ts';
import { ropeAppendCpu } from '../../src/engine/kernels/rope_append.ts';
import { ropeCpu, ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import type { PagedBatch } from '../../src/engine/model/kv_pages.ts';
import { CpuOps } from '../../src/engine/ops/ops.ts';
import { expectClose, randomArray } from '../gpu/expect_close.ts';
import { pagedFixture } from '../helpers/paged_fixture.ts';

const Hq = 4;
const Hkv = 2;
const D = 8;
const freqs = ropeFrequencies({ headDim: D, theta: 10000 });

/** Rows [n·Hx + h0, … + H) of a (N, Hx, D)-like flat array as (H, D), i.e. heads h0 .. h0+H−1 of row n. */
const heads = (x: Float32Array, width: number, n: number, h0: number, h: number) =>
  x.slice(n * width + h0 * D, n * width + (h0 + h) * D);

describe('ropeAppendCpu', () => {
  const N = 5;
  const width = (Hq + 2 * Hkv) * D;
  const qkv = randomArray(N * width, 1);
  const pos = Uint32Array.from([0, 3, 7, 1, 40]);
  const dest = Uint32Array.from([9, 2, 5, 0, 11]);
  const rows = 12;
  const batch: PagedBatch = { pageSize: 4, maxPages: 1, pos, dest, seq: new Uint32Array(N), pages: new Uint32Array(1) };
  const qNorm = randomArray(D, 2, 0.5, 1.5);
  const kNorm = randomArray(D, 3, 0.5, 1.5);
  const eps = 1e-6;

  for (const withNorm of [false, true]) {
    it(`${withNorm ? 'with' : 'without'} q/k norm: q, k equal rmsnormCpu then ropeCpu at pos[n]; v is copied raw; other store rows untouched`, () => {
      const kStore = randomArray(rows * Hkv * D, 4);
      const vStore = randomArray(rows * Hkv * D, 5);
      const k0 = kStore.slice();
      const v0 = vStore.slice();
      const norm = withNorm ? { qNorm, kNorm, eps } : {};
      const q = ropeAppendCpu(qkv, freqs, kStore, vStore, batch, { N, Hq, Hkv, D }, norm);
      expect(q.length).toBe(N * Hq * D);
      for (let n = 0; n < N; n++) {
        const qRaw = heads(qkv, width, n, 0, Hq);
        const kRaw = heads(qkv, width, n, Hq, Hkv);
        const qIn = withNorm ? rmsnormCpu(qRaw, qNorm, eps) : qRaw;
        const kIn = withNorm ? rmsnormCpu(kRaw, kNorm, eps) : kRaw;
        expect(q.slice(n * Hq * D, (n + 1) * Hq * D)).toEqual(ropeCpu(qIn, [1, Hq, D], freqs, pos[n]!));
        const r = dest[n]! * Hkv * D;
        expect(kStore.slice(r, r + Hkv * D)).toEqual(ropeCpu(kIn, [1, Hkv, D], freqs, pos[n]!));
        expect(vStore.slice(r, r + Hkv * D)).toEqual(heads(qkv, width, n, Hq + Hkv, Hkv));
      }
      for (let r = 0; r < rows; r++) {
        if (dest.includes(r)) continue;
        expect(kStore.slice(r * Hkv * D, (r + 1) * Hkv * D)).toEqual(k0.slice(r * Hkv * D, (r + 1) * Hkv * D));
        expect(vStore.slice(r * Hkv * D, (r + 1) * Hkv * D)).toEqual(v0.slice(r * Hkv * D, (r + 1) * Hkv * D));
      }
    });
  }

  it('refuses a destination outside the stores and a norm without eps', () => {
    const kStore = new Float32Array(rows * Hkv * D);
    const vStore = new Float32Array(rows * Hkv * D);
    const bad = { ...batch, dest: Uint32Array.from([0, 1, 2, 3, rows]) };
    expect(() => ropeAppendCpu(qkv, freqs, kStore, vStore, bad, { N, Hq, Hkv, D })).toThrow(/grow the stores/);
    expect(() => ropeAppendCpu(qkv, freqs, kStore, vStore, batch, { N, Hq, Hkv, D }, { qNorm })).toThrow(/eps/);
  });
});

describe('attentionPagedCpu', () => {
  // 3 sequences of 9, 1 and 6 tokens in pages of 4 listed in shuffled order; rows at several
  // positions of each (a row at position 0, two rows of one sequence as in a prefill chunk)
  const f = pagedFixture({ lengths: [9, 1, 6], pageSize: 4, Hkv, D, spare: 2, seed: 7 });
  const rowsOf: [number, number][] = [
    [0, 8],
    [1, 0],
    [2, 5],
    [0, 3],
    [2, 0],
  ];
  const N = rowsOf.length;
  const batch = f.batch(rowsOf);
  const q = randomArray(N * Hq * D, 11);

  it('uses a shuffled page list (the fixture is not the contiguous layout)', () => {
    expect(f.pageLists[0]).not.toEqual([...f.pageLists[0]!].sort((a, b) => a - b));
    expect(f.pageLists.flat()).not.toEqual(f.pageLists.flat().map((_, i) => i));
  });

  it('each row equals attentionCpu over keys 0 ..= pos of its sequence laid out contiguously (GQA Hq=4, Hkv=2)', () => {
    const out = attentionPagedCpu(q, f.kStore, f.vStore, batch, { N, Hq, Hkv, D });
    rowsOf.forEach(([s, p], n) => {
      const S = p + 1;
      const want = attentionCpu(
        q.slice(n * Hq * D, (n + 1) * Hq * D),
        f.k[s]!.slice(0, S * Hkv * D),
        f.v[s]!.slice(0, S * Hkv * D),
        { T: 1, S, Hq, Hkv, D },
      ).out;
      expectClose(out.slice(n * Hq * D, (n + 1) * Hq * D), want, 1e-6);
    });
  });

  it('refuses a page beyond the stores and a position beyond maxPages', () => {
    const tooFar = { ...batch, pages: batch.pages.map((p, i) => (i === 0 ? f.kStore.length / (Hkv * D * 4) : p)) };
    expect(() => attentionPagedCpu(q, f.kStore, f.vStore, tooFar, { N, Hq, Hkv, D })).toThrow(/stores hold/);
    const long = { ...batch, pos: Uint32Array.from([12, 0, 5, 3, 0]) };
    expect(() => attentionPagedCpu(q, f.kStore, f.vStore, long, { N, Hq, Hkv, D })).toThrow(/maxPages/);
  });
});

describe('CpuOps paged decode', () => {
  it('ropeAppend then attentionPaged over 2 sequences (a prefill chunk, then one token a step) equal rope + attention on contiguous caches', async () => {
    const ops = new CpuOps();
    const rng = createRng(21);
    const lengths = [6, 3];
    // new tokens of each sequence per step: a first chunk of 4 and 2 rows in one batch, then 1 each
    const schedule = [
      [4, 2],
      [1, 1],
      [1, 0],
    ];
    const pageSize = 2;
    // pages handed out in a scrambled order: sequence 0 gets 5, 1, 3; sequence 1 gets 0, 4
    const pageLists = [
      [5, 1, 3],
      [0, 4],
    ];
    const maxPages = 3;
    const pages = new Uint32Array(2 * maxPages);
    pageLists.forEach((l, s) => pages.set(l, s * maxPages));
    const kStore = ops.zeros([6 * pageSize, Hkv, D]);
    const vStore = ops.zeros([6 * pageSize, Hkv, D]);
    const f = ops.upload([D / 2], freqs);
    const width = (Hq + 2 * Hkv) * D;
    const qkvOf = lengths.map((L) => randomArray(L * width, rng));
    const got: Float32Array[] = lengths.map((L) => new Float32Array(L * Hq * D));
    const done = [0, 0];
    for (const counts of schedule) {
      // rows: [sequence, position] of every new token of this step
      const rowsOf = counts.flatMap((c, s) => Array.from({ length: c }, (_, i) => [s, done[s]! + i] as const));
      const seq = Uint32Array.from(rowsOf, ([s]) => s);
      const pos = Uint32Array.from(rowsOf, ([, p]) => p);
      const dest = Uint32Array.from(
        rowsOf,
        ([s, p]) => pageLists[s]![Math.floor(p / pageSize)]! * pageSize + (p % pageSize),
      );
      const b: PagedBatch = { pageSize, maxPages, pos, dest, seq, pages };
      const qkv = new Float32Array(rowsOf.length * width);
      rowsOf.forEach(([s, p], n) => qkv.set(qkvOf[s]!.subarray(p * width, (p + 1) * width), n * width));
      const qr = ops.ropeAppend(ops.upload([rowsOf.length, width], qkv), f, kStore, vStore, b, { Hq, Hkv });
      const o = ops.attentionPaged(qr, kStore, vStore, b);
      expect(o.shape).toEqual([rowsOf.length, Hq, D]);
      rowsOf.forEach(([s, p], n) => got[s]!.set(o.data.subarray(n * Hq * D, (n + 1) * Hq * D), p * Hq * D));
      counts.forEach((c, s) => (done[s]! += c));
    }
    expect(done).toEqual(lengths);
    lengths.forEach((L, s) => {
      const x = qkvOf[s]!;
      const part = (h0: number, h: number) => {
        const out = new Float32Array(L * h * D);
        for (let t = 0; t < L; t++) out.set(heads(x, width, t, h0, h), t * h * D);
        return out;
      };
      const q = ropeCpu(part(0, Hq), [L, Hq, D], freqs, 0);
      const k = ropeCpu(part(Hq, Hkv), [L, Hkv, D], freqs, 0);
      const want = attentionCpu(q, k, part(Hq + Hkv, Hkv), { T: L, S: L, Hq, Hkv, D }).out;
      expectClose(got[s]!, want, 1e-6);
    });
  });
});
