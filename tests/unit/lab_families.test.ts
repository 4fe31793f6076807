// The Lab's environment families (src/core/lab/families.ts) and level descriptions
// (levels.ts): every level of the knob grid passes the checker in the in-process QuickJS sandbox and
// its solution() wins; scoring is exact; the chance level is what a uniform player gets; the hint is
// a strategy (the same for every seed, never the episode's code: the leak probe's check passes on
// every main family and flags only the vault trap) that the oracle follows to a win; the parser
// clamps and refuses.
import { describe, expect, it } from 'vitest';
import { checkEnv } from '../../src/core/env/checker.ts';
import {
  AGENT_DIGITS,
  allLevels,
  chance,
  CLIMB_CODE,
  describeLevel,
  difficulty,
  FAMILIES,
  hintText,
  levelCode,
  levelValues,
  lockDigit,
  MAIN_FAMILIES,
  oracleReply,
  TRAP_FAMILIES,
  type Level,
} from '../../src/core/lab/families.ts';
import { parseLevel } from '../../src/core/lab/levels.ts';
import { createRng } from '../../src/core/rng.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { leakedValues } from '../../src/core/spade/extract.ts';
import { HINT_PREFIX } from '../../src/core/spade/prompts.ts';

const sandbox = createSandboxWorkerApi();

/** Play one episode with a reply function; returns the return and the first observation. */
async function play(
  id: string,
  seed: number,
  maxTurns: number,
  hint: string | null,
  reply: (m: { role: string; content: string }[]) => string,
): Promise<{ ret: number; obs0: string }> {
  const [obs0] = await sandbox.reset(id, seed);
  const messages = [{ role: 'user', content: hint ? `${obs0}${HINT_PREFIX}${hint}` : obs0 }];
  for (let t = 0; t < maxTurns; t++) {
    const a = reply(messages);
    const [obs, r, term, trunc] = await sandbox.step(id, a);
    if (term || trunc) return { ret: term ? r : 0, obs0 };
    messages.push({ role: 'assistant', content: a }, { role: 'user', content: obs });
  }
  return { ret: 0, obs0 };
}

