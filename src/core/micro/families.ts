/**
 * The micro lab's parametric environment families (issue 15): small games written for a tiny model
 * with a digits-only vocabulary, each generated as a JavaScript environment of the seed contract
 * (reset/step/solution, run in the QuickJS sandbox like any designed environment) from a family and
 * three knobs.
 *
 * Every family is the same episode shape — enter an L-digit code, one digit per reply — and differs
 * in what the observation tells the player:
 *   F0 echo    each observation shows the next digit              (skill: copy)
 *   F1 mirror  each observation shows d; the answer is (A−1)−d     (skill: a mapping)
 *   F2 lock    the code is the same for every seed of the level    (skill: remember across episodes)
 *   F3 vault   a new random code each seed; nothing shows it       (only the hint or search helps)
 * A right digit advances ("ok."), a wrong one does not ("no."); reward 1 and terminated when the
 * whole code is in; truncated (return 0) after L + SPARE_TURNS replies.
 *
 * How a reply is read (the tiny agent cannot write \boxed{}): the first digit of the \boxed{}
 * content when there is one, else the first digit anywhere in the reply; a digit outside the
 * alphabet counts modulo A, so every digit is a guess and a random reply wins a turn about 1/A of
 * the time. A reply with no digit costs the turn.
 *
 * Knobs, each a level 0..3 (the designer writes the level digits, levels.ts):
 *   L  code length      2, 3, 4, 5      (≥ 2: the checker asks for a multi-turn solution)
 *   A  alphabet size    2, 3, 5, 10
 *   D  distractors      0..3 random digits in brackets after each observation (noise to ignore)
 * Difficulty = (l + a + d) / 9 ∈ [0, 1], from the knob levels alone, the same for every family.
 *
 * The hint (appended to the first observation as in the method) is the code itself, "code 314":
 * it is computed from solution() right after reset(seed), so it always matches the episode.
 * It helps an agent that reads it at every level; without it, echo and mirror can be read off the
 * observations, lock can be memorised, and vault only searched.
 * Observations are terse on purpose: the tiny model's cost grows with the prompt's length in bytes.
 */

export interface FamilyInfo {
  /** Short name (class name prefix, charts). */
  name: string;
  /** One line for people: what the player sees and must do. */
  about: string;
}

export const FAMILIES: readonly FamilyInfo[] = [
  { name: 'echo', about: 'each observation shows the next digit: type it' },
  { name: 'mirror', about: 'each observation shows d: type (A−1)−d' },
  { name: 'lock', about: 'the combination is the same every episode: remember it' },
  { name: 'vault', about: 'a new hidden code every episode: only the hint (or luck) reveals it' },
];

/** Knob levels 0..3 → values. */
export const KNOB_VALUES = {
  L: [2, 3, 4, 5],
  A: [2, 3, 5, 10],
  D: [0, 1, 2, 3],
} as const;

/** The highest knob level (levels are 0..KNOB_MAX). */
export const KNOB_MAX = 3;

/** Replies allowed beyond the code's length (2: a random player on the easiest level wins about 2/3 of the time). */
export const SPARE_TURNS = 2;

/** A level: a family and its three knob levels (each 0..3). */
export interface Level {
  family: number;
  L: number;
  A: number;
  D: number;
}

/** Difficulty in [0, 1] from the knob levels. */
export function difficulty(l: Level): number {
  return (l.L + l.A + l.D) / (3 * KNOB_MAX);
}

/** The canonical level description, e.g. "F2 L3 A1 D0" (knob levels, not values). */
export function describeLevel(l: Level): string {
  return `F${l.family} L${l.L} A${l.A} D${l.D}`;
}

/** The level's knob values and turn limit. */
export function levelValues(l: Level): { length: number; alphabet: number; distractors: number; maxTurns: number } {
  const length = KNOB_VALUES.L[l.L]!;
  return { length, alphabet: KNOB_VALUES.A[l.A]!, distractors: KNOB_VALUES.D[l.D]!, maxTurns: length + SPARE_TURNS };
}

/** The hint text for an episode whose reference actions are `solution` ("code 314"). */
export function hintText(solution: readonly string[]): string {
  return `code ${solution.map((a) => /[0-9]/.exec(a)?.[0] ?? '?').join('')}`;
}

