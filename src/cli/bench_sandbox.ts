/**
 * `spade bench sandbox [--rounds N] [--compare REF] [--profile] [--json]` — sandbox speed, every
 * figure measured in one run, in rounds whose medians are reported:
 *   - host-driven steps/s of a trivial environment in QuickJS (one thread: one worker's view);
 *   - the bare quickjs-emscripten call floor (a no-op guest function, one string in and one out),
 *     measured in blocks alternating with the steps, so `sandboxOverFloor` is a ratio taken under
 *     the same load (steps per bare call);
 *   - the same environment's steps/s natively in V8 (benchmark only; never done with generated code);
 *   - steps/s through a one-worker pool: POOL_SESSIONS sessions stepping at once (the pool batches
 *     their calls), and one session alone (a message round trip per step);
 *   - checker time per seed environment (median and max);
 *   - a sandbox worker's start: one-worker pools started one after another (start, load, reset,
 *     end), wall and CPU ms each, measured first, for this tree only (V8 shares compiled QuickJS
 *     between everything in the process that holds it, so nothing measured after it starts cold).
 * --compare REF extracts the commit REF (git archive) into a temporary directory and measures its
 * sandbox (host, pool, checker) and this tree's in the same process, alternating round by round,
 * and prints each figure for both and their ratio (this tree over REF): a change's cost as a ratio.
 * --profile adds where a step's time goes: a CPU profile of the in-process step loop, grouped into
 * QuickJS (WASM), the quickjs-emscripten glue, the sandbox host, GC and the rest.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { newQuickJSWASMModuleFromVariant } from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { UsageError } from '../core/errors.ts';
import { JSON_FLAG, flag, intFlag, type Args, type CommandSpec, type Io } from './args.ts';

export const BENCH_SANDBOX: CommandSpec = {
  name: 'bench sandbox',
  usage: '[flags]',
  summary:
    'Sandbox speed in one run: QuickJS steps/s against the bare call floor and native V8, through the\n' +
    "worker pool (many sessions, and one), the checker time per seed environment, and a worker's start.",
  flags: {
    rounds: { value: 'N', help: 'rounds to take medians over', default: 3 },
    compare: { value: 'REF', help: "also measure the commit REF's sandbox, alternating, and print the ratios" },
    profile: { help: "add where a step's time goes (a CPU profile of the step loop)" },
    json: JSON_FLAG,
  },
  example: ['spade bench sandbox --json', 'spade bench sandbox --compare HEAD~3 --profile'],
};

/** A trivial counter environment: the cost of a step is almost all call overhead. */
const TRIVIAL_ENV = `class CounterEnv {
  constructor(maxTurns = 1e9) { this.maxTurns = maxTurns; }
  reset(seed) { this.n = 0; return ['count', {}]; }
  step(action) { this.n++; return ['n=' + this.n, 0, false, false, {}]; }
  solution() { return ['\\\\boxed{1}']; }
}`;
const ACTION = '\\boxed{1}';

/**
 * Sessions stepping at once through the one-worker pool: as many as one worker holds at the default
 * 32 MiB memory limit (its 1,536 MiB budget over 32 MiB), as `spade serve` fills it.
 */
const POOL_SESSIONS = 48;
/**
 * Length of one timed block; steps and floor alternate block by block. Short blocks side by side
 * see the same load on a shared machine, so their ratio holds where the rates themselves do not.
 */
const BLOCK_MS = 30;
/** Pairs of (steps, floor) blocks per round. */
const PAIRS = 16;
/** Warm-up before the first round: lets V8 tier the WASM and JS up before anything is timed. */
const WARM_MS = 600;
const POOL_MS = 500;
/** One-worker pools started one after another for the worker-start figure. */
const WORKER_STARTS = 6;
const PROFILE_MS = 1500;

interface HostLike {
  load(code: string): Promise<{ id: string }>;
  reset(id: string, seed: number): unknown;
  step(id: string, action: string): unknown;
  dispose(id: string): unknown;
}
interface PoolLike {
  load(code: string): Promise<{ id: string }>;
  reset(id: string, seed: number): Promise<unknown>;
  step(id: string, action: string): Promise<unknown>;
  terminate(): Promise<void>;
}
/** One source tree's sandbox: this one, or a commit extracted for --compare. */
interface Build {
  label: string;
  createHost(): Promise<HostLike>;
  createPool(opts: { size: number }): PoolLike;
  checkEnv(runner: HostLike, code: string): Promise<{ ms: number; ok: boolean }>;
  seeds: { title: string; code: string }[];
}

