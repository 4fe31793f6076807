#!/usr/bin/env node
// `npm test`: every tier in order — typecheck, check (eslint + prettier + knip), unit, gpu, build, e2e —
// with the time each takes, and one closing line "N passed, N failed, N skipped" over all tiers.
// Stops at the first failing tier and names the tiers it did not run. Reports land in test-results/.
// A tier marked `withPrevious` starts together with the one before it (typecheck and check: each is a
// chain of single-threaded tools, so on two cores the pair takes about as long as the longer one); its
// output is held and printed when it ends, and a failure in either stops the run after both.
//
// Counting (tallyTiers, pure and exported for tests/unit/test_runner.test.ts): a vitest tier adds its
// report's tests; a test file that failed with no failed test inside (it threw at import, or a hook
// failed) counts as one failure; a tier that exits non-zero without any counted failure (typecheck,
// lint, build, a crashed vitest, an unhandled error) counts as one failure. So the closing line never
// reads "0 failed" when the exit code is 1.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const vitest = (project) => [
  'npx',
  [
    'vitest',
    'run',
    '--project',
    project,
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=test-results/${project}.json`,
  ],
];

/** The tiers of `npm test`, in order. */
export const STEPS = [
  { name: 'typecheck', cmd: ['npm', ['run', '--silent', 'typecheck']] },
  { name: 'check', cmd: ['npm', ['run', '--silent', 'check']], withPrevious: true },
  { name: 'unit', cmd: vitest('unit'), report: 'test-results/unit.json' },
  { name: 'gpu', cmd: vitest('gpu'), report: 'test-results/gpu.json' },
  { name: 'build', cmd: ['npm', ['run', '--silent', 'build', '--', '--logLevel', 'warn']] },
  { name: 'e2e', cmd: vitest('e2e'), report: 'test-results/e2e.json' },
];

/**
 * Counts of one vitest JSON report: its tests, plus one failure per test file that failed without a
 * failed test (a file that throws at import has status "failed" and no assertion results).
 * @param {any} report parsed `--reporter=json` output
 * @returns {{ passed: number, failed: number, skipped: number, brokenFiles: string[] }}
 */
export function countReport(report) {
  const brokenFiles = [];
  for (const file of report.testResults ?? []) {
    const failedInside = (file.assertionResults ?? []).some((a) => a.status === 'failed');
    if (file.status === 'failed' && !failedInside) brokenFiles.push(String(file.name));
  }
  return {
    passed: report.numPassedTests ?? 0,
    failed: (report.numFailedTests ?? 0) + brokenFiles.length,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
    brokenFiles,
  };
}

/**
 * The summary of a run. `results` holds one entry per tier that ran, in order: its exit status
 * (null when killed by a signal), its seconds, and its parsed report (null when it has none or wrote
 * none). `planned` names every tier selected for this run, so the ones after a stop are listed.
 * @param {{ name: string, status: number | null, secs: number, report: any }[]} results
 * @param {string[]} planned
 * @returns {{ passed: number, failed: number, skipped: number, rows: string[], notRun: string[],
 *   closing: string, exitCode: number }}
 */
export function tallyTiers(results, planned = results.map((r) => r.name)) {
  let passed = 0,
    failed = 0,
    skipped = 0;
  const rows = [];
  for (const r of results) {
    const ok = r.status === 0;
    let counts = '';
    let tierFailed = 0;
    if (r.report) {
      const c = countReport(r.report);
      passed += c.passed;
      skipped += c.skipped;
      tierFailed = c.failed;
      counts = `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`;
      if (c.brokenFiles.length) counts += ` (${c.brokenFiles.length} file(s) failed to run)`;
    }
    if (!ok && tierFailed === 0) {
      tierFailed = 1; // the tier itself failed: a type error, a lint error, a crash
      counts += counts ? ' + the tier exited non-zero' : `exit ${r.status ?? 'by signal'}`;
    }
    failed += tierFailed;
    rows.push(`${r.name.padEnd(10)} ${ok ? 'ok  ' : 'FAIL'} ${r.secs.toFixed(1).padStart(6)} s  ${counts}`);
  }
  const ran = new Set(results.map((r) => r.name));
  const notRun = planned.filter((n) => !ran.has(n));
  const closing = `${passed} passed, ${failed} failed, ${skipped} skipped`;
  return { passed, failed, skipped, rows, notRun, closing, exitCode: failed > 0 ? 1 : 0 };
}

/**
 * Runs one tier's command; resolves with its exit status (null when killed by a signal) and seconds.
 * `held`: its output is collected and printed in one piece when it ends (a tier running beside another).
 */
function runStep(step, held) {
  if (step.report) rmSync(step.report, { force: true }); // never count an earlier run's report
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(step.cmd[0], step.cmd[1], { stdio: held ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    const out = [];
    child.stdout?.on('data', (d) => out.push(d));
    child.stderr?.on('data', (d) => out.push(d));
    const done = (status) => {
      if (held) {
        console.log(`\n── ${step.name} (output) ──`);
        process.stdout.write(Buffer.concat(out));
      }
      resolve({ status, secs: (performance.now() - t0) / 1000 });
    };
    child.on('error', (err) => {
      out.push(Buffer.from(`${err.message}\n`));
      done(1);
    });
    child.on('close', (code) => done(code));
  });
}

/** The planned tiers in runs: a tier with `withPrevious` joins the run of the tier before it. */
export function runsOf(planned) {
  const runs = [];
  for (const s of planned) {
    if (s.withPrevious && runs.length && planned.includes(STEPS[STEPS.indexOf(s) - 1])) runs.at(-1).push(s);
    else runs.push([s]);
  }
  return runs;
}

async function main(argv) {
  mkdirSync('test-results', { recursive: true });
  const planned = STEPS.filter((s) => argv.length === 0 || argv.includes(s.name));
  const unknown = argv.filter((a) => !STEPS.some((s) => s.name === a));
  if (unknown.length) {
    console.error(`unknown tier(s): ${unknown.join(', ')}; tiers are ${STEPS.map((s) => s.name).join(', ')}`);
    return 2;
  }
  const results = [];
  for (const run of runsOf(planned)) {
    console.log(`\n── ${run.map((s) => s.name).join(' + ')} ──`);
    const ended = await Promise.all(run.map((step, i) => runStep(step, i > 0)));
    run.forEach((step, i) => {
      let report = null;
      if (step.report && existsSync(step.report)) {
        try {
          report = JSON.parse(readFileSync(step.report, 'utf8'));
        } catch (err) {
          console.error(`could not read ${step.report}: ${err.message}`);
        }
      }
      results.push({ name: step.name, status: ended[i].status, secs: ended[i].secs, report });
    });
    if (ended.some((e) => e.status !== 0)) break;
  }
  const t = tallyTiers(
    results,
    planned.map((s) => s.name),
  );
  console.log('\n── summary ──');
  for (const row of t.rows) console.log(row);
  if (t.notRun.length) console.log(`not run after the failure: ${t.notRun.join(', ')}`);
  console.log(t.closing);
  return t.exitCode;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  process.exit(await main(process.argv.slice(2)));
