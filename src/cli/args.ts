/**
 * What every `spade` command shares: the output sink (`Io`), the declaration of a command's flags
 * (`CommandSpec`), the parser (Node's `util.parseArgs`, strict, over the declared flags) and the help
 * text each command prints for `--help` / `-h`. Its own module so the commands import it instead of
 * `spade.ts`, which loads the commands (importing back from `spade.ts` made a cycle through every
 * command).
 */
import { parseArgs as nodeParseArgs } from 'node:util';
import levenshtein from 'damerau-levenshtein';
import { UsageError } from '../core/errors.ts';

export interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
  /**
   * The stream behind `err` when it is the process's stderr: progress draws a bar on it when it is a
   * terminal (cli/progress.ts). Absent (tests, captured output): progress prints whole lines through `err`.
   */
  errStream?: { write(text: string): unknown; isTTY?: boolean; columns?: number };
}

/** One flag of a command. */
export interface FlagSpec {
  /** What the value is, shown in the help (`--seed N`); absent: a switch that takes no value. */
  value?: string;
  /** What the flag does, in one line. */
  help: string;
  /** The value when the flag is absent: shown in the help and returned by flag() and intFlag(). */
  default?: string | number;
  /**
   * Takes every value up to the next `--flag` (`--set a=1 b=2`, `--actions A1 A2`), and may repeat.
   * A value may then start with "-" (`--actions -1`).
   */
  many?: boolean;
  /** May be given more than once, one value each (`--tokens 1,2 --tokens 3`). */
  repeat?: boolean;
}

export type Flags = Record<string, FlagSpec>;

/** A command (`spade run`) or subcommand (`spade lab compare`): what --help prints, what the parser accepts. */
export interface CommandSpec {
  /** The words after `spade`: "run", "lab compare". */
  name: string;
  /** What follows the name in the usage line: positionals and required flags ("FILE... [flags]"). */
  usage: string;
  /** What the command does, in a sentence or two. */
  summary: string;
  flags: Flags;
  /** Positional arguments are accepted (the usage line names them); without this, one is a usage error. */
  positionals?: boolean;
  /** One or more example command lines. */
  example: string | string[];
  /** Lines printed after the flags (environment variables, where to read more). */
  notes?: string[];
}

/** A command made of subcommands (`spade bench sandbox|loop|...`), with an optional bare form (`spade lab`). */
export interface CommandGroup {
  name: string;
  summary: string;
  subcommands: CommandSpec[];
  /** What runs when no subcommand is named (`spade lab`, `spade run`); absent: a subcommand is required. */
  bare?: CommandSpec;
}

export interface Args {
  positional: string[];
  /** Every flag given on the command line with its values (absent flags are absent, defaults or not). */
  flags: Map<string, string[]>;
  /** The flags' declarations: flag() and intFlag() fall back to their defaults. */
  spec: Flags;
}

/** `--json`: the last printed line is one JSON object (every command takes it). */
export const JSON_FLAG: FlagSpec = { help: 'print one JSON object as the last line' };
const HELP_FLAG: FlagSpec = { help: 'show this help and exit' };

/** The help text of one command: usage, what it does, its flags with defaults, an example. */
function helpText(spec: CommandSpec): string {
  const rows = Object.entries(spec.flags).map(([name, f]) => {
    const left = `--${name}${f.value ? ` ${f.value}${f.many ? ' ...' : ''}` : ''}`;
    const def = f.default !== undefined && f.default !== '' ? ` (default: ${f.default})` : '';
    return [left, `${f.help}${def}${f.repeat ? ' (may repeat)' : ''}`] as const;
  });
  rows.push(['-h, --help', HELP_FLAG.help]);
  const width = Math.min(28, Math.max(...rows.map(([l]) => l.length)));
  const flagLines = rows.map(([l, r]) =>
    l.length > width ? `  ${l}\n  ${''.padEnd(width)}  ${r}` : `  ${l.padEnd(width)}  ${r}`,
  );
  const examples = Array.isArray(spec.example) ? spec.example : [spec.example];
  return [
    `Usage: spade ${spec.name} ${spec.usage}`.trimEnd(),
    '',
    spec.summary,
    '',
    'Flags:',
    ...flagLines,
    ...(spec.notes?.length ? ['', ...spec.notes] : []),
    '',
    examples.length > 1 ? 'Examples:' : 'Example:',
    ...examples.map((e) => `  ${e}`),
  ].join('\n');
}

