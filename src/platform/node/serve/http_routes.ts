/**
 * `spade serve`'s HTTP routes, as OpenEnv's HTTPEnvServer defines them: POST /reset, POST /step,
 * GET /state (stateless: each request gets a fresh environment instance, used and closed),
 * GET /health, GET /schema, GET /metadata. Every request passes the Host/Origin check and (but
 * /health) the token first; bodies are bounded; every reply is encoded by encodeReply (never a
 * throw) and every failure on the way — the client's, the environment's or our own — is answered,
 * never left to end the process. POST /reset and /step have a kill budget per client address and
 * per environment (kill_budget.ts, the rule /ws sessions follow): past it they get 429
 * (KillBudgetError, Retry-After) before anything is loaded.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serializeError } from '../../../core/errors.ts';
import type { Access } from './access.ts';
import { RequestError, type Episodes, type StartedEpisode } from './episodes.ts';
import { clientKey, HttpKillBudgets, KillBudgetError } from './kill_budget.ts';
import {
  actionText,
  encodeReply,
  parseResetParams,
  parseStepRequest,
  ProtocolValidationError,
  SCHEMAS,
  WS_ERROR,
  type ResetParams,
} from './openenv.ts';

const ROUTES: Record<string, string> = {
  '/health': 'GET',
  '/metadata': 'GET',
  '/schema': 'GET',
  '/state': 'GET',
  '/reset': 'POST',
  '/step': 'POST',
};

export interface HttpOptions {
  episodes: Episodes;
  access: Access;
  maxMessageBytes: number;
  /** True once the server is shutting down (requests get 503). */
  closing: () => boolean;
  log: (line: string) => void;
  /** The kill budgets of POST /reset and /step (default: a fresh HttpKillBudgets). */
  budgets?: HttpKillBudgets;
}

export class HttpRoutes {
  readonly budgets: HttpKillBudgets;

  constructor(private readonly o: HttpOptions) {
    this.budgets = o.budgets ?? new HttpKillBudgets();
  }

