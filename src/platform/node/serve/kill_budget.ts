/**
 * The watchdog's kill budget, one rule for every caller of `spade serve`: each time the sandbox
 * watchdog kills a worker because of a caller's own call (killedByOwnCall), that caller is charged
 * one kill; a caller whose kills reach the budget is refused from then on, and the error goes to it
 * alone — its neighbours on the killed worker replay their episodes and go on (env_instance.ts).
 *
 * Who "the caller" is depends on the route:
 *
 * - a /ws session: the session itself (MAX_SESSION_KILLS, for its lifetime: it is closed, 1008);
 * - a stateless HTTP request (POST /reset, POST /step): the client's address (IPv4, or an IPv6
 *   address's /64, which one host usually holds whole) — MAX_CLIENT_KILLS within KILL_WINDOW_MS —
 *   and the environment it plays, for HTTP callers together — MAX_ENV_KILLS within the window.
 *   Either budget spent, the request is refused (429, KillBudgetError, Retry-After) before it
 *   loads anything, and so is every call of that client's (or environment's) requests still in
 *   flight that would run again after the kill: a request lost to its own client's kill is not a
 *   neighbour to replay for. So a client looping on POST /step with an environment that times out
 *   gets MAX_CLIENT_KILLS kills per window, however many requests it sends at once, and clients on
 *   many addresses get MAX_ENV_KILLS per environment per window.
 *
 * HTTP clients on one address (a host's trainers, or everything behind one proxy) share its
 * budget; /ws sessions never do.
 */
import { isIP } from 'node:net';
import { SpadeError } from '../../../core/errors.ts';
import { killedByOwnCall } from './env_instance.ts';

/**
 * Watchdog kills a session's own calls may cause before it is closed: one can be an unlucky
 * action (the episode ends with the error, a reset starts another); a second shows the client or
 * the environment keeps doing it, and each kill costs every neighbour on the worker a replay.
 */
export const MAX_SESSION_KILLS = 2;
/**
 * Watchdog kills one HTTP client address may cause within KILL_WINDOW_MS (as a session may).
 * @alias a policy of its own that is, by choice, the session's (knip: not a duplicate export)
 */
export const MAX_CLIENT_KILLS = MAX_SESSION_KILLS;
/** Watchdog kills one environment's HTTP calls may cause within KILL_WINDOW_MS, from every address together. */
export const MAX_ENV_KILLS = 4;
/** How long an HTTP kill counts against its client and environment (10 minutes). */
const KILL_WINDOW_MS = 10 * 60_000;
/** Keys a budget remembers at most; past it the least recently charged are forgotten. */
const MAX_KEYS = 4096;

/** A caller (an HTTP client or an environment served over HTTP) that spent its kill budget. */
export class KillBudgetError extends SpadeError {}
Object.defineProperty(KillBudgetError.prototype, 'name', {
  value: 'KillBudgetError',
  writable: true,
  configurable: true,
});

export class KillBudget {
  /** Each key's kill times, oldest first; keys in the order they were last charged. */
  private readonly byKey = new Map<string, number[]>();

  constructor(
    readonly max: number,
    readonly windowMs = Infinity,
    private readonly now: () => number = Date.now,
  ) {}

  /** The kill times of `key` still inside the window. */
  private live(key: string, t: number): number[] {
    const list = this.byKey.get(key);
    if (!list) return [];
    while (list.length > 0 && t - list[0]! >= this.windowMs) list.shift();
    if (list.length === 0) this.byKey.delete(key);
    return list;
  }

  /**
   * Charge `key` with `err` when it is a watchdog kill for the key's own call; returns the key's
   * kills in the window, or 0 when `err` is anything else (not charged).
   */
  charge(key: string, err: unknown): number {
    if (!killedByOwnCall(err)) return 0;
    const t = this.now();
    const list = this.live(key, t);
    list.push(t);
    this.byKey.delete(key);
    this.byKey.set(key, list);
    for (const k of this.byKey.keys()) {
      if (this.byKey.size <= MAX_KEYS) break;
      this.byKey.delete(k);
    }
    return list.length;
  }

  /** Kills charged to `key` inside the window. */
  kills(key: string): number {
    return this.live(key, this.now()).length;
  }

  /** Has `key` spent its budget? */
  spent(key: string): boolean {
    return this.kills(key) >= this.max;
  }

  /** Milliseconds until `key` may be served again (0 when it may now). */
  retryAfterMs(key: string): number {
    const t = this.now();
    const list = this.live(key, t);
    if (list.length < this.max) return 0;
    return list[list.length - this.max]! + this.windowMs - t;
  }

  forget(key: string): void {
    this.byKey.delete(key);
  }
}

/** The budget key of an HTTP client's address: IPv4 as it is (mapped ones unmapped), IPv6 by its /64. */
export function clientKey(address: string | undefined): string {
  const a = (address ?? '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) return mapped[1]!;
  if (isIP(a) !== 6) return a || 'unknown';
  const [head = '', tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = a.includes('::') ? (tail ? tail.split(':') : []) : [];
  const groups = a.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/** The kill budgets of the stateless HTTP routes: per client address and per environment. */
export class HttpKillBudgets {
  readonly clients: KillBudget;
  readonly envs: KillBudget;

  constructor(now: () => number = Date.now, windowMs = KILL_WINDOW_MS) {
    this.clients = new KillBudget(MAX_CLIENT_KILLS, windowMs, now);
    this.envs = new KillBudget(MAX_ENV_KILLS, windowMs, now);
  }

  /** Throws KillBudgetError when the client or the environment has spent its budget. */
  check(client: string, envId: string): void {
    for (const [scope, budget, key] of [
      ['client', this.clients, client],
      ['environment', this.envs, envId],
    ] as const) {
      if (!budget.spent(key)) continue;
      const retryAfterS = Math.max(1, Math.ceil(budget.retryAfterMs(key) / 1000));
      throw new KillBudgetError(
        scope === 'client'
          ? `Requests from ${client} got the sandbox worker killed ${budget.kills(key)} times in ${budget.windowMs / 60_000} minutes; its POST /reset and /step are refused for ${retryAfterS} s so that other sessions are not disturbed again.`
          : `Environment "${envId}" got the sandbox worker killed ${budget.kills(key)} times in ${budget.windowMs / 60_000} minutes over HTTP; it is refused to HTTP requests for ${retryAfterS} s (a /ws session may still play it).`,
        {
          scope,
          ...(scope === 'client' ? { client } : { env_id: envId }),
          kills: budget.kills(key),
          max: budget.max,
          retry_after_s: retryAfterS,
        },
      );
    }
  }

  /**
   * Charge a failed call to its client and environment (only a watchdog kill for the call counts);
   * returns what this charge used up ("client 127.0.0.1", "environment X"), or null.
   */
  charge(client: string, envId: string, err: unknown): string | null {
    const c = this.clients.charge(client, err);
    const e = this.envs.charge(envId, err);
    const spent = [
      ...(c === this.clients.max ? [`client ${client}`] : []),
      ...(e === this.envs.max ? [`environment ${envId}`] : []),
    ];
    return spent.length ? spent.join(' and ') : null;
  }
}
