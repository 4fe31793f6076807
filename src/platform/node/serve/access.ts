/**
 * Who may talk to `spade serve`, checked on every route (HTTP and the /ws upgrade) before anything
 * else runs:
 *
 * - **Host**: the request's Host header must name this server — a loopback name (`localhost`,
 *   `*.localhost`), an IP address, the `--host` it was bound to, or a name given with
 *   `--allow-host` (or the host of an `--allow-origin`). A page that re-points its own DNS name at
 *   127.0.0.1 (DNS rebinding) sends its own name as Host, and is refused.
 * - **Origin**: browsers send it on cross-origin requests and on every WebSocket handshake; when
 *   present it must be one of the server's own origins or one given with `--allow-origin` (exactly:
 *   scheme, host and port). The server's own origins are `http://H:PORT`, PORT the port it listens
 *   on and H one of the addresses it is bound to and the loopback names that reach them
 *   (ownOriginHosts): on loopback, `localhost`, names under `.localhost`, `127.0.0.1`, `[::1]` and
 *   the bound address; on one other address, that address (or the name given as --host); on a
 *   wildcard (0.0.0.0, ::), the loopback ones and this machine's interface addresses at start-up.
 *   No other IP address is one (a page at `http://203.0.113.7:PORT`, `http://10.0.0.7:PORT`,
 *   `http://[2001:db8::7]:PORT` or `http://[::ffff:203.0.113.7]:PORT` is another machine's, or
 *   another server's), nor an IPv4-mapped spelling of loopback, another 127.x address, `0.0.0.0`,
 *   a trailing-dot name (`localhost.`) or an `--allow-host` name: a page there needs
 *   `--allow-origin`. `Sec-Fetch-Site: cross-site`/`same-site` without an allowed Origin is
 *   refused too (a no-cors GET carries no Origin). Clients that are not browsers (Python, TRL,
 *   curl) send neither and pass. So a page on another origin — another port of localhost
 *   included — cannot open /ws, POST a reset or read a reply.
 * - **Token**: with one set, every route but /health needs `Authorization: Bearer TOKEN` (the
 *   privileged hints included: only token holders get them).
 *
 * Allowed origins get CORS headers and their preflight answered; no other origin ever does.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { HostRefusedError, OriginRefusedError, UsageError } from '../../../core/errors.ts';

export interface AccessOptions {
  /** The address the server is bound to (`--host`). */
  bindHost: string;
  token?: string | null;
  /** Extra origins whose pages may call the server (`--allow-origin`, e.g. `http://localhost:5173`). */
  allowOrigins?: readonly string[];
  /** Extra names the server may be reached by (`--allow-host`), beside loopback names and IP addresses. */
  allowHosts?: readonly string[];
  /** This machine's addresses, for a wildcard bind's own origins (default: os.networkInterfaces()). */
  interfaceAddresses?: readonly string[];
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** A loopback address to bind to: 127.0.0.0/8, ::1 or localhost (a name like 127.x.example is not one). */
export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || (isIP(host) === 4 && host.startsWith('127.'));
}

/** A loopback name as browsers resolve it: localhost and every name under .localhost. */
function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
}

