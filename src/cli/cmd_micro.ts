/**
 * `spade micro` — the micro self-play lab (src/core/micro/lab.ts) on our engine's CPU references:
 * two tiny fresh models made on the spot from the seed (engine/micro_policy.ts, shared with the Lab
 * worker), one per role, each with its own LoRA adapter and GRPO trainer.
 *
 *   spade micro [--cycles N] [--seed S] [--designer regret|random|fixed|control] [--levels K]
 *               [--plays N] [--probe-plays P] [--temperature T] [--traps] [--json]
 *       one run; one line per cycle; with --json the last line is one JSON object (probeReturnFirst,
 *       probeReturnLast, difficultyFirst, difficultyLast, cycles, seconds, probeCurve, chance, …)
 *   spade micro check [--seed S] [--cycles N] [--json]
 *       the learning-curve check: per main family, the fixed designer on its easiest level
 *   spade micro compare --seeds A-B [--cycles N] [--json] [--combine FILE...]
 *       the pre-registered comparison (core/micro/compare.ts): the four designers per seed; with
 *       --json the last line is one JSON object; --combine merges the `runs` of earlier --json
 *       outputs (their last lines, or the "run {…}" line --json prints after each run when an
 *       output was cut short) instead of running, so seed ranges can run in separate processes
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../core/errors.ts';
import { compareRuns, type SeedRun } from '../core/micro/compare.ts';
import { FAMILIES, MAIN_FAMILIES, TRAP_FAMILIES } from '../core/micro/families.ts';
import {
  DESIGNERS,
  MICRO_DEFAULTS,
  PROBE_LEVELS,
  probeChance,
  summarise,
  type DesignerKind,
  type MicroSettings,
} from '../core/micro/lab.ts';
import { labDefaults, type LabChoices } from '../core/micro/settings.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import { learningCheck, runMicro } from '../engine/engine_api.ts';
import {
  flag,
  intFlag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandSpec,
  type Flags,
  type Io,
} from './args.ts';

/**
 * Where the flags start (core/micro/settings.ts): one run from the `cli` preset, the check and the
 * comparison from the pre-registered settings (docs/micro.md).
 */
const RUN_DEFAULTS = labDefaults('cli');
const PRE_REGISTERED = labDefaults();

/** The lab settings every form takes (settingsOf), with `defaults`' values. */
function labFlags(defaults: LabChoices): Flags {
  return {
    levels: {
      value: 'K',
      help: 'levels a cycle (the regret designer writes K - 1, one slot explores)',
      default: defaults.levels,
    },
    plays: { value: 'N', help: 'plays per level and arm', default: defaults.plays },
    'probe-plays': { value: 'P', help: 'plays per probe level', default: defaults.probePlays },
    temperature: { value: 'T', help: "the agent's sampling temperature (> 0)", default: MICRO_DEFAULTS.temperature },
    traps: { help: 'add the trap families to the main ones' },
    json: JSON_FLAG,
  };
}

export const MICRO: CommandSpec = {
  name: 'micro',
  usage: '[flags]',
  summary:
    'The micro self-play lab: two tiny fresh models (designer and agent) on toy levels, on the CPU. One\n' +
    'line per cycle; the probe return says whether the agent learned (docs/micro.md).',
  flags: {
    cycles: { value: 'N', help: 'cycles to run', default: RUN_DEFAULTS.cycles },
    seed: { value: 'S', help: 'every random choice of the run derives from it', default: RUN_DEFAULTS.seed },
    designer: { value: DESIGNERS.join('|'), help: 'who designs the levels', default: RUN_DEFAULTS.designer },
    ...labFlags(RUN_DEFAULTS),
  },
  example: 'spade micro --cycles 4 --designer random',
};

export const MICRO_CHECK: CommandSpec = {
  name: 'micro check',
  usage: '[flags]',
  summary: "The lab's learning-curve check: per main family, the fixed designer on its easiest level.",
  flags: {
    seed: { value: 'S', help: 'the seed of every run', default: PRE_REGISTERED.seed },
    cycles: { value: 'N', help: 'cycles per family', default: PRE_REGISTERED.cycles },
    ...labFlags(PRE_REGISTERED),
  },
  example: 'spade micro check --json',
};

