/**
 * The `spade` command (Node). Run with `npx spade <command>` or `npm run spade -- <command>`.
 * Contract: with --json the last line printed is one JSON object; exit 0 on
 * success, 1 on a failed check, 2 on bad usage.
 */
import { serializeError, UsageError } from '../core/errors.ts';
import type { Io } from './args.ts';

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

  spade help                     this text

Exit codes: 0 success, 1 a check failed, 2 bad usage.`;

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

export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    io.out(USAGE);
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    io.err(`spade: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    return await (
      await load()
    )(rest, io);
  } catch (err) {
    const e = serializeError(err);
    io.err(`spade ${name}: ${e.name}: ${e.message}`);
    if (rest.includes('--json')) io.out(JSON.stringify({ ok: false, error: e }));
    return err instanceof UsageError ? 2 : 1;
  }
}