/** A host as an origin's URL spells it (lower case, IPv6 compressed, without brackets); null when none. */
function urlHost(host: string): string | null {
  const h = host.replace(/^\[|\]$/g, '');
  try {
    return new URL(`http://${isIP(h) === 6 ? `[${h}]` : h}/`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

/** Every address of this machine's interfaces (link-local IPv6 ones carry a zone no origin can name). */
function interfaceAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((a) => a.address)
    .filter((a) => !a.includes('%'));
}

/**
 * The hosts whose pages on the server's port are its own origins (lower case, IPv6 without
 * brackets; names under .localhost count too on loopback and wildcard binds): on loopback,
 * localhost, 127.0.0.1, ::1 and the bound address; on a wildcard bind, those and `interfaces`; on
 * any other address, that address or name alone. Nothing else: not every IP address, not an
 * IPv4-mapped address, not an --allow-host name.
 */
export function ownOriginHosts(bindHost: string, interfaces: readonly string[]): Set<string> {
  const bind = bindHost.toLowerCase().replace(/^\[|\]$/g, '');
  const wildcard = bind === '0.0.0.0' || bind === '::' || bind === '';
  const own = new Set<string>();
  const add = (h: string) => {
    const u = urlHost(h);
    if (u !== null && u !== '') own.add(u);
  };
  if (wildcard || isLoopback(bind)) for (const h of LOOPBACK) add(h);
  if (wildcard) for (const a of interfaces) add(a);
  else add(bind);
  return own;
}

/** The host name of a Host header value (`name:port`, `[v6]:port`), lower-cased; null when malformed. */
function hostName(header: string): string | null {
  const h = header.trim().toLowerCase();
  if (h === '' || h.length > 255) return null;
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    if (end < 0) return null;
    const rest = h.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return null;
    return h.slice(1, end);
  }
  const m = /^([a-z0-9._-]+)(?::\d{1,5})?$/.exec(h);
  return m ? m[1]! : null;
}

/** An origin in its canonical form (`scheme://host[:port]`, default ports left out), or null when it is not one. */
function canonicalOrigin(origin: string): string | null {
  if (origin.length > 2048) return null;
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  if (u.pathname !== '/' || u.search || u.hash || u.username || u.password) return null;
  return u.origin;
}

/** What a refused request gets: the HTTP status and the typed error. */
export interface Refusal {
  status: number;
  error: HostRefusedError | OriginRefusedError;
}

export class Access {
  private readonly token: Buffer | null;
  private readonly origins: Set<string>;
  private readonly hosts: Set<string>;
  /** The hosts of the server's own origins (ownOriginHosts), on `port`. */
  private readonly ownHosts: Set<string>;
  /** Names under .localhost are own origins too (loopback and wildcard binds). */
  private readonly localhostNames: boolean;
  private port = 0;

  constructor(opts: AccessOptions) {
    this.token = opts.token ? Buffer.from(opts.token) : null;
    this.origins = new Set();
    for (const o of opts.allowOrigins ?? []) {
      const c = canonicalOrigin(o.trim());
      if (!c)
        throw new UsageError(
          `--allow-origin ${JSON.stringify(o.slice(0, 100))} is not an origin: give scheme, host and port, e.g. http://localhost:5173`,
        );
      this.origins.add(c);
    }
    this.hosts = new Set();
    for (const h of opts.allowHosts ?? []) {
      const name = hostName(h);
      if (!name) throw new UsageError(`--allow-host ${JSON.stringify(h.slice(0, 100))} is not a host name`);
      this.hosts.add(name);
    }
    for (const o of this.origins) this.hosts.add(new URL(o).hostname.replace(/^\[|\]$/g, ''));
    const bind = opts.bindHost.toLowerCase().replace(/^\[|\]$/g, '');
    const wildcard = bind === '0.0.0.0' || bind === '::' || bind === '';
    // a wildcard bind names no host: clients reach it by IP address, loopback or --allow-host names
    if (!wildcard) this.hosts.add(bind);
    this.ownHosts = ownOriginHosts(bind, wildcard ? (opts.interfaceAddresses ?? interfaceAddresses()) : []);
    this.localhostNames = wildcard || isLoopback(bind);
  }

  /** The port the server listens on (its own origin's port). */
  listening(port: number): void {
    this.port = port;
  }

  /** May a request name this host (a Host header's host name)? */
  private hostAllowed(name: string): boolean {
    return isLoopbackName(name) || isIP(name) !== 0 || this.hosts.has(name);
  }

  /** Is this Origin header one whose pages may call the server? */
  originAllowed(origin: string): boolean {
    const c = canonicalOrigin(origin);
    if (!c) return false; // "null" (sandboxed frames, file:) and anything malformed
    if (this.origins.has(c)) return true;
    const u = new URL(c);
    const name = u.hostname.replace(/^\[|\]$/g, '');
    const port = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
    // the server's own pages: its own scheme and port, at one of its own addresses (or loopback names)
    return (
      u.protocol === 'http:' &&
      port === this.port &&
      (this.ownHosts.has(name) || (this.localhostNames && name.endsWith('.localhost')))
    );
  }

  /** The server's own origins, as a refusal names them (at most 8 addresses, then how many more). */
  ownOrigins(): string[] {
    const list = [...this.ownHosts].map((h) => `http://${h.includes(':') ? `[${h}]` : h}:${this.port}`);
    if (this.localhostNames) list.push(`http://*.localhost:${this.port}`);
    return list.length > 8 ? [...list.slice(0, 8), `${list.length - 8} more`] : list;
  }

  /** The refusal for a request whose Host or Origin is not allowed; null when it may go on. */
  check(req: IncomingMessage): Refusal | null {
    const header = req.headers.host;
    const name = typeof header === 'string' ? hostName(header) : null;
    if (name === null || !this.hostAllowed(name))
      return {
        status: header === undefined ? 400 : 421,
        error: new HostRefusedError(
          header === undefined
            ? 'The request has no Host header; HTTP/1.1 requires one.'
            : `This server does not answer to the host ${JSON.stringify(String(header).slice(0, 100))}: it serves loopback names, IP addresses and the names given with --allow-host. A page that re-pointed its own name here (DNS rebinding) is refused.`,
          { host: String(header ?? '').slice(0, 255) },
        ),
      };
    const origin = req.headers.origin;
    if (origin !== undefined) {
      if (!this.originAllowed(origin))
        return {
          status: 403,
          error: new OriginRefusedError(
            `Requests from pages on ${JSON.stringify(origin.slice(0, 100))} are refused: only this server's own origins (${this.ownOrigins().join(', ')}) and those given with --allow-origin may call it.`,
            { origin: origin.slice(0, 255) },
          ),
        };
      return null;
    }
    const site = req.headers['sec-fetch-site'];
    if (site === 'cross-site' || site === 'same-site')
      return {
        status: 403,
        error: new OriginRefusedError(
          `A ${site} request from a browser page is refused (no allowed Origin): only this server's own origin and those given with --allow-origin may call it.`,
          { site },
        ),
      };
    return null;
  }

  /** Does the request carry the token (or is none needed)? Constant-time comparison. */
  authorized(req: IncomingMessage): boolean {
    if (!this.token) return true;
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    if (!m) return false;
    const given = Buffer.from(m[1]!.trim());
    return given.length === this.token.length && timingSafeEqual(given, this.token);
  }

  /** CORS headers for a request from an allowed origin that is not the server's own (none otherwise). */
  cors(req: IncomingMessage): Record<string, string> {
    const origin = req.headers.origin;
    if (origin === undefined) return {};
    const c = canonicalOrigin(origin);
    if (!c || !this.origins.has(c)) return {};
    return {
      'access-control-allow-origin': c,
      'access-control-allow-headers': 'authorization, content-type',
      'access-control-allow-methods': 'GET, POST',
      'access-control-max-age': '600',
      vary: 'Origin',
    };
  }
}
