// The designer's memory: capacity and eviction, code cut, the method's positive/negative selection,
// and SPADE's env_memory.json fields on export/import.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import {
  addRecord,
  emptyMemory,
  exportMemory,
  importMemory,
  MEMORY_CODE_CHARS,
  selectExamples,
  type MemoryRecord,
} from '../../src/core/spade/memory.ts';

const rec = (id: string, skill: string, winRate: number | null, regret: number | null): MemoryRecord => ({
  id,
  skill,
  setting: 'games',
  title: id,
  code: `class ${id}Env {}`,
  winRate,
  regret,
  cycle: 0,
});

describe('memory', () => {
  it('keeps at most capacity records, evicting the oldest, and cuts code to 2,000 characters', () => {
    let m = emptyMemory(3);
    for (let i = 0; i < 5; i++) m = addRecord(m, { ...rec(`e${i}`, 'spatial', 0.5, 0.1), code: 'x'.repeat(5000) });
    expect(m.records.map((r) => r.id)).toEqual(['e2', 'e3', 'e4']);
    expect(m.records[0]!.code).toHaveLength(MEMORY_CODE_CHARS);
    // re-adding an id moves it to the newest position instead of duplicating it
    m = addRecord(m, rec('e2', 'spatial', 0.4, 0.2));
    expect(m.records.map((r) => r.id)).toEqual(['e3', 'e4', 'e2']);
  });

  it('selects positives from the top max(3n, 10) by regret among win rates in [0.15, 0.85]', () => {
    let m = emptyMemory(200);
    // 12 in-band environments with regrets 0.01..0.12, plus out-of-band ones with huge regret
    for (let i = 1; i <= 12; i++) m = addRecord(m, rec(`b${i}`, 'spatial', 0.5, i / 100));
    m = addRecord(m, rec('easy', 'spatial', 0.95, 0.9));
    m = addRecord(m, rec('hard', 'spatial', 0.05, 0.8));
    m = addRecord(m, rec('other', 'mathematical', 0.5, 0.99));
    for (let seed = 0; seed < 30; seed++) {
      const { positive, negative } = selectExamples(m, 'spatial', 'games', createRng(seed), 2);
      expect(positive).toHaveLength(2);
      for (const p of positive) {
        expect(p.skill).toBe('spatial');
        expect(p.regret!).toBeGreaterThanOrEqual(0.03); // b1 and b2 are outside the top 10
      }
      expect(['easy', 'hard']).toContain(negative!.id);
    }
  });

  it('falls back to seed environments (no statistics) when a skill has too few positives', () => {
    let m = emptyMemory(200);
    m = addRecord(m, rec('seed1', 'spatial', null, null));
    m = addRecord(m, rec('seed2', 'spatial', null, null));
    m = addRecord(m, rec('played', 'spatial', 0.5, 0.2));
    const { positive, negative } = selectExamples(m, 'spatial', 'games', createRng(1), 2);
    expect(positive.map((p) => p.id)).toContain('played');
    expect(positive).toHaveLength(2);
    expect(negative).toBeNull();
  });

  it("round-trips SPADE's env_memory.json fields", () => {
    let m = emptyMemory(10);
    m = addRecord(m, rec('a', 'spatial', 0.25, 0.5));
    const json = exportMemory(m);
    expect(json[0]).toEqual({
      skill: 'spatial',
      code: 'class aEnv {}',
      win_rate: 0.25,
      regret: 0.5,
      title: 'a',
      setting: 'games',
    });
    const back = importMemory(JSON.parse(JSON.stringify(json)), 10);
    expect(back.records[0]).toMatchObject({ skill: 'spatial', winRate: 0.25, regret: 0.5, code: 'class aEnv {}' });
    expect(() => importMemory({})).toThrow('env_memory.json must be a JSON array');
    expect(() => importMemory([{ skill: 1 }])).toThrow('entry 0 needs string "skill" and "code"');
  });
});
