/**
 * `spade bench lab [--cycles N] [--rounds R] [--seed S] [--space NAME] [--json]` — the Lab's fast path
 * (engine/tiny/tiny_lm.ts) against the reference path (LocalChatModel on the engine's CPU references
 * and LoraTrainer, what the Lab ran before), measured alternately in one run: each round runs a fresh
 * Lab on the same seed and the Lab's default settings for N cycles on one path, then on the other
 * (the order swapping every round), after an untimed warm-up of each path as long as a round (`--warmup
 * 1`, the bench's warm-up before 2026-12-07, leaves the fast path's JIT half warm for its first round:
 * about 1.5× its steady cycle, where the reference's seconds-long cycles hide theirs). Both paths go through
 * the same LabLoop loop and sandbox, so the ratio is the models' share of a cycle.
 *
 * Figures: cycles per second of each path by wall time (their `ratio`) and by this process's CPU
 * time (`cpuRatio`, steadier on a shared machine), and `sameNumbers`: every round's cycle reports
 * (designs, plays, rewards, optimiser steps and their losses, probes; wall times left out) equal
 * across paths and rounds — the fast path does the reference's arithmetic in the same order, so
 * equal means bit for bit, no tolerance; `secondsPerCycle` of each path is its wall seconds over its
 * timed cycles. With --json stdout is the one JSON object; exit 1 when the numbers differ.
 *
 * Progress on stderr (cli/progress.ts), never on stdout: each section (the two warm-ups, then every
 * round's path) as it starts, its cycles as they finish, and its time as it ends, with the time left
 * in all once both paths have run — estimated per path, since the reference is many times slower.
 */
import { hashSeed } from '../core/rng.ts';
import { LAB_LOOP_DEFAULTS, LabLoop, type CycleReport } from '../core/lab/lab.ts';
import { SPACES, type SpaceName } from '../core/lab/spaces.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import type { ModelPath } from '../engine/engine_api.ts';
import { engineLabDeps } from '../lab/roles.ts';
import { formatSeconds } from '../core/spade/run_progress.ts';
import { UsageError } from '../core/errors.ts';
import { flag, intFlag, JSON_FLAG, type Args, type CommandSpec, type Io } from './args.ts';
import { startProgress } from './progress.ts';

export const BENCH_LAB: CommandSpec = {
  name: 'bench lab',
  usage: '[flags]',
  summary:
    "The Lab's fast path vs the reference path, alternately in one run: cycles per second of each,\n" +
    'their ratio, and whether every number is the same (docs/benchmarks.md).',
  flags: {
    cycles: {
      value: 'N',
      help: 'timed cycles per path and round (a run of N: probed every probeEvery-th cycle and the last two)',
      default: 5,
    },
    rounds: {
      value: 'R',
      help: 'rounds (each runs both paths); four by default: at two, the fast path is timed ~1.2 s in all and one stall moves the ratio by a fifth',
      default: 4,
    },
    warmup: {
      value: 'W',
      help: 'untimed warm-up cycles of each path before the rounds; 0: as many as --cycles',
      default: 0,
    },
    seed: { value: 'S', help: 'the Lab seed of every run', default: LAB_LOOP_DEFAULTS.seed },
    space: {
      value: 'NAME',
      help: `the level space (${SPACES.join(', ')}): the chain is the Lab's first screen, the climb round 4's ladder`,
      default: LAB_LOOP_DEFAULTS.space,
    },
    json: JSON_FLAG,
  },
  example: 'spade bench lab --json',
};

/** The fast path's target: at least this many times the reference's cycles per second (#31 set 10, #39 item 7 25). */
const LAB_SPEEDUP_TARGET = 25;

interface PathTimes {
  cycles: number;
  wallMs: number;
  cpuMs: number;
}

/** A cycle report's numbers (its wall time and each step's left out). */
const numbers = (h: CycleReport[]) => JSON.stringify(h, (k, v) => (k === 'ms' ? undefined : v));