  /** The request listener: answers every request, whatever happens on the way. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.route(req, res).catch((err: unknown) => {
      // a failure outside the route's own catch (writing the reply itself): answer if still possible
      try {
        this.o.log(`HTTP ${req.method ?? '?'} failed: ${serializeError(err).message.slice(0, 200)}`);
        if (!res.headersSent) this.send(res, 500, { detail: 'Internal error while answering the request.' });
        else res.destroy();
      } catch {
        res.destroy();
      }
    });
  };

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    let failed = false;
    const text = encodeReply(body, (reason) => {
      failed = true;
      return { detail: `Internal error: ${reason}.` };
    });
    res.writeHead(failed ? 500 : status, {
      ...headers,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = this.o.access.check(req);
    if (refused) {
      this.discard(req);
      return this.send(
        res,
        refused.status,
        { detail: refused.error.message, error: refused.error.name },
        { connection: 'close' },
      );
    }
    const cors = this.o.access.cors(req);
    const path = (req.url ?? '/').split('?')[0]!;
    const method = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined; // own keys only: no 'constructor' route
    if (req.method === 'OPTIONS' && method && cors['access-control-allow-origin']) {
      res.writeHead(204, cors);
      res.end();
      return;
    }
    if (!method) return this.send(res, 404, { detail: 'Not Found' }, cors);
    if (req.method !== method) return this.send(res, 405, { detail: 'Method Not Allowed' }, cors);
    if (path !== '/health' && !this.o.access.authorized(req))
      return this.send(
        res,
        401,
        { detail: 'Missing or wrong bearer token (Authorization: Bearer TOKEN).' },
        { ...cors, 'www-authenticate': 'Bearer' },
      );
    if (this.o.closing()) return this.send(res, 503, { detail: 'The server is shutting down.' }, cors);
    try {
      if (path === '/health') return this.send(res, 200, { status: 'healthy' }, cors);
      if (path === '/schema') return this.send(res, 200, SCHEMAS, cors);
      if (path === '/metadata') return this.send(res, 200, this.o.episodes.metadata(), cors);
      // a fresh instance's state, as OpenEnv's stateless GET /state gives
      if (path === '/state') return this.send(res, 200, { episode_id: null, step_count: 0 }, cors);
      const body = await this.readBody(req);
      if (body === undefined) {
        this.discard(req);
        return this.send(
          res,
          413,
          { detail: `The body is over ${this.o.maxMessageBytes} bytes.` },
          { ...cors, connection: 'close' },
        );
      }
      let data: unknown = {};
      if (body.trim() !== '') {
        try {
          data = JSON.parse(body);
        } catch (err) {
          return this.send(
            res,
            422,
            {
              detail: [
                {
                  type: 'json_invalid',
                  loc: ['body', 0],
                  msg: 'JSON decode error',
                  input: {},
                  ctx: { error: (err as Error).message.slice(0, 200) },
                },
              ],
            },
            cors,
          );
        }
      }
      const client = clientKey(req.socket.remoteAddress);
      if (path === '/reset') return this.send(res, 200, await this.reset(client, data), cors);
      return this.send(res, 200, await this.step(client, data), cors);
    } catch (err) {
      if (err instanceof ProtocolValidationError) return this.send(res, 422, { detail: err.errors }, cors);
      if (err instanceof KillBudgetError)
        return this.send(
          res,
          429,
          { detail: err.message, error: err.name, ...err.data },
          { ...cors, 'retry-after': String(err.data.retry_after_s) },
        );
      if (err instanceof RequestError) {
        if (err.code === WS_ERROR.capacity) return this.send(res, 503, { detail: err.message }, cors);
        if (err.errors) return this.send(res, 422, { detail: new ProtocolValidationError(err.errors).errors }, cors);
      }
      const e = serializeError(err);
      return this.send(res, 500, { detail: `${e.name}: ${e.message}`.slice(0, 2000) }, cors);
    }
  }

  /**
   * Let the rest of a refused request's body drain unread (so the client reads the refusal rather
   * than a reset connection), up to a few times the body limit; past that the connection is dropped.
   */
  private discard(req: IncomingMessage): void {
    let bytes = 0;
    req.removeAllListeners('data');
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes > 4 * this.o.maxMessageBytes) req.destroy();
    });
    req.resume();
  }

  /** The body as text, or undefined when it is over the size limit (reading stops there). */
  private readBody(req: IncomingMessage): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > this.o.maxMessageBytes) {
          resolve(undefined);
          req.removeAllListeners('data');
          req.pause();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
      req.on('close', () => resolve(undefined));
    });
  }

  /**
   * One stateless request's episode on a fresh instance, under its client's and environment's kill
   * budgets: refused before anything loads when either is spent; every call of the instance (a
   * rebuild after a kill included) checks them again; a watchdog kill for its own call is charged
   * to both. The instance is disposed before the reply.
   */
  private played<T>(client: string, params: ResetParams, run: (ep: StartedEpisode) => Promise<T>): Promise<T> {
    const eps = this.o.episodes;
    const rec = eps.pick(params);
    const guard = () => this.budgets.check(client, rec.id);
    guard();
    return eps.withHttpInstance(async () => {
      try {
        const ep = await eps.start(params, null, { rec, guard });
        try {
          return await run(ep);
        } finally {
          await ep.env.dispose();
        }
      } catch (err) {
        const spent = this.budgets.charge(client, rec.id, err);
        if (spent) this.o.log(`HTTP ${spent}: the watchdog was tripped past its kill budget; refused for a while`);
        throw err;
      }
    });
  }

  private reset(client: string, data: unknown): Promise<unknown> {
    const params = parseResetParams(data);
    return this.played(client, params, async (ep) => this.o.episodes.resetPayload(ep, params.hint));
  }

  /** OpenEnv's POST /step on a fresh instance: reset (env_id/sample/seed from the body's extras), then one step. */
  private step(client: string, data: unknown): Promise<unknown> {
    const { action, params } = parseStepRequest(data);
    const eps = this.o.episodes;
    return this.played(client, params, async (ep) => eps.stepPayload(ep, await eps.step(ep, actionText(action))));
  }
}
