// CPU token sampling (src/engine/kernels/sample_cpu.ts): the partial-selection path against the full-sort
// reference on random logits, known answers for each filter, and generate()'s use of it.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { sampleToken } from '../../src/engine/model/generate.ts';
import { sampleTokenFullSort, sampleTokenU, type SampleOptions } from '../../src/engine/kernels/sample_cpu.ts';

/** Random logits: normal-ish values times `spread` (larger = more peaked), some exact duplicates. */
function randomLogits(seed: number, v: number, spread: number): Float32Array {
  const rng = createRng(seed);
  const out = new Float32Array(v);
  for (let i = 0; i < v; i++) out[i] = (rng.next() + rng.next() + rng.next() - 1.5) * spread;
  for (let i = 0; i < v / 50; i++) out[rng.int(v)] = out[rng.int(v)]!; // ties
  return out;
}

const COMBOS: SampleOptions[] = [
  { temperature: 1, topP: 0.95 },
  { temperature: 0.6, topP: 0.9 },
  { temperature: 1.3, topP: 0.5 },
  { temperature: 1, topK: 20 },
  { temperature: 0.7, topK: 5, topP: 0.8 },
  { temperature: 1, minP: 0.05 },
  { temperature: 0.8, topP: 0.95, minP: 0.1 },
  { temperature: 1, topK: 50, topP: 0.9, minP: 0.02 },
  { temperature: 1, topK: 1 },
  { temperature: 1, topP: 1e-9 },
  { temperature: 1 },
  { temperature: 0 },
];

describe('CPU sampling without a full sort', () => {
  it('equals the full-sort reference on random logits, over seeds, sizes and filter combos', () => {
    let checked = 0;
    const distinct = new Set<number>();
    for (const [seed, v, spread] of [
      [1, 1000, 4],
      [2, 5000, 12],
      [3, 300, 0.5],
      [4, 20_000, 8],
    ] as const) {
      const logits = randomLogits(seed, v, spread);
      const rng = createRng(seed + 100);
      for (const o of COMBOS) {
        for (let draw = 0; draw < 12; draw++) {
          const u = draw === 0 ? 0 : draw === 1 ? 1 - 2 ** -32 : rng.next();
          const want = sampleTokenFullSort(logits, o, u);
          expect(sampleTokenU(logits, o, u), `${JSON.stringify(o)} u=${u} V=${v}`).toBe(want);
          distinct.add(want);
          checked++;
        }
      }
    }
    expect(checked).toBe(4 * COMBOS.length * 12);
    expect(distinct.size).toBeGreaterThan(50); // the draws really vary
  });

  it('resolves ties between equal logits to the lowest id, as the reference comparator does', () => {
    const logits = Float32Array.from([0, 3, 1, 3, 3, 1]);
    for (const u of [0, 0.2, 0.4, 0.6, 0.99])
      for (const o of [
        { temperature: 1, topK: 2 },
        { temperature: 1, topP: 0.7 },
        { temperature: 1, minP: 0.5 },
      ])
        expect(sampleTokenU(logits, o, u)).toBe(sampleTokenFullSort(logits, o, u));
    expect(sampleTokenU(logits, { temperature: 1, topK: 2 }, 0.99)).toBe(3); // keeps ids 1 and 3, not 4
    expect(sampleTokenU(logits, { temperature: 0 }, 0.5)).toBe(1);
  });

  it('known answers for each filter', () => {
    // p ∝ [1, e^-1, e^-2, e^-3] = [0.644, 0.237, 0.087, 0.032] after normalising
    const l = Float32Array.from([0, -1, -2, -3]);
    const t = { temperature: 1 };
    expect(sampleTokenU(l, { ...t, topK: 1 }, 0.99)).toBe(0);
    expect(sampleTokenU(l, { ...t, topK: 2 }, 0.99)).toBe(1);
    expect(sampleTokenU(l, { ...t, topP: 0.85 }, 0.99)).toBe(1); // 0.644 + 0.237 ≥ 0.85
    expect(sampleTokenU(l, { ...t, topP: 0.9 }, 0.99)).toBe(2); // needs the third
    expect(sampleTokenU(l, { ...t, minP: 0.3 }, 0.99)).toBe(1); // e^-1 = 0.37 ≥ 0.3 > e^-2
    expect(sampleTokenU(l, t, 0.99)).toBe(3);
    expect(sampleTokenU(l, t, 0.5)).toBe(0); // index-order walk: 0.644 ≥ 0.5
  });

  it('sampleToken (generate.ts) draws one uniform per sampled token and none when greedy', () => {
    const logits = randomLogits(7, 2000, 6);
    const a = createRng(5);
    const b = createRng(5);
    const o = { temperature: 0.8, topP: 0.95 };
    for (let i = 0; i < 5; i++) expect(sampleToken(logits, o, a)).toBe(sampleTokenFullSort(logits, o, b.next()));
    const g = createRng(9);
    sampleToken(logits, { temperature: 0 }, g);
    expect(g.next()).toBe(createRng(9).next());
  });
});
