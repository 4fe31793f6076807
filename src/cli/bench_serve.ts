/**
 * `spade bench serve [--sessions N[,N...]] [--seconds S] [--workers N] [--json]` — a bounded load
 * test of `spade serve` on loopback: N concurrent WebSocket sessions (default 64, then 256) each play
 * seed environments with their reference solutions, episode after episode, for S seconds (default 5).
 * The clients run in a process of their own (bench_serve_client.ts), so the figures are the
 * server's: steps/s (and per sandbox worker), p50/p99 step latency (send to reply, as the client
 * sees it), errors (error replies, lost connections, episodes not won) and, after every client has
 * disconnected, the sessions and environment instances still held and the workers replaced (all 0).
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { SEED_ENVS } from '../core/env/seeds/index.ts';
import { UsageError } from '../core/errors.ts';
import { createNodeSandboxPool } from '../platform/node/sandbox_pool.ts';
import { EnvCatalog } from '../platform/node/serve/env_catalog.ts';
import { defaultWorkers, sessionsPerWorker, SpadeServer } from '../platform/node/serve/server.ts';
import { DEFAULT_LIMITS } from '../core/env/limits.ts';
import { flag, intFlag, type Args, type Io } from './args.ts';
import { TIMED_MARK, type ClientPlan, type ClientResult } from './bench_serve_client.ts';

const CLIENT = fileURLToPath(new URL('./bench_serve_client.ts', import.meta.url));

export interface ServeBenchResult {
  sessions: number;
  workers: number;
  seconds: number;
  steps: number;
  episodes: number;
  stepsPerSecond: number;
  stepsPerSecondPerWorker: number;
  /**
   * CPU time per step (µs) of the server's process (its thread and the sandbox workers) and of the
   * clients' process: what a step costs whatever else the machine is doing.
   */
  serverCpuUsPerStep: number;
  clientCpuUsPerStep: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  /** The first error's message, when there was one. */
  firstError: string | null;
  /** Environment instances still loaded after every client disconnected. */
  leakedEnvs: number;
  /** Sessions the server still held after every client disconnected. */
  leakedSessions: number;
  workerReplacements: number;
  /** The 1-minute load average when the run started and ended (the machine may be shared). */
  loadAverage: [number, number];
}

const quantile = (sorted: number[], q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0;

/** Each seed environment's reference solution at seed 0. */
async function solutions(): Promise<string[][]> {
  const pool = createNodeSandboxPool({ size: 1 });
  try {
    const out: string[][] = [];
    for (const rec of SEED_ENVS) {
      const env = await pool.load(rec.code);
      await pool.reset(env.id, 0);
      out.push(await pool.solution(env.id));
      await pool.dispose(env.id);
    }
    return out;
  } finally {
    await pool.terminate();
  }
}

/**
 * Run the clients in a process of their own; resolves with what they measured. `onTimed` is called
 * when their timed window starts (every session connected and played one episode).
 */
function runClientProcess(plan: ClientPlan, onTimed: () => void): Promise<ClientResult> {
  const loader = process.env.SPADE_TS_LOADER;
  const child = spawn(process.execPath, [...(loader ? ['--import', loader] : []), CLIENT], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    const before = out.length;
    out += c.toString('utf8');
    if (
      out.indexOf(TIMED_MARK, Math.max(0, before - TIMED_MARK.length)) >= 0 &&
      !out.slice(0, before).includes(TIMED_MARK)
    )
      onTimed();
  });
  child.stdin.end(JSON.stringify(plan));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      try {
        if (code !== 0) throw new Error(`exit code ${code}`);
        resolve(JSON.parse(last) as ClientResult);
      } catch (err) {
        reject(new Error(`the bench's client process failed (${(err as Error).message})`));
      }
    });
  });
}

