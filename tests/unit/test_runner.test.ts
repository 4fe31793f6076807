// The `npm test` runner's counting (scripts/test.js): its closing line must not read "0 failed" when a
// tier failed — a test file that throws at import, a failing typecheck/lint/build, a crashed tier —
// and it names the tiers it did not run after a stop. The fixture report is real vitest 4 output
// (tests/fixtures/runner/), trimmed of timings and stack frames: one file whose tests pass, fail, skip
// and todo, and one file that throws at import.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { countReport, runsOf, STEPS, tallyTiers } from '../../scripts/test.js';

const REPORT = JSON.parse(
  readFileSync(new URL('../fixtures/runner/vitest_report_throws_at_import.json', import.meta.url), 'utf8'),
);
const THROWS = 'tests/unit/throws_at_import.test.mjs';
/** The same report with only the file that throws at import (all other counts zero, as vitest writes them). */
const ONLY_THROWS = {
  ...REPORT,
  numPassedTests: 0,
  numFailedTests: 0,
  numPendingTests: 0,
  numTodoTests: 0,
  testResults: REPORT.testResults.filter((f: { name: string }) => f.name === THROWS),
};
const GREEN = { numPassedTests: 5, numFailedTests: 0, numPendingTests: 1, numTodoTests: 0, testResults: [] };

describe('npm test counting', () => {
  it('counts a test file that throws at import as a failure', () => {
    expect(REPORT.testResults.find((f: { name: string }) => f.name === THROWS)).toMatchObject({
      status: 'failed',
      assertionResults: [],
      message: 'boom at import',
    });
    expect(countReport(REPORT)).toEqual({ passed: 1, failed: 2, skipped: 2, brokenFiles: [THROWS] });
    const t = tallyTiers([{ name: 'unit', status: 1, secs: 1.5, report: ONLY_THROWS }]);
    expect(t.closing).toBe('0 passed, 1 failed, 0 skipped');
    expect(t.exitCode).toBe(1);
    expect(t.rows[0]).toMatch(/^unit +FAIL +1\.5 s {2}0 passed, 1 failed, 0 skipped \(1 file\(s\) failed to run\)$/);
  });

  it('counts a failed tier without a report, or exiting non-zero with no failed test, once', () => {
    const t = tallyTiers([
      { name: 'typecheck', status: 0, secs: 1, report: null },
      { name: 'unit', status: 0, secs: 2, report: GREEN },
      { name: 'gpu', status: 1, secs: 3, report: GREEN }, // e.g. an unhandled error after the tests
    ]);
    expect(t.closing).toBe('10 passed, 1 failed, 2 skipped');
    expect(t.rows[2]).toContain('+ the tier exited non-zero');
    const lint = tallyTiers([{ name: 'check', status: 1, secs: 1, report: null }]);
    expect(lint.closing).toBe('0 passed, 1 failed, 0 skipped');
    expect(lint.rows[0]).toMatch(/check +FAIL .* exit 1$/);
    const killed = tallyTiers([{ name: 'e2e', status: null, secs: 1, report: null }]);
    expect(killed.failed).toBe(1);
  });

  it('does not add a tier failure on top of counted failed tests', () => {
    const t = tallyTiers([{ name: 'unit', status: 1, secs: 1, report: { ...GREEN, numFailedTests: 2 } }]);
    expect(t.closing).toBe('5 passed, 2 failed, 1 skipped');
  });

  it('names the tiers not run after a stop, and exits 0 only when nothing failed', () => {
    const planned = STEPS.map((s) => s.name);
    expect(planned.slice(0, 3)).toEqual(['typecheck', 'check', 'unit']); // lint runs in npm test
    const t = tallyTiers(
      [
        { name: 'typecheck', status: 0, secs: 1, report: null },
        { name: 'check', status: 1, secs: 1, report: null },
      ],
      planned,
    );
    expect(t.notRun).toEqual(['unit', 'gpu', 'build', 'e2e']);
    const ok = tallyTiers([{ name: 'unit', status: 0, secs: 1, report: GREEN }], ['unit']);
    expect(ok).toMatchObject({ closing: '5 passed, 0 failed, 1 skipped', exitCode: 0, notRun: [] });
  });

  it('starts typecheck and check together and every other tier alone, in order', () => {
    const names = (planned: typeof STEPS) => runsOf(planned).map((run) => run.map((s) => s.name));
    expect(names(STEPS)).toEqual([['typecheck', 'check'], ['unit'], ['gpu'], ['build'], ['e2e']]);
    const pick = (...n: string[]) => STEPS.filter((s) => n.includes(s.name));
    expect(names(pick('check', 'unit'))).toEqual([['check'], ['unit']]);
    expect(names(pick('typecheck', 'build', 'e2e'))).toEqual([['typecheck'], ['build'], ['e2e']]);
  });
});
