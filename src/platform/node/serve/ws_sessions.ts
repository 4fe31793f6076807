/**
 * `spade serve`'s /ws: one session per connection, with its own environment instance;
 * {type: reset|step|state|close} messages answered by {type: observation|state|error}, one at a
 * time in arrival order (a queue per session). Limits: the Host/Origin check and the token on the
 * upgrade, sessions (CAPACITY_REACHED), frame size, queued messages, idle time, and the watchdog
 * budget: a session whose own calls get the worker killed MAX_SESSION_KILLS times is closed with
 * the error (its neighbours replay and go on). Every message is handled inside a catch and every
 * reply goes through encodeReply, so nothing a client sends can end the process.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { serializeError } from '../../../core/errors.ts';
import type { Access } from './access.ts';
import { RequestError, type Episode, type Episodes } from './episodes.ts';
import { KillBudget, MAX_SESSION_KILLS } from './kill_budget.ts';
import {
  actionText,
  describe,
  encodeReply,
  isWsMessageType,
  parseAction,
  parseMessage,
  parseResetParams,
  ProtocolValidationError,
  WS_ERROR,
} from './openenv.ts';

export interface Session {
  id: string;
  ws: WebSocket;
  createdAt: number;
  lastActivity: number;
  queued: number;
  tail: Promise<void>;
  episode: Episode | null;
  closed: boolean;
}

export interface WsOptions {
  episodes: Episodes;
  access: Access;
  maxMessageBytes: number;
  maxQueued: number;
  idleTimeoutMs: number;
  closing: () => boolean;
  log: (line: string) => void;
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

export class WsSessions {
  private readonly wss: WebSocketServer;
  private readonly sessions = new Map<string, Session>();
  /** Watchdog kills by each session's own calls (kill_budget.ts: the rule the HTTP routes share). */
  private readonly kills = new KillBudget(MAX_SESSION_KILLS);

  constructor(private readonly o: WsOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: o.maxMessageBytes });
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The HTTP server's 'upgrade' listener. */
  readonly upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    try {
      this.onUpgrade(req, socket, head);
    } catch (err) {
      this.o.log(`/ws upgrade failed: ${serializeError(err).message.slice(0, 200)}`);
      socket.destroy();
    }
  };

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined); // a reset socket must not become an unhandled 'error'
    const refuse = (status: string, body = '') => {
      const text = body ? encodeReply({ detail: body }, () => ({ detail: status })) : '';
      socket.end(
        `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
      );
    };
    const refused = this.o.access.check(req);
    if (refused)
      return refuse(
        `${refused.status} ${refused.status === 400 ? 'Bad Request' : refused.status === 421 ? 'Misdirected Request' : 'Forbidden'}`,
        refused.error.message,
      );
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/ws') return refuse('404 Not Found');
    if (!this.o.access.authorized(req)) return refuse('401 Unauthorized');
    if (this.o.closing()) return refuse('503 Service Unavailable');
    this.wss.handleUpgrade(req, socket, head, (ws) => this.onConnection(ws));
  }

  private send(s: Session, msg: unknown): void {
    if (s.ws.readyState !== s.ws.OPEN) return;
    s.ws.send(
      encodeReply(msg, (reason) => ({
        type: 'error',
        data: { message: `Internal error: ${reason}.`, code: WS_ERROR.execution },
      })),
    );
  }

  private onConnection(ws: WebSocket): void {
    const eps = this.o.episodes;
    if (eps.full) {
      const active = eps.active;
      ws.send(
        JSON.stringify({
          type: 'error',
          data: {
            message: `Server at capacity: ${active}/${eps.o.maxSessions} sessions active. Cannot accept new connections.`,
            code: WS_ERROR.capacity,
            active_sessions: active,
            max_sessions: eps.o.maxSessions,
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
    eps.sessions++;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      try {
        this.enqueue(s, data, isBinary);
      } catch (err) {
        this.o.log(`session ${s.id}: ${serializeError(err).message.slice(0, 200)}`);
        void this.end(s, 1011, 'internal error');
      }
    });
    // a frame over maxPayload, a broken frame or a dropped connection ends the session
    ws.on('error', () => void this.end(s, 1011, 'socket error'));
    ws.on('close', () => void this.end(s, 1000, 'closed'));
  }

  private enqueue(s: Session, data: RawData, isBinary: boolean): void {
    s.lastActivity = Date.now();
    if (s.closed) return;
    if (s.queued >= this.o.maxQueued) {
      this.send(s, {
        type: 'error',
        data: {
          message: `More than ${this.o.maxQueued} messages waiting: send the next message after the last answer.`,
          code: WS_ERROR.session,
        },
      });
      void this.end(s, 1008, 'too many queued messages');
      return;
    }
    s.queued++;
    s.tail = s.tail
      .then(async () => {
        if (!s.closed) await this.onMessage(s, data, isBinary);
      })
      .catch((err: unknown) => {
        // onMessage answers its own errors; this is a failure in answering (never the process's end)
        this.o.log(`session ${s.id}: ${serializeError(err).message.slice(0, 200)}`);
        void this.end(s, 1011, 'internal error');
      })
      .finally(() => {
        s.queued--;
        s.lastActivity = Date.now();
      });
  }

  /** End a session: the call in flight finishes first; its instance is then disposed. Never throws. */
  private async end(s: Session, code: number, reason: string): Promise<void> {
    if (s.closed) return;
    s.closed = true;
    this.sessions.delete(s.id);
    this.kills.forget(s.id);
    this.o.episodes.sessions--;
    await s.tail.catch(() => undefined);
    const ep = s.episode;
    s.episode = null;
    await ep?.env.dispose().catch(() => undefined);
    try {
      if (s.ws.readyState === s.ws.OPEN || s.ws.readyState === s.ws.CONNECTING) s.ws.close(code, reason.slice(0, 120));
    } catch {
      s.ws.terminate();
    }
  }

  /** End a session from inside its own message handler (end waits for the handler, so it is not awaited). */
  private endFromHandler(s: Session, code: number, reason: string): void {
    void this.end(s, code, reason);
  }

  reapIdle(): void {
    const now = Date.now();
    for (const s of this.sessions.values())
      if (s.queued === 0 && now - s.lastActivity > this.o.idleTimeoutMs) {
        this.o.log(`session ${s.id} idle for ${Math.round((now - s.lastActivity) / 1000)} s: closed`);
        void this.end(s, 1000, `idle for more than ${Math.round(this.o.idleTimeoutMs / 1000)} s`);
      }
  }

  /** Shutdown, first half: wait (at most graceMs) for the calls in flight, then close every session with 1001. */
  async drain(graceMs: number): Promise<Session[]> {
    const open = [...this.sessions.values()];
    await Promise.race([Promise.all(open.map((s) => s.tail)), new Promise((r) => setTimeout(r, graceMs).unref())]);
    for (const s of open) {
      s.closed = true;
      this.sessions.delete(s.id);
      this.kills.forget(s.id);
      this.o.episodes.sessions--;
      if (s.ws.readyState === s.ws.OPEN) s.ws.close(1001, 'server shutting down');
    }
    return open;
  }

  /** Shutdown, second half (after the workers stopped): dispose what the sessions held, close the socket server. */
  async release(open: Session[]): Promise<void> {
    for (const s of open) {
      await s.tail.catch(() => undefined);
      await s.episode?.env.dispose().catch(() => undefined);
      s.episode = null;
    }
    this.wss.close();
  }

  /** A watchdog kill caused by this session's own call: counted; past the budget the session is closed. */
  private countKill(s: Session, err: unknown): void {
    const kills = this.kills.charge(s.id, err);
    if (kills > 0 && this.kills.spent(s.id)) {
      this.o.log(`session ${s.id}: its environment tripped the watchdog ${kills} times: closed`);
      this.send(s, {
        type: 'error',
        data: {
          message: `This session's environment calls got the sandbox worker killed ${kills} times; the session is closed so that its neighbours are not disturbed again.`,
          code: WS_ERROR.session,
        },
      });
      this.endFromHandler(s, 1008, 'environment tripped the watchdog repeatedly');
    }
  }

  private async onMessage(s: Session, data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary) {
      // OpenEnv reads text frames only; a binary frame ends its session
      this.send(s, {
        type: 'error',
        data: { message: 'Binary frames are not accepted: send JSON text.', code: WS_ERROR.session },
      });
      this.endFromHandler(s, 1003, 'binary frame');
      return;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(rawText(data));
    } catch (err) {
      this.send(s, {
        type: 'error',
        data: { message: `Invalid JSON: ${(err as Error).message.slice(0, 200)}`, code: WS_ERROR.invalidJson },
      });
      return;
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) {
      this.send(s, {
        type: 'error',
        data: { message: 'A message must be a JSON object with a "type".', code: WS_ERROR.session },
      });
      this.endFromHandler(s, 1003, 'not an object');
      return;
    }
    // the message's own "type" only (a polluted Object.prototype names none); its fields are checked by type (openenv.ts)
    const type = Object.hasOwn(msg, 'type') ? (msg as { type: unknown }).type : '';
    if (!isWsMessageType(type)) {
      this.send(s, {
        type: 'error',
        data: {
          message: `Unknown message type: ${typeof type === 'string' ? type.slice(0, 200) : describe(type)}`,
          code: WS_ERROR.unknownType,
        },
      });
      return;
    }
    const eps = this.o.episodes;
    try {
      const { data } = parseMessage(type, msg);
      switch (type) {
        case 'reset': {
          const params = parseResetParams(data ?? {}, ['data']);
          const old = s.episode;
          s.episode = null;
          const ep = await eps.start(params, old);
          if (s.closed) {
            await ep.env.dispose();
            return;
          }
          s.episode = ep;
          this.send(s, { type: 'observation', data: eps.resetPayload(ep, params.hint) });
          return;
        }
        case 'step': {
          const action = parseAction(data, ['data']);
          const ep = s.episode;
          if (!ep) throw new RequestError('No episode: send a reset message first.', WS_ERROR.execution);
          const r = await eps.step(ep, actionText(action));
          this.send(s, { type: 'observation', data: eps.stepPayload(ep, r) });
          return;
        }
        case 'state': {
          const ep = s.episode;
          this.send(s, {
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
          this.endFromHandler(s, 1000, 'closed by client');
          return;
      }
    } catch (err) {
      if (err instanceof ProtocolValidationError)
        this.send(s, {
          type: 'error',
          data: { message: 'Invalid message', code: WS_ERROR.validation, errors: err.errors },
        });
      else if (err instanceof RequestError)
        this.send(s, { type: 'error', data: { message: err.message.slice(0, 2000), code: err.code } });
      else {
        const e = serializeError(err);
        this.send(s, {
          type: 'error',
          data: { message: `${e.name}: ${e.message}`.slice(0, 2000), code: WS_ERROR.execution },
        });
        this.countKill(s, err);
      }
    }
  }
}
