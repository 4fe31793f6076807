/**
 * What every `spade` subcommand shares: the output sink (`Io`) and the argument parser with its flag
 * readers. Its own module so the commands import it instead of `spade.ts`, which loads the commands
 * (importing back from `spade.ts` made a cycle through every command).
 */
import { UsageError } from '../core/errors.ts';

export interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

export interface Args {
  positional: string[];
  flags: Map<string, string[]>;
}

/** Parse `--flag value`, `--flag=value`, boolean `--flag`, and multi-valued flags listed in `multi`. */
export function parseArgs(argv: string[], booleans: string[] = [], multi: string[] = []): Args {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    const values = flags.get(name) ?? [];
    flags.set(name, values);
    if (eq >= 0) values.push(a.slice(eq + 1));
    else if (booleans.includes(name)) values.push('true');
    else if (multi.includes(name))
      while (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) values.push(argv[++i]!);
    else if (i + 1 < argv.length) values.push(argv[++i]!);
    else throw new UsageError(`--${name} needs a value`);
  }
  return { positional, flags };
}

/** The first value of `--name`, or undefined when the flag is absent. */
export function flag(args: Args, name: string): string | undefined {
  return args.flags.get(name)?.[0];
}

export function intFlag(args: Args, name: string, fallback: number): number {
  const v = args.flags.get(name)?.[0];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be a whole number; got ${JSON.stringify(v)}`);
  return n;
}
