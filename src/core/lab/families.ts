/**
 * The Lab's parametric environment families: small games written for a tiny model whose
 * vocabulary is the digits 0–4 (AGENT_DIGITS), each generated as a JavaScript environment of the
 * seed contract (reset/step/solution, run in the QuickJS sandbox like any designed environment)
 * from a family and three knobs.
 *
 * Every family is the same episode shape — enter an L-digit code, one digit per reply — and differs
 * in what the observation tells the player:
 *   F0 echo    each observation shows the next digit               (skill: copy)
 *   F1 mirror  each observation shows d; the answer is (A−1)−d      (skill: a mapping)
 *   F2 lock    the same code every episode, one code for all lengths: the code of length L is the
 *              first L digits of the length-5 code, so short locks teach what long ones need
 *              (skill: remember across episodes; the chain)
 *   F3 vault   a new random code each episode; only its hint (the code itself) reveals it — a
 *              labelled trap, designable only in the trap ablation (see TRAP)
 *   F4 climb   the long ladder (the climb space, round 4): one fixed code of CLIMB_CODE's 16 digits
 *              at alphabet 5, not periodic, every length its first L digits; the intro does not
 *              state the length, so every rung shares one context and a length is the one before
 *              it plus one digit; the episode ends as soon as the code can no longer be completed
 *              (two slips), and its hint is the code itself ("code 14023"), a thing to remember
 * A right digit advances ("ok."), a wrong one does not ("no."); reward 1 and terminated when the
 * whole code is in; truncated (return 0) after L + SPARE_TURNS replies.
 *
 * Scoring is exact: the first digit of the \boxed{} content when there is one, else the first digit
 * anywhere, must equal the code's digit (no modulo: a digit outside the alphabet is wrong). A
 * player choosing uniformly among the agent's five digits wins a turn 1/5 of the time, so its win
 * rate on a level is `chance(level)` = P(Binomial(L + SPARE_TURNS, 1/5) ≥ L): 0.10 at L = 2,
 * 0.027 at 3, under 0.01 beyond.
 *
 * Knobs, each a level 0..3 (the designer writes the level digits, levels.ts):
 *   L  code length      2, 3, 4, 5      (≥ 2: the checker asks for a multi-turn solution)
 *   A  alphabet size    2, 3, 4, 5      (digits 0..A−1; the agent can write every one)
 *   D  distractors      0..3 random digits in brackets after each observation (noise to ignore;
 *                       in training and in the probe alike)
 * Difficulty = (l + a + d) / 9 ∈ [0, 1], from the knob levels alone, the same for every family.
 *
 * The hint (appended to the first observation as in the method) is a strategy the unhinted agent
 * could learn, the same for every seed of a level — never that episode's code: echo "type the
 * digit shown", mirror "type 3 minus the digit shown", lock "same code every time: start at 1,
 * count down, 0 wraps to 3". Only the vault trap's hint is the episode's code (`code 314`), which
 * is what makes it a trap: maximal regret, nothing to learn.
 * `oracleReply` is a scripted player that follows a hint exactly (the lab's hinted arm, labelled
 * an oracle: a fresh tiny model cannot read instructions).
 * Observations are terse on purpose: the tiny model's cost grows with the prompt's length in bytes.
 */

export interface FamilyInfo {
  /** Short name (class name prefix, charts). */
  name: string;
  /** One line for people: what the player sees and must do. */
  about: string;
  /** Set for a trap family (designable only in the trap ablation): why it is one. */
  trap?: string;
}

export const FAMILIES: readonly FamilyInfo[] = [
  { name: 'echo', about: 'each observation shows the next digit: type it' },
  { name: 'mirror', about: 'each observation shows d: type (A−1)−d' },
  { name: 'lock', about: 'the same code every episode, one code for every length: remember it' },
  {
    name: 'vault',
    about: 'a new hidden code every episode: only the hint (the code itself) or luck reveals it',
    trap: 'its hint is the answer and nothing can be learnt without it: maximal regret, no skill',
  },
  { name: 'climb', about: 'one fixed 16-digit code, every length its first digits, the length not said: remember it' },
];

/** The climb family's code (F4): fixed, alphabet 5, no period; a length-L climb level's code is its first L digits. */
export const CLIMB_CODE = '1402331042201431';
const CLIMB = 4;

/**
 * The families the lab designs and probes by default (the trap ablation adds TRAP_FAMILIES): those
 * whose learning-curve check passes at the lab's budget (docs/lab.md). Echo does not: at the
 * lab's learning rate the tiny agent learns its alphabet (win rate 0.5 at A = 2) but not to copy.
 */
export const MAIN_FAMILIES: readonly number[] = [1, 2];
export const TRAP_FAMILIES: readonly number[] = [3];

/** The agent's vocabulary: the digits it can write (every alphabet's digits, and no more). */
export const AGENT_DIGITS = '01234';

/**
 * Knob levels → values: 0..3 for every knob on the grid; the length knob goes on to 7 (lengths up to
 * 9) for the long lock chain and to 14 (lengths up to 16) for the climb (spaces.ts), whose stages
 * are the lengths.
 */
const KNOB_VALUES = {
  L: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
  A: [2, 3, 4, 5],
  D: [0, 1, 2, 3],
} as const;

/** The highest knob level of the grid (levels are 0..KNOB_MAX; a designer's digits above it are clamped). */
export const KNOB_MAX = 3;

