/**
 * The `spade` command (Node). Run with `npx spade <command>` or `npm run spade -- <command>`.
 * Contract: with --json the last line printed is one JSON object; exit 0 on success, 1 on a
 * failure (a failed check, a run with no successful model call, an error), 2 on bad usage, 130 when
 * stopped by Ctrl-C. As git, npm and cargo: `spade --version` (`-V`, `spade version`) prints the
 * version; `spade help CMD [SUB]` is `spade CMD [SUB] --help`; an unknown command or subcommand
 * suggests the nearest; every error is one line with one prefix, `spade CMD: `, and shows no URL's
 * user name or password.
 */
import { readFileSync } from 'node:fs';
import { serializeError, UsageError } from '../core/errors.ts';
import { redactUrlCredentials } from '../core/llm/base_url.ts';
import { ownField } from '../core/schema.ts';
import { didYouMean, type Io } from './args.ts';

export const USAGE = `spade — SPADE Playground command line

Usage: spade COMMAND [SUBCOMMAND] [flags]
\`spade COMMAND --help\` (or -h) shows a command's flags, their defaults and an example.

Environments:
  spade validate FILE...         check environment files in the sandbox (exit 1 if any fails)
  spade play FILE                play an environment (type actions, or --actions, or --solution)
  spade share encode FILE...     make a share link from an env set (.json) or env files (.js)
  spade share decode LINK        read a share link back into an env set
  spade serve [SOURCE...]        serve environments over OpenEnv (HTTP + /ws) to RL trainers

Self-play:
  spade run --backend B --out DIR
                                 headless self-play into a run directory; no GPU? --backend openai
                                 with a hosted API (--api-key) or a CPU server (Ollama, llama.cpp)
  spade run export DIR --out FILE
                                 one run file from a run directory (the app opens it to review)
  spade config show              the resolved settings: each key's value and where it came from
  spade chat "prompt"            stream one reply from a model (check a server and its key)
  spade models                   the WebLLM model catalog and the other backends

Our engine and training:
  spade engine init --out DIR    write a small random-initialised checkpoint (a plumbing check)
  spade engine logits            our engine's logits for a prompt of token ids
  spade engine generate          decode token ids with our engine (one prompt or a batch)
  spade train toy                the learning proof: a tiny fresh model learns a toy environment
  spade gpu                      report the WebGPU adapter Node sees

The Lab (tiny models on toy levels, CPU; \`spade micro\`, its older name, is the same command):
  spade lab                      one run: designer and agent, one line per cycle
  spade lab check                the Lab's learning-curve check, per family
  spade lab compare --seeds A-B
                                 every arm per seed, judged by the pre-registered criteria

Benchmarks (figures measured in one run):
  spade bench sandbox            QuickJS vs native V8 vs the call floor; checker time
  spade bench loop               loop overhead outside model calls
  spade bench engine             matmul GFLOP/s, decode and LoRA training tokens/s
  spade bench train              GRPO training tokens/s and a cycle's generate/train split
  spade bench serve              OpenEnv server load test on loopback
  spade bench lab                the Lab's fast path vs the reference path, and the same numbers

  spade help [COMMAND [SUB]]     this text, or a command's help (the same as COMMAND [SUB] --help)
  spade --version                the version (also -V, spade version)

Exit codes: 0 success, 1 a check failed (or the command failed), 2 bad usage, 130 stopped by Ctrl-C.`;

/** The version in package.json (`spade --version`). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

const defaultIo: Io = { out: (l) => console.log(l), err: (l) => console.error(l), errStream: process.stderr };

type Command = (argv: string[], io: Io) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  gpu: async () => (await import('./cmd_gpu.ts')).run,
  validate: async () => (await import('./cmd_env.ts')).validate,
  play: async () => (await import('./cmd_env.ts')).play,
  share: async () => (await import('./cmd_share.ts')).share,
  run: async () => (await import('./cmd_run.ts')).run,
  config: async () => (await import('./cmd_config.ts')).config,
  chat: async () => (await import('./cmd_models.ts')).chat,
  models: async () => (await import('./cmd_models.ts')).models,
  engine: async () => (await import('./cmd_engine.ts')).engine,
  train: async () => (await import('./cmd_train.ts')).train,
  bench: async () => (await import('./cmd_bench.ts')).bench,
  lab: async () => (await import('./cmd_lab.ts')).lab,
  micro: async () => (await import('./cmd_lab.ts')).lab,
  serve: async () => (await import('./cmd_serve.ts')).serve,
};

/**
 * An error as one line with one prefix: `spade CMD: message` for bad usage, `spade CMD: Name: message`
 * for any other error (its class says what kind). A usage message that already names the command
 * (`spade lab compare: unknown flag …`, `spade bench needs a subcommand …`) is printed as it is.
 */
export function errorLine(command: string, err: unknown): string {
  const e = safeError(err);
  if (err instanceof UsageError && e.message.startsWith('spade ')) return e.message;
  return `spade ${command}: ${err instanceof UsageError ? '' : `${e.name}: `}${e.message}`;
}

/** serializeError with the credentials of any URL in it shown as `***` (a value echoed back from a settings file). */
function safeError(err: unknown): ReturnType<typeof serializeError> {
  return JSON.parse(redactUrlCredentials(JSON.stringify(serializeError(err)))) as ReturnType<typeof serializeError>;
}

export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    io.out(`spade ${version()}`);
    return 0;
  }
  if (name === 'help' && rest.length && rest[0] !== 'help') return main([...rest, '--help'], io);
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    io.out(USAGE);
    return name ? 0 : 2;
  }
  const load = ownField(COMMANDS, name); // own keys only: `spade constructor` is unknown
  if (!load) {
    const hint = name.startsWith('-') ? '' : didYouMean(name, Object.keys(COMMANDS));
    io.err(`spade: unknown command "${name}"${hint} (spade help lists the commands)`);
    return 2;
  }
  try {
    return await (
      await load()
    )(rest, io);
  } catch (err) {
    io.err(errorLine(name, err));
    if (rest.includes('--json')) io.out(JSON.stringify({ ok: false, error: safeError(err) }));
    return err instanceof UsageError ? 2 : 1;
  }
}
