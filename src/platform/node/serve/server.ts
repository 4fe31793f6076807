/**
 * `spade serve`: an OpenEnv-compatible HTTP + WebSocket server for an environment catalog.
 *
 * This file starts and stops it; the routes live in http_routes.ts (POST /reset, POST /step,
 * GET /state, /health, /schema, /metadata) and ws_sessions.ts (/ws, one session per connection),
 * which share episodes.ts (picking, starting and stepping episodes, the turn limit and the replay
 * cap), access.ts (the Host and Origin allow-lists and the bearer token, checked on every
 * route) and kill_budget.ts (the watchdog kills a session, an HTTP client or an environment may
 * cause before it is refused). Sessions share a pool of sandbox workers. Before it listens, the server loads and resets
 * every served environment once and leaves out (and names) those that fail; a watched run
 * directory's new environments go through the same check. Off loopback every route but /health
 * needs `Authorization: Bearer TOKEN`. close() drains: calls in flight finish (up to a grace
 * period), sessions are closed with 1001, instances disposed, workers stopped. No state is shared
 * between server processes but the environment set, so several can sit behind a balancer.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { SERVE_DEFAULTS } from '../../../core/defaults.ts';
import type { EnvRecord } from '../../../core/env/envset.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES, type SandboxLimits } from '../../../core/env/limits.ts';
import { serializeError, UsageError } from '../../../core/errors.ts';
import type { SandboxPool } from '../../../core/sandbox/pool.ts';
import { createNodeSandboxPool } from '../sandbox_pool.ts';
import { Access, isLoopback } from './access.ts';
import type { EnvCatalog } from './env_catalog.ts';
import { lostToNeighbour, MAX_REBUILDS_PER_CALL } from './env_instance.ts';
import { Episodes, MAX_REPLAY_CHARS } from './episodes.ts';
import { HttpRoutes } from './http_routes.ts';
import { WsSessions } from './ws_sessions.ts';

export interface ServeOptions {
  catalog: EnvCatalog;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Sandbox workers (default: one per core). */
  workers?: number;
  /** Concurrent WebSocket sessions (default: what the workers' memory budget holds). */
  maxSessions?: number;
  /** A session with no message for this long is closed (default 300 s). */
  idleTimeoutMs?: number;
  /** Largest WebSocket frame or HTTP body (default 1 MiB). */
  maxMessageBytes?: number;
  /** Messages a session may have waiting behind the one being answered (default 16). */
  maxQueued?: number;
  /** Required as `Authorization: Bearer TOKEN` when set; must be set off loopback. */
  token?: string | null;
  /** Origins (besides the server's own) whose pages may call it (`--allow-origin`). */
  allowOrigins?: readonly string[];
  /** Host names (besides loopback names and IP addresses) the server answers to (`--allow-host`). */
  allowHosts?: readonly string[];
  limits?: SandboxLimits;
  /** Turns per episode; the server truncates the episode at this step whatever the environment does. */
  maxTurns?: number;
  /** Characters of actions an episode keeps for replay (default MAX_REPLAY_CHARS); the step past it truncates. */
  maxReplayChars?: number;
  /** Extra time past a sandbox call's limit before its worker is killed. */
  graceMs?: number;
  log?: (line: string) => void;
}

export interface ServerStats {
  sessions: number;
  maxSessions: number;
  /** Environment instances loaded in the sandbox and not yet disposed. */
  liveEnvs: number;
  workers: number;
  /** Workers killed and replaced by the sandbox watchdog. */
  workerReplacements: number;
  /** Instances loaded again and replayed after losing their worker to a neighbour. */
  replays: number;
}

/** Sandbox workers by default: one per core (the server's own thread mostly waits on them). */
export function defaultWorkers(): number {
  return Math.max(1, availableParallelism());
}

/** Environment instances one worker holds: its memory budget over each instance's memory limit. */
export function sessionsPerWorker(limits: SandboxLimits): number {
  return Math.floor(MODULE_BUDGET_BYTES / limits.memoryBytes);
}

/**
 * The check every served environment passes before it is offered: it loads and resets (seed 0)
 * within the sandbox limits. Returns null, or what failed.
 */
function loadAndReset(
  pool: SandboxPool,
  maxTurns: number,
  limits: SandboxLimits,
): (rec: EnvRecord) => Promise<string | null> {
  const once = async (rec: EnvRecord): Promise<unknown> => {
    let id: string | null = null;
    try {
      const env = await pool.load(rec.code, maxTurns, limits);
      id = env.id;
      await pool.reset(env.id, 0);
      return null;
    } catch (err) {
      return err;
    } finally {
      if (id !== null) await pool.dispose(id).catch(() => undefined);
    }
  };
  return async (rec) => {
    // checks run side by side: one that lost its worker to another's kill is tried again
    let err = await once(rec);
    for (let tries = 1; err !== null && lostToNeighbour(err) && tries < MAX_REBUILDS_PER_CALL; tries++)
      err = await once(rec);
    if (err === null) return null;
    const e = serializeError(err);
    return `${e.name}: ${e.message}`.slice(0, 500);
  };
}

