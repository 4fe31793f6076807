/**
 * `spade lab` (also `spade micro`, its older name) — the Lab (src/core/lab/lab.ts) on the CPU: two tiny fresh
 * models made on the spot from the seed (src/lab/roles.ts, shared with the Lab's worker),
 * one per role, each with its own LoRA adapter and GRPO trainer, on the fast path (engine/tiny/tiny_lm.ts) by
 * default. Every default is the Lab panel's (core/lab/settings.ts, one table).
 *
 *   spade lab [flags]            one run; one line per cycle; with --json the last line is one JSON
 *                                object (probeReturnFirst, probeReturnLast, probeCurve, stageCurves,
 *                                levelCurve, steps, chance, seconds, …)
 *   spade lab check [flags]      the learning-curve check: per family, the fixed designer on its easiest level
 *   spade lab compare --seeds A-B [flags]
 *                                the pre-registered comparison (core/lab/compare.ts): the dead-seed
 *                                screen, then every arm per seed; with --json a "screen {…}" and a
 *                                "run {…}" line as each finishes and, last, one JSON object naming
 *                                `spadeDesigner` with `gain[arm].perSeed` for every arm; --combine
 *                                merges earlier outputs (their last lines, or their screen/run lines)
 *                                instead of running, so seed ranges can run in separate processes;
 *                                progress (runs done of seeds × arms, time left) on stderr, and with
 *                                --json every line for people there too
 *
 * Every Lab setting's flag is checked against its range in core/lab/settings.ts (LAB_SCHEMA, the link's;
 * LAB_RUN_SCHEMA, the flags-only ones): a value outside it is a usage error naming the flag and the
 * range (exit 2), before anything runs.
 */
import { ESTIMATORS, type Estimator } from '../core/config.ts';
import { UsageError } from '../core/errors.ts';
import {
  ARMS,
  compareRuns,
  PRE_REGISTERED_ARMS,
  PRE_REGISTERED_SPEC,
  ROUND4_ARMS,
  ROUND5_ARMS,
  ROUND5_SPEC,
  compareSpecOf,
  markdownReport,
  type CompareSpec,
  type SeedRun,
} from '../core/lab/compare.ts';
import { FAMILIES, TRAP_FAMILIES } from '../core/lab/families.ts';
import { designerNamed, DESIGNERS, summarise, type LabLoopSettings, type ScreenResult } from '../core/lab/lab.ts';
import {
  labDefaults,
  labField,
  LAB_RUN_SCHEMA,
  LAB_SCHEMA,
  type LabKey,
  type LabRunKey,
} from '../core/lab/settings.ts';
import { curriculumCycles, curriculumProblem } from '../core/lab/hand.ts';
import { fieldProblem, fromText } from '../core/schema.ts';
import { SPACE, SPACES, spaceChance, type SpaceName } from '../core/lab/spaces.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import { MODEL_PATHS, type ModelPath } from '../engine/engine_api.ts';
import { learningCheck, runLabSeed, screenLabSeed, type LabEngineOptions } from '../lab/roles.ts';
import { readUserFile } from '../platform/node/regular_file.ts';
import {
  flag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandSpec,
  type Flags,
  type Io,
} from './args.ts';
import { startProgress } from './progress.ts';

/** Where the flags start: the Lab's defaults (core/lab/settings.ts), the panel's own. */
const DEFAULTS = labDefaults();

