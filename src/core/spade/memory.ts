/**
 * The Designer's memory, as pure functions over a plain record list (jaxued-style
 * level buffer): at most `capacity` records, oldest evicted first, code cut to
 * 2,000 characters. Selection follows the method: per skill, positive examples
 * drawn from the top max(3n, 10) by regret among environments with a win rate in
 * [0.15, 0.85]; one negative example with a win rate > 0.9 or < 0.1. Seed
 * environments (no statistics yet) fill in when a skill has too few positives.
 * Export/import uses SPADE's env_memory.json fields (skill, code, win_rate, regret).
 */
import type { Rng } from '../rng.ts';

export const MEMORY_CODE_CHARS = 2000;

export interface MemoryRecord {
  id: string;
  skill: string;
  setting: 'games' | 'tool_use';
  title: string;
  code: string;
  /** null for seed environments that were never played. */
  winRate: number | null;
  regret: number | null;
  /** Cycle that produced it; -1 for the seed library. */
  cycle: number;
  /** The code was longer than MEMORY_CODE_CHARS and was cut (never shown as a whole example). */
  cut?: boolean;
}

export interface Memory {
  capacity: number;
  records: MemoryRecord[];
}

export function emptyMemory(capacity = 200): Memory {
  return { capacity, records: [] };
}

/** Add a record (code cut to 2,000 characters); evicts the oldest past capacity. */
export function addRecord(mem: Memory, rec: MemoryRecord): Memory {
  const cut = {
    ...rec,
    code: rec.code.slice(0, MEMORY_CODE_CHARS),
    // exactly the limit may be an already-cut program (SPADE's env_memory.json has no flag): treat it as cut
    ...(rec.cut || rec.code.length >= MEMORY_CODE_CHARS ? { cut: true } : {}),
  };
  const records = [...mem.records.filter((r) => r.id !== rec.id), cut];
  return { ...mem, records: records.slice(Math.max(0, records.length - mem.capacity)) };
}

export interface Examples {
  positive: MemoryRecord[];
  negative: MemoryRecord | null;
}

const inBand = (r: MemoryRecord) => r.winRate !== null && r.winRate >= 0.15 && r.winRate <= 0.85;
const extreme = (r: MemoryRecord) => r.winRate !== null && (r.winRate > 0.9 || r.winRate < 0.1);

/** Examples for one skill: n positives (top max(3n, 10) by regret in the band) and one negative. */
export function selectExamples(
  mem: Memory,
  skill: string,
  setting: MemoryRecord['setting'],
  rng: Rng,
  n = 2,
  opts: { completeOnly?: boolean } = {},
): Examples {
  const same = mem.records.filter((r) => r.skill === skill && r.setting === setting && !(opts.completeOnly && r.cut));
  const pool = same
    .filter(inBand)
    .sort((a, b) => (b.regret ?? 0) - (a.regret ?? 0))
    .slice(0, Math.max(3 * n, 10));
  let positive = rng.sample(pool, n);
  if (positive.length < n) {
    const seeds = same.filter((r) => r.winRate === null && !positive.includes(r));
    positive = [...positive, ...rng.sample(seeds, n - positive.length)];
  }
  const negatives = mem.records.filter((r) => r.setting === setting && extreme(r));
  const sameSkillNeg = negatives.filter((r) => r.skill === skill);
  const negative = sameSkillNeg.length ? rng.pick(sameSkillNeg) : negatives.length ? rng.pick(negatives) : null;
  return { positive, negative };
}

/** SPADE's env_memory.json shape. */
export interface SpadeMemoryEntry {
  skill: string;
  code: string;
  win_rate: number | null;
  regret: number | null;
  title?: string;
  setting?: string;
}

export function exportMemory(mem: Memory): SpadeMemoryEntry[] {
  return mem.records.map((r) => ({
    skill: r.skill,
    code: r.code,
    win_rate: r.winRate,
    regret: r.regret,
    title: r.title,
    setting: r.setting,
  }));
}

export function importMemory(data: unknown, capacity = 200): Memory {
  if (!Array.isArray(data))
    throw new TypeError('env_memory.json must be a JSON array of {skill, code, win_rate, regret}');
  let mem = emptyMemory(capacity);
  data.forEach((e, i) => {
    const o = e as Record<string, unknown>;
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
    if (typeof o?.skill !== 'string' || typeof o?.code !== 'string') {
      throw new TypeError(`entry ${i} needs string "skill" and "code"`);
    }
    mem = addRecord(mem, {
      id: `m${i}`,
      skill: o.skill,
      setting: o.setting === 'tool_use' ? 'tool_use' : 'games',
      title: typeof o.title === 'string' ? o.title : `${o.skill} #${i}`,
      code: o.code,
      winRate: num(o.win_rate),
      regret: num(o.regret),
      cycle: -1,
    });
  });
  return mem;
}
