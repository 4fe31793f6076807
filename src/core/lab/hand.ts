/**
 * A person's curriculum — the Lab's `hand` designer, "You design the curriculum": the levels of each
 * cycle picked by hand. A curriculum is text: one group per cycle, joined by ".", each group one
 * character per level in the space's own level alphabet (LevelSpace.designerDigits: the climb's
 * letters a–o, easiest first; the chain's digits), K characters a cycle. So a link carries it
 * (`lab.hand`), `spade lab --designer hand --curriculum aabb.bbcc` replays it, and the same seed and
 * settings give the same numbers wherever it is replayed.
 *
 * Also the race the person's curriculum runs against the Lab's round-4 arms (RACE_ARMS, same seed,
 * same K × N plays a cycle, same cycles) and its score, and the class board's rows (several links
 * pasted in, exported as CSV). Pure: no DOM, no model.
 */
import { ConfigError } from '../errors.ts';
import type { Level } from './families.ts';
import type { LevelSpace } from './spaces.ts';

/** The most cycles a hand-written curriculum holds (the pre-registered runs' 400; a run may go to 1,000 without one). */
const MAX_CURRICULUM_CYCLES = 400;
/** The longest curriculum text: MAX_CURRICULUM_CYCLES groups of at most 8 levels and their separators. */
export const MAX_CURRICULUM_CHARS = MAX_CURRICULUM_CYCLES * 9;
/** The longest author name a link carries. */
export const MAX_WHO_CHARS = 40;

/** Between two cycles' groups. */
const SEP = '.';

/** The groups of a curriculum text ('' has none). */
export const curriculumCycles = (text: string): string[] => (text === '' ? [] : text.split(SEP));

/** A curriculum's text from its groups. */
export const formatCurriculum = (cycles: readonly string[]): string => cycles.join(SEP);

/**
 * What is wrong with a curriculum for a space and K levels a cycle, or null when nothing is: too many
 * cycles, a group of the wrong length, a character that is no level of the space.
 */
export function curriculumProblem(space: LevelSpace, text: string, levels: number): string | null {
  if (text.length > MAX_CURRICULUM_CHARS)
    return `the curriculum is ${text.length.toLocaleString('en')} characters long; it may be at most ${MAX_CURRICULUM_CHARS.toLocaleString('en')}`;
  const groups = curriculumCycles(text);
  if (groups.length > MAX_CURRICULUM_CYCLES)
    return `the curriculum has ${groups.length} cycles; it may have at most ${MAX_CURRICULUM_CYCLES}`;
  const alphabet = space.designerDigits;
  for (const [i, g] of groups.entries()) {
    if ([...g].length !== levels)
      return `cycle ${i + 1} of the curriculum has ${[...g].length} levels ("${g.slice(0, 16)}"); each cycle has ${levels} (K)`;
    const bad = [...g].find((c) => !alphabet.includes(c));
    if (bad !== undefined)
      return `cycle ${i + 1} of the curriculum names "${bad}", which is no level of the ${space.name} space: write ${alphabet[0]}–${alphabet.at(-1)} (easiest first)`;
  }
  return null;
}

/** Throws a ConfigError saying what is wrong unless the curriculum fits the space and K. */
export function checkCurriculum(space: LevelSpace, text: string, levels: number): void {
  const problem = curriculumProblem(space, text, levels);
  if (problem) throw new ConfigError(`The hand-made curriculum cannot be used: ${problem}.`, { curriculum: text });
}

/** The levels of one cycle's group (checked: every character is a level of the space). */
export function groupLevels(space: LevelSpace, family: number, group: string): Level[] {
  return [...group].map((c) => {
    const parsed = space.parse(family, c);
    if (!parsed.ok) throw new ConfigError(`The hand-made curriculum names "${c}": ${parsed.reason}.`);
    return parsed.level;
  });
}

/**
 * One cycle's group from the levels a person chose (their indices in the space's alphabet, easiest
 * first), spread over the K slots in the order chosen: {3, 5} at K = 4 is "dfdf" on the climb.
 */
