/**
 * A paged KV cache for the paged-decode tests (unit and GPU): sequences of given lengths whose
 * contiguous K/V (L, Hkv, D) are scattered over pages handed out in a shuffled order, in stores
 * whose other rows hold noise (so a kernel reading a wrong row gets a wrong answer, not zeros).
 */
import { createRng } from '../../src/core/rng.ts';
import type { PagedBatch } from '../../src/engine/model/kv_pages.ts';

export interface PagedFixture {
  /** (pages · pageSize, Hkv, D) stores. */
  kStore: Float32Array;
  vStore: Float32Array;
  /** Each sequence's keys and values laid out contiguously, (L, Hkv, D). */
  k: Float32Array[];
  v: Float32Array[];
  /** Page ids of each sequence, in key order. */
  pageLists: number[][];
  /** The batch of rows [sequence, position] (dest = the row's own store row). */
  batch(rows: [number, number][]): PagedBatch;
}

export function pagedFixture(o: {
  lengths: number[];
  pageSize: number;
  Hkv: number;
  D: number;
  /** Pages no sequence owns (noise). */
  spare: number;
  seed: number;
}): PagedFixture {
  const { lengths, pageSize, Hkv, D } = o;
  const rng = createRng(o.seed);
  const rand = (n: number) => new Float32Array(n).map(() => 2 * rng.next() - 1);
  const need = lengths.map((L) => Math.ceil(L / pageSize));
  const total = need.reduce((a, b) => a + b, 0) + o.spare;
  const order = Array.from({ length: total }, (_, i) => i);
  for (let i = total - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let next = 0;
  const pageLists = need.map((n) => order.slice(next, (next += n)));
  const row = Hkv * D;
  const kStore = rand(total * pageSize * row);
  const vStore = rand(total * pageSize * row);
  const k = lengths.map((L) => rand(L * row));
  const v = lengths.map((L) => rand(L * row));
  const maxPages = Math.max(...need);
  const pages = new Uint32Array(lengths.length * maxPages);
  pageLists.forEach((l, s) => pages.set(l, s * maxPages));
  // kv_pages.ts's layout, written out here rather than taken from the code under test
  const storeRow = (s: number, j: number) => pageLists[s]![Math.floor(j / pageSize)]! * pageSize + (j % pageSize);
  lengths.forEach((L, s) => {
    for (let j = 0; j < L; j++) {
      const r = storeRow(s, j);
      kStore.set(k[s]!.subarray(j * row, (j + 1) * row), r * row);
      vStore.set(v[s]!.subarray(j * row, (j + 1) * row), r * row);
    }
  });
  return {
    kStore,
    vStore,
    k,
    v,
    pageLists,
    batch: (rows) => ({
      pageSize,
      maxPages,
      pages,
      pos: Uint32Array.from(rows, ([, p]) => p),
      seq: Uint32Array.from(rows, ([s]) => s),
      dest: Uint32Array.from(rows, ([s, p]) => storeRow(s, p)),
    }),
  };
}