async function importBuild(root: string, label: string): Promise<Build> {
  // this tree's or another commit's (--compare) modules, by their file URL under `root`: a computed
  // path by design (eslint.config.js allows this one shape, in this file: COMPUTED_IMPORT_ALLOWED), so
  // it is held here to core and platform/node, which the CLI may import — never the engine past its
  // front door
  const at = (p: string): Promise<unknown> => {
    if (!/^src\/(core|platform\/node)\//.test(p))
      throw new Error(`bench sandbox loads core and platform/node only: ${p}`);
    return import(pathToFileURL(join(root, p)).href);
  };
  const host = (await at('src/core/sandbox/host.ts')) as {
    SandboxHost: { create(): Promise<HostLike> };
  };
  const pool = (await at('src/platform/node/sandbox_pool.ts')) as {
    createNodeSandboxPool(opts: { size: number }): PoolLike;
  };
  const checker = (await at('src/core/env/checker.ts')) as {
    checkEnv(runner: HostLike, code: string): Promise<{ ms: number; ok: boolean }>;
  };
  const seeds = (await at('src/core/env/seeds/index.ts')) as { SEED_ENVS: { title: string; code: string }[] };
  return {
    label,
    createHost: () => host.SandboxHost.create(),
    createPool: (o) => pool.createNodeSandboxPool(o),
    checkEnv: (r, c) => checker.checkEnv(r, c),
    seeds: seeds.SEED_ENVS,
  };
}

/** `ref` extracted with git archive into a fresh temporary directory that shares this tree's node_modules. */
async function extractRef(ref: string): Promise<string> {
  const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
  try {
    execFileSync('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { cwd: root, stdio: 'ignore' });
  } catch {
    throw new UsageError(`--compare: "${ref}" is not a commit in ${root}`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'spade-bench-'));
  execFileSync('sh', ['-c', 'git archive --format=tar "$1" | tar -x -C "$2"', 'sh', ref, dir], { cwd: root });
  await symlink(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/**
 * Wall and CPU milliseconds (every thread of the process) per one-worker pool started, given an
 * environment to load and reset, and ended: what each worker started for a run or a replaced one costs.
 */
async function workerStarts(build: Build, n: number): Promise<{ ms: number; cpuMs: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const pool = build.createPool({ size: 1 });
    try {
      const env = await pool.load(TRIVIAL_ENV);
      await pool.reset(env.id, 0);
    } finally {
      await pool.terminate();
    }
  }
  const c = process.cpuUsage(c0);
  return { ms: Math.round((performance.now() - t0) / n), cpuMs: Math.round((c.user + c.system) / 1000 / n) };
}

/** Calls of `fn` per second over about `ms` (it is called in bursts of 100). */
function rate(fn: () => unknown, ms: number): number {
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    for (let i = 0; i < 100; i++) fn();
    n += 100;
    t = performance.now();
  }
  return (n / (t - t0)) * 1000;
}

async function poolRate(pool: PoolLike, ids: string[], ms: number): Promise<number> {
  let n = 0;
  const t0 = performance.now();
  const end = t0 + ms;
  await Promise.all(
    ids.map(async (id) => {
      while (performance.now() < end) {
        await pool.step(id, ACTION);
        n++;
      }
    }),
  );
  return (n / (performance.now() - t0)) * 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface SandboxFigures {
  sandboxStepsPerSec: number;
  callFloorPerSec: number;
  /** Steps per bare call: the median of the per-pair ratios. */
  sandboxOverFloor: number;
  /** POOL_SESSIONS sessions stepping at once through one worker. */
  poolStepsPerSec: number;
  /** One session alone through one worker. */
  poolOneSessionStepsPerSec: number;
  poolOverInProcess: number;
  checkMedianMs: number;
  checkMaxMs: number;
  seedEnvs: number;
  seedEnvsPassing: number;
}

interface Round {
  steps: number[];
  floors: number[];
  ratios: number[];
  pool: number;
  poolOne: number;
  checks: { title: string; ms: number; ok: boolean }[];
}

/** The bare call: a no-op guest function, one string in and one out, through the public API. */
async function floorCall(): Promise<{ call: () => void; dispose: () => void }> {
  const mod = await newQuickJSWASMModuleFromVariant(variant);
  const ctx = mod.newContext();
  const noop = ctx.unwrapResult(ctx.evalCode('(s) => s'));
  return {
    call: () => {
      const arg = ctx.newString(ACTION);
      const r = ctx.unwrapResult(ctx.callFunction(noop, ctx.undefined, arg));
      ctx.getString(r);
      r.dispose();
      arg.dispose();
    },
    dispose: () => {
      noop.dispose();
      ctx.dispose();
    },
  };
}

/** One build set up for measuring: a host with the trivial env, a one-worker pool with its sessions. */
class Bench {
  private constructor(
    readonly build: Build,
    readonly host: HostLike,
    readonly envId: string,
    readonly pool: PoolLike,
    readonly poolIds: string[],
  ) {}

  static async open(build: Build): Promise<Bench> {
    const host = await build.createHost();
    const env = await host.load(TRIVIAL_ENV);
    host.reset(env.id, 0);
    const pool = build.createPool({ size: 1 });
    const ids: string[] = [];
    try {
      for (let i = 0; i < POOL_SESSIONS; i++) {
        const e = await pool.load(TRIVIAL_ENV);
        await pool.reset(e.id, 0);
        ids.push(e.id);
      }
    } catch (err) {
      host.dispose(env.id);
      await pool.terminate();
      throw err;
    }
    const b = new Bench(build, host, env.id, pool, ids);
    rate(() => host.step(env.id, ACTION), WARM_MS);
    await poolRate(pool, ids, WARM_MS / 2);
    return b;
  }

  step = () => this.host.step(this.envId, ACTION);

  async round(floor: () => void): Promise<Round> {
    const r: Round = { steps: [], floors: [], ratios: [], pool: 0, poolOne: 0, checks: [] };
    for (let i = 0; i < PAIRS; i++) {
      const s = rate(this.step, BLOCK_MS);
      const f = rate(floor, BLOCK_MS);
      r.steps.push(s);
      r.floors.push(f);
      r.ratios.push(s / f);
    }
    r.pool = await poolRate(this.pool, this.poolIds, POOL_MS);
    r.poolOne = await poolRate(this.pool, this.poolIds.slice(0, 1), POOL_MS / 2);
    for (const seed of this.build.seeds) {
      const c = await this.build.checkEnv(this.host, seed.code);
      r.checks.push({ title: seed.title, ms: c.ms, ok: c.ok });
    }
    return r;
  }

  async close(): Promise<void> {
    this.host.dispose(this.envId);
    await this.pool.terminate();
  }
}

function figures(rounds: Round[]): SandboxFigures {
  const steps = median(rounds.map((r) => median(r.steps)));
  const last = rounds[rounds.length - 1]!.checks;
  return {
    sandboxStepsPerSec: Math.round(steps),
    callFloorPerSec: Math.round(median(rounds.map((r) => median(r.floors)))),
    sandboxOverFloor: +median(rounds.flatMap((r) => r.ratios)).toFixed(3),
    poolStepsPerSec: Math.round(median(rounds.map((r) => r.pool))),
    poolOneSessionStepsPerSec: Math.round(median(rounds.map((r) => r.poolOne))),
    poolOverInProcess: +median(rounds.map((r) => r.pool / median(r.steps))).toFixed(3),
    checkMedianMs: +median(rounds.map((r) => median(r.checks.map((c) => c.ms)))).toFixed(1),
    checkMaxMs: +Math.max(...rounds.flatMap((r) => r.checks.map((c) => c.ms))).toFixed(1),
    seedEnvs: last.length,
    seedEnvsPassing: last.filter((c) => c.ok).length,
  };
}

/** Share of the step loop's CPU samples by where they ran, and the functions with the most self time. */
interface StepProfile {
  /** Percent of samples: QuickJS (WASM), quickjs-emscripten glue, sandbox host, GC, the rest. */
  shares: Record<string, number>;
  top: { fn: string; where: string; percent: number }[];
  /** Microseconds per step while profiled (the profiler slows it a little). */
  usPerStep: number;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  hitCount?: number;
}

function category(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (url.startsWith('wasm://') || (/^\$?(js_|JS_|QTS_|__|emscripten|dl|malloc|free)/.test(functionName) && url === ''))
    return 'QuickJS (WASM)';
  if (/quickjs-emscripten|@jitl\/quickjs/.test(url)) return 'quickjs-emscripten glue';
  if (url.includes('/src/core/sandbox/')) return 'sandbox host';
  if (functionName === '(garbage collector)') return 'GC';
  if (url.includes('bench_sandbox')) return 'bench loop';
  return 'other (V8 built-ins, JSON, program)';
}

async function profileSteps(step: () => unknown): Promise<StepProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 50 });
    await session.post('Profiler.start');
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < PROFILE_MS) {
      for (let i = 0; i < 100; i++) step();
      n += 100;
    }
    const usPerStep = ((performance.now() - t0) * 1000) / n;
    const { profile } = (await session.post('Profiler.stop')) as { profile: { nodes: ProfileNode[] } };
    const byCat = new Map<string, number>();
    const byFn = new Map<string, { where: string; hits: number }>();
    let total = 0;
    for (const node of profile.nodes) {
      const hits = node.hitCount ?? 0;
      if (hits === 0 || node.callFrame.functionName === '(idle)') continue;
      total += hits;
      const cat = category(node.callFrame);
      byCat.set(cat, (byCat.get(cat) ?? 0) + hits);
      const name = node.callFrame.functionName || '(anonymous)';
      const key = `${name}|${cat}`;
      const f = byFn.get(key) ?? { where: cat, hits: 0 };
      f.hits += hits;
      byFn.set(key, f);
    }
    const pct = (h: number) => +((h / Math.max(total, 1)) * 100).toFixed(1);
    return {
      shares: Object.fromEntries([...byCat].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, pct(v)])),
      top: [...byFn]
        .sort((a, b) => b[1].hits - a[1].hits)
        .slice(0, 12)
        .map(([k, v]) => ({ fn: k.split('|')[0]!, where: v.where, percent: pct(v.hits) })),
      usPerStep: +usPerStep.toFixed(2),
    };
  } finally {
    await session.post('Profiler.disable').catch(() => undefined);
    session.disconnect();
  }
}

