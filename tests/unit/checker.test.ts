// The checker against the BROKEN catalogue (src/core/env/broken.ts): each broken lock game fails
// exactly the check it was written for, with that check's message, after every earlier check passed;
// the unbroken lock passes them all; an environment that is winnable only once solution() has run on
// it fails, since the solution is played on a fresh instance.
import { describe, expect, it } from 'vitest';
import { BROKEN, LOCK_ENV } from '../../src/core/env/broken.ts';
import { CHECK_NAMES, checkEnv } from '../../src/core/env/checker.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';

const runner = inProcessRunner();

describe('checker: the BROKEN catalogue', () => {
  it('has one broken program per named check', () => {
    expect(BROKEN.map((b) => b.check)).toEqual([...CHECK_NAMES]);
  });

  it('the unbroken lock passes every check', async () => {
    const r = await checkEnv(runner, LOCK_ENV);
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.checks.map((c) => c.name)).toEqual([...CHECK_NAMES]);
    expect(r.ok).toBe(true);
  });

  it.each(BROKEN)('$check fails when $mistake', async (b) => {
    const r = await checkEnv(runner, b.code);
    const at = CHECK_NAMES.indexOf(b.check);
    const names = r.checks.map((c) => c.name);
    // every check before it ran and passed
    expect(names.slice(0, at)).toEqual(CHECK_NAMES.slice(0, at));
    expect(r.checks.slice(0, at).filter((c) => !c.ok)).toEqual([]);
    const failed = r.checks.find((c) => c.name === b.check);
    expect(failed?.ok, `${b.check}: ${failed?.message}`).toBe(false);
    expect(failed!.message).toMatch(b.message);
    expect(r.ok).toBe(false);
  });
});

describe('checker: solution() is played on a fresh instance', () => {
  // Each of these wins only once solution() has run on the instance (or in its runtime): an agent,
  // which never calls solution(), could never win; the checker must not be fooled by its own call.
  const win = `return this.got === this.code.length ? out('Open!', 1, true) : out('Click.', 0, false);`;
  const peeking: [string, string][] = [
    [
      'a flag set by solution()',
      LOCK_ENV.replace('solution() {', 'solution() { this.peeked = true;').replace(
        win,
        win.replace('this.got === this.code.length', 'this.got === this.code.length && this.peeked'),
      ),
    ],
    [
      'a global set by solution()',
      LOCK_ENV.replace('solution() {', 'solution() { globalThis.__peek = 1;').replace(
        win,
        win.replace('this.got === this.code.length', 'this.got === this.code.length && globalThis.__peek === 1'),
      ),
    ],
    [
      'a key that only solution() makes, cleared by reset()',
      LOCK_ENV.replace('this.got = 0;\n    this.t = 0;', 'this.got = 0;\n    this.t = 0;\n    this.key = null;')
        .replace('solution() {', 'solution() { this.key = this.code.join("");')
        .replace(
          win,
          win.replace('this.got === this.code.length', 'this.got === this.code.length && this.key !== null'),
        ),
    ],
    [
      'a count of solution() calls that unlocks the goal',
      LOCK_ENV.replace('solution() {', 'solution() { this.asked = (this.asked || 0) + 1;').replace(
        win,
        win.replace('this.got === this.code.length', 'this.got === this.code.length && this.asked > 0'),
      ),
    ],
  ];

  it.each(peeking)('an environment winnable only after solution() (%s) fails solution_solves', async (_what, code) => {
    expect(code).not.toBe(LOCK_ENV);
    const r = await checkEnv(runner, code);
    const names = r.checks.map((c) => c.name);
    expect(names.slice(0, 4)).toEqual(['loads', 'reset', 'step', 'garbage_input']);
    expect(r.checks.slice(0, 4).every((c) => c.ok)).toBe(true);
    const s = r.checks.find((c) => c.name === 'solution_solves')!;
    expect(s.ok).toBe(false);
    expect(s.message).toMatch(/ended with reward 0.*fresh instance/);
    expect(r.ok).toBe(false);
  });

  it('every instance the checker opened is closed, the player included', async () => {
    let open = 0;
    const counted = {
      ...runner,
      load: async (...a: Parameters<typeof runner.load>) => {
        const e = await runner.load(...a);
        open++;
        return e;
      },
      dispose: async (id: string) => {
        await runner.dispose(id);
        open--;
      },
    };
    expect((await checkEnv(counted, LOCK_ENV)).ok).toBe(true);
    expect(open).toBe(0);
    expect((await checkEnv(counted, peeking[0]![1])).ok).toBe(false);
    expect(open).toBe(0);
  });
});