/** A summary's first sentence on one line (cut at a word, with "…", past 90 characters). */
function firstSentence(summary: string): string {
  const text = summary.replace(/\s*\n\s*/g, ' ');
  const end = text.search(/\.(\s|$)/);
  const first = end < 0 ? text : text.slice(0, end);
  return first.length <= 90 ? first : `${first.slice(0, first.lastIndexOf(' ', 89))} …`;
}

/** One line per subcommand of a group. */
function subcommandLines(group: CommandGroup): string[] {
  const width = Math.max(...group.subcommands.map((s) => `spade ${s.name}`.length));
  return [
    'Subcommands:',
    ...group.subcommands.map((s) => `  ${`spade ${s.name}`.padEnd(width)}  ${firstSentence(s.summary)}`),
    '',
    `\`spade ${group.name} SUBCOMMAND --help\` shows a subcommand's flags, their defaults and an example.`,
  ];
}

/** The help text of a command group without a bare form: its subcommands, one line each. */
function groupHelpText(group: CommandGroup): string {
  const names = group.subcommands.map((s) => s.name.split(' ').at(-1)).join('|');
  return [`Usage: spade ${group.name} ${names} [flags]`, '', group.summary, '', ...subcommandLines(group)].join('\n');
}

/** `--help` or `-h` among the arguments (before a `--` that ends the flags). */
function wantsHelp(argv: string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

/**
 * The name among `names` nearest to `word` when it is near enough to be a typo (`rnu` → `run`,
 * `compre` → `compare`): the fewest edits, a swap of two neighbours counting one (Damerau–Levenshtein,
 * as git's "did you mean" weighs a swap), and at most 2 edits, or a third of the word's length for
 * longer words. The first of equals, in `names`' order; null when none is that near.
 */
function nearest(word: string, names: readonly string[]): string | null {
  let best: string | null = null;
  let bestSteps = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const n of names) {
    const steps = levenshtein(word, n).steps;
    if (steps < bestSteps) [best, bestSteps] = [n, steps];
  }
  return best;
}

/** `; did you mean "run"?` when one name is near `word`, else nothing. */
export function didYouMean(word: string, names: readonly string[]): string {
  const n = nearest(word, names);
  return n ? `; did you mean "${n}"?` : '';
}

/**
 * Which subcommand `argv` names, and the arguments after it. Without one, the group's bare form runs
 * (`spade lab`, `spade run`); a group without a bare form needs a subcommand (a usage error that
 * lists them). A first word that is no subcommand is an unknown subcommand (with the nearest one
 * suggested) — also for a group with a bare form that takes no positional argument (`spade lab
 * compre`). Returns null when help was printed: the group's, or the bare form's with the
 * subcommands listed under it.
 */
export function pickSubcommand(
  group: CommandGroup,
  argv: string[],
  io: Io,
): { spec: CommandSpec; rest: string[] } | null {
  const [first, ...rest] = argv;
  const sub = group.subcommands.find((s) => s.name.split(' ').at(-1) === first);
  if (sub) return { spec: sub, rest };
  const names = group.subcommands.map((s) => s.name.split(' ').at(-1)!);
  const word = first !== undefined && !first.startsWith('-');
  if (group.bare && !(word && !group.bare.positionals)) {
    if (!wantsHelp(argv)) return { spec: group.bare, rest: argv };
    io.out([helpText(group.bare), '', ...subcommandLines(group)].join('\n'));
    return null;
  }
  if (!group.bare && (first === '--help' || first === '-h')) {
    io.out(groupHelpText(group));
    return null;
  }
  throw new UsageError(
    first === undefined
      ? `spade ${group.name} needs a subcommand: ${names.join(', ')} (spade ${group.name} --help)`
      : `spade ${group.name}: unknown subcommand "${first}"${didYouMean(first, names)} (subcommands: ${names.join(', ')}; spade ${group.name} --help)`,
  );
}

/**
 * Parse `argv` against `spec` with `util.parseArgs` (strict: an undeclared flag, a value given to a
 * switch or a missing value is a UsageError). Returns null after printing the help when `--help` or
 * `-h` is given. `--flag value` always takes the next argument as the value, even one that starts
 * with "-" (`--seed -1`), and `many` flags take every argument up to the next `--flag`, as before.
 */