/** The highest length knob (lengths 2–16: the climb). */
const L_MAX = 14;

/** Replies allowed beyond the code's length (1: one slip is forgiven; luck alone rarely wins). */
const SPARE_TURNS = 1;

/** The lock's code of the longest length: every lock's code is its first L digits (mod A): start at 1, count down. */
export const lockDigit = (i: number, A: number) => (((1 - i) % A) + A) % A;

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

/**
 * The win rate of a player replying uniformly among AGENT_DIGITS: P(Binomial(L + SPARE_TURNS, p) ≥ L),
 * p = 1/|AGENT_DIGITS| (every code digit is one of them, and a wrong reply only costs the turn).
 */
export function chance(l: Level): number {
  const { length: L, maxTurns: n } = levelValues(l);
  const p = 1 / AGENT_DIGITS.length;
  let sum = 0;
  for (let k = L; k <= n; k++) sum += binom(n, k) * p ** k * (1 - p) ** (n - k);
  return sum;
}

function binom(n: number, k: number): number {
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/**
 * The hint of an episode: a strategy for the level, the same for every seed (see the file header);
 * only the vault trap's is that episode's code, read from `solution` (its solution() after reset).
 */
export function hintText(l: Level, solution: readonly string[] = []): string {
  const A = levelValues(l).alphabet;
  switch (l.family) {
    case 0:
      return 'type the digit shown';
    case 1:
      return `type ${A - 1} minus the digit shown`;
    case 2:
      return `same code every time: start at 1, count down, 0 wraps to ${A - 1}`;
    case CLIMB:
      return `code ${CLIMB_CODE.slice(0, levelValues(l).length)}`;
    default:
      return `code ${solution.map((a) => /[0-9]/.exec(a)?.[0] ?? '?').join('')}`;
  }
}

/**
 * The oracle: a scripted player that follows the hint of hintText exactly, reading only the
 * conversation (the hint after `hintPrefix` in the first message, the last observation, and the
 * "ok."s so far for the position). Returns "0" when it finds no hint it knows.
 */
export function oracleReply(messages: readonly { role: string; content: string }[], hintPrefix: string): string {
  const first = messages[0]?.content ?? '';
  const at = first.indexOf(hintPrefix);
  const hint = at < 0 ? '' : first.slice(at + hintPrefix.length);
  const users = messages.filter((m) => m.role === 'user');
  const last = users.at(-1)!.content.split(hintPrefix)[0]!;
  const shown = Number(/(?:Type|Digit) (\d)(?!\?)/.exec(last)?.[1] ?? 0);
  const pos = users.filter((m) => m.content.startsWith('ok.')).length;
  let m: RegExpExecArray | null;
  if (hint === 'type the digit shown') return String(shown);
  if ((m = /^type (\d) minus the digit shown$/.exec(hint))) return String(Number(m[1]) - shown);
  if ((m = /^same code every time: start at 1, count down, 0 wraps to (\d)$/.exec(hint)))
    return String(lockDigit(pos, Number(m[1]) + 1));
  if ((m = /^code (\d+)$/.exec(hint))) return m[1]![pos] ?? '0';
  return '0';
}

/** Every level of the grid of the given families (default all: 4 × 4 × 4 × 4 = 256). */
export function allLevels(families: readonly number[] = FAMILIES.map((_, f) => f)): Level[] {
  const out: Level[] = [];
  for (const family of families)
    for (let L = 0; L <= KNOB_MAX; L++)
      for (let A = 0; A <= KNOB_MAX; A++) for (let D = 0; D <= KNOB_MAX; D++) out.push({ family, L, A, D });
  return out;
}

const CLASS = ['MicroEchoEnv', 'MicroMirrorEnv', 'MicroLockEnv', 'MicroVaultEnv', 'MicroClimbEnv'];

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
        // the same code for every seed and every length: start at 1, count down mod A (lockDigit)
        code: `(((1 - i) % ${A}) + ${A}) % ${A}`,
        intro: `Lock ${L} digits, 0-${A - 1}, same code every time.`,
        show: `'Digit ' + (this.pos + 1) + '?'`,
      };
    case CLIMB:
      return {
        code: `${JSON.stringify(CLIMB_CODE)}.charCodeAt(i) - 48`,
        intro: `Climb, 0-${A - 1}, same code every time.`,
        // the position as one letter (a-p): with numbers, "Digit 10?" ends like "Digit 0?" would
        // and the pilot's gated ladder stalled at length 9 on every seed tried
        show: `'Digit ' + 'abcdefghijklmnop'[this.pos] + '?'`,
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
  if (!ok(l.family, FAMILIES.length - 1) || !ok(l.L, L_MAX) || !ok(l.A, KNOB_MAX) || !ok(l.D, KNOB_MAX))
    throw new RangeError(
      `Not a micro level: ${JSON.stringify(l)}; families 0-${FAMILIES.length - 1}, L 0-${L_MAX}, A and D 0-${KNOB_MAX}`,
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
    return m ? Number(m[0]) : null;
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
    if (this.turn >= this.maxTurns${l.family === CLIMB ? ' || this.maxTurns - this.turn < this.code.length - this.pos' : ''}) {
      this.done = true;
      return [msg + ' Out of turns.', 0, false, true, {}];
    }
    return [msg + ' ' + this.show(), 0, false, false, {}];
  }
  solution() { return this.code.slice(this.pos).map((d) => '\\\\boxed{' + d + '}'); }
}
`;
}
