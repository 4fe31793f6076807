#!/usr/bin/env node
// `npm run mutants`: each curated mutant of scripts/mutants.list.js — one exact snippet of one file
// replaced by a realistic mistake — must make the test file(s) it names fail. The working tree
// (tracked and untracked, not ignored) is first copied once to a temporary snapshot, so every run
// below sees the same code even while the tree is being edited; for each mutant the snapshot is
// copied again with node_modules linked in, the snippet is replaced there (the working tree itself
// is never touched) and vitest runs the named files. Verdicts: caught (the tests failed, or ran past the time limit),
// SURVIVED (they passed), stale (the snippet does not occur exactly once: the code moved on and the
// mutant needs rewriting). First a baseline runs every named file on an unmutated copy: a mutant
// whose tests already fail there is reported as `baseline` — a failure that proves nothing.
// Only `caught` counts as caught; the exit code is 0 only when every mutant is caught.
//
// Usage: node scripts/mutants.js [--json] [--jobs N] [--only ID,ID] [--no-baseline]
//   --json         the last line is {"mutants": N, "caught": K}
//   --jobs N       mutants run at once (default 2, or MUTANTS_JOBS)
//   --only IDS     run only these mutants (comma-separated ids)
//   --no-baseline  skip the unmutated run
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MUTANTS } from './mutants.list.js';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
/** Ignored folders the tests read, linked (not copied) into each copy when present. */
const LINKS = ['node_modules', 'public/corpus'];
/** Seconds one vitest run may take before it is stopped (a hang counts as caught). */
const TIMEOUT_S = 600;

/** The test files a mutant names, as a list. */
export const testsOf = (m) => (Array.isArray(m.test) ? m.test : [m.test]);

/** The vitest project of a test file: its folder under tests/ (unit, gpu, e2e). */
export const projectOf = (file) => {
  const m = /^tests\/(unit|gpu|e2e)\//.exec(file);
  if (!m) throw new Error(`mutants: test file ${file} is not under tests/unit, tests/gpu or tests/e2e`);
  return m[1];
};

/**
 * The source with the mutant applied, or the reason it cannot be: its `find` must occur exactly once.
 * @returns {{ ok: true, text: string } | { ok: false, reason: string }}
 */
export function applyMutant(source, m) {
  const first = source.indexOf(m.find);
  if (first < 0) return { ok: false, reason: `snippet not found in ${m.file}` };
  if (source.indexOf(m.find, first + 1) >= 0)
    return { ok: false, reason: `snippet occurs more than once in ${m.file}` };
  return { ok: true, text: source.slice(0, first) + m.replace + source.slice(first + m.find.length) };
}

/** Mistakes in the list itself: a missing field, a duplicate id, a test file that does not exist. */
export function listProblems(mutants, root = ROOT) {
  const problems = [];
  const seen = new Set();
  for (const m of mutants) {
    for (const k of ['id', 'file', 'find', 'test', 'why'])
      if (m[k] === undefined || m[k] === '') problems.push(`${m.id ?? '?'}: no ${k}`);
    if (typeof m.replace !== 'string') problems.push(`${m.id ?? '?'}: replace must be a string (it may be empty)`);
    if (seen.has(m.id)) problems.push(`${m.id}: the id is used twice`);
    seen.add(m.id);
    if (m.find === m.replace) problems.push(`${m.id}: replace equals find`);
    for (const t of testsOf(m)) {
      if (!existsSync(join(root, t))) problems.push(`${m.id}: test file ${t} does not exist`);
      else projectOf(t);
    }
  }
  return problems;
}

/** Tracked and untracked-but-not-ignored files of the working tree (what a copy holds). */
function treeFiles() {
  const r = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`git ls-files failed: ${r.stderr}`);
  // plain files only: a linked folder (node_modules as a symlink in a worktree) is linked in, not copied
  return r.stdout
    .split('\0')
    .filter((f) => f && !LINKS.includes(f) && existsSync(join(ROOT, f)) && statSync(join(ROOT, f)).isFile());
}

/** Temporary folders made by this run, removed when it ends or is interrupted. */
const made = new Set();
/** Process groups of the vitest runs in flight, stopped when the run is interrupted. */
const running = new Set();

function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  made.delete(dir);
}

/** A copy of `files` from `from` in a new temporary folder; with `links`, LINKS linked in from the working tree. */
function copyTree(from, files, label, links = true) {
  const dir = mkdtempSync(join(tmpdir(), `spade-mutant-${label}-`));
  made.add(dir);
  for (const f of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(from, f), join(dir, f));
  }
  for (const l of links ? LINKS : []) {
    if (!existsSync(join(ROOT, l))) continue;
    mkdirSync(dirname(join(dir, l)), { recursive: true });
    symlinkSync(join(ROOT, l), join(dir, l), 'dir');
  }
  return dir;
}

/**
 * Runs vitest on `files` (one project) in `dir`. Resolves with the exit status (null when stopped
 * at the time limit), the seconds taken and the tail of the output.
 */
