/**
 * `spade serve`: an OpenEnv-compatible HTTP + WebSocket server for an environment catalog.
 *
 * Routes, as OpenEnv's HTTPEnvServer defines them: POST /reset, POST /step, GET /state (stateless:
 * each request gets a fresh environment instance, used and closed), GET /health, GET /schema,
 * GET /metadata (the set, with skills and the designer's scores), and /ws, one session per
 * connection with its own environment instance: {type: reset|step|state|close} messages answered
 * by {type: observation|state|error}. Sessions share a pool of sandbox workers; limits: sessions
 * (CAPACITY_REACHED), frame and body size, queued messages per session, idle time (the session is
 * closed), and the sandbox's own step/reset time and memory limits. Off loopback every route but
 * /health needs `Authorization: Bearer TOKEN`. close() drains: calls in flight finish (up to a
 * grace period), sessions are closed with 1001, instances disposed, workers stopped. No state is
 * shared between server processes but the environment set, so several can sit behind a balancer.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { DEFAULTS } from '../../../core/config.ts';
import type { EnvRecord } from '../../../core/env/envset.ts';
import { serializeError, UsageError } from '../../../core/errors.ts';
import { DEFAULT_LIMITS, MODULE_BUDGET_BYTES, type SandboxLimits } from '../../../core/env/limits.ts';
import type { SandboxPool } from '../../../core/sandbox/pool.ts';
import { createNodeSandboxPool } from '../sandbox_pool.ts';
import { drawFor, sampleEnv, scoresOf, type EnvCatalog } from './env_catalog.ts';
import { EnvInstance, type LiveCounter } from './env_instance.ts';
import {
  actionText,
  parseAction,
  parseResetParams,
  ProtocolValidationError,
  resetPayload,
  SAMPLE_RULES,
  SCHEMAS,
  stepPayload,
  WS_ERROR,
  type EpisodeInfo,
  type FieldError,
  type ResetParams,
} from './openenv.ts';

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
  limits?: SandboxLimits;
  maxTurns?: number;
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
}

interface Episode {
  env: EnvInstance;
  info: EpisodeInfo;
  episodeId: string;
  steps: number;
  done: boolean;
}

interface Session {
  id: string;
  ws: WebSocket;
  createdAt: number;
  lastActivity: number;
  queued: number;
  tail: Promise<void>;
  episode: Episode | null;
  closed: boolean;
}

/** Sandbox workers by default: one per core (the server's own thread mostly waits on them). */
export function defaultWorkers(): number {
  return Math.max(1, availableParallelism());
}

/** Environment instances one worker holds: its memory budget over each instance's memory limit. */
export function sessionsPerWorker(limits: SandboxLimits): number {
  return Math.floor(MODULE_BUDGET_BYTES / limits.memoryBytes);
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith('127.');
}

/** A failure the client caused or that the environment raised, with its OpenEnv code. */
class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly errors?: FieldError[],
  ) {
    super(message);
  }
}

export class SpadeServer {
  readonly pool: SandboxPool;
  readonly maxSessions: number;
  private readonly http: Server;
  private readonly wss: WebSocketServer;
  private readonly sessions = new Map<string, Session>();
  private readonly counter: LiveCounter = { live: 0 };
  private readonly limits: SandboxLimits;
  private readonly maxTurns: number;
  private readonly idleTimeoutMs: number;
  private readonly maxMessageBytes: number;
  private readonly maxQueued: number;
  private readonly token: Buffer | null;
  private readonly log: (line: string) => void;
  private reaper: ReturnType<typeof setInterval> | undefined;
  /** Stateless HTTP requests holding an instance right now (they count against maxSessions). */
  private httpInFlight = 0;
  private closing: Promise<void> | null = null;
  url = '';

  private constructor(private readonly opts: ServeOptions) {
    const workers = Math.max(1, opts.workers ?? defaultWorkers());
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    this.maxTurns = opts.maxTurns ?? DEFAULTS.maxTurns;
    const capacity = workers * sessionsPerWorker(this.limits);
    this.maxSessions = opts.maxSessions ?? capacity;
    if (this.maxSessions > capacity)
      throw new UsageError(
        `${this.maxSessions} sessions do not fit in ${workers} sandbox worker(s): each holds ${sessionsPerWorker(this.limits)} environments of ${this.limits.memoryBytes / 2 ** 20} MiB. Raise --workers to ${Math.ceil(this.maxSessions / sessionsPerWorker(this.limits))} or lower --max-sessions.`,
      );
    this.idleTimeoutMs = opts.idleTimeoutMs ?? 300_000;
    this.maxMessageBytes = opts.maxMessageBytes ?? 2 ** 20;
    this.maxQueued = opts.maxQueued ?? 16;
    this.token = opts.token ? Buffer.from(opts.token) : null;
    this.log = opts.log ?? (() => undefined);
    this.pool = createNodeSandboxPool({
      size: workers,
      ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
    });
    this.http = createServer((req, res) => void this.onRequest(req, res));
    this.wss = new WebSocketServer({ noServer: true, maxPayload: this.maxMessageBytes });
    this.http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
  }