/** Every level of the grid (4 families × 4 × 4 × 4 = 256). */
export function allLevels(): Level[] {
  const out: Level[] = [];
  for (let family = 0; family < FAMILIES.length; family++)
    for (let L = 0; L <= KNOB_MAX; L++)
      for (let A = 0; A <= KNOB_MAX; A++) for (let D = 0; D <= KNOB_MAX; D++) out.push({ family, L, A, D });
  return out;
}

const CLASS = ['MicroEchoEnv', 'MicroMirrorEnv', 'MicroLockEnv', 'MicroVaultEnv'];

/** The family-specific parts of the program: the code, the intro and what each observation shows. */
function familyParts(l: Level, A: number, L: number): { code: string; intro: string; show: string } {
  switch (l.family) {
    case 0:
      return {
        code: `Math.floor(Math.random() * ${A})`,
        intro: `Echo ${L} digits, 0-${A - 1}.`,
        show: `'Type ' + this.code[this.pos]`,
      };
    case 1:
      return {
        code: `Math.floor(Math.random() * ${A})`,
        intro: `Mirror ${L} digits, 0-${A - 1}: reply ${A - 1} minus the digit.`,
        show: `'Digit ' + (${A - 1} - this.code[this.pos])`,
      };
    case 2:
      return {
        // the same combination for every seed: (3i + 1) mod A
        code: `(3 * i + 1) % ${A}`,
        intro: `Lock ${L} digits, 0-${A - 1}, same code every time.`,
        show: `'Digit ' + (this.pos + 1) + '?'`,
      };
    default:
      return {
        code: `Math.floor(Math.random() * ${A})`,
        intro: `Vault ${L} digits, 0-${A - 1}, new code each time.`,
        show: `'Digit ' + (this.pos + 1) + '?'`,
      };
  }
}

/** The environment program (seed contract) for a level. Throws a RangeError for a level off the grid. */
export function levelCode(l: Level): string {
  const ok = (v: number, hi: number) => Number.isInteger(v) && v >= 0 && v <= hi;
  if (!ok(l.family, FAMILIES.length - 1) || !ok(l.L, KNOB_MAX) || !ok(l.A, KNOB_MAX) || !ok(l.D, KNOB_MAX))
    throw new RangeError(
      `Not a micro level: ${JSON.stringify(l)}; families 0-${FAMILIES.length - 1}, knobs 0-${KNOB_MAX}`,
    );
  const v = levelValues(l);
  const p = familyParts(l, v.alphabet, v.length);
  const noise = v.distractors
    ? `show() { let s = ' ['; for (let k = 0; k < ${v.distractors}; k++) s += (k ? ' ' : '') + Math.floor(Math.random() * 10); return ${p.show} + s + ']'; }`
    : `show() { return ${p.show}; }`;
  return `// @title micro ${FAMILIES[l.family]!.name} ${describeLevel(l)}
// @skill micro
// @difficulty ${difficulty(l).toFixed(2)}
class ${CLASS[l.family]} {
  constructor(maxTurns = ${v.maxTurns}) { this.maxTurns = Math.min(maxTurns, ${v.maxTurns}); }
  reset(seed) {
    this.code = [];
    for (let i = 0; i < ${v.length}; i++) this.code.push(${p.code});
    this.pos = 0;
    this.turn = 0;
    this.done = false;
    return [${JSON.stringify(p.intro)} + ' ' + this.show(), {}];
  }
  ${noise}
  read(action) {
    const text = String(action);
    const boxed = extractBoxed(text);
    const m = /[0-9]/.exec(boxed === null ? text : boxed);
    return m ? Number(m[0]) % ${v.alphabet} : null;
  }
  step(action) {
    if (this.done) return ['The episode is over.', 0, true, false, {}];
    this.turn++;
    const d = this.read(action);
    let msg;
    if (d === null) msg = 'Reply with a digit.';
    else if (d === this.code[this.pos]) {
      this.pos++;
      if (this.pos === this.code.length) {
        this.done = true;
        return ['Solved!', 1, true, false, {}];
      }
      msg = 'ok.';
    } else msg = 'no.';
    if (this.turn >= this.maxTurns) {
      this.done = true;
      return [msg + ' Out of turns.', 0, false, true, {}];
    }
    return [msg + ' ' + this.show(), 0, false, false, {}];
  }
  solution() { return this.code.slice(this.pos).map((d) => '\\\\boxed{' + d + '}'); }
}
`;
}
