/**
 * `spade validate FILE... [--json] [--max-turns N]` — run the checker on each environment file.
 * `spade play FILE [--seed N] [--actions A1 A2 ...] [--solution] [--raw] [--json]` — play an
 * environment: the given actions, the reference solution, or (without either) one action per line
 * from stdin. A game's action is sent as `\boxed{...}` unless it already holds one (--raw: as typed).
 */
import { createInterface } from 'node:readline';
import { DEFAULTS } from '../core/config.ts';
import { boxedAction, parseEnvHeader, type StepResult } from '../core/env/contract.ts';
import { UsageError } from '../core/errors.ts';
import { readRegularText } from '../platform/node/regular_file.ts';
import { createNodeSandboxPool } from '../platform/node/sandbox_pool.ts';
import { intFlag, JSON_FLAG, parseCommand, type CommandSpec, type Io } from './args.ts';

const MAX_TURNS = {
  value: 'N',
  help: 'steps per episode at most',
  default: DEFAULTS.maxTurns,
};

export const VALIDATE: CommandSpec = {
  name: 'validate',
  usage: 'FILE... [flags]',
  summary:
    'Run the checker on each environment file (.js) in the sandbox: loads, resets, steps, its solution wins,\n' +
    'deterministic per seed. Exit 1 if any file fails.',
  positionals: true,
  flags: { 'max-turns': MAX_TURNS, json: JSON_FLAG },
  example: 'spade validate src/core/env/seeds/lantern_lock.js',
};

export const PLAY: CommandSpec = {
  name: 'play',
  usage: 'FILE [flags]',
  summary:
    "Play an environment: type one action per line (a game's action is sent as \\boxed{...} for you),\n" +
    'or give --actions, or replay its reference --solution.',
  positionals: true,
  flags: {
    seed: { value: 'N', help: 'the episode seed passed to reset()', default: 0 },
    actions: { value: 'A', many: true, help: 'play these actions instead of reading stdin' },
    solution: { help: "play the environment's own solution()" },
    raw: { help: 'send each action exactly as given (no \\boxed{} added)' },
    'max-turns': MAX_TURNS,
    json: JSON_FLAG,
  },
  example: ['spade play src/core/env/seeds/lantern_lock.js --seed 3', 'spade play FILE --actions "2 4" "1 3"'],
};

/** An environment file: a regular file (a FIFO or a device is refused unread), at most 1 MiB read. */
async function readCode(file: string): Promise<string> {
  let text: string | null;
  try {
    text = await readRegularText(file, 2 ** 20);
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (text === null) throw new UsageError(`cannot read ${file}: there is no such file`);
  return text;
}

export async function validate(argv: string[], io: Io): Promise<number> {
  const args = parseCommand(VALIDATE, argv, io);
  if (!args) return 0;
  if (args.positional.length === 0) throw new UsageError('validate needs at least one FILE');
  const json = args.flags.has('json');
  const maxTurns = intFlag(args, 'max-turns');
  const pool = createNodeSandboxPool();
  type Report = Awaited<ReturnType<typeof pool.check>>;
  const files: (Partial<Report> & { file: string; ok: boolean; error?: { name: string; message: string } })[] = [];
  try {
    for (const file of args.positional) {
      const code = await readCode(file);
      const t0 = performance.now();
      // a check the sandbox could not finish (watchdog kill, crashed worker, restarted module)
      // fails this file with the error and the checks done so far; the next file still runs
      const entry = await pool.check(code, { maxTurns }).then(
        (report) => ({ file, ...report }),
        (err: unknown) => {
          const e = err as Error & { data?: { report?: Report } };
          const partial = e.data?.report;
          return {
            file,
            ...partial,
            ok: false,
            checks: partial?.checks ?? [],
            ms: performance.now() - t0,
            error: { name: e.name, message: e.message },
          };
        },
      );
      files.push(entry);
      if (!json) {
        io.out(
          `${entry.ok ? 'PASS' : 'FAIL'} ${file}${entry.className ? ` (${entry.className})` : ''} ${entry.ms.toFixed(0)} ms`,
        );
        for (const c of entry.checks) io.out(`  ${c.ok ? '✓' : '✗'} ${c.name}: ${c.message}`);
        if ('error' in entry) io.out(`  ✗ ${entry.error.name}: ${entry.error.message}`);
      }
    }
  } finally {
    await pool.terminate();
  }
  const ok = files.every((f) => f.ok);
  if (json) io.out(JSON.stringify({ ok, files }));
  else io.out(`${files.filter((f) => f.ok).length} of ${files.length} passed`);
  return ok ? 0 : 1;
}

export async function play(argv: string[], io: Io): Promise<number> {
  const args = parseCommand(PLAY, argv, io);
  if (!args) return 0;
  const [file] = args.positional;
  if (!file || args.positional.length > 1) throw new UsageError('play needs exactly one FILE');
  const json = args.flags.has('json');
  const seed = intFlag(args, 'seed');
  const maxTurns = intFlag(args, 'max-turns');
  const code = await readCode(file);
  const pool = createNodeSandboxPool();
  const transcript: {
    action: string | null;
    observation: string;
    reward: number;
    terminated: boolean;
    truncated: boolean;
  }[] = [];
  try {
    const env = await pool.load(code, maxTurns);
    const [obs] = await pool.reset(env.id, seed);
    transcript.push({ action: null, observation: obs, reward: 0, terminated: false, truncated: false });
    // a game reads \boxed{command}: what the player types is wrapped unless it holds one (--raw: never)
    const wrap = env.setting === 'games' && !args.flags.has('raw');
    const typed = !args.flags.has('solution') && !args.flags.has('actions');
    if (!json) {
      io.out(`# ${parseEnvHeader(code).title ?? env.className} (seed ${seed})\n${obs}`);
      if (typed && wrap) io.out('(type one action per line; it is sent as \\boxed{...}, so "2 4" is enough)');
    }
    let actions: AsyncIterable<string> | string[];
    if (args.flags.has('solution')) actions = await pool.solution(env.id);
    else if (args.flags.has('actions')) actions = args.flags.get('actions')!;
    else actions = createInterface({ input: process.stdin, terminal: false });
    for await (const given of actions) {
      if (typed && !given.trim()) continue; // an empty line is no move
      const action = wrap ? boxedAction(given) : given;
      const r: StepResult = await pool.step(env.id, action);
      transcript.push({ action, observation: r[0], reward: r[1], terminated: r[2], truncated: r[3] });
      if (!json)
        io.out(`\n> ${action}\n${r[0]}\n[reward ${r[1]}${r[2] ? ', terminated' : ''}${r[3] ? ', truncated' : ''}]`);
      if (r[2] || r[3]) break;
    }
    await pool.dispose(env.id);
  } finally {
    await pool.terminate();
  }
  const last = transcript[transcript.length - 1]!;
  const ret = last.terminated ? Math.max(-1, Math.min(1, last.reward)) : 0;
  if (json) io.out(JSON.stringify({ ok: true, seed, return: ret, transcript }));
  else io.out(`\nreturn ${ret} after ${transcript.length - 1} steps`);
  return 0;
}
