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
 *   climb   round 4's ladder: the climb family (one fixed 16-digit code, the length not stated, the
 *           position shown as a letter), lengths 2–16 — fifteen rungs; the designer writes one letter
 *           (a–o) and sees the agent's frontier rung in its prompt; the probe is every rung, its top
 *           half lengths 9–16 (docs/lab.md, "Round 4").
 *   grid    the first two pre-registrations' space: families mirror and lock (rotating per cycle),
 *          every knob 0–3 (64 levels each), a 6-level probe (each family at knobs 0/0/0, 1/1/1,
 *          2/2/2); the designer writes three digits (L A D).
 *
 * Pure data and small functions; the Lab (lab.ts) reads a space, never the other way round.
 */
import { chance, describeLevel, difficulty, KNOB_MAX, MAIN_FAMILIES, type Level } from './families.ts';
import { parseLevel, type ParsedLevel } from './levels.ts';
import { mean } from '../spade/estimators.ts';

export const SPACES = ['chain', 'chain2', 'chain5', 'grid', 'climb'] as const;
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
  /**
   * Whether the designer's prompt carries the agent's state (the highest rung it has mastered,
   * lab.ts designerPrompt): the climb's; the older spaces' prompt is the family tag alone.
   */
  designerSeesAgent?: boolean;
  /**
   * The agent's learning rate on this space when the run names none (src/lab/roles.ts): the
   * climb's 1e-3, set on the pilot seeds (docs/lab.md, round 4). With the hidden-16 agent 3e-3
   * collapsed by cycle 300 and 1e-3 reached only rung 5-6; with the hidden-32 agent 2e-3 climbed
   * to lengths 11–14 and collapsed and relearned on most seeds, while 1e-3 held (headroom pilot 3).
   */
  agentLr?: number;
  /**
   * The agent model's width and init std on this space when the run names none (default hidden 16,
   * std 0.2). The climb's: hidden 32, std 0.14. The largest logit gap the adapter can open grows
   * with std·C, the fresh model's spread with std·√C: at hidden 16 the agent never passed ~0.85 a
   * digit and stalled at lengths 7–8; hidden 32 at std 0.14 keeps the fresh spread and raises the
   * ceiling to ~6 nats; weight decay (AdamW's, toward the base model) 0.1 against the collapse
   * a long climb showed without it (docs/lab.md, "The learner").
   */
  agentModel?: { hidden: number; std: number; rank?: number; weightDecay?: number; klCoef?: number };
}

const LOCK = 2;
const CLIMB = 4;

/** The climb designer's alphabet: one letter a level, easiest first (its 15 levels use a–o). */
const DESIGN_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCD';

const same = (a: Level, b: Level) => a.family === b.family && a.L === b.L && a.A === b.A && a.D === b.D;
const indexIn = (levels: readonly Level[], l: Level) => levels.findIndex((x) => same(x, l));

/**
 * A lock chain: one family at one alphabet (knob level `A`), lengths `Ls` (knob levels) and
 * distractors `Ds`, easiest first (length-major); the stages are the lengths. The chain spaces'
 * designer writes one digit, the level's index; the climb's (`letters`) one letter of
 * DESIGN_LETTERS, and every reply is a level (a letter past the end is the top level, clamped).
 * The probe is every level.
 */
