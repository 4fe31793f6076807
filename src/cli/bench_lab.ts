/**
 * `spade bench lab [--cycles N] [--rounds R] [--seed S] [--json]` — the Lab's fast path
 * (engine/lab/tiny_lm.ts) against the reference path (LocalChatModel on the engine's CPU references
 * and LoraTrainer, what the Lab ran before), measured alternately in one run: each round runs a fresh
 * Lab on the same seed and the Lab's default settings for N cycles on one path, then on the other
 * (the order swapping every round), after one untimed warm-up cycle of each. Both paths go through
 * the same LabLoop loop and sandbox, so the ratio is the models' share of a cycle.
 *
 * Figures: cycles per second of each path by wall time (their `ratio`) and by this process's CPU
 * time (`cpuRatio`, steadier on a shared machine), and `sameNumbers`: every round's cycle reports
 * (designs, plays, rewards, optimiser steps and their losses, probes; wall times left out) equal
 * across paths and rounds — the fast path does the reference's arithmetic in the same order, so
 * equal means bit for bit, no tolerance. With --json the last line is one JSON object; exit 1 when
 * the numbers differ.
 */
import { hashSeed } from '../core/rng.ts';
import { LAB_LOOP_DEFAULTS, LabLoop, type CycleReport } from '../core/lab/lab.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import { engineLabDeps, type ModelPath } from '../engine/engine_api.ts';
import { intFlag, JSON_FLAG, type Args, type CommandSpec, type Io } from './args.ts';

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
    rounds: { value: 'R', help: 'rounds (each runs both paths)', default: 2 },
    seed: { value: 'S', help: 'the Lab seed of every run', default: LAB_LOOP_DEFAULTS.seed },
    json: JSON_FLAG,
  },
  example: 'spade bench lab --json',
};

/** The target the issue set for the fast path (#31): at least this many times the reference's cycles per second. */
export const LAB_SPEEDUP_TARGET = 10;

interface PathTimes {
  cycles: number;
  wallMs: number;
  cpuMs: number;
}

/** A cycle report's numbers (its wall time and each step's left out). */
const numbers = (h: CycleReport[]) => JSON.stringify(h, (k, v) => (k === 'ms' ? undefined : v));

export async function benchLab(io: Io, args: Args): Promise<number> {
  const json = args.flags.has('json');
  const cycles = intFlag(args, 'cycles');
  const rounds = intFlag(args, 'rounds');
  const seed = intFlag(args, 'seed');
  if (cycles < 1 || rounds < 1) throw new RangeError('--cycles and --rounds must be ≥ 1');
  const runner = createSandboxWorkerApi();
  const settings = { ...LAB_LOOP_DEFAULTS, seed };
  const runLab = async (path: ModelPath, n: number) => {
    const deps = await engineLabDeps(seed, settings.designer, runner, {
      path,
      temperature: settings.temperature,
      space: settings.space,
    });
    const lab = new LabLoop({ ...settings, plannedCycles: n }, deps); // probes as a run of n cycles probes
    await lab.start(); // the cycle-0 probe is not part of a cycle
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let c = 0; c < n; c++) await lab.cycle();
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    await lab.close();
    return {
      wallMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      report: numbers(lab.history) + JSON.stringify(lab.initialProbe),
    };
  };
  // warm-up: one cycle each (the JIT, the sandbox module), untimed
  for (const path of ['fast', 'reference'] as const) await runLab(path, 1);
  const times: Record<ModelPath, PathTimes> = {
    fast: { cycles: 0, wallMs: 0, cpuMs: 0 },
    reference: { cycles: 0, wallMs: 0, cpuMs: 0 },
  };
  const reports = new Set<string>();
  for (let r = 0; r < rounds; r++) {
    const order: ModelPath[] = r % 2 ? ['reference', 'fast'] : ['fast', 'reference'];
    for (const path of order) {
      const x = await runLab(path, cycles);
      times[path].cycles += cycles;
      times[path].wallMs += x.wallMs;
      times[path].cpuMs += x.cpuMs;
      reports.add(x.report);
      if (!json)
        io.out(
          `round ${r + 1} ${path.padEnd(9)} ${cycles} cycles in ${(x.wallMs / 1000).toFixed(1)} s (${(x.cpuMs / 1000).toFixed(1)} s CPU)`,
        );
    }
  }
  const rate = (t: PathTimes) => ({
    cycles: t.cycles,
    seconds: +(t.wallMs / 1000).toFixed(2),
    cpuSeconds: +(t.cpuMs / 1000).toFixed(2),
    cyclesPerSecond: +((t.cycles / t.wallMs) * 1000).toFixed(4),
    cpuCyclesPerSecond: +((t.cycles / t.cpuMs) * 1000).toFixed(4),
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