function nativeRate(): number {
  const Native = new Function(`${TRIVIAL_ENV}\nreturn CounterEnv;`)() as new () => {
    reset(s: number): unknown;
    step(a: string): unknown;
  };
  const native = new Native();
  native.reset(0);
  rate(() => JSON.parse(JSON.stringify(native.step(ACTION))), 200);
  return Math.round(rate(() => JSON.parse(JSON.stringify(native.step(ACTION))), 300));
}

function printFigures(io: Io, f: SandboxFigures, label = ''): void {
  const l = label ? `${label}: ` : '';
  io.out(`${l}sandbox steps/s (host-driven, 1 thread)   ${f.sandboxStepsPerSec.toLocaleString('en')}`);
  io.out(
    `${l}quickjs call floor calls/s                ${f.callFloorPerSec.toLocaleString('en')}  (steps per bare call ${f.sandboxOverFloor})`,
  );
  io.out(
    `${l}worker-pool steps/s, ${POOL_SESSIONS} sessions          ${f.poolStepsPerSec.toLocaleString('en')}  (${f.poolOverInProcess}× in-process; one session alone ${f.poolOneSessionStepsPerSec.toLocaleString('en')})`,
  );
  io.out(
    `${l}checker per seed env                      median ${f.checkMedianMs} ms, max ${f.checkMaxMs} ms over ${f.seedEnvs} (${f.seedEnvsPassing} pass)`,
  );
}