export const MICRO_COMPARE: CommandSpec = {
  name: 'micro compare',
  usage: '--seeds A-B [flags]',
  summary:
    'The pre-registered comparison: the four designers on each seed, judged by the criteria in\n' +
    'docs/micro.md. --combine merges earlier --json outputs instead of running.',
  flags: {
    seeds: { value: 'A-B', help: 'the seeds to run, a range like 1-10 or one seed' },
    cycles: { value: 'N', help: 'cycles per run', default: PRE_REGISTERED.cycles },
    combine: {
      value: 'FILE',
      many: true,
      help: 'merge the runs of earlier --json outputs (their last lines, or their "run {…}" lines)',
    },
    ...labFlags(PRE_REGISTERED),
  },
  example: ['spade micro compare --seeds 1-10 --json > a.txt', 'spade micro compare --combine a.txt b.txt'],
};

const f2 = (x: number | null) => (x === null ? '  -  ' : x.toFixed(2));
const r3 = (x: number) => Math.round(x * 1000) / 1000;

/** The lab settings the flags give (their defaults: the spec's; everything else: MICRO_DEFAULTS). */
function settingsOf(args: Args): Partial<MicroSettings> {
  const temperature = Number(flag(args, 'temperature'));
  if (!(temperature > 0)) throw new UsageError('--temperature must be a number > 0');
  return {
    levels: intFlag(args, 'levels'),
    plays: intFlag(args, 'plays'),
    probePlays: intFlag(args, 'probe-plays'),
    temperature,
    families: args.flags.has('traps') ? [...MAIN_FAMILIES, ...TRAP_FAMILIES] : [...MAIN_FAMILIES],
  };
}

/** "3-7" or "5" → [3, …, 7]. */
function seedRange(text: string | undefined): number[] {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text ?? '');
  if (!m) throw new UsageError('--seeds must be a range like 1-10 (or one seed)');
  const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
  if (b < a || b - a > 999) throw new UsageError('--seeds: the range must go up, at most 1000 seeds');
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

export async function micro(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(
    { name: 'micro', summary: MICRO.summary, bare: MICRO, subcommands: [MICRO_CHECK, MICRO_COMPARE] },
    argv,
    io,
  );
  if (!picked) return 0;
  const args = parseCommand(picked.spec, picked.rest, io);
  if (!args) return 0;
  if (picked.spec === MICRO_COMPARE) return compare(args, io);
  if (picked.spec === MICRO_CHECK) return check(args, io);
  const json = args.flags.has('json');
  const cycles = intFlag(args, 'cycles');
  const seed = intFlag(args, 'seed');
  const designer = flag(args, 'designer') as DesignerKind;
  if (!DESIGNERS.includes(designer)) throw new UsageError(`--designer must be one of ${DESIGNERS.join(', ')}`);
  if (cycles < 1) throw new UsageError('--cycles must be ≥ 1');
  const settings = settingsOf(args);
  const { run, lab } = await runMicro({ ...settings, seed, designer }, cycles, createSandboxWorkerApi(), {}, (r) =>
    io.out(
      `cycle ${String(r.cycle).padStart(2)}  probe ${f2(r.probe.mean)} (easy ${f2(r.probe.byBucket.easy)} medium ${f2(r.probe.byBucket.medium)} hard ${f2(r.probe.byBucket.hard)})` +
        `  ${FAMILIES[r.family]!.name}: ${r.designs.map((d) => (d.description ?? `invalid(${d.text})`) + (d.explore ? '*' : '')).join(', ')}` +
        `  difficulty ${f2(r.meanDifficulty)}  regret ${f2(r.meanRegret)}  reward ${f2(r.meanDesignerReward)}` +
        `  return ${f2(r.meanReturn)}  ${(r.ms / 1000).toFixed(1)} s`,
    ),
  );
  const summary = {
    ...summarise(lab),
    seconds: Math.round(run.seconds * 10) / 10,
    designer,
    seed,
    secondsPerCycle: Math.round((run.seconds / cycles) * 10) / 10,
    chance: r3(probeChance(lab.settings.probeLevels)),
    probeCurve: run.curve.map(r3),
    difficultyCurve: lab.history.map((h) => (h.meanDifficulty === null ? null : r3(h.meanDifficulty))),
    medianRegret: run.medianRegret.map(r3),
    distinctLevels: run.distinctLevels,
  };
  if (json) io.out(JSON.stringify(summary));
  else
    io.out(
      `probe return ${summary.probeReturnFirst.toFixed(2)} → ${summary.probeReturnLast.toFixed(2)} (chance ${summary.chance.toFixed(2)}), designed difficulty ${f2(summary.difficultyFirst)} → ${f2(summary.difficultyLast)}, ${cycles} cycles in ${summary.seconds} s`,
    );
  return 0;
}