/** The lab settings every form takes (settingsOf). */
const LAB_FLAGS: Flags = {
  space: {
    value: SPACES.join('|'),
    help: 'the level space (chain: the lock at alphabet 5, lengths 2-9)',
    default: DEFAULTS.space,
  },
  estimator: { value: 'E', help: "the learned designer's reward", default: DEFAULTS.estimator },
  levels: {
    value: 'K',
    help: 'levels a cycle (the learned designer writes K - 1, one slot is an edit)',
    default: DEFAULTS.levels,
  },
  plays: { value: 'N', help: 'plays per level and arm', default: DEFAULTS.plays },
  'probe-plays': { value: 'P', help: 'plays per probe level', default: DEFAULTS.probePlays },
  'probe-every': {
    value: 'C',
    help: 'probe after every C-th cycle and the last two (the gain reads cycle 0 and those)',
    default: LAB_RUN_SCHEMA.probeEvery.default,
  },
  temperature: {
    value: 'T',
    help: `both roles’ sampling temperature, ${LAB_RUN_SCHEMA.temperature.min} to ${LAB_RUN_SCHEMA.temperature.max} (docs/lab.md)`,
    default: LAB_RUN_SCHEMA.temperature.default,
  },
  'agent-lr': {
    value: 'LR',
    help: `the agent's learning rate, ${LAB_RUN_SCHEMA.agentLr.min} to ${LAB_RUN_SCHEMA.agentLr.max}; 0: the space's own (the climb's 1e-3, else 3e-3)`,
    default: LAB_RUN_SCHEMA.agentLr.default,
  },
  'agent-lr-end': {
    value: 'F',
    help: "the agent's learning rate at the last cycle, as a fraction of its first (it falls linearly; 1: constant)",
    default: LAB_RUN_SCHEMA.agentLrEnd.default,
  },
  'skip-spikes': {
    value: 'S',
    help: "skip an agent step whose gradient norm is over S times the median of its last 64 steps' (0: off; at least 1)",
    default: LAB_RUN_SCHEMA.skipSpikes.default,
  },
  traps: { help: 'add the trap family (the vault) to the grid space' },
  path: {
    value: MODEL_PATHS.join('|'),
    help: "the models' implementation (the same numbers; the reference is slower)",
    default: 'fast',
  },
  json: JSON_FLAG,
};

export const LAB: CommandSpec = {
  name: 'lab',
  usage: '[flags]',
  summary:
    'The Lab: two tiny fresh models (designer and agent) on toy levels, on the CPU. One line per\n' +
    'cycle; the probe says whether the agent learned, per stage (docs/lab.md). Also `spade micro`, its older name.',
  flags: {
    cycles: { value: 'N', help: 'cycles to run', default: DEFAULTS.cycles },
    seed: { value: 'S', help: 'every random choice of the run derives from it', default: DEFAULTS.seed },
    designer: { value: DESIGNERS.join('|'), help: 'who designs the levels', default: DEFAULTS.designer },
    curriculum: {
      value: 'TEXT',
      help: "the hand designer's levels: K level letters a cycle, cycles joined by '.' (a Lab link's lab.hand)",
    },
    ...LAB_FLAGS,
  },
  example: 'spade lab --cycles 8 --designer frontier',
};

export const LAB_CHECK: CommandSpec = {
  name: 'lab check',
  usage: '[flags]',
  summary: "The Lab's learning-curve check: per family of the space, the fixed designer on its easiest level.",
  flags: {
    seed: { value: 'S', help: 'the seed of every run', default: DEFAULTS.seed },
    cycles: { value: 'N', help: 'cycles per family', default: 16 },
    ...LAB_FLAGS,
  },
  example: 'spade lab check --json',
};

export const LAB_COMPARE: CommandSpec = {
  name: 'lab compare',
  usage: '--seeds A-B [flags]',
  summary:
    'The pre-registered comparison: the dead-seed screen, then every arm on each seed, judged by the\n' +
    'criteria in docs/lab.md. --combine merges earlier --json outputs instead of running.',
  flags: {
    seeds: { value: 'A-B', help: 'the seeds to run, a range like 1-10 or one seed' },
    cycles: {
      value: 'N',
      help: "cycles per run (on --space climb round 4's pre-registered run: 400, with --probe-plays 32 --probe-every 40)",
      default: DEFAULTS.cycles,
    },
    arms: {
      value: 'A,B,...',
      help: `the arms (${Object.keys(ARMS).join(', ')}); default: pre-registration 3's (${PRE_REGISTERED_ARMS.join(',')}), on --space climb round 4's (${ROUND4_ARMS.join(',')})`,
    },
    spade: { value: 'ARM', help: "the arm judged as SPADE's designer", default: PRE_REGISTERED_SPEC.spade },
    prereg: {
      value: '4|5',
      help: `on --space climb, which pre-registered comparison (its arms, SPADE's designer and baselines): 4, round 4's; 5, the step-writing designer's (${ROUND5_ARMS.join(',')})`,
      default: '4',
    },
    ...LAB_FLAGS,
    markdown: { help: 'also print the per-seed and per-pair tables as Markdown (stdout; with --json, stderr)' },
    skip: {
      value: 'FILE',
      many: true,
      help: 'do not run the seed and arm runs these earlier --json outputs hold (a stopped part restarted; same settings)',
    },
    combine: {
      value: 'FILE',
      many: true,
      help: 'merge the runs of earlier --json outputs (their last lines, or their "screen"/"run" lines)',
    },
  },
  example: ['spade lab compare --seeds 1-10 --json > a.txt', 'spade lab compare --combine a.txt b.txt'],
};

