/**
 * The `spade` command (Node). Run with `npx spade <command>` or `npm run spade -- <command>`.
 * Contract: with --json the last line printed is one JSON object; exit 0 on
 * success, 1 on a failed check, 2 on bad usage.
 */
import { serializeError, UsageError } from '../core/errors.ts';
import type { Io } from './args.ts';

export const USAGE = `spade — SPADE Playground command line

Usage:
  spade validate FILE... [--json] [--max-turns N]
                                             check environment files (exit 1 if any fails)
  spade play FILE [--seed N] [--actions A1 A2 ...] [--solution] [--json]
                                             play an environment (actions from stdin by default)
  spade share encode FILE... [--title T] [--base URL] [--json]
                                             make a share link from an env set (.json) or env files (.js)
  spade share decode LINK [--out FILE] [--json]
                                             read a share link back into an env set
  spade bench sandbox [--json]               sandbox speed: QuickJS vs native V8 vs call floor, checker time
  spade run --backend openai|replay|local ... --iterations N --out DIR [--resume] [--record FILE]
            [--preset laptop|paper] [--set key=value ...]
                                             headless self-play into a run directory (see docs/loop.md)
  spade config show [--preset NAME] [--set key=value ...] [--link HASH] [--json]
                                             the resolved settings: each key's value and source (default, preset, link, flag)
  spade run export DIR --out FILE [--gzip] [--json]
                                             one run file from a run directory (the app opens it to review)
  spade serve [SOURCE...] [--watch DIR] [--host H] [--port P] [--workers N] [--max-sessions N]
              [--idle-timeout S] [--max-turns N] [--token T]
                                             serve environments over OpenEnv (HTTP + /ws) to RL trainers;
                                             SOURCE: seeds, an env set, a share link, .js files, a run dir
  spade bench serve [--sessions N] [--seconds S] [--json]
                                             OpenEnv server load test on loopback: steps/s, p50/p99, leaks
  spade models [--json]                      the WebLLM model catalog and the other backends
  spade chat --backend openai --base-url URL --model M "prompt"
                                             stream one reply from a server
  spade bench loop [--json]                  loop overhead outside model calls, replies paced at 20 tokens/s
  spade engine logits --model DIR [--adapter DIR] --tokens 1,2,3 [--all] [--device gpu|cpu] [--json]
  spade engine generate --model DIR [--adapter DIR] --tokens 1,2,3 --max-new N [--temperature 0] [--steps-per-readback K] [--kv f32|f16] [--json]
                                             run our WebGPU engine (or its CPU references) on a checkpoint;
                                             both take --weights f32|bf16|f16|q4 (the base's GPU storage)
  spade bench engine [--json]                matmul GFLOP/s vs the FMA peak, decode and LoRA training tokens/s
  spade engine init --arch llama|qwen2|qwen3 --layers N --hidden N --out DIR [--seed S] [--heads N] [--kv-heads N]
                    [--intermediate N] [--dtype f32|bf16] [--json]
                                             write a small random-initialised checkpoint (Hugging Face layout)
  spade train toy [--seed S] [--updates N] [--device cpu|gpu] [--json]
                                             the learning proof: a tiny fresh model learns a toy environment
  spade bench train [--json]                 GRPO training tokens/s and the generate/train split of a cycle
  spade gpu [--json]                         report the WebGPU adapter Node sees
  spade micro [--cycles N] [--seed S] [--designer regret|random|fixed|control] [--json]
                                             the micro self-play lab: two tiny fresh models, toy levels
  spade micro check [--seed S] [--cycles N] [--json]
                                             the lab's learning-curve check, per family
  spade micro compare --seeds A-B [--cycles N] [--json] [--combine FILE...]
                                             the four designers per seed, judged by the pre-registered criteria
  spade help                                 this text

Exit codes: 0 success, 1 a check failed, 2 bad usage.`;

const defaultIo: Io = { out: (l) => console.log(l), err: (l) => console.error(l) };

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
  micro: async () => (await import('./cmd_micro.ts')).micro,
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