function chainSpace(
  name: SpaceName,
  A: number,
  Ls = [0, 1, 2, 3],
  Ds = [0, 3],
  o: {
    family?: number;
    letters?: boolean;
    fixedTop?: boolean;
    agentLr?: number;
    agentModel?: LevelSpace['agentModel'];
    about?: string;
  } = {},
): LevelSpace {
  const family = o.family ?? LOCK;
  const CHAIN: Level[] = Ls.flatMap((L) => Ds.map((D) => ({ family, L, A, D })));
  const lengths = Ls.map((L) => L + 2);
  const digits = o.letters ? DESIGN_LETTERS.slice(0, CHAIN.length) : '01234567';
  return {
    name,
    about:
      o.about ??
      `the lock chain: alphabet ${A + 2}, lengths ${lengths[0]}–${lengths.at(-1)}${Ds.length > 1 ? `, ${Ds.join(' or ')} distractors` : ''} (${CHAIN.length} levels; the probe is all of them)`,
    families: [family],
    levelsOf: (f) => (f === family ? CHAIN.map((l) => ({ ...l })) : []),
    probe: CHAIN.map((l) => ({ ...l })),
    stages: lengths.map((n) => `length ${n}`),
    stageOf: (l) => Ls.indexOf(l.L),
    hardHalf: (l) => Ls.indexOf(l.L) >= Math.floor(Ls.length / 2), // the top half: lengths 9–16 of the climb's 15
    rank: (l) => {
      const i = indexIn(CHAIN, l);
      return i < 0 ? difficulty(l) : i / (CHAIN.length - 1);
    },
    // the top rung (the climb), or a middle length with one distractor: medium, and not a probe level
    fixed: (f) =>
      o.fixedTop ? { ...CHAIN.at(-1)!, family: f } : { family: f, L: Ls[Math.floor((Ls.length - 1) / 2)]!, A, D: 1 },
    designerDigits: digits,
    replyTokens: 1,
    parse: (f, reply) => {
      if (f !== family) return { ok: false, reason: `the ${name} space has only family F${family}` };
      if (o.letters) {
        const at = [...String(reply ?? '')].map((c) => DESIGN_LETTERS.indexOf(c)).find((i) => i >= 0);
        if (at === undefined)
          return {
            ok: false,
            reason: `"${reply}" is not a ${name} level: write one letter ${digits[0]}-${digits.at(-1)}`,
          };
        const i = Math.min(at, CHAIN.length - 1);
        return { ok: true, level: { ...CHAIN[i]! }, clamped: i !== at };
      }
      const d = /[0-9]/.exec(String(reply ?? ''));
      if (!d || Number(d[0]) >= CHAIN.length)
        return { ok: false, reason: `"${reply}" is not a chain level: write one digit 0-${CHAIN.length - 1}` };
      return { ok: true, level: { ...CHAIN[Number(d[0])]! }, clamped: false };
    },
    reply: (l) => {
      const i = indexIn(CHAIN, l);
      return i < 0 ? describeLevel(l) : digits[i]!;
    },
    up: (l) =>
      [
        { ...l, L: l.L + 1 },
        ...Ds.filter((D) => D > l.D)
          .slice(0, 1)
          .map((D) => ({ ...l, D })),
      ].filter((x) => !same(x, l) && indexIn(CHAIN, x) >= 0),
    down: (l) =>
      [
        { ...l, L: l.L - 1 },
        ...Ds.filter((D) => D < l.D)
          .slice(-1)
          .map((D) => ({ ...l, D })),
      ].filter((x) => !same(x, l) && indexIn(CHAIN, x) >= 0),
    ...(o.letters ? { designerSeesAgent: true } : {}),
    ...(o.agentLr ? { agentLr: o.agentLr } : {}),
    ...(o.agentModel ? { agentModel: o.agentModel } : {}),
  };
}

/**
 * The chain (pre-registration 3): the lock at alphabet 5 (code 1 0 4 3 2 1 0 4 3), lengths 2–9, no
 * distractors — eight stages, each learnable once the one before it is (a new digit to find, one try
 * in five), and random levels mostly far past what the agent can do. Developed as `long5` (docs/lab.md).
 */
export const CHAIN_SPACE: LevelSpace = chainSpace('chain', 3, [0, 1, 2, 3, 4, 5, 6, 7], [0]);

/**
 * The climb (round 4): the climb family (families.ts: one fixed 16-digit code at alphabet 5, the
 * length not stated), lengths 2–16 — fifteen rungs, so a uniform sampler lands on the agent's
 * frontier rung one time in fifteen. The probe is every rung, its top half lengths 9–16; the fixed
 * designer plays the top rung. No distractors: on pilot seed 61 a random digit in every observation
 * split each rung into two contexts and the gated ladder stalled at rung 3–4 (docs/lab.md).
 */
export const CLIMB_SPACE: LevelSpace = chainSpace('climb', 3, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [0], {
  family: CLIMB,
  letters: true,
  agentLr: 1e-3,
  agentModel: { hidden: 32, std: 0.14, weightDecay: 0.1 },
  fixedTop: true,
  about: 'the climb: one fixed 16-digit code, lengths 2–16, the length not said (15 levels; the probe is all of them)',
});

/** The audit's suggestion (#31): alphabet 2 (code 1 0 1 0 1), lengths 2–5, 0 or 3 distractors; no headroom (docs/lab.md). */
export const CHAIN2_SPACE: LevelSpace = chainSpace('chain2', 0);

/** The grid's probe: every main family at knob levels 0/0/0, 1/1/1 and 2/2/2 (buckets easy, medium, hard). */
const GRID_PROBE: Level[] = MAIN_FAMILIES.flatMap((family) => [0, 1, 2].map((k) => ({ family, L: k, A: k, D: k })));

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
  climb: CLIMB_SPACE,
};

/** The probe's chance level: a uniform random player's mean return over its levels. */
export const spaceChance = (s: LevelSpace) => mean(s.probe.map(chance));
