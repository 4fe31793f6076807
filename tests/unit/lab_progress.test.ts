// Progress and plain words of the Lab's long commands (#41): the comparison's sentence never claims a
// difference its own verdict calls not detectable (a tiny +0.01, with and without spread, and a clear
// win), `spade bench lab` speaks on stderr section by section while stdout holds only its JSON (with
// secondsPerCycle per path; the models stubbed, so the test takes no model time), and `spade lab
// compare` counts runs done of seeds × arms on stderr, its stdout under --json only the "settings"/"screen"/"run"
// lines and the last JSON object (a tiny real run: two arms, one seed, one cycle).
import { describe, expect, it } from 'vitest';
import { BENCH_LAB, benchLab, type LabBenchRun } from '../../src/cli/bench_lab.ts';
import { parseCommand, type Io } from '../../src/cli/args.ts';
import { main } from '../../src/cli/spade.ts';
import { compareRuns, type CompareSpec, type SeedRun } from '../../src/core/lab/compare.ts';

const run = (seed: number, designer: string, gain: number): SeedRun => ({
  seed,
  designer,
  curve: [0.1, null, 0.1 + gain, 0.1 + gain],
  medianRegret: [0.5],
  distinctLevels: [3],
  seconds: 1,
});

const SPEC: CompareSpec = {
  arms: ['learnability', 'frontier', 'random', 'fixed'],
  spade: 'learnability',
  baselines: ['random', 'fixed'],
  headroom: ['frontier', 'random'],
  mechanismInSuccess: false,
};

/** Every arm on every seed: the learned designer's gain per seed, frontier and fixed beside random's. */
const runs = (learned: readonly number[], random = 0.05) =>
  learned.flatMap((g, i) => [
    run(i + 1, 'learnability', g),
    run(i + 1, 'frontier', random + 0.01),
    run(i + 1, 'random', random),
    run(i + 1, 'fixed', 0),
  ]);

describe("lab compare's plain sentence", () => {
  it('says no difference was detected, with the numbers, for a tiny +0.01 the verdict calls not detectable', () => {
    // the case: two seeds, +0.01 on each (a zero-width interval: no spread, no evidence)
    const same = compareRuns(runs([0.06, 0.06]), 0.02, SPEC);
    // and a real interval that includes 0: +0.03 and −0.01
    const noisy = compareRuns(runs([0.08, 0.04]), 0.02, SPEC);
    for (const [r, numbers] of [
      [same, 'learnability − random +0.01 on every seed, no spread to judge it by'],
      [noisy, 'learnability − random +0.01 [-0.24, 0.26]'],
    ] as const) {
      expect(r.success).toBe(false);
      expect(r.verdict).toMatch(/^Not detectable at this budget \(2 seeds\)/);
      expect(r.comparisons['learnability-random']!.interval.mean).toBeCloseTo(0.01, 9);
      expect(r.sentence).not.toMatch(/helped|did worse/);
      expect(r.sentence).toContain(
        `The learned designer did not help more than random levels: no difference was detected (${numbers})`,
      );
      expect(r.sentence).toMatch(
        /^Even a scripted curriculum \(frontier\) did not clearly beat random levels \(\+0\.01[ ,]/,
      );
    }
    // one seed: no interval at all
    expect(compareRuns(runs([0.06]), 0.02, SPEC).sentence).toContain(
      'no difference was detected (learnability − random +0.01, one seed: no interval)',
    );
    // the same −0.01 on every seed is not "did worse" either; the same −0.25 on every seed is
    expect(compareRuns(runs([0.04, 0.04, 0.04]), 0.02, SPEC).sentence).toContain('no difference was detected');
    expect(compareRuns(runs([-0.2, -0.2, -0.2]), 0.02, SPEC).sentence).toMatch(/did worse than random levels/);
  });

  it('says "helped" for a clear win the verdict calls positive, and "a little" only above 0 with a real interval', () => {
    const clear = compareRuns(runs([0.35, 0.4, 0.38, 0.42, 0.37]), 0.02, SPEC);
    expect(clear.success).toBe(true);
    expect(clear.verdict).toMatch(/^Positive on 5 seeds/);
    expect(clear.sentence).toMatch(/The learned designer helped: its agent improved by \+0\.38 on the probe/);
    const little = compareRuns(runs([0.1, 0.11, 0.12, 0.1, 0.11]), 0.02, SPEC);
    expect(little.comparisons['learnability-random']!.interval.lo).toBeGreaterThan(0);
    expect(little.sentence).toMatch(
      /The learned designer did better than random levels, not by the pre-registered rule: .* — \+0\.06 \[0\.05, 0\.07\], short of the pre-registered margin of 0\.10 \(5 seeds\)\.$/,
    );
  });

  it('names the criterion a difference missed: a mean over the margin ahead on too few seeds misses the share', () => {
    // learned − random +0.30 on 7 seeds and 0 on 3 (round 4's second pilot, gated − random, had
    // this shape): mean +0.21, its interval above 0, ahead on 7 of 10 — the share, not the margin
    const gains = [0.35, 0.35, 0.05, 0.35, 0.35, 0.05, 0.35, 0.35, 0.05, 0.35];
    const r = compareRuns(runs(gains), 0.02, SPEC);
    const c = r.comparisons['learnability-random']!;
    expect(c.interval.mean).toBeGreaterThan(0.1);
    expect(c.interval.lo).toBeGreaterThan(0);
    expect(c.pass).toBe(false);
    expect(r.sentence).toContain('ahead on 7 of 10 seeds, short of the pre-registered 80%');
    expect(r.sentence).not.toContain('margin');
  });
});

/** An Io that keeps stdout and stderr apart. */
const captured = () => {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l) };
  return { io, out, err };
};

