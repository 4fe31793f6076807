/**
 * `spade bench serve` — see bench_serve.ts.
 *
 * `spade bench loop [--json]` — the loop's own cost: one cycle replayed instantly (so the time is all
 * outside model calls) vs the same cycle's model time if its replies streamed at 20 tokens/s.
 *
 * `spade bench sandbox` — see bench_sandbox.ts.
 */
import { createNodeSandboxPool } from '../platform/node/sandbox_pool.ts';
import { JSON_FLAG, parseCommand, pickSubcommand, type CommandGroup, type CommandSpec, type Io } from './args.ts';
import { DEFAULTS } from '../core/config.ts';
import { RecordingChatModel, ReplayChatModel } from '../core/llm/replay.ts';
import { scriptedAgent, scriptedDesigner, scriptedHinter } from '../core/llm/scripted_models.ts';
import { chunkText } from '../core/spade/corpus.ts';
import { SpadeLoop } from '../core/spade/loop.ts';
import { StoreRunStore, type RunSpec } from '../core/spade/run_store.ts';
import { MemoryStore } from '../core/store.ts';
import { MeteredChatModel } from '../core/llm/chat_model.ts';
import { BENCH_LAB, benchLab } from './bench_lab.ts';
import { BENCH_SANDBOX, benchSandbox } from './bench_sandbox.ts';

const BENCH_LOOP: CommandSpec = {
  name: 'bench loop',
  usage: '[--json]',
  summary: "The loop's own cost: one cycle replayed instantly vs its model time with replies at 20 tokens/s.",
  flags: { json: JSON_FLAG },
  example: 'spade bench loop',
};

const BENCH_ENGINE: CommandSpec = {
  name: 'bench engine',
  usage: '[--quick] [--json]',
  summary:
    'The engine on the adapter Node sees: matmul GFLOP/s against the FMA peak, decode and LoRA training\n' +
    'tokens/s, memory per parameter, batching and KV formats (docs/benchmarks.md).',
  flags: { quick: { help: 'smaller sizes (for software adapters)' }, json: JSON_FLAG },
  example: 'spade bench engine --quick --json',
};

const BENCH_TRAIN: CommandSpec = {
  name: 'bench train',
  usage: '[flags]',
  summary: 'GRPO training tokens/s on the toy task and the share of a cycle spent generating vs training.',
  flags: {
    updates: { value: 'N', help: 'toy updates to time', default: 3 },
    device: { value: 'cpu|gpu', help: "the engine's CPU references or WebGPU", default: 'cpu' },
    json: JSON_FLAG,
  },
  example: 'spade bench train --device gpu',
};

const BENCH_SERVE: CommandSpec = {
  name: 'bench serve',
  usage: '[flags]',
  summary:
    '`spade serve` load test on loopback: concurrent WebSocket sessions (clients in a process of their\n' +
    'own) play seed environments; steps/s (and per worker), p50/p99 step latency, CPU per step, errors\n' +
    'and leaks after disconnect.',
  flags: {
    sessions: { value: 'N[,N...]', help: 'concurrent sessions, one run per count', default: '64,256' },
    seconds: { value: 'S', help: 'how long to play', default: 5 },
    workers: { value: 'N', help: 'sandbox workers (default: one per CPU core)' },
    json: JSON_FLAG,
  },
  example: 'spade bench serve --sessions 16 --seconds 3',
};

export const BENCH: CommandGroup = {
  name: 'bench',
  summary: 'Benchmarks: each prints figures measured in one run (docs/benchmarks.md).',
  subcommands: [BENCH_SANDBOX, BENCH_LOOP, BENCH_ENGINE, BENCH_TRAIN, BENCH_SERVE, BENCH_LAB],
};

export async function bench(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(BENCH, argv, io);
  if (!picked) return 0;
  const args = parseCommand(picked.spec, picked.rest, io);
  if (!args) return 0;
  const json = args.flags.has('json');
  if (picked.spec === BENCH_LOOP) return benchLoop(io, json);
  if (picked.spec === BENCH_ENGINE) return (await import('./bench_engine.ts')).benchEngine(io, args);
  if (picked.spec === BENCH_TRAIN) return (await import('./cmd_train.ts')).benchTrain(io, args);
  if (picked.spec === BENCH_SERVE) return (await import('./bench_serve.ts')).benchServe(io, args, json);
  if (picked.spec === BENCH_LAB) return benchLab(io, args);

  return benchSandbox(io, args);
}

async function benchLoop(io: Io, json: boolean): Promise<number> {
  const TOKENS_PER_SECOND = 20;
  const spec: RunSpec = {
    config: { ...DEFAULTS, seed: 3 },
    skills: ['mathematical', 'logical_deduction', 'pattern_recognition'],
    models: { designer: 'bench double', hint: 'bench double', agent: 'bench double' },
    corpus: 'bench',
    createdAt: new Date(0).toISOString(),
  };
  const corpus = chunkText('Binary search halves an interval at every probe.', 'bench', 50);
  const pool = createNodeSandboxPool({ size: 1 });
  try {
    // 1. record one cycle with scripted doubles (every role's traffic in one transcript)
    const designer = new RecordingChatModel(scriptedDesigner());
    const hint = new RecordingChatModel(scriptedHinter());
    const agent = new RecordingChatModel(scriptedAgent());
    await new SpadeLoop({
      spec,
      models: { designer, hint, agent },
      runner: pool,
      corpus,
      store: new StoreRunStore(new MemoryStore(), 'rec'),
    }).run(1);
    // 2. replay it instantly: wall time ≈ everything outside model calls
    const models = {
      designer: new MeteredChatModel(new ReplayChatModel(designer.toJsonl())),
      hint: new MeteredChatModel(new ReplayChatModel(hint.toJsonl())),
      agent: new MeteredChatModel(new ReplayChatModel(agent.toJsonl())),
    };
    const t0 = performance.now();
    await new SpadeLoop({
      spec,
      models,
      runner: pool,
      corpus,
      store: new StoreRunStore(new MemoryStore(), 'replay'),
    }).run(1);
    const wallMs = performance.now() - t0;
    const all = Object.values(models);
    const modelMs = all.reduce((s, m) => s + m.ms, 0);
    const tokens = all.reduce((s, m) => s + m.tokens, 0);
    const calls = all.reduce((s, m) => s + m.calls, 0);
    const overheadMs = wallMs - modelMs;
    const pacedModelMs = (tokens / TOKENS_PER_SECOND) * 1000;
    const share = overheadMs / (overheadMs + pacedModelMs);
    const result = {
      ok: share < 0.05,
      overheadMs: +overheadMs.toFixed(1),
      modelCalls: calls,
      tokens,
      pacedModelMs: Math.round(pacedModelMs),
      tokensPerSecond: TOKENS_PER_SECOND,
      overheadShare: +share.toFixed(4),
    };
    if (json) io.out(JSON.stringify(result));
    else {
      io.out(`one cycle (3 environments, 4+4 plays each): ${calls} model calls, ${tokens} tokens`);
      io.out(`time outside model calls   ${result.overheadMs} ms`);
      io.out(`model time at ${TOKENS_PER_SECOND} tokens/s    ${(pacedModelMs / 1000).toFixed(1)} s`);
      io.out(`overhead share of a cycle  ${(share * 100).toFixed(2)}% (target < 5%)`);
    }
    return 0;
  } finally {
    await pool.terminate();
  }
}
