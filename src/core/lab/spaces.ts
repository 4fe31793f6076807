/**
 * Level spaces: which levels a Lab run designs and probes, and how its designer writes one.
 *
 *   chain   the lock family at alphabet 5 (code 1 0 4 3 2 1 0 4 3), lengths 2–9, no distractors:
 *           8 levels whose stages are the lengths — the code of length L is the first L digits of
 *           the longest one, so a length is learnable once the one before it is (one new digit, a
 *           try in five), while a random level is mostly far past what the agent can do. The probe
 *           is every level, so it weighs every stage; the designer writes one digit, the level's
 *           index (0–7, easiest first). The default since the third pre-registration (docs/lab.md).
 *   chain2  the audit's suggestion: alphabet 2 (code 1 0 1 0 1), lengths 2–5, 0 or 3 distractors;
 *           the periodic code makes every length learnable at once, so random levels do as well as
 *           a curriculum (no headroom, docs/lab.md). chain5: alphabet 5 at those lengths, a pilot.
 *   grid    the first two pre-registrations' space: families mirror and lock (rotating per cycle),
 *          every knob 0–3 (64 levels each), a 6-level probe (each family at knobs 0/0/0, 1/1/1,
 *          2/2/2); the designer writes three digits (L A D).
 *
 * Pure data and small functions; the Lab (lab.ts) reads a space, never the other way round.
 */
import { chance, describeLevel, difficulty, KNOB_MAX, MAIN_FAMILIES, type Level } from './families.ts';
import { parseLevel, type ParsedLevel } from './levels.ts';
import { mean } from '../spade/estimators.ts';

export const SPACES = ['chain', 'chain2', 'chain5', 'grid'] as const;
export type SpaceName = (typeof SPACES)[number];

export interface LevelSpace {
  name: SpaceName;
  /** One line for people. */
  about: string;
  /** The families the cycles rotate over (one family per cycle). */
  families: readonly number[];
  /** The designable levels of a family, easiest first. */
  levelsOf(family: number): Level[];
  /** The probe levels (the Lab's measure of learning). */
  probe: Level[];
  /** The probe's stages, in order, and the stage of a level (for "probe per stage"). */
  stages: readonly string[];
  stageOf(l: Level): number;
  /** The hardest half of the probe (reported beside its mean). */
  hardHalf(l: Level): boolean;
  /** A level's place in the space, 0 (easiest) to 1 (hardest): the Lab's "designed level" charts. */
  rank(l: Level): number;
  /** The fixed designer's level for a family (a medium level; in the chain space not a probe level). */
  fixed(family: number): Level;
  /** The digits the learned designer may write, and how many per design. */
  designerDigits: string;
  replyTokens: number;
  /** The level a designer's reply means for the cycle's family. */
  parse(family: number, reply: string): ParsedLevel;
  /** A level as the designer would write it (scripted designs and trained edits use it). */
  reply(l: Level): string;
  /** The levels one knob up from `l` within the space (ACCEL-style edits). */
  up(l: Level): Level[];
  /** The levels one knob down. */
  down(l: Level): Level[];
}

const LOCK = 2;

const same = (a: Level, b: Level) => a.family === b.family && a.L === b.L && a.A === b.A && a.D === b.D;
const indexIn = (levels: readonly Level[], l: Level) => levels.findIndex((x) => same(x, l));

/**
 * A lock chain: the lock family at one alphabet (knob level `A`), lengths 2–5 (L = 0..3) and 0 or 3
 * distractors (D = 0 or 3), easiest first; the probe is every level, the stages are the lengths.
 */
