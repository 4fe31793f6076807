/**
 * `spade bench serve [--sessions N] [--seconds S] [--workers N] [--json]` — a bounded load test of
 * `spade serve` on loopback: N concurrent WebSocket sessions (default 64) each play seed
 * environments with their reference solutions, episode after episode, for S seconds (default 5).
 * Reports steps/s, p50/p99 step latency (send to reply), errors (error replies, lost connections,
 * episodes not won) and, after every client has disconnected, the environment instances still
 * loaded and the workers replaced (both should be 0).
 */
import { SEED_ENVS } from '../core/env/seeds/index.ts';
import { UsageError } from '../core/errors.ts';
import { createNodeSandboxPool } from '../platform/node/sandbox_pool.ts';
import { EnvCatalog } from '../platform/node/serve/env_catalog.ts';
import { defaultWorkers, sessionsPerWorker, SpadeServer } from '../platform/node/serve/server.ts';
import { DEFAULT_LIMITS } from '../core/env/limits.ts';
import { OpenEnvWsClient } from '../platform/node/serve/ws_client.ts';
import { flag, intFlag, type Args, type Io } from './args.ts';

export interface ServeBenchResult {
  sessions: number;
  workers: number;
  seconds: number;
  steps: number;
  episodes: number;
  stepsPerSecond: number;
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

export async function runServeBench(opts: {
  sessions: number;
  seconds: number;
  workers?: number;
}): Promise<ServeBenchResult> {
  const plans = await solutions();
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
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  const fail = (what: string) => {
    errors++;
    firstError ??= what;
  };
  let episodes = 0;
  const t0 = performance.now();
  const deadline = t0 + opts.seconds * 1000;
  const session = async (i: number) => {
    const envIndex = i % SEED_ENVS.length;
    let client: OpenEnvWsClient;
    try {
      client = await OpenEnvWsClient.connect(server.url);
    } catch (err) {
      fail(`connect: ${(err as Error).message}`);
      return;
    }
    try {
      do {
        const r = await client.reset({ env_id: SEED_ENVS[envIndex]!.id, seed: 0 });
        if (r.type !== 'observation') throw new Error(String(r.data.message));
        let last = r;
        for (const text of plans[envIndex]!) {
          const s0 = performance.now();
          last = await client.step({ text });
          latencies.push(performance.now() - s0);
          if (last.type !== 'observation') throw new Error(String(last.data.message));
          if (last.data.done) break;
        }
        episodes++;
        if (!(last.data.done && Number(last.data.reward) > 0))
          fail(`${SEED_ENVS[envIndex]!.title}: the reference solution did not win`);
      } while (performance.now() < deadline);
      await client.close();
    } catch (err) {
      fail((err as Error).message);
      client.terminate();
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.sessions }, (_, i) => session(i)));
    const elapsed = (performance.now() - t0) / 1000;
    // the server ends a session when its socket closes: give the last close frames a moment
    for (let i = 0; i < 50 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
    const stats = server.stats();
    const sorted = [...latencies].sort((a, b) => a - b);
    return {
      sessions: opts.sessions,
      workers: stats.workers,
      seconds: Math.round(elapsed * 100) / 100,
      steps: latencies.length,
      episodes,
      stepsPerSecond: Math.round(latencies.length / elapsed),
      p50Ms: Math.round(quantile(sorted, 0.5) * 100) / 100,
      p99Ms: Math.round(quantile(sorted, 0.99) * 100) / 100,
      errors,
      firstError,
      leakedEnvs: stats.liveEnvs,
      leakedSessions: stats.sessions,
      workerReplacements: stats.workerReplacements,
    };
  } finally {
    await server.close();
  }
}

export async function benchServe(io: Io, args: Args, json: boolean): Promise<number> {
  const sessions = intFlag(args, 'sessions', 64);
  const seconds = Number(flag(args, 'seconds') ?? 5);
  if (sessions < 1) throw new UsageError('--sessions must be at least 1');
  if (!(seconds > 0)) throw new UsageError('--seconds must be a positive number');
  const workers = args.flags.has('workers') ? intFlag(args, 'workers', 1) : undefined;
  const r = await runServeBench({ sessions, seconds, workers });
  const ok = r.errors === 0 && r.leakedEnvs === 0 && r.leakedSessions === 0;
  if (json) io.out(JSON.stringify({ ok, ...r }));
  else {
    io.out(`spade serve on loopback: ${r.sessions} concurrent sessions, ${r.workers} sandbox workers, ${r.seconds} s`);
    io.out(`  ${r.steps} steps in ${r.episodes} episodes: ${r.stepsPerSecond} steps/s`);
    io.out(`  step latency p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms`);
    io.out(
      `  errors ${r.errors}; after disconnect: ${r.leakedSessions} sessions, ${r.leakedEnvs} environment instances left; ${r.workerReplacements} workers replaced`,
    );
  }
  return ok ? 0 : 1;
}