describe('spade bench lab: progress on stderr, only JSON on stdout', () => {
  // the models stubbed: a fast cycle 100 ms, a reference cycle 1.5 s, the same numbers on both
  const stub: LabBenchRun = async (path, n, hooks) => {
    hooks.onProbe();
    for (let c = 1; c <= n; c++) hooks.onCycle(c);
    return { wallMs: n * (path === 'fast' ? 100 : 1500), cpuMs: n * 90, report: 'the same numbers' };
  };

  it('names each section as it starts and ends, with the time left once both paths ran; --json prints one line', async () => {
    const { io, out, err } = captured();
    const args = parseCommand(BENCH_LAB, ['--cycles', '3', '--rounds', '2', '--json'], io)!;
    expect(await benchLab(io, args, stub)).toBe(0);
    expect(out).toHaveLength(1);
    const r = JSON.parse(out[0]!) as Record<string, Record<string, number>> & { sameNumbers: boolean };
    expect(r.sameNumbers).toBe(true);
    expect(r.fast).toMatchObject({ cycles: 6, secondsPerCycle: 0.1 });
    expect(r.reference).toMatchObject({ cycles: 6, secondsPerCycle: 1.5 });
    const starts = err.filter((l) => l.endsWith('…'));
    expect(starts).toEqual([
      'bench lab: warm-up fast, 3 cycles (untimed)…', // a warm-up as long as a round by default
      'bench lab: warm-up reference, 3 cycles (untimed)…',
      'bench lab: round 1/2 fast, 3 cycles…',
      'bench lab: round 1/2 reference, 3 cycles…',
      'bench lab: round 2/2 reference, 3 cycles…',
      'bench lab: round 2/2 fast, 3 cycles…',
    ]);
    // the cycles of a section counted as they finish, its end with its time
    expect(err).toContain(
      'round 1/2 reference: 3/3 cycles · 0 s · the cycles 4.5 s (0.3 s CPU) · about 5 s left in all',
    );
    expect(err.filter((l) => l.startsWith('round 2/2 fast: ') && / cycles · /.test(l))).toHaveLength(3);
    expect(err.find((l) => l.startsWith('warm-up fast: 3/3'))).not.toMatch(/left in all/); // the reference has not run
    expect(r.warmupCycles).toBe(3);
    expect(err.at(-1)).toMatch(/^bench lab: done in /);
  });

  it('--warmup W: each path warms up W cycles before the rounds, untimed', async () => {
    const { io, out, err } = captured();
    const args = parseCommand(BENCH_LAB, ['--cycles', '4', '--rounds', '1', '--warmup', '1', '--json'], io)!;
    expect(await benchLab(io, args, stub)).toBe(0);
    expect(err.filter((l) => l.startsWith('bench lab: warm-up'))).toEqual([
      'bench lab: warm-up fast, 1 cycle (untimed)…',
      'bench lab: warm-up reference, 1 cycle (untimed)…',
    ]);
    const r = JSON.parse(out[0]!) as { warmupCycles: number; fast: { cycles: number } };
    expect([r.warmupCycles, r.fast.cycles]).toEqual([1, 4]); // the warm-up's cycles are not timed
  });

  it('--space names the level space the runs use (the chain by default); an unknown one is a usage error', async () => {
    const spaces: string[] = [];
    const { io, out } = captured();
    const args = parseCommand(BENCH_LAB, ['--cycles', '1', '--rounds', '1', '--space', 'climb', '--json'], io)!;
    expect(await benchLab(io, args, stub)).toBe(0);
    spaces.push((JSON.parse(out[0]!) as { settings: { space: string } }).settings.space);
    const plain = captured();
    expect(
      await benchLab(plain.io, parseCommand(BENCH_LAB, ['--cycles', '1', '--rounds', '1', '--json'], plain.io)!, stub),
    ).toBe(0);
    spaces.push((JSON.parse(plain.out[0]!) as { settings: { space: string } }).settings.space);
    expect(spaces).toEqual(['climb', 'chain']);
    const bad = captured();
    await expect(benchLab(bad.io, parseCommand(BENCH_LAB, ['--space', 'moon'], bad.io)!, stub)).rejects.toThrow(
      /--space must be one of chain, .*climb/,
    );
  });

  it('without --json the rounds print on stdout, progress still on stderr', async () => {
    const { io, out, err } = captured();
    const args = parseCommand(BENCH_LAB, ['--cycles', '1', '--rounds', '1'], io)!;
    expect(await benchLab(io, args, stub)).toBe(0);
    expect(out[0]).toMatch(/^round 1 fast {6}1 cycles in 0\.1 s/);
    expect(out.at(-1)).toMatch(/^fast 10 cycles\/s, reference 0\.6667 cycles\/s: 15× by wall time/);
    expect(err.join('\n')).not.toMatch(/cycles\/s/);
    expect(err.some((l) => l.startsWith('bench lab: warm-up fast'))).toBe(true);
  });
});