const f2 = (x: number | null) => (x === null ? '  -  ' : x.toFixed(2));
const r3 = (x: number) => Math.round(x * 1000) / 1000;
const n3 = (x: number | null) => (x === null ? null : r3(x));
const probed = (xs: readonly (number | null)[]) => xs.filter((x): x is number => x !== null);

/**
 * A Lab setting's flag in its range (core/lab/settings.ts), else a usage error naming the flag and the
 * range: `--temperature must be between 0.1 and 2; got 1000000000`.
 */
function labFlag(
  args: Args,
  name: string,
  key: Exclude<LabKey, 'designer' | 'estimator' | 'space'> | LabRunKey,
): number {
  const f = labField(key)!;
  const value = fromText(f, flag(args, name) ?? '');
  const problem = fieldProblem(`--${name}`, f, value);
  if (problem) throw new UsageError(`${problem} (docs/lab.md, "Settings")`);
  return value as number;
}

/** The lab settings the flags give (their defaults: the spec's; everything else: LAB_LOOP_DEFAULTS). */
function settingsOf(args: Args): Partial<LabLoopSettings> & { space: SpaceName } {
  const temperature = labFlag(args, 'temperature', 'temperature');
  const space = flag(args, 'space') as SpaceName;
  if (!SPACES.includes(space)) throw new UsageError(`--space must be one of ${SPACES.join(', ')}`);
  const estimator = flag(args, 'estimator') as Estimator;
  if (!ESTIMATORS.includes(estimator)) throw new UsageError(`--estimator must be one of ${ESTIMATORS.join(', ')}`);
  if (args.flags.has('traps') && space !== 'grid') throw new UsageError('--traps needs --space grid');
  return {
    space,
    estimator,
    levels: labFlag(args, 'levels', 'levels'),
    plays: labFlag(args, 'plays', 'plays'),
    probePlays: labFlag(args, 'probe-plays', 'probePlays'),
    probeEvery: labFlag(args, 'probe-every', 'probeEvery'),
    temperature,
    families: args.flags.has('traps') ? [...SPACE.grid.families, ...TRAP_FAMILIES] : null,
  };
}

function pathOf(args: Args): ModelPath {
  const p = flag(args, 'path') as ModelPath;
  if (!MODEL_PATHS.includes(p)) throw new UsageError(`--path must be one of ${MODEL_PATHS.join(', ')}`);
  return p;
}

/** The models' options the flags give: the path, and the agent's learning rate when one is named. */
function engineOf(args: Args): LabEngineOptions {
  const agentLr = labFlag(args, 'agent-lr', 'agentLr');
  const skipSpikes = labFlag(args, 'skip-spikes', 'skipSpikes');
  if (skipSpikes > 0 && skipSpikes < 1)
    throw new UsageError(`--skip-spikes must be 0 (off) or at least 1, got ${skipSpikes}`);
  const agentLrEnd = labFlag(args, 'agent-lr-end', 'agentLrEnd');
  return {
    path: pathOf(args),
    ...(agentLr > 0 ? { agentLr } : {}),
    ...(skipSpikes > 0 ? { skipSpikes } : {}),
    ...(agentLrEnd !== 1 ? { agentLrEnd } : {}),
  };
}