async function check(args: Args, io: Io): Promise<number> {
  const seed = intFlag(args, 'seed');
  const cycles = intFlag(args, 'cycles');
  const runner = createSandboxWorkerApi();
  const out = [];
  for (const family of MAIN_FAMILIES) {
    const c = await learningCheck(family, seed, cycles, runner, settingsOf(args));
    io.out(
      `${FAMILIES[family]!.name.padEnd(6)} ${c.masteredAt === null ? 'NOT mastered' : `mastered at cycle ${c.masteredAt}`} within ${cycles}: ${c.curve.map((x) => x.toFixed(2)).join(' ')}  ${c.seconds.toFixed(0)} s;` +
        ` then the agent itself: ${f2(c.agentNoHint)} without the hint, ${f2(c.agentWithHint)} with it`,
    );
    out.push({
      ...c,
      curve: c.curve.map(r3),
      agentNoHint: r3(c.agentNoHint),
      agentWithHint: r3(c.agentWithHint),
      seconds: Math.round(c.seconds),
    });
  }
  if (args.flags.has('json'))
    io.out(JSON.stringify({ seed, cycles, checks: out, pass: out.every((c) => c.masteredAt !== null) }));
  return 0;
}

async function compare(args: Args, io: Io): Promise<number> {
  const chance = probeChance(PROBE_LEVELS);
  const runs: SeedRun[] = [];
  const combine = args.flags.get('combine');
  if (combine?.length) {
    for (const file of combine) {
      const lines = readFileSync(file, 'utf8').trim().split('\n');
      let parsed: { runs?: SeedRun[] } = {};
      try {
        parsed = JSON.parse(lines.at(-1) ?? '') as { runs?: SeedRun[] };
      } catch {
        /* a run cut short: its finished runs are the "run {…}" lines */
      }
      const done = Array.isArray(parsed.runs)
        ? parsed.runs
        : lines.filter((l) => l.startsWith('run {')).map((l) => JSON.parse(l.slice(4)) as SeedRun);
      if (!done.length)
        throw new UsageError(`${file}: neither a last line from \`spade micro compare --json\` nor any "run {…}" line`);
      runs.push(...done);
    }
  } else {
    const seeds = seedRange(flag(args, 'seeds'));
    const cycles = intFlag(args, 'cycles');
    if (cycles < 1) throw new UsageError('--cycles must be ≥ 1');
    const settings = settingsOf(args);
    const runner = createSandboxWorkerApi();
    for (const seed of seeds)
      for (const designer of DESIGNERS) {
        const { run } = await runMicro({ ...settings, seed, designer }, cycles, runner);
        runs.push(run);
        if (args.flags.has('json')) io.out(`run ${JSON.stringify(run)}`); // a run cut short keeps what it finished (--combine reads these)
        io.out(
          `seed ${seed} ${designer.padEnd(7)} probe ${run.curve.map((x) => x.toFixed(2)).join(' ')}  median regret ${f2(run.medianRegret.reduce((a, b) => a + b, 0) / run.medianRegret.length)}  distinct ${(run.distinctLevels.reduce((a, b) => a + b, 0) / run.distinctLevels.length).toFixed(1)}  ${run.seconds.toFixed(0)} s`,
        );
      }
  }
  const result = compareRuns(runs, chance);
  io.out(result.verdict);
  if (args.flags.has('json')) {
    const perDesigner = Object.fromEntries(
      DESIGNERS.map((d) => [
        d,
        {
          curves: Object.fromEntries(runs.filter((r) => r.designer === d).map((r) => [r.seed, r.curve.map(r3)])),
          gain: result.gain[d],
          medianRegret: Object.fromEntries(
            runs.filter((r) => r.designer === d).map((r) => [r.seed, r.medianRegret.map(r3)]),
          ),
          distinctLevels: Object.fromEntries(
            runs.filter((r) => r.designer === d).map((r) => [r.seed, r.distinctLevels]),
          ),
        },
      ]),
    );
    io.out(JSON.stringify({ ...result, designers: perDesigner, runs }));
  }
  return 0;
}