export function spreadPicks(space: LevelSpace, picks: readonly number[], levels: number): string {
  if (!picks.length) throw new ConfigError('Pick at least one level for the cycle.');
  const alphabet = space.designerDigits;
  for (const p of picks)
    if (!Number.isInteger(p) || p < 0 || p >= alphabet.length)
      throw new ConfigError(`There is no level ${p} in the ${space.name} space (0–${alphabet.length - 1}).`);
  return Array.from({ length: levels }, (_, k) => alphabet[picks[k % picks.length]!]!).join('');
}

/** The arms a hand-made curriculum races, beside it: SPADE's designer, random levels and the gated ladder. */
export const RACE_ARMS = ['hand', 'learned', 'random', 'gated'] as const;
export type RaceArm = (typeof RACE_ARMS)[number];

/** Each race arm as a class reads it. */
export const RACE_ARM_LABELS: Record<RaceArm, string> = {
  hand: 'your curriculum',
  learned: "SPADE's designer",
  random: 'random levels',
  gated: 'gated ladder (scripted)',
};

/** A race arm's standing: its last probe, as the race table shows it. */
export interface RaceScore {
  /** The probe's mean over every rung: the race's score (a short race rarely reaches the top half). */
  mean: number;
  /** The probe's top half (the Lab's round-4 metric), shown beside it. */
  hardHalf: number;
  /** The highest rung the probe won at least half the time (−1: none). */
  topRung: number;
  /** The agent's unhinted plays and optimiser steps so far (every arm gets the same plays). */
  plays: number;
  steps: number;
}

/**
 * The arms in race order: the highest score (probe mean) first, then the highest rung held, then
 * the table's own order (a tie stays in RACE_ARMS order).
 */
export function raceOrder<T extends { arm: string; score: RaceScore | null }>(rows: readonly T[]): T[] {
  const key = (r: T) => (r.score ? [r.score.mean, r.score.topRung] : [-1, -2]);
  return rows
    .map((r, i) => ({ r, i }))
    .sort((a, b) => {
      const [am, at] = key(a.r);
      const [bm, bt] = key(b.r);
      return bm! - am! || bt! - at! || a.i - b.i;
    })
    .map((x) => x.r);
}

/**
 * One row of the class board: a curriculum from a link and what its replay scored. Stored as
 * core/spade/app_records.ts's BOARD_ROW checks it (lab_hand.test.ts: a row this type allows passes it).
 */
export interface BoardRow {
  /** Who made it (the link's `lab.who`, plain text; '' when unnamed). */
  who: string;
  seed: number;
  space: string;
  levels: number;
  plays: number;
  probePlays: number;
  cycles: number;
  curriculum: string;
  /** The link it came from. */
  link: string;
  /** Its replayed score, null until replayed. */
  score: RaceScore | null;
}

const csvCell = (v: unknown) => {
  const s = String(v ?? '');
  // a leading = + - @ would be a formula in a spreadsheet: quote it behind an apostrophe
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\n\r]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
};

/** The board as CSV (a header row, then one row per curriculum; empty score cells until replayed). */
export function boardCsv(rows: readonly BoardRow[]): string {
  const head = [
    'who',
    'seed',
    'space',
    'K',
    'N',
    'P',
    'cycles',
    'score',
    'top_half',
    'top_rung',
    'plays',
    'steps',
    'curriculum',
    'link',
  ];
  const lines = rows.map((r) =>
    [
      r.who,
      r.seed,
      r.space,
      r.levels,
      r.plays,
      r.probePlays,
      r.cycles,
      r.score?.mean ?? '',
      r.score?.hardHalf ?? '',
      r.score?.topRung ?? '',
      r.score?.plays ?? '',
      r.score?.steps ?? '',
      r.curriculum,
      r.link,
    ]
      .map(csvCell)
      .join(','),
  );
  return [head.join(','), ...lines].join('\n') + '\n';
}