function runVitest(dir, project, files, extra = []) {
  return new Promise((done) => {
    const t0 = performance.now();
    const bin = join(dir, 'node_modules', 'vitest', 'vitest.mjs');
    const child = spawn(process.execPath, [bin, 'run', '--project', project, ...extra, ...files], {
      cwd: dir,
      detached: true,
      env: { ...process.env, CI: process.env.CI ?? '', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child.pid);
    let out = '';
    const keep = (b) => (out = (out + b.toString()).slice(-4000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, TIMEOUT_S * 1000);
    child.on('close', (status) => {
      clearTimeout(timer);
      running.delete(child.pid);
      done({ status: timedOut ? null : status, secs: (performance.now() - t0) / 1000, out });
    });
  });
}

/** Runs tasks with at most `jobs` at once, keeping their order in the results. */
async function pool(items, jobs, task) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await task(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, worker));
  return results;
}

/** Test files (of all mutants) that fail on an unmutated copy, with why. */
async function baseline(snap, files, mutants) {
  const named = [...new Set(mutants.flatMap(testsOf))];
  const dir = copyTree(snap, files, 'baseline');
  const failing = new Map();
  try {
    for (const project of [...new Set(named.map(projectOf))]) {
      const mine = named.filter((t) => projectOf(t) === project);
      const report = join(dir, `baseline-${project}.json`);
      const r = await runVitest(dir, project, mine, ['--reporter=json', `--outputFile=${report}`]);
      let results = [];
      try {
        results = JSON.parse(readFileSync(report, 'utf8')).testResults ?? [];
      } catch {
        for (const t of mine) failing.set(t, `vitest exited ${r.status} with no report`);
      }
      for (const f of results)
        if (f.status !== 'passed') failing.set(f.name.slice(dir.length + 1), `${f.status} on the unmutated tree`);
      console.log(`baseline ${project}: ${mine.length} file(s) in ${r.secs.toFixed(1)} s`);
    }
  } finally {
    removeDir(dir);
  }
  return failing;
}

async function runMutant(snap, files, m) {
  const tests = testsOf(m);
  const source = existsSync(join(snap, m.file)) ? readFileSync(join(snap, m.file), 'utf8') : '';
  const applied = applyMutant(source, m);
  if (!applied.ok) return { verdict: 'stale', secs: 0, detail: applied.reason };
  const dir = copyTree(snap, files, m.id.replace(/[^\w-]/g, '_'));
  try {
    writeFileSync(join(dir, m.file), applied.text);
    let secs = 0;
    for (const project of [...new Set(tests.map(projectOf))]) {
      const r = await runVitest(
        dir,
        project,
        tests.filter((t) => projectOf(t) === project),
        ['--reporter=dot', '--bail=1'],
      );
      secs += r.secs;
      if (r.status === null) return { verdict: 'caught', secs, detail: `ran past ${TIMEOUT_S} s` };
      if (r.status !== 0) return { verdict: 'caught', secs, detail: '' };
    }
    return { verdict: 'SURVIVED', secs, detail: '' };
  } finally {
    removeDir(dir);
  }
}

function parseArgs(argv) {
  const opts = { json: false, jobs: Number(process.env.MUTANTS_JOBS ?? 2), only: null, baseline: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a === '--no-baseline') opts.baseline = false;
    else if (a === '--jobs') opts.jobs = Number(argv[++i]);
    else if (a === '--only') opts.only = String(argv[++i] ?? '').split(',');
    else throw new Error(`mutants: unknown argument ${a}; see the usage at the top of scripts/mutants.js`);
  }
  if (!(Number.isInteger(opts.jobs) && opts.jobs >= 1)) throw new Error('mutants: --jobs must be a whole number ≥ 1');
  return opts;
}

async function main(argv) {
  const opts = parseArgs(argv);
  const problems = listProblems(MUTANTS);
  if (problems.length) {
    console.error(`scripts/mutants.list.js has mistakes:\n  ${problems.join('\n  ')}`);
    return 2;
  }
  const chosen = opts.only ? MUTANTS.filter((m) => opts.only.includes(m.id)) : MUTANTS;
  if (opts.only && chosen.length !== opts.only.length) {
    console.error(`mutants: unknown id(s): ${opts.only.filter((id) => !MUTANTS.some((m) => m.id === id)).join(', ')}`);
    return 2;
  }
  const t0 = performance.now();
  const files = treeFiles();
  const snap = copyTree(ROOT, files, 'snapshot', false);
  let results;
  try {
    results = await runAll(snap, files, chosen, opts);
  } finally {
    removeDir(snap);
  }
  const caught = results.filter((r) => r.verdict === 'caught').length;
  const missed = results.filter((r) => r.verdict !== 'caught');
  console.log(`\n${caught} of ${results.length} mutants caught in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  for (const r of missed) console.log(`  ${r.verdict} ${r.m.id} (${r.m.file}): ${r.m.why}`);
  if (opts.json) console.log(JSON.stringify({ mutants: results.length, caught }));
  return caught === results.length ? 0 : 1;
}

/** The baseline, then every chosen mutant (at most opts.jobs at once), each printed as it ends. */
async function runAll(snap, files, chosen, opts) {
  const broken = opts.baseline ? await baseline(snap, files, chosen) : new Map();
  return pool(chosen, opts.jobs, async (m) => {
    const bad = testsOf(m).filter((t) => broken.has(t));
    const r = bad.length
      ? { verdict: 'baseline', secs: 0, detail: bad.map((t) => `${t}: ${broken.get(t)}`).join('; ') }
      : await runMutant(snap, files, m);
    const tail = r.detail ? `  (${r.detail})` : '';
    console.log(
      `${r.verdict.padEnd(8)} ${m.id.padEnd(38)} ${r.secs.toFixed(1).padStart(6)} s  ${testsOf(m).join(' ')}${tail}`,
    );
    return { m, ...r };
  });
}

/** Ctrl-C: stop the vitest runs in flight and remove the temporary folders. */
function onInterrupt() {
  for (const pid of running)
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  process.exit(130);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.on('SIGINT', onInterrupt);
  process.on('SIGTERM', onInterrupt);
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err.message);
      process.exit(2);
    },
  );
}
