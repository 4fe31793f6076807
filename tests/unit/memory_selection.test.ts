// selectExamples' pools, over many seeds: positives come from the top max(3n, 10) by regret among
// in-band records (so with n = 2 the 7th–10th are drawn too, the 11th never), and the negative is
// of the asked skill whenever that skill has one.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { addRecord, emptyMemory, selectExamples, type MemoryRecord } from '../../src/core/spade/memory.ts';

const rec = (id: string, skill: string, winRate: number, regret: number): MemoryRecord => ({
  id,
  skill,
  setting: 'games',
  title: id,
  code: `class ${id}Env {}`,
  winRate,
  regret,
  cycle: 0,
});

describe('memory: example selection', () => {
  it('draws positives from the top 10 by regret when 3n is less than 10', () => {
    let mem = emptyMemory();
    // r1 has the highest regret, r12 the lowest; all in the band
    for (let i = 1; i <= 12; i++) mem = addRecord(mem, rec(`r${i}`, 'spatial', 0.5, 1 - i / 100));
    const drawn = new Set<string>();
    for (let seed = 0; seed < 200; seed++)
      for (const p of selectExamples(mem, 'spatial', 'games', createRng(seed), 2).positive) drawn.add(p.id);
    expect([...drawn].sort()).toEqual(['r1', 'r10', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9']);
  });

  it('picks the negative of the same skill when there is one, else any', () => {
    let mem = emptyMemory();
    mem = addRecord(mem, rec('mine', 'spatial', 0.95, 0));
    for (let i = 0; i < 5; i++) mem = addRecord(mem, rec(`other${i}`, 'logical', 0.02, 0));
    for (let seed = 0; seed < 50; seed++)
      expect(selectExamples(mem, 'spatial', 'games', createRng(seed)).negative?.id).toBe('mine');
    expect(selectExamples(mem, 'mathematical', 'games', createRng(1)).negative?.skill).toBe('logical');
  });
});
