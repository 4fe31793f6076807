// `spade serve` against the classes hardening round 5 (#38) found open: a page on any IP address at
// the server's port counted as its own origin (items 1); the stateless HTTP routes had no kill
// budget, so a client looping on POST /step with an environment that times out got a worker killed
// per request and cost a /ws session on that worker its episode (item 2); `--watch` re-read and
// re-parsed an unchanged archive every tick (item 9). Containment is asserted by cause: the typed
// refusal and its data, the watchdog's kill count, the bytes the watcher read.
import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { OriginRefusedError } from '../../src/core/errors.ts';
import { Access, ownOriginHosts } from '../../src/platform/node/serve/access.ts';
import { EnvCatalog } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';

const lantern = SEED_ENVS.find((e) => e.title === 'Lantern Lock')!;

interface Reply {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One HTTP request with any headers, from `localAddress` when given; its body as text. */
function http(
  base: string,
  path: string,
  opts: { method?: string; body?: string; headers?: Record<string, string>; localAddress?: string } = {},
): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
        headers: { 'content-type': 'text/plain', ...opts.headers },
        ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A WebSocket handshake with these headers: 'open', or the HTTP status it was refused with. */
function wsOpen(base: string, headers: Record<string, string> = {}): Promise<number | 'open'> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/ws`, { headers });
    ws.once('open', () => {
      ws.terminate();
      resolve('open');
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', () => resolve(-1));
  });
}

/** Pages on the server's port at addresses that are not the server's: public, private, IPv6, mapped. */
function foreignOrigins(port: string): string[] {
  return [
    `http://203.0.113.7:${port}`,
    `http://8.8.8.8:${port}`,
    `http://10.0.0.7:${port}`,
    `http://192.168.1.20:${port}`,
    `http://172.16.0.1:${port}`,
    `http://169.254.169.254:${port}`,
    `http://0.0.0.0:${port}`,
    `http://127.0.0.2:${port}`,
    `http://127.255.255.254:${port}`,
    `http://[2001:db8::7]:${port}`,
    `http://[fe80::1]:${port}`,
    `http://[fd00::1]:${port}`,
    `http://[::]:${port}`,
    `http://[::ffff:203.0.113.7]:${port}`,
    `http://[::ffff:cb00:7107]:${port}`,
    `http://[::ffff:127.0.0.1]:${port}`,
    `http://[::ffff:10.0.0.7]:${port}`,
    `http://[::127.0.0.1]:${port}`,
    `http://3405803783:${port}`, // 203.0.113.7 as one number
    `http://0xcb.0.113.7:${port}`,
    `http://localhost.:${port}`,
    `http://LOCALHOST.:${port}`,
    `http://app.localhost.:${port}`,
    `http://localhost.evil.example:${port}`,
    `http://trainer.internal:${port}`,
  ];
}

describe('a loopback server: its own origins are its loopback names and addresses on its port, nothing else', () => {
  let server: SpadeServer;
  let port = '';
  beforeAll(async () => {
    server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [lantern]),
      port: 0,
      workers: 1,
      allowHosts: ['trainer.internal'],
    });
    port = new URL(server.url).port;
  });
  afterAll(() => server.close());

  it('refuses a page at any other address on the same port: no /ws, no hints, no reset, no step', async () => {
    const hinted = JSON.stringify({ env_id: lantern.id, hint: true });
    for (const origin of foreignOrigins(port)) {
      for (const [path, body] of [
        ['/reset', hinted],
        ['/step', JSON.stringify({ env_id: lantern.id, action: { text: 'x' } })],
        ['/metadata', undefined],
      ] as const) {
        const r = await http(server.url, path, { body, headers: { origin } });
        expect(r.status, `${origin} ${path}`).toBe(403);
        const reply = JSON.parse(r.text) as { error: string; detail: string };
        expect(reply.error).toBe('OriginRefusedError');
        expect(reply.detail).not.toContain(lantern.hint);
        expect(r.headers['access-control-allow-origin']).toBeUndefined();
      }
      expect(await wsOpen(server.url, { origin }), origin).toBe(403);
    }
    expect(server.stats()).toMatchObject({ liveEnvs: 0, sessions: 0 });
  });

  it('serves its own origins in any spelling a browser sends: localhost, *.localhost, 127.0.0.1, [::1]', async () => {
    for (const origin of [
      `http://localhost:${port}`,
      `http://LocalHost:${port}`,
      `http://app.localhost:${port}`,
      `http://127.0.0.1:${port}`,
      `http://127.0.0.1.:${port}`,
      `http://2130706433:${port}`, // 127.0.0.1 as one number: the URL parser's 127.0.0.1
      `http://[::1]:${port}`,
      `http://[0:0:0:0:0:0:0:1]:${port}`,
    ]) {
      expect((await http(server.url, '/reset', { body: '{}', headers: { origin } })).status, origin).toBe(200);
      expect(await wsOpen(server.url, { origin }), origin).toBe('open');
    }
    // the same names on another port or scheme are other origins
    for (const origin of [`http://localhost:${Number(port) + 1}`, `https://127.0.0.1:${port}`, `http://[::1]:1`])
      expect((await http(server.url, '/reset', { body: '{}', headers: { origin } })).status, origin).toBe(403);
  });

  it('the refusal names the own origins and --allow-origin; --allow-host names a Host, never an origin', async () => {
    const r = await http(server.url, '/reset', { body: '{}', headers: { origin: `http://203.0.113.7:${port}` } });
    const { detail } = JSON.parse(r.text) as { detail: string };
    expect(detail).toContain(`http://127.0.0.1:${port}`);
    expect(detail).toContain(`http://[::1]:${port}`);
    expect(detail).toContain('--allow-origin');
    expect(detail).not.toContain('203.0.113.7:' + port + ',');
    // trainer.internal is a Host this server answers to, but a page there is not its own
    expect((await http(server.url, '/health', { headers: { host: `trainer.internal:${port}` } })).status).toBe(200);
    expect(
      (await http(server.url, '/reset', { body: '{}', headers: { origin: `http://trainer.internal:${port}` } }))
        .status,
    ).toBe(403);
  });

  it('--allow-origin adds exactly the origins it names', async () => {
    const s = await SpadeServer.start({
      catalog: new EnvCatalog('s', [lantern]),
      port: 0,
      workers: 1,
      allowOrigins: ['http://203.0.113.7:8000', 'http://[2001:DB8::7]:8000'],
    });
    try {
      for (const origin of ['http://203.0.113.7:8000', 'http://[2001:db8::7]:8000']) {
        const ok = await http(s.url, '/reset', { body: '{}', headers: { origin } });
        expect(ok.status, origin).toBe(200);
        expect(ok.headers['access-control-allow-origin']).toBe(origin);
      }
      for (const origin of [
        'http://203.0.113.8:8000',
        'http://203.0.113.7:8001',
        'https://203.0.113.7:8000',
        'http://[::ffff:203.0.113.7]:8000',
        'http://[2001:db8::8]:8000',
        `http://203.0.113.7:${new URL(s.url).port}`,
      ])
        expect((await http(s.url, '/reset', { body: '{}', headers: { origin } })).status, origin).toBe(403);
    } finally {
      await s.close();
    }
  });
});