/** "3-7" or "5" → [3, …, 7]. */
function seedRange(text: string | undefined): number[] {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text ?? '');
  if (!m) throw new UsageError('--seeds must be a range like 1-10 (or one seed)');
  const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
  if (b < a || b - a > 999) throw new UsageError('--seeds: the range must go up, at most 1000 seeds');
  if (b > LAB_SCHEMA.seed.max) throw new UsageError(`--seeds: a seed is at most ${LAB_SCHEMA.seed.max}; got ${b}`);
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

export async function lab(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(
    { name: 'lab', summary: LAB.summary, bare: LAB, subcommands: [LAB_CHECK, LAB_COMPARE] },
    argv,
    io,
  );
  if (!picked) return 0;
  const args = parseCommand(picked.spec, picked.rest, io);
  if (!args) return 0;
  if (picked.spec === LAB_COMPARE) return compare(args, io);
  if (picked.spec === LAB_CHECK) return check(args, io);
  const json = args.flags.has('json');
  const cycles = labFlag(args, 'cycles', 'cycles');
  const seed = labFlag(args, 'seed', 'seed');
  const designer = designerNamed(flag(args, 'designer') ?? '');
  if (!designer) throw new UsageError(`--designer must be one of ${DESIGNERS.join(', ')}`);
  const settings = settingsOf(args);
  const space = SPACE[settings.space];
  const curriculum = flag(args, 'curriculum') ?? '';
  if (designer === 'hand') {
    const problem = curriculumProblem(space, curriculum, settings.levels!);
    if (problem || !curriculum) throw new UsageError(`--curriculum: ${problem ?? 'the hand designer needs one'}`);
    const n = curriculumCycles(curriculum).length;
    if (cycles > n)
      throw new UsageError(`--cycles ${cycles}: the curriculum has ${n} cycles; run --cycles ${n} or fewer`);
  } else if (curriculum) throw new UsageError('--curriculum is read by --designer hand only');
  const stageText = (xs: number[]) => space.stages.map((st, i) => `${st} ${f2(xs[i]!)}`).join(', ');
  const { run, lab } = await runLabSeed(
    { ...settings, seed, designer, curriculum },
    cycles,
    createSandboxWorkerApi(),
    engineOf(args),
    (r) =>
      io.out(
        `cycle ${String(r.cycle).padStart(2)}  ${r.probe ? `probe ${f2(r.probe.mean)} (${stageText(r.probe.byStage)})` : '(no probe)'}` +
          `  ${FAMILIES[r.family]!.name}: ${r.designs.map((d) => (d.description ?? `invalid(${d.text})`) + (d.explore ? '*' : '')).join(', ')}` +
          `  level ${f2(r.meanDifficulty)}  reward ${f2(r.meanDesignerReward)}  return ${f2(r.meanReturn)}` +
          `  steps ${r.steps.agent}+${r.steps.designer}  ${(r.ms / 1000).toFixed(1)} s`,
      ),
  );
  const summary = {
    ...summarise(lab),
    seconds: Math.round(run.seconds * 10) / 10,
    designer,
    seed,
    space: space.name,
    secondsPerCycle: Math.round((run.seconds / cycles) * 10) / 10,
    chance: r3(spaceChance(space)),
    probeCurve: run.curve.map(n3),
    hardHalfCurve: run.hardCurve!.map(n3),
    stages: space.stages,
    stageCurves: run.stages!.map((xs) => xs && xs.map(r3)),
    levelCurve: run.level!.map((x) => (x === null ? null : r3(x))),
    medianRegret: run.medianRegret.map(r3),
    distinctLevels: run.distinctLevels,
    steps: run.steps,
  };
  if (json) io.out(JSON.stringify(summary));
  else
    io.out(
      `probe return ${summary.probeReturnFirst.toFixed(2)} → ${summary.probeReturnLast.toFixed(2)} (chance ${summary.chance.toFixed(2)}), designed level ${f2(summary.difficultyFirst)} → ${f2(summary.difficultyLast)}, ${run.steps!.agent} agent steps, ${cycles} cycles in ${summary.seconds} s`,
    );
  return 0;
}

