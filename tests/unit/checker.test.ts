// The checker against the BROKEN catalogue (src/core/env/broken.ts): each broken lock game fails
// exactly the check it was written for, with that check's message, after every earlier check passed;
// the unbroken lock passes them all.
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