export async function runServeBench(opts: {
  sessions: number;
  seconds: number;
  workers?: number;
}): Promise<ServeBenchResult> {
  const plans = await solutions();
  const load0 = loadavg()[0]!;
  // enough workers to hold every session's instance (the default limits: 48 per worker)
  const workers = Math.max(
    opts.workers ?? defaultWorkers(),
    Math.ceil(opts.sessions / sessionsPerWorker(DEFAULT_LIMITS)),
  );
  const server = await SpadeServer.start({
    catalog: new EnvCatalog('seeds', SEED_ENVS),
    port: 0,
    workers,
    maxSessions: opts.sessions,
  });
  try {
    let cpu0 = process.cpuUsage();
    const r = await runClientProcess(
      {
        url: server.url,
        sessions: opts.sessions,
        seconds: opts.seconds,
        envs: SEED_ENVS.map((rec, i) => ({ id: rec.id, title: rec.title, actions: plans[i]! })),
      },
      () => (cpu0 = process.cpuUsage()),
    );
    // the server ends a session when its socket closes: give the last close frames a moment
    for (let i = 0; i < 50 && server.stats().sessions > 0; i++) await new Promise((res) => setTimeout(res, 20));
    const cpu = process.cpuUsage(cpu0);
    const stats = server.stats();
    const sorted = [...r.latencies].sort((a, b) => a - b);
    const perStep = (seconds: number) => Math.round((seconds * 1e6) / Math.max(1, r.latencies.length));
    const stepsPerSecond = r.latencies.length / r.seconds;
    return {
      sessions: opts.sessions,
      workers: stats.workers,
      seconds: Math.round(r.seconds * 100) / 100,
      steps: r.latencies.length,
      episodes: r.episodes,
      stepsPerSecond: Math.round(stepsPerSecond),
      stepsPerSecondPerWorker: Math.round(stepsPerSecond / stats.workers),
      serverCpuUsPerStep: perStep((cpu.user + cpu.system) / 1e6),
      clientCpuUsPerStep: perStep(r.cpuSeconds),
      p50Ms: Math.round(quantile(sorted, 0.5) * 100) / 100,
      p99Ms: Math.round(quantile(sorted, 0.99) * 100) / 100,
      errors: r.errors,
      firstError: r.firstError,
      leakedEnvs: stats.liveEnvs,
      leakedSessions: stats.sessions,
      workerReplacements: stats.workerReplacements,
      loadAverage: [+load0.toFixed(2), +loadavg()[0]!.toFixed(2)],
    };
  } finally {
    await server.close();
  }
}

/** `--sessions 64,256`: each count in turn. */
function sessionCounts(args: Args): number[] {
  const text = flag(args, 'sessions') ?? '64,256';
  const counts = text.split(',').map((t) => Number(t.trim()));
  if (counts.some((n) => !Number.isInteger(n) || n < 1))
    throw new UsageError(`--sessions takes whole numbers of at least 1, comma-separated; got "${text}"`);
  return counts;
}

export async function benchServe(io: Io, args: Args, json: boolean): Promise<number> {
  const counts = sessionCounts(args);
  const seconds = Number(flag(args, 'seconds') ?? 5);
  if (!(seconds > 0)) throw new UsageError('--seconds must be a positive number');
  const workers = args.flags.has('workers') ? intFlag(args, 'workers', 1) : undefined;
  const runs: ServeBenchResult[] = [];
  for (const sessions of counts) {
    const r = await runServeBench({ sessions, seconds, workers });
    runs.push(r);
    if (json) continue;
    io.out(
      `spade serve on loopback: ${r.sessions} concurrent sessions (clients in their own process), ${r.workers} sandbox workers, ${r.seconds} s`,
    );
    io.out(
      `  ${r.steps} steps in ${r.episodes} episodes: ${r.stepsPerSecond} steps/s (${r.stepsPerSecondPerWorker} per worker)`,
    );
    io.out(`  step latency p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms`);
    io.out(
      `  CPU per step: server ${r.serverCpuUsPerStep} µs (its thread and workers), clients ${r.clientCpuUsPerStep} µs`,
    );
    io.out(
      `  errors ${r.errors}; after disconnect: ${r.leakedSessions} sessions, ${r.leakedEnvs} environment instances left; ${r.workerReplacements} workers replaced; load average ${r.loadAverage[0]} -> ${r.loadAverage[1]}`,
    );
  }
  const ok = runs.every((r) => r.errors === 0 && r.leakedEnvs === 0 && r.leakedSessions === 0);
  if (json) io.out(JSON.stringify({ ok, runs }));
  return ok ? 0 : 1;
}
