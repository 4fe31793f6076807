/**
 * A catalogue of broken environments, one per named check of the checker (checker.ts's
 * CHECK_NAMES): each is a small valid game — a three-digit lock opened one digit at a time — with
 * one realistic mistake that THAT check exists to catch, so every check before it passes and it
 * fails. Beside HOSTILE (hostile.ts), which attacks the sandbox; these only get the game wrong.
 * tests/unit/checker.test.ts runs each one and names the check that must fail.
 */
import type { CheckName } from './checker.ts';

export interface Broken {
  /** The check that must fail (every check before it passes). */
  check: CheckName;
  /** The mistake, in words. */
  mistake: string;
  code: string;
  /** A fragment of that check's message. */
  message: RegExp;
}

/** Parts of the lock game a broken variant replaces. */
interface LockParts {
  className: string;
  digits: number;
  resetReturn: string;
  /** Runs first in step(), after the turn is counted; `b` is the boxed text or null. */
  guard: string;
  truncated: string;
  winReward: string;
  /** What step returns, from (obs, reward, terminated). */
  result: string;
  extra: string;
}

const LOCK: LockParts = {
  className: 'LockEnv',
  digits: 3,
  resetReturn: `['Open the lock: send its digits one at a time, each as \\\\boxed{d}.', { seed }]`,
  guard: '',
  truncated: '!term && this.t >= this.maxTurns',
  winReward: '1',
  result: '[obs, r, term, trunc, {}]',
  extra: '',
};

/** The lock game with some parts replaced. */
function lock(over: Partial<LockParts> = {}): string {
  const p = { ...LOCK, ...over };
  return `// @title Lock
// @setting games
// @skill logical
// @difficulty easy
class ${p.className} {
  constructor(maxTurns = 12) { this.maxTurns = maxTurns; }
  reset(seed) {
    this.code = Array.from({ length: ${p.digits} }, () => Math.floor(Math.random() * 10));
    this.got = 0;
    this.t = 0;
    return ${p.resetReturn};
  }
  step(action) {
    this.t++;
    const b = extractBoxed(action);
    const out = (obs, r, term) => { const trunc = ${p.truncated}; return ${p.result}; };
    ${p.guard}
    if (b === null || !/^[0-9]$/.test(b)) return out('Send one digit as \\\\boxed{d}.', 0, false);
    if (Number(b) !== this.code[this.got]) { this.got = 0; return out('Wrong digit: start again.', 0, false); }
    this.got++;
    return this.got === this.code.length ? out('Open!', ${p.winReward}, true) : out('Click.', 0, false);
  }
  solution() { return this.code.map((d) => '\\\\boxed{' + d + '}'); }
  ${p.extra}
}`;
}

/** The lock game with nothing wrong: passes every check. */
export const LOCK_ENV = lock();

export const BROKEN: Broken[] = [
  {
    check: 'loads',
    mistake: 'the class name does not end in "Env", so no environment class is found',
    code: lock({ className: 'Lock' }),
    message: /Env/,
  },
  {
    check: 'reset',
    mistake: 'reset() returns the observation alone instead of [observation, info]',
    code: lock({ resetReturn: `'Open the lock.'` }),
    message: /reset/,
  },
  {
    check: 'step',
    mistake: 'step() returns [observation, reward, terminated] without truncated and info',
    code: lock({ result: '[obs, r, term]' }),
    message: /step/,
  },
  {
    check: 'garbage_input',
    mistake: 'step() throws on an action without \\boxed{}',
    code: lock({ guard: `if (b === null) throw new Error('no boxed answer');` }),
    message: /must return a helpful observation/,
  },
  {
    check: 'solution_solves',
    mistake: 'opening the lock pays 0.5, so the solution never reaches reward 1',
    code: lock({ winReward: '0.5' }),
    message: /ended with reward 0\.5/,
  },
  {
    check: 'multi_turn',
    mistake: 'the lock has one digit: a one-step quiz',
    code: lock({ digits: 1 }),
    message: /one step/,
  },
  {
    check: 'not_solved_at_reset',
    mistake: 'an empty \\boxed{} opens the lock with reward exactly 1',
    code: lock({ guard: `if (b === '') return out('The lock was not locked.', 1, true);` }),
    message: /already wins \(reward 1\)/,
  },
  {
    check: 'deterministic',
    mistake: 'a round counter kept across resets (capped at 3) shows in the observation',
    code: lock({
      resetReturn: `(this.round = Math.min((this.round ?? 0) + 1, 3), ['Round ' + this.round + ': open the lock, one \\\\boxed{d} at a time.', { seed }])`,
    }),
    message: /in a fresh instance/,
  },
  {
    check: 'random_policy_ends',
    mistake: 'the episode never truncates: random play runs past maxTurns',
    code: lock({ truncated: 'false' }),
    message: /had not ended/,
  },
  {
    check: 'closes',
    mistake: 'close() throws',
    code: lock({ extra: `close() { throw new Error('the lock is already closed'); }` }),
    message: /already closed/,
  },
];
