// Known answers at the edges of top-p and min-p, for the reference sampler and the fast one alike:
// top-p whose mass is reached only by the whole vocabulary keeps every id, and min-p keeps an id
// whose probability equals min_p exactly.
import { describe, expect, it } from 'vitest';
import { sampleTokenFullSort, sampleTokenU } from '../../src/engine/kernels/sample_cpu.ts';

const samplers = [
  ['reference', sampleTokenFullSort],
  ['fast', sampleTokenU],
] as const;

describe.each(samplers)('sampler edges (%s)', (_name, sample) => {
  it('top-p reaching its mass only at the last id keeps the whole vocabulary', () => {
    // three equal ids: mass 0.99 × 3 = 2.97 is reached only by all three; u = 0.99 walks to the third
    const logits = Float32Array.from([0, 0, 0]);
    expect(sample(logits, { temperature: 1, topP: 0.99 }, 0.99)).toBe(2);
  });

  it('min-p keeps an id whose probability equals min_p', () => {
    const logits = Float32Array.from([0, -0.5]);
    const p1 = Math.exp(logits[1]!); // the second id's unnormalised p (max p = 1)
    // both kept: u = 0.99 of (1 + p1) lies past the first id's mass
    expect(sample(logits, { temperature: 1, minP: p1 }, 0.99)).toBe(1);
    // just above p1: only the first is kept
    expect(sample(logits, { temperature: 1, minP: p1 * 1.000001 }, 0.99)).toBe(0);
  });
});
