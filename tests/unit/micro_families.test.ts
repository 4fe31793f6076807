// The micro lab's environment families (src/core/micro/families.ts) and level descriptions
// (levels.ts): every level of the knob grid passes the checker in the in-process QuickJS sandbox and
// its solution() wins; the hint is the code; difficulty follows the knobs; the parser clamps and refuses.
import { describe, expect, it } from 'vitest';
import { checkEnv } from '../../src/core/env/checker.ts';
import {
  allLevels,
  describeLevel,
  difficulty,
  FAMILIES,
  hintText,
  levelCode,
  levelValues,
} from '../../src/core/micro/families.ts';
import { parseLevel } from '../../src/core/micro/levels.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';

const sandbox = createSandboxWorkerApi();

describe('micro families', () => {
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

  it('plays as documented: hint = code, wrong digits cost a turn, digits count modulo A, truncation after L + 2', async () => {
    const l = { family: 3, L: 1, A: 1, D: 2 }; // vault, 3 digits, alphabet 3, 2 distractors
    const env = await sandbox.load(levelCode(l), 12);
    const [obs] = await sandbox.reset(env.id, 7);
    expect(obs).toMatch(/^Vault 3 digits, 0-2, new code each time\. Digit 1\? \[\d \d\]$/);
    const sol = await sandbox.solution(env.id);
    expect(sol).toHaveLength(3);
    const code = sol.map((a) => Number(/\d/.exec(a)![0]));
    expect(hintText(sol)).toBe(`code ${code.join('')}`);
    // a wrong digit: "no.", same position; then the right one written as digit + 3 (mod 3) and boxed
    const wrong = (code[0]! + 1) % 3;
    expect((await sandbox.step(env.id, String(wrong)))[0]).toMatch(/^no\. Digit 1\?/);
    expect((await sandbox.step(env.id, `\\boxed{${code[0]! + 3}}`))[0]).toMatch(/^ok\. Digit 2\?/);
    expect((await sandbox.step(env.id, 'no digit here'))[1]).toBe(0);
    const r4 = await sandbox.step(env.id, String(code[1]));
    expect(r4.slice(1, 4)).toEqual([0, false, false]);
    const r5 = await sandbox.step(env.id, String((code[2]! + 1) % 3)); // 5th reply = 3 + 2: out of turns
    expect(r5.slice(1, 4)).toEqual([0, false, true]);
    // the lock's code does not depend on the seed; echo shows the digit to type; mirror shows its mirror
    const lock = await sandbox.load(levelCode({ family: 2, L: 2, A: 3, D: 0 }), 12);
    await sandbox.reset(lock.id, 1);
    const s1 = await sandbox.solution(lock.id);
    await sandbox.reset(lock.id, 99);
    expect(await sandbox.solution(lock.id)).toEqual(s1);
    const echo = await sandbox.load(levelCode({ family: 0, L: 0, A: 3, D: 0 }), 12);
    const [eo] = await sandbox.reset(echo.id, 3);
    expect(eo).toBe(`Echo 2 digits, 0-9. Type ${/\d/.exec((await sandbox.solution(echo.id))[0]!)![0]}`);
    const mirror = await sandbox.load(levelCode({ family: 1, L: 0, A: 0, D: 0 }), 12);
    const [mo] = await sandbox.reset(mirror.id, 3);
    const first = Number(/\d/.exec((await sandbox.solution(mirror.id))[0]!)![0]);
    expect(mo).toBe(`Mirror 2 digits, 0-1: reply 1 minus the digit. Digit ${1 - first}`);
    for (const e of [env, lock, echo, mirror]) await sandbox.dispose(e.id);
  });

  it('difficulty is the mean knob level on [0, 1]', () => {
    expect(difficulty({ family: 0, L: 0, A: 0, D: 0 })).toBe(0);
    expect(difficulty({ family: 3, L: 3, A: 3, D: 3 })).toBe(1);
    expect(difficulty({ family: 1, L: 1, A: 2, D: 0 })).toBeCloseTo(1 / 3);
    expect(() => levelCode({ family: 4, L: 0, A: 0, D: 0 })).toThrow(RangeError);
    expect(() => levelCode({ family: 0, L: 4, A: 0, D: 0 })).toThrow(/knobs 0-3/);
  });
});

describe('micro level descriptions', () => {
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