async function check(args: Args, io: Io): Promise<number> {
  const seed = labFlag(args, 'seed', 'seed');
  const cycles = labFlag(args, 'cycles', 'cycles');
  const runner = createSandboxWorkerApi();
  const settings = settingsOf(args);
  const out = [];
  for (const family of SPACE[settings.space].families) {
    const c = await learningCheck(family, seed, cycles, runner, settings, { path: pathOf(args) });
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

/**
 * The comparison the flags name: the arms (by default the space's: round 4's on the climb), SPADE's
 * designer among them, random, fixed (and on the climb untrained) as baselines, gated (else
 * frontier/sfl) − random as headroom; on the climb the gains read the probe's top half.
 */
function specOf(args: Args, space: SpaceName): CompareSpec {
  const prereg = flag(args, 'prereg');
  if (prereg !== '4' && prereg !== '5') throw new UsageError(`--prereg must be 4 or 5; got ${JSON.stringify(prereg)}`);
  if (prereg === '5' && space !== 'climb') throw new UsageError('--prereg 5 is a comparison on --space climb');
  const base = prereg === '5' ? ROUND5_SPEC : compareSpecOf(space);
  const arms = (flag(args, 'arms') ?? base.arms.join(',')).split(',').filter(Boolean);
  for (const a of arms)
    if (!ARMS[a]) throw new UsageError(`--arms: "${a}" is not an arm (${Object.keys(ARMS).join(', ')})`);
  const spade = args.flags.has('spade') ? (flag(args, 'spade') ?? '') : base.spade;
  if (!arms.includes(spade)) throw new UsageError(`--spade must be one of the arms (${arms.join(', ')})`);
  return {
    ...base,
    arms,
    spade,
    baselines: base.baselines.filter((b) => arms.includes(b) && b !== spade),
    headroom: !arms.includes('random')
      ? null
      : ((['gated', 'frontier', 'sfl'].filter((h) => arms.includes(h)).map((h) => [h, 'random'])[0] as
          [string, string] | undefined) ?? null),
  };
}

/**
 * What `lab compare` runs: the flags' settings, where the space's comparison pre-registered its own
 * (round 4 on the climb: 400 cycles, 32 probe plays, a probe every 40) those unless a flag is given,
 * and the record of them every --json output opens with (`settings {…}`; --combine refuses to merge
 * outputs whose records differ).
 */
export function compareSettingsOf(args: Args) {
  const settings = settingsOf(args);
  const spec = specOf(args, settings.space);
  const pre = spec.run;
  const pick = (name: string, key: 'cycles' | 'probePlays' | 'probeEvery') =>
    pre && !args.flags.has(name) ? pre[key] : labFlag(args, name, key);
  const cycles = pick('cycles', 'cycles');
  settings.probePlays = pick('probe-plays', 'probePlays');
  settings.probeEvery = pick('probe-every', 'probeEvery');
  const engine = engineOf(args);
  const record = {
    space: settings.space,
    cycles,
    levels: settings.levels,
    plays: settings.plays,
    probePlays: settings.probePlays,
    probeEvery: settings.probeEvery,
    temperature: settings.temperature,
    estimator: settings.estimator,
    agentLr: engine.agentLr ?? 0,
    ...(engine.skipSpikes ? { skipSpikes: engine.skipSpikes } : {}),
    ...(engine.agentLrEnd !== undefined ? { agentLrEnd: engine.agentLrEnd } : {}),
    traps: settings.families !== null,
  };
  return { settings, spec, cycles, engine, record };
}

/**
 * Keep `x` in `out` unless the same seed's run of the same arm (or the same seed's screen) came
 * before: then both must be the same numbers (wall time aside) — a run is deterministic, so two that
 * differ mean different code or settings, and --combine says so instead of keeping either.
 */
function once<T extends { seed: number; designer?: string; seconds?: number }>(
  first: Map<string, { text: string; file: string }>,
  what: string,
  x: T,
  file: string,
  out: T[],
): void {
  const key = `${x.seed}|${x.designer ?? ''}`;
  const text = JSON.stringify({ ...x, seconds: undefined });
  const had = first.get(key);
  if (!had) {
    first.set(key, { text, file });
    out.push(x);
  } else if (had.text !== text)
    throw new UsageError(
      `--combine: ${what} differs between ${had.file} and ${file}; the same seed and settings give the same numbers, so one of them was run otherwise`,
    );
}

/**
 * An earlier `spade lab compare --json` output: its `settings {…}` lines (as JSON text), its runs and
 * screens — the last line's, or the `run {…}`/`screen {…}` lines of an output cut short.
 */
async function readOutput(
  file: string,
  flagName: string,
): Promise<{ settings: string[]; runs: SeedRun[]; screens: ScreenResult[] }> {
  // a compare output is at most a few MiB (400-cycle runs): 64 MiB bounds it; a FIFO or a device is refused unread
  const lines = (await readUserFile(file, flagName, 64 * 2 ** 20)).trim().split('\n');
  let parsed: { runs?: SeedRun[]; screens?: ScreenResult[] } = {};
  try {
    parsed = JSON.parse(lines.at(-1) ?? '') as typeof parsed;
  } catch {
    /* a run cut short: its finished runs are the "run {…}" lines */
  }
  const runs = Array.isArray(parsed.runs)
    ? parsed.runs
    : lines.filter((l) => l.startsWith('run {')).map((l) => JSON.parse(l.slice(4)) as SeedRun);
  const screens = Array.isArray(parsed.screens)
    ? parsed.screens
    : lines.filter((l) => l.startsWith('screen {')).map((l) => JSON.parse(l.slice(7)) as ScreenResult);
  if (!runs.length && !screens.length)
    throw new UsageError(`${file}: neither a last line from \`spade lab compare --json\` nor any "run {…}" line`);
  const settings = lines.filter((l) => l.startsWith('settings {')).map((l) => l.slice(9));
  return { settings, runs, screens };
}

/**
 * The seed and arm runs the --skip outputs already hold ("seed|arm" → file), refused when an output
 * was run with other settings than these (its runs would not be this comparison's).
 */
async function skipped(files: readonly string[], record: unknown): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const mine = JSON.stringify(record);
  for (const file of files) {
    const { settings, runs } = await readOutput(file, '--skip');
    const other = settings.find((s) => s !== mine);
    if (other) throw new UsageError(`--skip: ${file} was run with other settings (${other}; these are ${mine})`);
    for (const r of runs) if (!out.has(`${r.seed}|${r.designer}`)) out.set(`${r.seed}|${r.designer}`, file);
  }
  return out;
}

async function compare(args: Args, io: Io): Promise<number> {
  const json = args.flags.has('json');
  const { settings, spec, cycles, engine, record } = compareSettingsOf(args);
  const space = SPACE[settings.space];
  const runs: SeedRun[] = [];
  const screens: ScreenResult[] = [];
  const combine = args.flags.get('combine');
  let ranWith: unknown = record; // combined: the files' one settings record (null: none had one)
  if (combine?.length) {
    const seen = new Map<string, string>(); // a settings record → the first file that had it
    // a seed's arm (or screen) in two files — a stopped part restarted — is kept once, when both agree
    const firstRun = new Map<string, { text: string; file: string }>();
    const firstScreen = new Map<string, { text: string; file: string }>();
    for (const file of combine) {
      const { settings: ran, runs: done, screens: screened } = await readOutput(file, '--combine');
      for (const s of ran) if (!seen.has(s)) seen.set(s, file);
      if (seen.size > 1) {
        const [[a, fa], [b, fb]] = [...seen] as [[string, string], [string, string]];
        throw new UsageError(
          `--combine: ${fa} and ${fb} were run with different settings (${a} vs ${b}); combine only runs of one comparison`,
        );
      }
      for (const r of done) once(firstRun, `seed ${r.seed}'s ${r.designer} run`, r, file, runs);
      for (const x of screened) once(firstScreen, `seed ${x.seed}'s screen`, x, file, screens);
    }
    ranWith = seen.size ? (JSON.parse([...seen.keys()][0]!) as unknown) : null;
  } else {
    const seeds = seedRange(flag(args, 'seeds'));
    const skip = await skipped(args.flags.get('skip') ?? [], record);
    const runner = createSandboxWorkerApi();
    const { path } = engine;
    if (json) io.out(`settings ${JSON.stringify(record)}`);
    (json ? io.err : io.out)(
      `${record.space}: ${spec.arms.join(', ')}; ${cycles} cycles, ${record.levels} levels × ${record.plays} plays, probe ${record.probePlays} plays a level every ${record.probeEvery} cycles${spec.run ? ' (the pre-registered run)' : ''}`,
    );
    // progress on stderr: runs done of seeds × arms (a screened-out seed counts its arms as done)
    const p = startProgress(io, {
      label: 'lab compare',
      unit: 'runs',
      total: seeds.length * spec.arms.length,
      every: 1,
    });
    const tell = json ? (l: string) => p.say(l) : io.out;
    try {
      for (const seed of seeds) {
        p.note(`seed ${seed}: the dead-seed screen`);
        const screen = await screenLabSeed(seed, space.name, runner, { path, temperature: settings.temperature });
        screens.push(screen);
        if (json) io.out(`screen ${JSON.stringify(screen)}`);
        tell(
          `seed ${seed} screen: ${screen.wins} of ${screen.plays} plays of ${screen.level} won by the fresh agent — ${screen.pass ? 'kept' : 'screened out (no arm is run)'}`,
        );
        if (!screen.pass) {
          p.tick(spec.arms.length, `seed ${seed} screened out`);
          continue;
        }
        for (const arm of spec.arms) {
          const a = ARMS[arm]!;
          const had = skip.get(`${seed}|${arm}`);
          if (had) {
            p.tick(1, `seed ${seed} ${arm}: in ${had} already`);
            continue;
          }
          p.note(`seed ${seed} ${arm}…`);
          const { run } = await runLabSeed(
            {
              ...settings,
              seed,
              designer: a.designer,
              ...(a.estimator ? { estimator: a.estimator } : {}),
              ...(a.steps ? { designerSteps: true } : {}),
            },
            cycles,
            runner,
            engine,
            (r) => p.note(`seed ${seed} ${arm}, cycle ${r.cycle}/${cycles}`),
            arm,
          );
          runs.push(run);
          if (json) io.out(`run ${JSON.stringify(run)}`); // a run cut short keeps what it finished (--combine reads these)
          tell(
            `seed ${seed} ${arm.padEnd(12)} probe ${probed(run.curve)
              .map((x) => x.toFixed(2))
              .join(
                ' ',
              )}  hard half ${f2(probed(run.hardCurve!)[0]!)} → ${f2(probed(run.hardCurve!).at(-1)!)}  steps ${run.steps!.agent}  ${run.seconds.toFixed(0)} s`,
          );
          p.tick(1, `seed ${seed} ${arm} done in ${run.seconds.toFixed(0)} s`);
        }
      }
    } catch (err) {
      p.interrupt();
      throw err;
    }
    p.finish(`${runs.length} runs on ${seeds.length - screens.filter((x) => !x.pass).length} kept seeds`);
  }
  const out = screens.filter((s) => !s.pass).map((s) => s.seed);
  const result = compareRuns(runs, spaceChance(space), spec, out);
  // with --json, stdout holds the "screen"/"run" lines and the last JSON object; the sentences go to stderr
  const tell = json ? io.err : io.out;
  tell(result.sentence);
  tell(result.verdict);
  if (out.length) tell(`screened out (the fresh agent never won the easiest level): seeds ${out.join(', ')}`);
  if (args.flags.has('markdown')) tell(markdownReport(result, runs, space.stages));
  if (json)
    io.out(JSON.stringify({ ...result, space: space.name, settings: ranWith, screens, screenedOut: out, runs }));
  return 0;
}