/** One fresh Lab of `n` cycles on one path, timed: its cycles' wall and CPU time, and its numbers. */
interface LabTiming {
  /** The cycles' wall time (the setup and the cycle-0 probe before them left out). */
  wallMs: number;
  cpuMs: number;
  /** The run's numbers (cycle reports without wall times, and the cycle-0 probe). */
  report: string;
}

/** Runs one Lab of `n` cycles on `path`; `onCycle(c)` after cycle c, `onProbe()` before the cycle-0 probe. */
export type LabBenchRun = (
  path: ModelPath,
  n: number,
  hooks: { onProbe(): void; onCycle(c: number): void },
) => Promise<LabTiming>;

/** The real run: a fresh Lab on the seed and the Lab's default settings, as `spade lab` builds it. */
function engineRun(seed: number, space: SpaceName): LabBenchRun {
  const runner = createSandboxWorkerApi();
  const settings = { ...LAB_LOOP_DEFAULTS, seed, space };
  return async (path, n, hooks) => {
    const deps = await engineLabDeps(seed, settings.designer, runner, {
      path,
      temperature: settings.temperature,
      space: settings.space,
    });
    const lab = new LabLoop({ ...settings, plannedCycles: n }, deps); // probes as a run of n cycles probes
    hooks.onProbe();
    await lab.start(); // the cycle-0 probe is not part of a cycle
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let c = 0; c < n; c++) {
      await lab.cycle();
      hooks.onCycle(c + 1);
    }
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    await lab.close();
    return {
      wallMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      report: numbers(lab.history) + JSON.stringify(lab.initialProbe),
    };
  };
}

/**
 * The seconds a section of `n` cycles on `path` will take: its setup and probe, and n cycles, at the
 * means of that path's sections so far (null before it has run once).
 */
function sectionEstimate(seen: { setupMs: number[]; cycleMs: number; cycles: number }, n: number): number | null {
  if (!seen.setupMs.length || !seen.cycles) return null;
  const setup = seen.setupMs.reduce((a, b) => a + b, 0) / seen.setupMs.length;
  return (setup + (seen.cycleMs / seen.cycles) * n) / 1000;
}