export function parseCommand(spec: CommandSpec, argv: string[], io: Io): Args | null {
  if (wantsHelp(argv)) {
    io.out(helpText(spec));
    return null;
  }
  return parseFlags(spec.flags, argv, spec.positionals ?? false, `spade ${spec.name}`);
}

/** The parser itself (no help): `flags` declared, positionals allowed or not; `who` names the command in errors. */
export function parseFlags(flags: Flags, argv: string[], positionals = true, who = 'spade'): Args {
  // `--name value` → `--name=value` for declared flags that take a value, so the value may start with "-";
  // a `many` flag's values up to the next `--flag` become one `--name=value` each
  const norm: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      norm.push(...argv.slice(i));
      break;
    }
    const f = a.startsWith('--') && !a.includes('=') ? flags[a.slice(2)] : undefined;
    if (!f?.value) {
      norm.push(a);
      continue;
    }
    if (f.many) {
      let n = 0;
      while (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) {
        norm.push(`${a}=${argv[++i]!}`);
        n++;
      }
      if (n === 0) throw new UsageError(`${a} needs a value`);
    } else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) norm.push(`${a}=${argv[++i]!}`);
    else throw new UsageError(`${a} needs a value`);
  }
  const options = Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      { type: f.value ? ('string' as const) : ('boolean' as const), multiple: true },
    ]),
  );
  let parsed: ReturnType<typeof nodeParseArgs<{ options: typeof options; allowPositionals: true; strict: true }>>;
  try {
    parsed = nodeParseArgs({ args: norm, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw usageOf(err as Error & { code?: string }, who);
  }
  if (!positionals && parsed.positionals.length)
    throw new UsageError(`${who} takes no argument "${parsed.positionals[0]}" (${who} --help)`);
  const map = new Map<string, string[]>();
  for (const [name, v] of Object.entries(parsed.values))
    if (v !== undefined) map.set(name, (v as (string | boolean)[]).map(String));
  return { positional: parsed.positionals, flags: map, spec: flags };
}

/** util.parseArgs' errors in this CLI's words, as UsageErrors (exit 2). */
function usageOf(err: Error & { code?: string }, who: string): UsageError {
  const name = /'(-[^' ]+)/.exec(err.message)?.[1] ?? '';
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')
    return new UsageError(`${who}: unknown flag ${name} (${who} --help lists its flags)`);
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && /does not take an argument/.test(err.message))
    return new UsageError(`${name} is a switch and takes no value`);
  return new UsageError(err.message.split('\n')[0]!);
}

/** The value of `--name`: its first value, else its declared default, else undefined. */
export function flag(args: Args, name: string): string | undefined {
  const v = args.flags.get(name)?.[0];
  if (v !== undefined) return v;
  const d = args.spec[name]?.default;
  return d === undefined ? undefined : String(d);
}

/** `--name` as a whole number: its value, else its declared default (else `fallback`). */
export function intFlag(args: Args, name: string, fallback?: number): number {
  const v = args.flags.get(name)?.[0];
  if (v === undefined) {
    const d = args.spec[name]?.default;
    if (typeof d === 'number') return d;
    if (fallback !== undefined) return fallback;
    throw new UsageError(`--${name} is required`);
  }
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n))
    throw new UsageError(`--${name} must be a whole number; got ${JSON.stringify(v)}`);
  return n;
}

/** `--name` as a number (decimals allowed): its value, else its declared default. */
export function numberFlag(args: Args, name: string): number {
  const v = flag(args, name);
  const n = Number(v);
  if (v === undefined || v.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`--${name} must be a number; got ${JSON.stringify(v)}`);
  return n;
}

/**
 * The parser for callers without a spec, as the CLI parsed before specs: the named switches take
 * no value, `many` flags take every value up to the next `--flag`, any other `--flag` takes one.
 * Kept for the device harness (../shared/tools/gpu_bench.sh calls `parseArgs(rest, ['json', 'quick'])`
 * for `bench engine`), which is not this repository's to change.
 */
export function parseArgs(argv: string[], switches: string[] = [], many: string[] = []): Args {
  const flags: Flags = {};
  for (const a of argv) {
    if (a === '--') break;
    const name = a.startsWith('--') ? a.slice(2).split('=')[0]! : '';
    if (name && !flags[name]) flags[name] = switches.includes(name) ? { help: name } : { value: 'V', help: name };
  }
  for (const m of many) flags[m] = { value: 'V', many: true, help: m };
  return parseFlags(flags, argv);
}
