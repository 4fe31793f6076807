// scripts/lab_measured.js: a pre-registration's combined output into the file the Lab panel loads
// (src/core/lab/measured_prereg{4,5}.json, state/lab.svelte.ts loadPrereg) — the runs exactly as printed,
// the seeds as a range, the settings kept; a wrong input is refused with what to give instead.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareRuns, ROUND4_ARMS, ROUND4_SPEC, type SeedRun } from '../../src/core/lab/compare.ts';
import { measuredEntry, PREREGS } from '../../scripts/lab_measured.js';
import { loadPrereg } from '../../src/state/lab.svelte.ts';

const run = (seed: number, designer: string, g: number): SeedRun => ({
  seed,
  designer,
  curve: [0, 0.5, 0.5],
  hardCurve: [0, g, g],
  medianRegret: [0.5, 0.5],
  distinctLevels: [3, 4],
  stepsCurve: [0, 5, 10],
  plays: 64,
  seconds: 1,
});

describe('scripts/lab_measured.js', () => {
  const runs = [71, 72, 73].flatMap((seed) => ROUND4_ARMS.map((a, i) => run(seed, a, i / 10 + seed / 1000)));
  const settings = { space: 'climb', cycles: 2, probePlays: 32 };
  const output = [
    `settings ${JSON.stringify(settings)}`,
    JSON.stringify({
      space: 'climb',
      cycles: 2,
      screenedOut: [],
      screens: [{ seed: 71, wins: 5, plays: 64 }],
      settings,
      runs,
    }),
  ].join('\n');

  it('keeps the runs as printed, the seeds as a range and the settings; the comparison reads it as the command did', () => {
    const m = measuredEntry(output);
    expect(m.runs).toEqual(runs);
    expect(m.seeds).toBe('71–73');
    expect(m.settings).toEqual(settings);
    expect(m.screens).toEqual([{ seed: 71, wins: 5, plays: 64 }]);
    expect(m.space).toBe('climb');
    const a = compareRuns(m.runs, 0, ROUND4_SPEC);
    expect(a.seeds).toEqual([71, 72, 73]);
    expect(a.gain.gated!.perSeed).toEqual(compareRuns(runs, 0, ROUND4_SPEC).gain.gated!.perSeed);
  });

  it('counts a seed the screen left out among the held-out seeds', () => {
    const kept = runs.filter((r) => r.seed !== 72);
    const m = measuredEntry(JSON.stringify({ space: 'climb', cycles: 2, screenedOut: [72], runs: kept }));
    expect(m.seeds).toBe('71–73');
    expect(m.screenedOut).toEqual([72]);
    expect(measuredEntry(JSON.stringify({ space: 'climb', cycles: 2, runs: kept })).seeds).toBe('71, 73');
  });

  it('refuses output that is not a climb comparison, saying what to give', () => {
    expect(() => measuredEntry('seed 71 …\nnot json')).toThrow(/spade lab compare --combine … --json/);
    expect(() => measuredEntry(JSON.stringify({ space: 'chain', runs }))).toThrow(/not the climb/);
    expect(() => measuredEntry(JSON.stringify({ space: 'climb', runs: [] }))).toThrow(/no runs/);
  });

  it('writes the file the panel loads (run as a command), named and labelled by its pre-registration', () => {
    expect(PREREGS[4].out).toBe('src/core/lab/measured_prereg4.json');
    expect(PREREGS[5].out).toBe('src/core/lab/measured_prereg5.json');
    expect(PREREGS[5].command).toMatch(/--prereg 5 --seeds 101-105/);
    const dir = mkdtempSync(join(tmpdir(), 'lab-measured-'));
    writeFileSync(join(dir, 'combined.txt'), output);
    const out = join(dir, 'm.json');
    const said = execFileSync('node', ['scripts/lab_measured.js', join(dir, 'combined.txt'), '--out', out], {
      encoding: 'utf8',
    });
    expect(said).toMatch(/21 runs, seeds 71–73, 2 cycles/);
    expect((JSON.parse(readFileSync(out, 'utf8')) as { runs: SeedRun[] }).runs).toHaveLength(21);
    const out5 = join(dir, 'm5.json');
    execFileSync('node', ['scripts/lab_measured.js', join(dir, 'combined.txt'), '--prereg', '5', '--out', out5]);
    expect((JSON.parse(readFileSync(out5, 'utf8')) as { command: string }).command).toBe(PREREGS[5].command);
    expect(() =>
      execFileSync('node', ['scripts/lab_measured.js', join(dir, 'combined.txt'), '--prereg', '3'], { stdio: 'pipe' }),
    ).toThrow(/--prereg 4\|5/);
  });
});

describe("the Lab panel's loader", () => {
  it.each([4, 5] as const)(
    'loads pre-registration %i from the file the script writes when it is there, and is null while it is not',
    async (n) => {
      const m = await loadPrereg(n);
      if (existsSync(PREREGS[n].out)) {
        expect(m!.space).toBe('climb');
        expect(m!.runs.length).toBeGreaterThan(0);
        expect(m!.command).toMatch(/^spade lab compare --space climb/);
      } else expect(m).toBeNull();
    },
  );
});