describe('Lab families', () => {
  it('every family at every knob setting passes the checker and its solution wins', async () => {
    const levels = allLevels();
    expect(levels).toHaveLength(FAMILIES.length * 64);
    const failures: string[] = [];
    for (const l of levels) {
      const v = levelValues(l);
      const report = await checkEnv(sandbox, levelCode(l), { maxTurns: v.maxTurns });
      if (!report.ok)
        failures.push(
          `${describeLevel(l)}: ${report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.message}`)}`,
        );
      else expect(report.solutionSteps).toEqual([v.length, v.length, v.length]);
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('plays as documented: exact digits (no modulo), a wrong digit costs a turn, truncation after L + 1', async () => {
    const l = { family: 3, L: 1, A: 1, D: 2 }; // vault, 3 digits, alphabet 3, 2 distractors
    const env = await sandbox.load(levelCode(l), 12);
    const [obs] = await sandbox.reset(env.id, 7);
    expect(obs).toMatch(/^Vault 3 digits, 0-2, new code each time\. Digit 1\? \[\d \d\]$/);
    const sol = await sandbox.solution(env.id);
    const code = sol.map((a) => Number(/\d/.exec(a)![0]));
    expect(hintText(l, sol)).toBe(`code ${code.join('')}`);
    // the right digit plus the alphabet is wrong now (it counted modulo A before); then the right one, boxed
    expect((await sandbox.step(env.id, String(code[0]! + 3)))[0]).toMatch(/^no\. Digit 1\?/);
    expect((await sandbox.step(env.id, `\\boxed{${code[0]}}`))[0]).toMatch(/^ok\. Digit 2\?/);
    expect((await sandbox.step(env.id, String(code[1])))[0]).toMatch(/^ok\. Digit 3\?/);
    const r4 = await sandbox.step(env.id, String((code[2]! + 1) % 3)); // 4th reply = 3 + 1: out of turns
    expect(r4.slice(1, 4)).toEqual([0, false, true]);
    // the lock: one code for every seed and every length, counting down from 1 mod A
    for (const L of [0, 3]) {
      const lock = await sandbox.load(levelCode({ family: 2, L, A: 2, D: 0 }), 12);
      for (const seed of [1, 99]) {
        await sandbox.reset(lock.id, seed);
        const digits = (await sandbox.solution(lock.id)).map((a) => Number(/\d/.exec(a)![0]));
        expect(digits).toEqual([1, 0, 3, 2, 1].slice(0, levelValues({ family: 2, L, A: 2, D: 0 }).length));
        expect(digits).toEqual(digits.map((_, i) => lockDigit(i, 4)));
      }
      await sandbox.dispose(lock.id);
    }
    await sandbox.dispose(env.id);
  });

  it('chance is the win rate of a uniform player over the agent digits', async () => {
    expect(chance({ family: 0, L: 0, A: 0, D: 0 })).toBeCloseTo(3 * 0.2 ** 2 * 0.8 + 0.2 ** 3, 12); // 0.104
    expect(chance({ family: 2, L: 3, A: 3, D: 3 })).toBeCloseTo(6 * 0.2 ** 5 * 0.8 + 0.2 ** 6, 12); // 0.0016
    const l = { family: 1, L: 0, A: 3, D: 1 };
    const env = await sandbox.load(levelCode(l), 12);
    const rng = createRng(4);
    let wins = 0;
    const n = 3000;
    for (let i = 0; i < n; i++)
      wins += (await play(env.id, i, levelValues(l).maxTurns, null, () => AGENT_DIGITS[rng.int(5)]!)).ret;
    expect(Math.abs(wins / n - chance(l))).toBeLessThan(0.02);
    await sandbox.dispose(env.id);
  }, 60_000);

  it('the hint is a strategy, not the answer: the same every seed, the leak check passes on every main family and flags the vault trap; the oracle wins with it', async () => {
    const grid = (families: readonly number[]) => allLevels(families).filter((l: Level) => (l.L + l.A + l.D) % 3 === 0); // a third of the grid, every knob value
    const leaks = async (l: Level) => {
      const v = levelValues(l);
      const env = await sandbox.load(levelCode(l), 12);
      const found: string[] = [];
      const hints = new Set<string>();
      for (const seed of [1, 2, 3, 4]) {
        const [obs] = await sandbox.reset(env.id, seed);
        const sol = await sandbox.solution(env.id);
        const hint = hintText(l, sol);
        hints.add(hint);
        // the code as one hidden value (the stricter form: the leak probe's values need ≥ 2 digits)
        const whole = `\\boxed{${sol.map((a) => /\d/.exec(a)![0]).join('')}}`;
        found.push(...leakedValues(hint, [[whole]], [obs]));
        const won = await play(env.id, seed, v.maxTurns, hint, (m) => oracleReply(m, HINT_PREFIX));
        expect(won.ret, `${describeLevel(l)} seed ${seed}: the oracle follows "${hint}"`).toBe(1);
      }
      await sandbox.dispose(env.id);
      return { found, hints: hints.size };
    };
    for (const l of grid(MAIN_FAMILIES)) {
      const r = await leaks(l);
      expect(r.found, describeLevel(l)).toEqual([]);
      expect(r.hints, describeLevel(l)).toBe(1);
    }
    let flagged = 0;
    for (const l of grid(TRAP_FAMILIES)) flagged += (await leaks(l)).found.length ? 1 : 0;
    expect(flagged).toBeGreaterThan(0); // the trap's hint is the per-seed code
    expect(FAMILIES[3]!.trap).toMatch(/hint is the answer/);
  }, 60_000);

  it('difficulty is the mean knob level on [0, 1]', () => {
    expect(difficulty({ family: 0, L: 0, A: 0, D: 0 })).toBe(0);
    expect(difficulty({ family: 3, L: 3, A: 3, D: 3 })).toBe(1);
    expect(difficulty({ family: 1, L: 1, A: 2, D: 0 })).toBeCloseTo(1 / 3);
    expect(() => levelCode({ family: 5, L: 0, A: 0, D: 0 })).toThrow(RangeError);
    expect(() => levelCode({ family: 0, L: 15, A: 0, D: 0 })).toThrow(/L 0-14, A and D 0-3/);
    expect(() => levelCode({ family: 0, L: 0, A: 4, D: 0 })).toThrow(RangeError);
    // the length goes on to 9 (knob 7) for the long lock chain: a length-9 lock with its 10 turns
    expect(levelValues({ family: 2, L: 7, A: 3, D: 0 })).toMatchObject({ length: 9, alphabet: 5, maxTurns: 10 });
  });
});

describe('the climb family (F4, round 4)', () => {
  const climb = (L: number, D = 0): Level => ({ family: 4, L, A: 3, D });
  it('every rung passes the checker; one fixed code, each length its prefix; the intro never says the length', async () => {
    expect(CLIMB_CODE).toMatch(/^[0-4]{16}$/);
    const intros = new Set<string>();
    for (const D of [0, 1])
      for (let L = 0; L <= 14; L++) {
        const l = climb(L, D);
        const v = levelValues(l);
        expect(v.length).toBe(L + 2);
        const report = await checkEnv(sandbox, levelCode(l), { maxTurns: v.maxTurns });
        expect(report.ok, describeLevel(l)).toBe(true);
        expect(hintText(l)).toBe(`code ${CLIMB_CODE.slice(0, L + 2)}`);
        const env = await sandbox.load(levelCode(l), v.maxTurns);
        // the oracle reads the hint and wins; the unhinted first observation is the same at every length
        const won = await play(env.id, 7 + L, v.maxTurns, hintText(l), (m) => oracleReply(m, HINT_PREFIX));
        expect(won.ret, describeLevel(l)).toBe(1);
        const first = await play(env.id, 7, v.maxTurns, null, () => '9');
        if (D === 0) intros.add(first.obs0);
        await sandbox.dispose(env.id);
      }
    expect([...intros]).toEqual(['Climb, 0-4, same code every time. Digit a?']);
  });

  it('ends an episode as soon as the code can no longer be entered (two slips), and forgives one', async () => {
    const l = climb(14);
    const env = await sandbox.load(levelCode(l), levelValues(l).maxTurns);
    await sandbox.reset(env.id, 1);
    expect((await sandbox.step(env.id, '9')).slice(1, 4)).toEqual([0, false, false]); // one slip: 16 left in 16 turns
    expect((await sandbox.step(env.id, '9')).slice(1, 4)).toEqual([0, false, true]); // two: truncated at once
    // one slip anywhere still wins: 17 turns for 16 digits
    await sandbox.reset(env.id, 2);
    let last: unknown[] = [];
    for (const a of ['9', ...CLIMB_CODE]) last = await sandbox.step(env.id, a);
    expect(last.slice(1, 3)).toEqual([1, true]);
    // the lock family keeps playing out its turns (its recorded runs had no early end)
    const lock = { family: 2, L: 7, A: 3, D: 0 };
    const lockEnv = await sandbox.load(levelCode(lock), levelValues(lock).maxTurns);
    await sandbox.reset(lockEnv.id, 1);
    await sandbox.step(lockEnv.id, '9');
    expect((await sandbox.step(lockEnv.id, '9'))[3]).toBe(false);
    await sandbox.dispose(env.id);
    await sandbox.dispose(lockEnv.id);
  });
});

describe('Lab level descriptions', () => {
  it('parses the long and the short form', () => {
    expect(parseLevel('F2 L3 A1 D0')).toEqual({ ok: true, level: { family: 2, L: 3, A: 1, D: 0 }, clamped: false });
    expect(parseLevel('f1l2a3d1')).toEqual({ ok: true, level: { family: 1, L: 2, A: 3, D: 1 }, clamped: false });
    expect(parseLevel('F0 D2 A1 L3')).toEqual({ ok: true, level: { family: 0, L: 3, A: 1, D: 2 }, clamped: false });
    expect(parseLevel('2310')).toEqual({ ok: true, level: { family: 2, L: 3, A: 1, D: 0 }, clamped: false });
    expect(parseLevel(' 3 0 0 1 9')).toEqual({ ok: true, level: { family: 3, L: 0, A: 0, D: 1 }, clamped: false });
    for (const l of allLevels()) expect(parseLevel(describeLevel(l))).toEqual({ ok: true, level: l, clamped: false });
  });

  it('clamps knob digits above 3 and refuses what is not a level', () => {
    expect(parseLevel('F1 L7 A4 D9')).toEqual({ ok: true, level: { family: 1, L: 3, A: 3, D: 3 }, clamped: true });
    expect(parseLevel('0509')).toEqual({ ok: true, level: { family: 0, L: 3, A: 0, D: 3 }, clamped: true });
    for (const bad of ['', '123', 'hello', 'F2 L1 A3', '7000', 'F9 L0 A0 D0']) {
      const p = parseLevel(bad);
      expect(p.ok, bad).toBe(false);
      if (!p.ok) expect(p.reason.length).toBeGreaterThan(10);
    }
  });
});