/** A request as Access.check reads it: only the headers matter. */
const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('own origins by bind address (Access, without a server)', () => {
  it('loopback: localhost, 127.0.0.1, ::1 and the bound address; no other 127.x, no mapped form', () => {
    expect([...ownOriginHosts('127.0.0.1', ['192.168.1.5'])].sort()).toEqual(['127.0.0.1', '::1', 'localhost']);
    expect([...ownOriginHosts('127.0.0.5', [])].sort()).toEqual(['127.0.0.1', '127.0.0.5', '::1', 'localhost']);
    expect([...ownOriginHosts('[::1]', [])].sort()).toEqual(['127.0.0.1', '::1', 'localhost']);
    expect([...ownOriginHosts('LOCALHOST', [])].sort()).toEqual(['127.0.0.1', '::1', 'localhost']);
  });

  it('a wildcard bind: loopback and this machine interface addresses; one other address: that one alone', () => {
    const ifaces = ['127.0.0.1', '192.168.1.5', '2001:DB8:0:0::5', 'fe80::1%eth0'];
    expect([...ownOriginHosts('0.0.0.0', ifaces)].sort()).toEqual([
      '127.0.0.1',
      '192.168.1.5',
      '2001:db8::5',
      '::1',
      'localhost',
    ]);
    expect([...ownOriginHosts('::', ifaces)]).toContain('2001:db8::5');
    expect([...ownOriginHosts('192.168.1.5', ifaces)]).toEqual(['192.168.1.5']);
    expect([...ownOriginHosts('trainer.internal', ifaces)]).toEqual(['trainer.internal']);

    const wild = new Access({ bindHost: '0.0.0.0', token: 't', interfaceAddresses: ifaces });
    wild.listening(8000);
    for (const o of [
      'http://192.168.1.5:8000',
      'http://[2001:db8::5]:8000',
      'http://localhost:8000',
      'http://a.localhost:8000',
    ])
      expect(wild.originAllowed(o), o).toBe(true);
    for (const o of ['http://192.168.1.6:8000', 'http://203.0.113.7:8000', 'http://[::ffff:c0a8:105]:8000'])
      expect(wild.originAllowed(o), o).toBe(false);

    const one = new Access({ bindHost: '192.168.1.5', token: 't' });
    one.listening(8000);
    expect(one.originAllowed('http://192.168.1.5:8000')).toBe(true);
    for (const o of ['http://localhost:8000', 'http://127.0.0.1:8000', 'http://a.localhost:8000', 'http://10.0.0.7:8000'])
      expect(one.originAllowed(o), o).toBe(false);
  });

  it('the refusal is typed and carries the origin it refused', () => {
    const a = new Access({ bindHost: '127.0.0.1' });
    a.listening(8000);
    const r = a.check(req({ host: '127.0.0.1:8000', origin: 'http://[::ffff:203.0.113.7]:8000' }));
    expect(r?.status).toBe(403);
    expect(r?.error).toBeInstanceOf(OriginRefusedError);
    expect(r?.error.data).toEqual({ origin: 'http://[::ffff:203.0.113.7]:8000' });
    expect(a.check(req({ host: '127.0.0.1:8000', origin: 'http://127.0.0.1:8000' }))).toBeNull();
  });
});