function printProfile(io: Io, p: StepProfile, label = ''): void {
  io.out(`${label ? `${label}: ` : ''}where a step's time goes (${p.usPerStep} µs/step while profiled):`);
  for (const [k, v] of Object.entries(p.shares)) io.out(`  ${String(v).padStart(5)}%  ${k}`);
  for (const t of p.top.slice(0, 6)) io.out(`         ${String(t.percent).padStart(5)}%  ${t.fn} (${t.where})`);
}

export async function benchSandbox(io: Io, args: Args): Promise<number> {
  const json = args.flags.has('json');
  const rounds = intFlag(args, 'rounds');
  if (rounds < 1) throw new UsageError('--rounds must be at least 1');
  const ref = flag(args, 'compare');
  const wantProfile = args.flags.has('profile');
  const load0 = loadavg()[0]!;
  const here = await importBuild(join(import.meta.dirname, '../..'), 'this tree');
  // progress on stderr (stdout stays the figures, or the JSON): a run takes 10–20 s
  io.err(`bench sandbox: ${WORKER_STARTS} sandbox workers started one after another…`);
  const starts = await workerStarts(here, WORKER_STARTS);
  const refDir = ref ? await extractRef(ref) : null;
  const floor = await floorCall();
  const benches: Bench[] = [];
  try {
    const builds = refDir ? [await importBuild(refDir, ref!), here] : [here];
    for (const b of builds) benches.push(await Bench.open(b));
    rate(floor.call, WARM_MS);
    const done: Round[][] = benches.map(() => []);
    for (let r = 0; r < rounds; r++) {
      io.err(`bench sandbox: round ${r + 1} of ${rounds}…`);
      // alternate the order round by round, so a drift in the machine's load falls on both alike
      const order = r % 2 === 0 ? benches.map((_, i) => i) : benches.map((_, i) => benches.length - 1 - i);
      for (const i of order) done[i]!.push(await benches[i]!.round(floor.call));
    }
    const profiles = wantProfile ? await Promise.all(benches.map((b) => profileSteps(b.step))) : [];
    const all = done.map(figures);
    const native = nativeRate();
    const head = all[all.length - 1]!;
    const loadAverage = [+load0.toFixed(2), +loadavg()[0]!.toFixed(2)];
    const ok = all.every((f) => f.seedEnvsPassing === f.seedEnvs);
    if (!refDir) {
      const result = {
        ok,
        ...head,
        nativeStepsPerSec: native,
        nativeOverSandbox: +(native / head.sandboxStepsPerSec).toFixed(1),
        workerStartMs: starts.ms,
        workerStartCpuMs: starts.cpuMs,
        poolSessions: POOL_SESSIONS,
        rounds,
        loadAverage,
        ...(wantProfile ? { profile: profiles[0] } : {}),
        checks: done[0]![rounds - 1]!.checks,
      };
      if (json) io.out(JSON.stringify(result));
      else {
        printFigures(io, head);
        io.out(
          `native V8 steps/s (same env)              ${native.toLocaleString('en')}  (${result.nativeOverSandbox}× the sandbox)`,
        );
        io.out(
          `sandbox worker start (load, reset, end)   ${starts.ms} ms, ${starts.cpuMs} CPU-ms (${WORKER_STARTS} one after another)`,
        );
        io.out(
          `(${rounds} rounds; 1-minute load average ${loadAverage[0]} at the start, ${loadAverage[1]} at the end)`,
        );
        if (wantProfile) printProfile(io, profiles[0]!);
      }
      return ok ? 0 : 1;
    }
    const base = all[0]!;
    const ratio = Object.fromEntries(
      (Object.keys(head) as (keyof SandboxFigures)[])
        .filter((k) => typeof head[k] === 'number' && base[k] !== 0 && !k.startsWith('seedEnvs'))
        .map((k) => [k, +(head[k] / base[k]).toFixed(3)]),
    );
    const result = {
      ok,
      ref,
      base,
      head,
      ratio,
      workerStartMs: starts.ms,
      workerStartCpuMs: starts.cpuMs,
      rounds,
      poolSessions: POOL_SESSIONS,
      loadAverage,
      ...(wantProfile ? { profiles: { base: profiles[0], head: profiles[1] } } : {}),
    };
    if (json) io.out(JSON.stringify(result));
    else {
      printFigures(io, base, ref!);
      printFigures(io, head, 'this tree');
      io.out(
        `this tree / ${ref}: ${Object.entries(ratio)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
      io.out(
        `this tree: sandbox worker start (load, reset, end) ${starts.ms} ms, ${starts.cpuMs} CPU-ms (${WORKER_STARTS} one after another)`,
      );
      io.out(
        `(${rounds} rounds, alternating; 1-minute load average ${loadAverage[0]} at the start, ${loadAverage[1]} at the end)`,
      );
      if (wantProfile) {
        printProfile(io, profiles[0]!, ref!);
        printProfile(io, profiles[1]!, 'this tree');
      }
    }
    return ok ? 0 : 1;
  } finally {
    for (const b of benches) await b.close().catch(() => undefined);
    floor.dispose();
    if (refDir) await rm(refDir, { recursive: true, force: true });
  }
}