describe('spade lab compare: progress on stderr between runs', () => {
  const tiny = ['--seeds', '2', '--cycles', '1', '--arms', 'fixed,random', '--spade', 'fixed'];
  const small = ['--levels', '1', '--plays', '1', '--probe-plays', '1'];

  it('counts runs done of seeds × arms on stderr; with --json stdout is only the settings/screen/run lines and the JSON', async () => {
    const { io, out, err } = captured();
    expect(await main(['lab', 'compare', ...tiny, ...small, '--json'], io)).toBe(0);
    expect(
      out.every((l) => /^(settings |screen |run )?\{/.test(l)),
      out.join('\n'),
    ).toBe(true);
    expect(out.filter((l) => l.startsWith('run {'))).toHaveLength(2);
    expect(out[0]).toMatch(/^settings \{"space":"chain","cycles":1,/); // what was run, first
    expect((JSON.parse(out.at(-1)!) as { seeds: number[] }).seeds).toEqual([2]);
    expect(err.find((l) => l.startsWith('lab compare: 1/2 runs · '))).toMatch(
      / · about .+ left · seed 2 fixed done in /,
    );
    expect(err.find((l) => l.startsWith('lab compare: 2/2 runs · '))).toMatch(/2 runs on 1 kept seeds$/);
    expect(err.some((l) => l.startsWith('seed 2 screen: '))).toBe(true);
    expect(err.some((l) => l.startsWith('The fixed designer '))).toBe(true); // the sentence, for people
  }, 60_000);
});