export async function benchLab(io: Io, args: Args, run?: LabBenchRun): Promise<number> {
  const json = args.flags.has('json');
  const cycles = intFlag(args, 'cycles');
  const rounds = intFlag(args, 'rounds');
  const seed = intFlag(args, 'seed');
  if (cycles < 1 || rounds < 1) throw new UsageError('--cycles and --rounds must be ≥ 1');
  const warmup = intFlag(args, 'warmup') || cycles;
  if (warmup < 0) throw new UsageError('--warmup must be ≥ 0');
  const space = flag(args, 'space') as SpaceName;
  if (!SPACES.includes(space)) throw new UsageError(`--space must be one of ${SPACES.join(', ')}`);
  const settings = { ...LAB_LOOP_DEFAULTS, seed, space };
  const runLab = run ?? engineRun(seed, space);
  const t0 = performance.now();
  // every section in order: the warm-ups (untimed), then each round's two paths
  const sections: { label: string; path: ModelPath; n: number; round: number | null }[] = [
    { label: 'warm-up fast', path: 'fast', n: warmup, round: null },
    { label: 'warm-up reference', path: 'reference', n: warmup, round: null },
  ];
  for (let r = 0; r < rounds; r++)
    for (const path of r % 2 ? (['reference', 'fast'] as const) : (['fast', 'reference'] as const))
      sections.push({ label: `round ${r + 1}/${rounds} ${path}`, path, n: cycles, round: r + 1 });
  const seen: Record<ModelPath, { setupMs: number[]; cycleMs: number; cycles: number }> = {
    fast: { setupMs: [], cycleMs: 0, cycles: 0 },
    reference: { setupMs: [], cycleMs: 0, cycles: 0 },
  };
  const times: Record<ModelPath, PathTimes> = {
    fast: { cycles: 0, wallMs: 0, cpuMs: 0 },
    reference: { cycles: 0, wallMs: 0, cpuMs: 0 },
  };
  const reports = new Set<string>();
  for (const [i, sec] of sections.entries()) {
    const p = startProgress(io, { label: sec.label, unit: 'cycles', total: sec.n, every: 1 });
    p.say(`bench lab: ${sec.label}, ${sec.n} cycle${sec.n === 1 ? '' : 's'}${sec.round === null ? ' (untimed)' : ''}…`);
    const s0 = performance.now();
    let x: LabTiming;
    try {
      x = await runLab(sec.path, sec.n, {
        onProbe: () => p.note('the probe before training'),
        onCycle: (c) => p.tick(1, `cycle ${c}`),
      });
    } catch (err) {
      p.interrupt();
      throw err;
    }
    const sectionMs = performance.now() - s0;
    seen[sec.path].setupMs.push(Math.max(0, sectionMs - x.wallMs)); // building the Lab, its cycle-0 probe
    seen[sec.path].cycleMs += x.wallMs;
    seen[sec.path].cycles += sec.n;
    const rest = sections.slice(i + 1).map((r) => sectionEstimate(seen[r.path], r.n));
    const left =
      !rest.length || rest.includes(null)
        ? ''
        : ` · about ${formatSeconds(rest.reduce<number>((a, b) => a + b!, 0))} left in all`;
    p.finish(
      `the cycle${sec.n === 1 ? '' : 's'} ${(x.wallMs / 1000).toFixed(1)} s (${(x.cpuMs / 1000).toFixed(1)} s CPU)${left}`,
    );
    if (sec.round === null) continue;
    times[sec.path].cycles += sec.n;
    times[sec.path].wallMs += x.wallMs;
    times[sec.path].cpuMs += x.cpuMs;
    reports.add(x.report);
    if (!json)
      io.out(
        `round ${sec.round} ${sec.path.padEnd(9)} ${sec.n} cycles in ${(x.wallMs / 1000).toFixed(1)} s (${(x.cpuMs / 1000).toFixed(1)} s CPU)`,
      );
  }
  io.err(`bench lab: done in ${formatSeconds((performance.now() - t0) / 1000)}`);
  const rate = (t: PathTimes) => ({
    cycles: t.cycles,
    seconds: +(t.wallMs / 1000).toFixed(2),
    cpuSeconds: +(t.cpuMs / 1000).toFixed(2),
    cyclesPerSecond: +((t.cycles / t.wallMs) * 1000).toFixed(4),
    cpuCyclesPerSecond: +((t.cycles / t.cpuMs) * 1000).toFixed(4),
    secondsPerCycle: +(t.wallMs / t.cycles / 1000).toFixed(4),
  });
  const fast = rate(times.fast);
  const reference = rate(times.reference);
  const result = {
    ok: reports.size === 1,
    ratio: +(fast.cyclesPerSecond / reference.cyclesPerSecond).toFixed(2),
    cpuRatio: +(fast.cpuCyclesPerSecond / reference.cpuCyclesPerSecond).toFixed(2),
    sameNumbers: reports.size === 1,
    target: LAB_SPEEDUP_TARGET,
    fast,
    reference,
    rounds,
    cyclesPerRound: cycles,
    warmupCycles: warmup,
    settings: {
      seed,
      designer: settings.designer,
      space: settings.space,
      levels: settings.levels,
      plays: settings.plays,
      probePlays: settings.probePlays,
      probeEvery: settings.probeEvery,
    },
    /** A fingerprint of the numbers both paths printed (equal across runs of this command). */
    numbers: hashSeed([...reports][0] ?? ''),
  };
  if (json) io.out(JSON.stringify(result));
  else
    io.out(
      `fast ${fast.cyclesPerSecond} cycles/s, reference ${reference.cyclesPerSecond} cycles/s: ${result.ratio}× by wall time, ${result.cpuRatio}× by CPU time (target ${LAB_SPEEDUP_TARGET}×); ` +
        (result.sameNumbers ? 'the same numbers on both paths, bit for bit' : 'THE NUMBERS DIFFER between the paths'),
    );
  return result.sameNumbers ? 0 : 1;
}