function chainSpace(name: SpaceName, A: number, Ls = [0, 1, 2, 3], Ds = [0, 3]): LevelSpace {
  const CHAIN: Level[] = Ls.flatMap((L) => Ds.map((D) => ({ family: LOCK, L, A, D })));
  const lengths = Ls.map((L) => L + 2);
  return {
    name,
    about: `the lock chain: alphabet ${A + 2}, lengths ${lengths[0]}–${lengths.at(-1)}${Ds.length > 1 ? `, ${Ds.join(' or ')} distractors` : ''} (${CHAIN.length} levels; the probe is all of them)`,
    families: [LOCK],
    levelsOf: (family) => (family === LOCK ? CHAIN.map((l) => ({ ...l })) : []),
    probe: CHAIN.map((l) => ({ ...l })),
    stages: lengths.map((n) => `length ${n}`),
    stageOf: (l) => Ls.indexOf(l.L),
    hardHalf: (l) => Ls.indexOf(l.L) >= Ls.length / 2,
    rank: (l) => {
      const i = indexIn(CHAIN, l);
      return i < 0 ? difficulty(l) : i / (CHAIN.length - 1);
    },
    // a middle length with one distractor: medium, and not a probe level (the probe is the space)
    fixed: (family) => ({ family, L: Ls[Math.floor((Ls.length - 1) / 2)]!, A, D: 1 }),
    designerDigits: '01234567',
    replyTokens: 1,
    parse: (family, reply) => {
      const d = /[0-9]/.exec(String(reply ?? ''));
      if (family !== LOCK) return { ok: false, reason: `the chain space has only the lock family (F${LOCK})` };
      if (!d || Number(d[0]) >= CHAIN.length)
        return { ok: false, reason: `"${reply}" is not a chain level: write one digit 0-${CHAIN.length - 1}` };
      return { ok: true, level: { ...CHAIN[Number(d[0])]! }, clamped: false };
    },
    reply: (l) => {
      const i = indexIn(CHAIN, l);
      return i < 0 ? describeLevel(l) : String(i);
    },
    up: (l) =>
      [
        { ...l, L: l.L + 1 },
        { ...l, D: Ds.at(-1)! },
      ].filter((x) => !same(x, l) && indexIn(CHAIN, x) >= 0),
    down: (l) =>
      [
        { ...l, L: l.L - 1 },
        { ...l, D: Ds[0]! },
      ].filter((x) => !same(x, l) && indexIn(CHAIN, x) >= 0),
  };
}

/**
 * The chain (pre-registration 3): the lock at alphabet 5 (code 1 0 4 3 2 1 0 4 3), lengths 2–9, no
 * distractors — eight stages, each learnable once the one before it is (a new digit to find, one try
 * in five), and random levels mostly far past what the agent can do. Developed as `long5` (docs/lab.md).
 */
export const CHAIN_SPACE: LevelSpace = chainSpace('chain', 3, [0, 1, 2, 3, 4, 5, 6, 7], [0]);

/** The audit's suggestion (#31): alphabet 2 (code 1 0 1 0 1), lengths 2–5, 0 or 3 distractors; no headroom (docs/lab.md). */
export const CHAIN2_SPACE: LevelSpace = chainSpace('chain2', 0);

/** The grid's probe: every main family at knob levels 0/0/0, 1/1/1 and 2/2/2 (buckets easy, medium, hard). */
export const GRID_PROBE: Level[] = MAIN_FAMILIES.flatMap((family) =>
  [0, 1, 2].map((k) => ({ family, L: k, A: k, D: k })),
);

/** The grid's buckets by difficulty: easy < 1/3 ≤ medium < 2/3 ≤ hard. */
const bucket = (d: number) => (d < 1 / 3 ? 0 : d < 2 / 3 ? 1 : 2);

export const GRID_SPACE: LevelSpace = {
  name: 'grid',
  about: 'the first two pre-registrations’ grid: mirror and lock, every knob 0–3 (64 levels a family)',
  families: MAIN_FAMILIES,
  levelsOf: (family) => {
    const out: Level[] = [];
    for (let L = 0; L <= KNOB_MAX; L++)
      for (let A = 0; A <= KNOB_MAX; A++) for (let D = 0; D <= KNOB_MAX; D++) out.push({ family, L, A, D });
    return out.sort((a, b) => difficulty(a) - difficulty(b));
  },
  probe: GRID_PROBE,
  stages: ['easy', 'medium', 'hard'],
  stageOf: (l) => bucket(difficulty(l)),
  hardHalf: (l) => difficulty(l) >= 1 / 3,
  rank: difficulty,
  // medium difficulty (1/3): the recorded runs' fixed level, which is also a probe level
  fixed: (family) => ({ family, L: 1, A: 1, D: 1 }),
  designerDigits: '0123',
  replyTokens: 3,
  parse: (family, reply) => parseLevel(`${family}${reply}`),
  reply: (l) => `${l.L}${l.A}${l.D}`,
  up: (l) => (['L', 'A', 'D'] as const).filter((k) => l[k] < KNOB_MAX).map((k) => ({ ...l, [k]: l[k] + 1 })),
  down: (l) => (['L', 'A', 'D'] as const).filter((k) => l[k] > 0).map((k) => ({ ...l, [k]: l[k] - 1 })),
};

export const SPACE: Record<SpaceName, LevelSpace> = {
  chain: CHAIN_SPACE,
  chain2: CHAIN2_SPACE,
  // alphabet 5 at lengths 2–5 with 0 or 3 distractors: a pilot of the headroom search
  chain5: chainSpace('chain5', 3),
  grid: GRID_SPACE,
};

/** The probe's chance level: a uniform random player's mean return over its levels. */
export const spaceChance = (s: LevelSpace) => mean(s.probe.map(chance));

/** The level's name as the Lab shows it (the canonical description). */
export const levelName = describeLevel;