export class SpadeServer {
  readonly pool: SandboxPool;
  readonly maxSessions: number;
  private readonly http: Server;
  private readonly episodes: Episodes;
  private readonly access: Access;
  private readonly ws: WsSessions;
  private readonly idleTimeoutMs: number;
  private readonly log: (line: string) => void;
  private reaper: ReturnType<typeof setInterval> | undefined;
  private closing: Promise<void> | null = null;
  url = '';

  private constructor(
    private readonly opts: ServeOptions,
    bindHost: string,
  ) {
    const workers = Math.max(1, opts.workers ?? defaultWorkers());
    const limits = opts.limits ?? DEFAULT_LIMITS;
    const capacity = workers * sessionsPerWorker(limits);
    this.maxSessions = opts.maxSessions ?? capacity;
    if (this.maxSessions > capacity)
      throw new UsageError(
        `${this.maxSessions} sessions do not fit in ${workers} sandbox worker(s): each holds ${sessionsPerWorker(limits)} environments of ${limits.memoryBytes / 2 ** 20} MiB. Raise --workers to ${Math.ceil(this.maxSessions / sessionsPerWorker(limits))} or lower --max-sessions.`,
      );
    this.idleTimeoutMs = opts.idleTimeoutMs ?? SERVE_DEFAULTS.idleTimeoutS * 1000;
    const maxMessageBytes = opts.maxMessageBytes ?? SERVE_DEFAULTS.maxMessageBytes;
    this.log = opts.log ?? (() => undefined);
    this.access = new Access({
      bindHost,
      token: opts.token ?? null,
      allowOrigins: opts.allowOrigins,
      allowHosts: opts.allowHosts,
    });
    this.pool = createNodeSandboxPool({
      size: workers,
      ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
    });
    this.episodes = new Episodes({
      catalog: opts.catalog,
      pool: this.pool,
      limits,
      maxTurns: opts.maxTurns ?? SERVE_DEFAULTS.maxTurns,
      maxReplayChars: opts.maxReplayChars ?? MAX_REPLAY_CHARS,
      maxSessions: this.maxSessions,
    });
    const closing = () => this.closing !== null;
    const routes = new HttpRoutes({
      episodes: this.episodes,
      access: this.access,
      maxMessageBytes,
      closing,
      log: this.log,
    });
    this.ws = new WsSessions({
      episodes: this.episodes,
      access: this.access,
      maxMessageBytes,
      maxQueued: opts.maxQueued ?? 16,
      idleTimeoutMs: this.idleTimeoutMs,
      closing,
      log: this.log,
    });
    this.http = createServer(routes.handle);
    this.http.on('upgrade', this.ws.upgrade);
    // a client that breaks the HTTP framing (or sends headers past Node's 16 KiB) gets 400 (431)
    // and its socket closed; nothing else happens
    this.http.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
      if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      else socket.destroy();
    });
  }

  /**
   * Screen the catalog (every environment loads and resets, or is left out with its reason), then
   * listen; resolves once the port is bound (`url` is then http://host:port).
   */
  static async start(opts: ServeOptions): Promise<SpadeServer> {
    const host = opts.host ?? SERVE_DEFAULTS.host;
    if (!isLoopback(host) && !opts.token)
      throw new UsageError(
        `Binding to ${host} exposes the server beyond this machine: give a bearer token (--token or SPADE_SERVE_TOKEN).`,
      );
    const server = new SpadeServer(opts, host);
    try {
      const e = server.episodes.o;
      // two checks per worker at a time: one runs while the next one's load is on its way
      await opts.catalog.useCheck(
        loadAndReset(server.pool, e.maxTurns, e.limits),
        (line) => server.log(line),
        2 * server.pool.size,
      );
      await new Promise<void>((resolve, reject) => {
        server.http.once('error', reject);
        server.http.listen(opts.port ?? SERVE_DEFAULTS.port, host, () => resolve());
      });
    } catch (err) {
      opts.catalog.stop();
      await server.pool.terminate();
      throw err;
    }
    const addr = server.http.address() as AddressInfo;
    server.access.listening(addr.port);
    server.url = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
    const every = Math.min(server.idleTimeoutMs / 4, 5000);
    server.reaper = setInterval(() => server.ws.reapIdle(), every);
    server.reaper.unref();
    return server;
  }

  stats(): ServerStats {
    return {
      sessions: this.ws.size,
      maxSessions: this.maxSessions,
      liveEnvs: this.episodes.counter.live,
      workers: this.pool.size,
      workerReplacements: this.pool.kills,
      replays: this.episodes.counter.replays,
    };
  }

  /**
   * Graceful shutdown: stop accepting, let each session's call in flight finish (at most
   * `graceMs`), close every session (1001), dispose the instances and stop the workers.
   */
  close(graceMs = 5000): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.reaper);
      this.opts.catalog.stop();
      this.http.close();
      const open = await this.ws.drain(graceMs);
      // calls still running past the grace period reject when the workers stop
      await this.pool.terminate();
      await this.ws.release(open);
      this.http.closeAllConnections();
    })();
    return this.closing;
  }
}
