/**
 * `spade bench serve` — see bench_serve.ts.
 *
 * `spade bench loop [--json]` — the loop's own cost: one cycle replayed instantly (so the time is all
 * outside model calls) vs the same cycle's model time if its replies streamed at 20 tokens/s.
 *
 * `spade bench sandbox [--json]` — sandbox speed, all measured in one run:
 *   - host-driven steps/s of a trivial environment in QuickJS (what one worker sustains);
 *   - the same environment's steps/s run natively in V8 (benchmark only; never done with generated code);
 *   - the bare quickjs-emscripten call floor (a no-op guest function, string in and out);
 *   - steps/s through the worker pool (message round trips included);
 *   - checker time per seed environment (median and max).
 */
import { newQuickJSWASMModuleFromVariant } from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { SEED_ENVS } from '../core/env/seeds/index.ts';
import { checkEnv } from '../core/env/checker.ts';
import { SandboxHost } from '../core/sandbox/host.ts';
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

/** A trivial counter environment: the cost of a step is almost all call overhead. */
export const TRIVIAL_ENV = `class CounterEnv {
  constructor(maxTurns = 1e9) { this.maxTurns = maxTurns; }
  reset(seed) { this.n = 0; return ['count', {}]; }
  step(action) { this.n++; return ['n=' + this.n, 0, false, false, {}]; }
  solution() { return ['\\\\boxed{1}']; }
}`;

function rate(n: number, ms: number): number {
  return Math.round((n / ms) * 1000);
}

function timeLoop(fn: () => void, minMs = 400): { n: number; ms: number } {
  for (let i = 0; i < 200; i++) fn(); // warm up
  let n = 0;
  const t0 = performance.now();
  let ms = 0;
  while (ms < minMs) {
    for (let i = 0; i < 500; i++) fn();
    n += 500;
    ms = performance.now() - t0;
  }
  return { n, ms };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const BENCH_SANDBOX: CommandSpec = {
  name: 'bench sandbox',
  usage: '[--json]',
  summary:
    'Sandbox speed in one run: QuickJS steps/s vs native V8 vs the bare call floor, through the worker\n' +
    'pool, and the checker time per seed environment.',
  flags: { json: JSON_FLAG },
  example: 'spade bench sandbox --json',
};

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
    '`spade serve` load test on loopback: concurrent WebSocket sessions play seed environments;\n' +
    'steps/s, p50/p99 step latency, errors and leaks after disconnect.',
  flags: {
    sessions: { value: 'N', help: 'concurrent sessions', default: 64 },
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

  // 1. sandbox, host-driven, in this thread (= one worker's view)
  const host = await SandboxHost.create();
  const env = await host.load(TRIVIAL_ENV);
  host.reset(env.id, 0);
  const sb = timeLoop(() => host.step(env.id, '\\boxed{1}'));
  host.dispose(env.id);

  // 2. native V8
  const Native = new Function(`${TRIVIAL_ENV}\nreturn CounterEnv;`)() as new () => {
    reset(s: number): unknown;
    step(a: string): unknown;
  };
  const native = new Native();
  native.reset(0);
  const nv = timeLoop(() => JSON.parse(JSON.stringify(native.step('\\boxed{1}'))), 300);

  // 3. call floor: a no-op guest function, one string in and one out
  const mod = await newQuickJSWASMModuleFromVariant(variant);
  const ctx = mod.newContext();
  const noop = ctx.unwrapResult(ctx.evalCode('(s) => s'));
  const floor = timeLoop(() => {
    const arg = ctx.newString('\\boxed{1}');
    const r = ctx.unwrapResult(ctx.callFunction(noop, ctx.undefined, arg));
    ctx.getString(r);
    r.dispose();
    arg.dispose();
  });
  noop.dispose();
  ctx.dispose();

  // 4. through the worker pool
  const pool = createNodeSandboxPool({ size: 1 });
  const penv = await pool.load(TRIVIAL_ENV);
  await pool.reset(penv.id, 0);
  let pn = 0;
  const p0 = performance.now();
  while (performance.now() - p0 < 400) {
    await pool.step(penv.id, '\\boxed{1}');
    pn++;
  }
  const poolMs = performance.now() - p0;

  // 5. checker time per seed environment (in-process host; the pool adds one message)
  const checks: { title: string; ms: number; ok: boolean }[] = [];
  for (const seed of SEED_ENVS) {
    const r = await checkEnv(host, seed.code);
    checks.push({ title: seed.title, ms: r.ms, ok: r.ok });
  }
  await pool.terminate();

  const result = {
    sandboxStepsPerSec: rate(sb.n, sb.ms),
    nativeStepsPerSec: rate(nv.n, nv.ms),
    callFloorPerSec: rate(floor.n, floor.ms),
    poolStepsPerSec: rate(pn, poolMs),
    nativeOverSandbox: +(rate(nv.n, nv.ms) / rate(sb.n, sb.ms)).toFixed(1),
    sandboxOverFloor: +(rate(sb.n, sb.ms) / rate(floor.n, floor.ms)).toFixed(3),
    checkMedianMs: +median(checks.map((c) => c.ms)).toFixed(1),
    checkMaxMs: +Math.max(...checks.map((c) => c.ms)).toFixed(1),
    seedEnvs: checks.length,
    seedEnvsPassing: checks.filter((c) => c.ok).length,
  };
  if (json) io.out(JSON.stringify({ ok: true, ...result, checks }));
  else {
    io.out(`sandbox steps/s (host-driven, 1 thread)  ${result.sandboxStepsPerSec.toLocaleString('en')}`);
    io.out(
      `native V8 steps/s (same env)             ${result.nativeStepsPerSec.toLocaleString('en')}  (${result.nativeOverSandbox}× the sandbox)`,
    );
    io.out(
      `quickjs call floor calls/s               ${result.callFloorPerSec.toLocaleString('en')}  (sandbox step = ${result.sandboxOverFloor}× floor rate)`,
    );
    io.out(`worker-pool steps/s (with messaging)     ${result.poolStepsPerSec.toLocaleString('en')}`);
    io.out(
      `checker per seed env                     median ${result.checkMedianMs} ms, max ${result.checkMaxMs} ms over ${result.seedEnvs} (${result.seedEnvsPassing} pass)`,
    );
  }
  return 0;
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
