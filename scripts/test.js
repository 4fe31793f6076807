#!/usr/bin/env node
// `npm test`: every tier in order — typecheck, unit, gpu, build, e2e — with the
// time each takes, and one closing line "N passed, N failed" over all tiers.
// Stops at the first failing tier. Reports land in test-results/.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';

mkdirSync('test-results', { recursive: true });
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
const steps = [
  { name: 'typecheck', cmd: ['npm', ['run', '--silent', 'typecheck']] },
  { name: 'unit', cmd: vitest('unit'), report: 'test-results/unit.json' },
  { name: 'gpu', cmd: vitest('gpu'), report: 'test-results/gpu.json' },
  { name: 'build', cmd: ['npm', ['run', '--silent', 'build', '--', '--logLevel', 'warn']] },
  { name: 'e2e', cmd: vitest('e2e'), report: 'test-results/e2e.json' },
];
const only = process.argv.slice(2);
let passed = 0,
  failed = 0,
  skipped = 0;
const rows = [];
for (const step of steps) {
  if (only.length && !only.includes(step.name)) continue;
  console.log(`\n── ${step.name} ──`);
  if (step.report) rmSync(step.report, { force: true }); // never count an earlier run's report
  const t0 = performance.now();
  const r = spawnSync(step.cmd[0], step.cmd[1], { stdio: 'inherit' });
  const secs = (performance.now() - t0) / 1000;
  let counts = '';
  if (step.report && existsSync(step.report)) {
    const j = JSON.parse(readFileSync(step.report, 'utf8'));
    passed += j.numPassedTests;
    failed += j.numFailedTests;
    skipped += j.numPendingTests + (j.numTodoTests ?? 0);
    counts = `${j.numPassedTests} passed, ${j.numFailedTests} failed, ${j.numPendingTests} skipped`;
  }
  rows.push(`${step.name.padEnd(10)} ${r.status === 0 ? 'ok  ' : 'FAIL'} ${secs.toFixed(1).padStart(6)} s  ${counts}`);
  if (r.status !== 0) {
    if (!step.report) failed += 1;
    break;
  }
}
console.log('\n── summary ──');
for (const row of rows) console.log(row);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || rows.some((r) => r.includes('FAIL')) ? 1 : 0);