  /** Start listening; resolves once the port is bound (`url` is then http://host:port). */
  static async start(opts: ServeOptions): Promise<SpadeServer> {
    const host = opts.host ?? '127.0.0.1';
    if (!isLoopback(host) && !opts.token)
      throw new UsageError(
        `Binding to ${host} exposes the server beyond this machine: give a bearer token (--token or SPADE_SERVE_TOKEN).`,
      );
    const server = new SpadeServer(opts);
    await new Promise<void>((resolve, reject) => {
      server.http.once('error', reject);
      server.http.listen(opts.port ?? 8000, host, () => resolve());
    }).catch(async (err: unknown) => {
      await server.pool.terminate();
      throw err;
    });
    const addr = server.http.address() as AddressInfo;
    server.url = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
    const every = Math.min(server.idleTimeoutMs / 4, 5000);
    server.reaper = setInterval(() => server.reapIdle(), every);
    server.reaper.unref();
    return server;
  }

  stats(): ServerStats {
    return {
      sessions: this.sessions.size,
      maxSessions: this.maxSessions,
      liveEnvs: this.counter.live,
      workers: this.pool.size,
      workerReplacements: this.pool.kills,
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
      const open = [...this.sessions.values()];
      await Promise.race([Promise.all(open.map((s) => s.tail)), new Promise((r) => setTimeout(r, graceMs).unref())]);
      for (const s of open) {
        s.closed = true;
        this.sessions.delete(s.id);
        if (s.ws.readyState === s.ws.OPEN) s.ws.close(1001, 'server shutting down');
      }
      // calls still running past the grace period reject when the workers stop
      await this.pool.terminate();
      for (const s of open) {
        await s.tail.catch(() => undefined);
        await s.episode?.env.dispose();
        s.episode = null;
      }
      this.wss.close();
      this.http.closeAllConnections();
    })();
    return this.closing;
  }

  // --- authentication -----------------------------------------------------------------------

  private authorized(req: IncomingMessage): boolean {
    if (!this.token) return true;
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    if (!m) return false;
    const given = Buffer.from(m[1]!.trim());
    return given.length === this.token.length && timingSafeEqual(given, this.token);
  }

  // --- HTTP ---------------------------------------------------------------------------------

  private send(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const routes: Record<string, string> = {
      '/health': 'GET',
      '/metadata': 'GET',
      '/schema': 'GET',
      '/state': 'GET',
      '/reset': 'POST',
      '/step': 'POST',
    };
    const method = routes[path];
    if (!method) return this.send(res, 404, { detail: 'Not Found' });
    if (req.method !== method) return this.send(res, 405, { detail: 'Method Not Allowed' });
    if (path !== '/health' && !this.authorized(req)) {
      res.setHeader('www-authenticate', 'Bearer');
      return this.send(res, 401, { detail: 'Missing or wrong bearer token (Authorization: Bearer TOKEN).' });
    }
    if (this.closing) return this.send(res, 503, { detail: 'The server is shutting down.' });
    try {
      if (path === '/health') return this.send(res, 200, { status: 'healthy' });
      if (path === '/schema') return this.send(res, 200, SCHEMAS);
      if (path === '/metadata') return this.send(res, 200, this.metadata());
      // a fresh instance's state, as OpenEnv's stateless GET /state gives
      if (path === '/state') return this.send(res, 200, { episode_id: null, step_count: 0 });
      const body = await this.readBody(req);
      if (body === undefined) return this.send(res, 413, { detail: `The body is over ${this.maxMessageBytes} bytes.` });
      let data: unknown = {};
      if (body.trim() !== '') {
        try {
          data = JSON.parse(body);
        } catch (err) {
          return this.send(res, 422, {
            detail: [
              {
                type: 'json_invalid',
                loc: ['body', 0],
                msg: 'JSON decode error',
                input: {},
                ctx: { error: (err as Error).message },
              },
            ],
          });
        }
      }
      if (path === '/reset') return this.send(res, 200, await this.httpReset(data));
      return this.send(res, 200, await this.httpStep(data));
    } catch (err) {
      if (err instanceof ProtocolValidationError) return this.send(res, 422, { detail: err.errors });
      if (err instanceof RequestError) {
        if (err.code === WS_ERROR.capacity) return this.send(res, 503, { detail: err.message });
        if (err.errors) return this.send(res, 422, { detail: err.errors });
      }
      return this.send(res, 500, { detail: (err as Error).message });
    }
  }

  /** The body as text, or undefined when it is over the size limit (reading stops there). */
  private readBody(req: IncomingMessage): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > this.maxMessageBytes) {
          resolve(undefined);
          req.destroy();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });
  }

  private async withHttpInstance<T>(fn: () => Promise<T>): Promise<T> {
    if (this.sessions.size + this.httpInFlight >= this.maxSessions)
      throw new RequestError(
        `Server at capacity: ${this.sessions.size + this.httpInFlight}/${this.maxSessions} sessions active. Retry later.`,
        WS_ERROR.capacity,
      );
    this.httpInFlight++;
    try {
      return await fn();
    } finally {
      this.httpInFlight--;
    }
  }

  private httpReset(data: unknown): Promise<unknown> {
    const params = parseResetParams(data);
    return this.withHttpInstance(async () => {
      const ep = await this.startEpisode(params);
      try {
        return this.resetResponse(ep, params);
      } finally {
        await ep.env.dispose();
      }
    });
  }

  /** OpenEnv's POST /step on a fresh instance: reset (env_id/sample/seed from the body's extras), then one step. */
  private httpStep(data: unknown): Promise<unknown> {
    if (typeof data !== 'object' || data === null || Array.isArray(data))
      throw new ProtocolValidationError([
        { type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary', input: data },
      ]);
    const body = data as Record<string, unknown>;
    const errors: FieldError[] = [];
    if (body.action === undefined)
      errors.push({ type: 'missing', loc: ['body', 'action'], msg: 'Field required', input: body });
    const t = body.timeout_s;
    if (t !== undefined && t !== null && !(typeof t === 'number' && t > 0))
      errors.push({
        type: 'greater_than',
        loc: ['body', 'timeout_s'],
        msg: 'Input should be greater than 0',
        input: t,
      });
    const rid = body.request_id;
    if (rid !== undefined && rid !== null && !(typeof rid === 'string' && rid.length <= 255))
      errors.push({
        type: 'string_type',
        loc: ['body', 'request_id'],
        msg: 'Input should be a string of at most 255 characters',
        input: rid,
      });
    if (errors.length) throw new ProtocolValidationError(errors);
    const action = parseAction(body.action, ['body', 'action']);
    const params = parseResetParams(
      Object.fromEntries(Object.entries(body).filter(([k]) => !['action', 'timeout_s', 'request_id'].includes(k))),
    );
    return this.withHttpInstance(async () => {
      const ep = await this.startEpisode(params);
      try {
        return stepPayload(ep.info, 1, await ep.env.step(actionText(action)));
      } finally {
        await ep.env.dispose();
      }
    });
  }

  private metadata(): Record<string, unknown> {
    const envs = this.opts.catalog.list();
    return {
      name: 'spade',
      description: `SPADE environments served over OpenEnv: ${this.opts.catalog.title}, ${envs.length} environment(s). Reset with env_id (one of environments[].env_id) or sample (${SAMPLE_RULES.join(', ')}); hint: true adds the privileged hint to the first observation.`,
      readme_content: null,
      version: '1',
      author: null,
      documentation_url: null,
      environments: envs.map((e) => {
        const s = scoresOf(e);
        return {
          env_id: e.id,
          title: e.title,
          setting: e.setting,
          skill: e.skill,
          difficulty: e.difficulty,
          has_hint: e.hint !== '',
          scores: {
            regret: s.regret,
            win_rate: s.winRate,
            win_rate_hinted: s.winRateHinted,
            learnability: s.learnability,
            designer_reward: s.designerReward,
          },
        };
      }),
      sampling: SAMPLE_RULES,
      sessions: { active: this.sessions.size, max: this.maxSessions },
    };
  }

  // --- episodes -----------------------------------------------------------------------------

  private pick(params: ResetParams): EnvRecord {
    if (params.envId !== null) {
      const rec = this.opts.catalog.get(params.envId);
      if (!rec)
        throw new RequestError(
          `No environment "${params.envId}" in the served set; GET /metadata lists the env_id values.`,
          WS_ERROR.execution,
          [
            {
              type: 'value_error',
              loc: ['body', 'env_id'],
              msg: 'Unknown environment id (see GET /metadata)',
              input: params.envId,
            },
          ],
        );
      return rec;
    }
    return sampleEnv(this.opts.catalog.list(), params.sample ?? 'uniform', drawFor(params.seed, params.episodeId));
  }

  private async startEpisode(params: ResetParams): Promise<Episode & { first: [string, Record<string, unknown>] }> {
    const rec = this.pick(params);
    const seed = params.seed ?? Math.floor(Math.random() * 2 ** 31);
    const env = new EnvInstance(this.pool, rec, seed, this.maxTurns, this.limits, this.counter);
    let first;
    try {
      first = await env.start();
    } catch (err) {
      await env.dispose();
      throw err;
    }
    return {
      env,
      info: {
        envId: rec.id,
        title: rec.title,
        setting: rec.setting,
        skill: rec.skill,
        difficulty: rec.difficulty,
        seed,
      },
      episodeId: params.episodeId ?? randomUUID(),
      steps: 0,
      done: false,
      first,
    };
  }

  private resetResponse(ep: Episode & { first: [string, Record<string, unknown>] }, params: ResetParams) {
    const hint = params.hint && ep.env.record.hint !== '' ? ep.env.record.hint : null;
    return resetPayload(ep.info, ep.first[0], ep.first[1], ep.env.tools, hint);
  }

  // --- WebSocket sessions -------------------------------------------------------------------

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = (req.url ?? '/').split('?')[0];
    const refuse = (status: string) => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    if (path !== '/ws') return refuse('404 Not Found');
    if (!this.authorized(req)) return refuse('401 Unauthorized');
    if (this.closing) return refuse('503 Service Unavailable');
    this.wss.handleUpgrade(req, socket, head, (ws) => this.onConnection(ws));
  }

  private sendWs(s: Session, msg: unknown): void {
    if (s.ws.readyState === s.ws.OPEN) s.ws.send(JSON.stringify(msg));
  }

  private onConnection(ws: WebSocket): void {
    if (this.sessions.size + this.httpInFlight >= this.maxSessions) {
      const active = this.sessions.size + this.httpInFlight;
      ws.send(
        JSON.stringify({
          type: 'error',
          data: {
            message: `Server at capacity: ${active}/${this.maxSessions} sessions active. Cannot accept new connections.`,
            code: WS_ERROR.capacity,
            active_sessions: active,
            max_sessions: this.maxSessions,
          },
        }),
      );
      ws.close(1013, 'at capacity');
      return;
    }
    const now = Date.now();
    const s: Session = {
      id: randomUUID(),
      ws,
      createdAt: now,
      lastActivity: now,
      queued: 0,
      tail: Promise.resolve(),
      episode: null,
      closed: false,
    };
    this.sessions.set(s.id, s);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      s.lastActivity = Date.now();
      if (s.queued >= this.maxQueued) {
        this.sendWs(s, {
          type: 'error',
          data: {
            message: `More than ${this.maxQueued} messages waiting: send the next message after the last answer.`,
            code: WS_ERROR.session,
          },
        });
        void this.endSession(s, 1008, 'too many queued messages');
        return;
      }
      s.queued++;
      s.tail = s.tail.then(async () => {
        try {
          if (!s.closed) await this.onMessage(s, data, isBinary);
        } finally {
          s.queued--;
          s.lastActivity = Date.now();
        }
      });
    });
    // a frame over maxPayload, a broken frame or a dropped connection ends the session
    ws.on('error', () => void this.endSession(s, 1011, 'socket error'));
    ws.on('close', () => void this.endSession(s, 1000, 'closed'));
  }

  private async endSession(s: Session, code: number, reason: string): Promise<void> {
    if (s.closed) return;
    s.closed = true;
    this.sessions.delete(s.id);
    // the call in flight finishes first; its instance is then disposed
    await s.tail.catch(() => undefined);
    const ep = s.episode;
    s.episode = null;
    await ep?.env.dispose();
    if (s.ws.readyState === s.ws.OPEN || s.ws.readyState === s.ws.CONNECTING) s.ws.close(code, reason);
  }

  private reapIdle(): void {
    const now = Date.now();
    for (const s of this.sessions.values())
      if (s.queued === 0 && now - s.lastActivity > this.idleTimeoutMs) {
        this.log(`session ${s.id} idle for ${Math.round((now - s.lastActivity) / 1000)} s: closed`);
        void this.endSession(s, 1000, `idle for more than ${Math.round(this.idleTimeoutMs / 1000)} s`);
      }
  }

  private async onMessage(s: Session, data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary) {
      // OpenEnv reads text frames only; a binary frame ends its session
      this.sendWs(s, {
        type: 'error',
        data: { message: 'Binary frames are not accepted: send JSON text.', code: WS_ERROR.session },
      });
      this.closeFromHandler(s, 1003, 'binary frame');
      return;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(rawText(data));
    } catch (err) {
      this.sendWs(s, {
        type: 'error',
        data: { message: `Invalid JSON: ${(err as Error).message}`, code: WS_ERROR.invalidJson },
      });
      return;
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
      this.sendWs(s, {
        type: 'error',
        data: { message: 'A message must be a JSON object with a "type".', code: WS_ERROR.session },
      });
      this.closeFromHandler(s, 1003, 'not an object');
      return;
    }
    const m = msg as Record<string, unknown>;
    const type = m.type ?? '';
    try {
      const extra = (allowed: string[]) => {
        const errors = Object.keys(m)
          .filter((k) => !allowed.includes(k))
          .map((k) => ({ type: 'extra_forbidden', loc: [k], msg: 'Extra inputs are not permitted', input: m[k] }));
        if (errors.length) throw new ProtocolValidationError(errors);
      };
      switch (type) {
        case 'reset': {
          extra(['type', 'data']);
          if (m.data !== undefined && (typeof m.data !== 'object' || m.data === null || Array.isArray(m.data)))
            throw new ProtocolValidationError([
              { type: 'dict_type', loc: ['data'], msg: 'Input should be a valid dictionary', input: m.data },
            ]);
          const params = parseResetParams(m.data ?? {}, ['data']);
          const old = s.episode;
          s.episode = null;
          await old?.env.dispose();
          const ep = await this.startEpisode(params);
          if (s.closed) {
            await ep.env.dispose();
            return;
          }
          s.episode = ep;
          this.sendWs(s, { type: 'observation', data: this.resetResponse(ep, params) });
          return;
        }
        case 'step': {
          extra(['type', 'data']);
          if (m.data === undefined)
            throw new ProtocolValidationError([{ type: 'missing', loc: ['data'], msg: 'Field required', input: m }]);
          const action = parseAction(m.data, ['data']);
          const ep = s.episode;
          if (!ep) throw new RequestError('No episode: send a reset message first.', WS_ERROR.execution);
          if (ep.done)
            throw new RequestError('The episode is over: send a reset message to start another.', WS_ERROR.execution);
          let r;
          try {
            r = await ep.env.step(actionText(action));
          } catch (err) {
            // the instance is gone or broken (its own time-out, crash or error): the episode ends here
            ep.done = true;
            await ep.env.dispose();
            throw err;
          }
          ep.steps++;
          ep.done = r[2] || r[3];
          this.sendWs(s, { type: 'observation', data: stepPayload(ep.info, ep.steps, r) });
          return;
        }
        case 'state': {
          extra(['type']);
          const ep = s.episode;
          this.sendWs(s, {
            type: 'state',
            data: ep
              ? {
                  episode_id: ep.episodeId,
                  step_count: ep.steps,
                  env_id: ep.info.envId,
                  seed: ep.info.seed,
                  done: ep.done,
                }
              : { episode_id: null, step_count: 0, env_id: null, seed: null, done: false },
          });
          return;
        }
        case 'close':
          extra(['type']);
          this.closeFromHandler(s, 1000, 'closed by client');
          return;
        default:
          this.sendWs(s, {
            type: 'error',
            data: { message: `Unknown message type: ${String(type)}`, code: WS_ERROR.unknownType },
          });
      }
    } catch (err) {
      if (err instanceof ProtocolValidationError)
        this.sendWs(s, {
          type: 'error',
          data: { message: 'Invalid message', code: WS_ERROR.validation, errors: err.errors },
        });
      else if (err instanceof RequestError)
        this.sendWs(s, { type: 'error', data: { message: err.message, code: err.code } });
      else {
        const e = serializeError(err);
        this.sendWs(s, { type: 'error', data: { message: `${e.name}: ${e.message}`, code: WS_ERROR.execution } });
      }
    }
  }

  /** End a session from inside its own message handler (endSession waits for the handler, so it is not awaited). */
  private closeFromHandler(s: Session, code: number, reason: string): void {
    void this.endSession(s, code, reason);
  }
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}
