// `spade serve` against the classes hardening round 5 (#38) found open: a page on any IP address at
// the server's port counted as its own origin (item 1); the stateless HTTP routes had no kill
// budget, so a client looping on POST /step with an environment that times out got a worker killed
// per request and cost a /ws session on that worker its episode (item 2); `--watch` re-read and
// re-parsed an unchanged archive every tick (item 9). Containment is asserted by cause: the typed
// refusal and its data, the watchdog's kill count, the bytes the watcher read.
import { request } from 'node:http';
import { appendFile, mkdtemp, rename, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordFromCode } from '../../src/core/env/envset.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { OriginRefusedError, SandboxTimeoutError } from '../../src/core/errors.ts';
import { Access, ownOriginHosts } from '../../src/platform/node/serve/access.ts';
import { ArchiveTail, CHECK_BYTES } from '../../src/platform/node/serve/archive_tail.ts';
import { EnvCatalog, loadCatalog, MAX_ARCHIVE_BYTES } from '../../src/platform/node/serve/env_catalog.ts';
import {
  clientKey,
  HttpKillBudgets,
  KillBudget,
  KillBudgetError,
  MAX_CLIENT_KILLS,
  MAX_ENV_KILLS,
} from '../../src/platform/node/serve/kill_budget.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';
import { OpenEnvWsClient } from '../../src/platform/node/serve/ws_client.ts';
import { archiveRecord, line } from '../helpers/run_records.ts';
import { solutionOf } from '../helpers/solution_of.ts';

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
      (await http(server.url, '/reset', { body: '{}', headers: { origin: `http://trainer.internal:${port}` } })).status,
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
    for (const o of [
      'http://localhost:8000',
      'http://127.0.0.1:8000',
      'http://a.localhost:8000',
      'http://10.0.0.7:8000',
    ])
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

// a loop inside a built-in on one action: QuickJS cannot interrupt it, so the watchdog kills the worker
const trap = recordFromCode(
  `// @title Trap\nclass TrapEnv { reset(s){ this.t = 0; return ['go', {}]; } step(a){ this.t++; if (a.includes('spring')) { let n = 0; Array.prototype.join.call({ get length() { return n++ ? 2 ** 32 - 1 : 0; } }); } return ['x', 0, false, this.t >= 12, {}]; } solution(){ return ['\\\\boxed{1}', '\\\\boxed{2}']; } }`,
);
const spring = JSON.stringify({ env_id: trap.id, action: { text: 'spring' } });

/** One worker, a 200 ms step limit and 300 ms of grace: each trap step costs one watchdog kill. */
function trapServer(): Promise<SpadeServer> {
  return SpadeServer.start({
    catalog: new EnvCatalog('s', [lantern, trap]),
    port: 0,
    workers: 1,
    graceMs: 300,
    limits: { ...DEFAULT_LIMITS, stepMs: 200 },
  });
}

/**
 * /ws sessions playing Lantern Lock's solution on the same (only) worker: `step()` plays the next
 * move of one of them (in turn) and leaves each session's winning move for `finish()`, which plays
 * the rest: every episode must end won, as an undisturbed play does.
 */
async function victims(server: SpadeServer, plan: string[], n: number) {
  const sessions = await Promise.all(
    Array.from({ length: n }, async () => {
      const ws = await OpenEnvWsClient.connect(server.url);
      expect((await ws.reset({ env_id: lantern.id, seed: 6 })).type).toBe('observation');
      return { ws, taken: 0 };
    }),
  );
  let turn = 0;
  return {
    async step() {
      const v = sessions[turn++ % n]!;
      if (v.taken >= plan.length - 1) return;
      const r = await v.ws.step({ text: plan[v.taken]! });
      expect(r.type, JSON.stringify(r.data).slice(0, 300)).toBe('observation');
      expect(r.data).toMatchObject({ done: false });
      v.taken++;
    },
    async finish() {
      for (const v of sessions) {
        let last: unknown = null;
        for (const text of plan.slice(v.taken)) last = (await v.ws.step({ text })).data;
        expect(last).toMatchObject({ done: true, reward: 1 });
        await v.ws.close();
      }
    },
  };
}

const body = (r: { text: string }) => JSON.parse(r.text) as Record<string, unknown>;

// each case: a few watchdog kills of ~0.5 s (2-4 s idle; with two CPU-bound processes beside it,
// about 3x): 120 s is over 20x idle
describe('the HTTP routes have a kill budget: only the hostile caller gets the error (#38 item 2)', () => {
  let plan: string[] = [];
  beforeAll(async () => {
    plan = await solutionOf(lantern, 6);
    expect(plan.length).toBeGreaterThanOrEqual(3);
  });

  it(
    'a client looping on POST /step: two kills, then 429 for it alone; a /ws episode on the worker is won',
    { timeout: 120_000 },
    async () => {
      const server = await trapServer();
      try {
        const v = await victims(server, plan, 2);
        const statuses: number[] = [];
        for (let i = 0; i < 6; i++) {
          // a victim's step queued behind each hostile request on the same worker
          const [r] = await Promise.all([http(server.url, '/step', { body: spring }), v.step()]);
          statuses.push(r.status);
          if (r.status === 500) expect(String(body(r).detail)).toMatch(/^SandboxTimeoutError/);
          else {
            expect(r.status).toBe(429);
            expect(body(r)).toMatchObject({
              error: 'KillBudgetError',
              scope: 'client',
              client: '127.0.0.1',
              kills: MAX_CLIENT_KILLS,
              max: MAX_CLIENT_KILLS,
            });
            expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
          }
        }
        expect(statuses).toEqual([500, 500, 429, 429, 429, 429]);
        expect(server.stats().workerReplacements).toBe(MAX_CLIENT_KILLS);
        // POST /reset is refused to that client too; another address is served, the trap included
        expect((await http(server.url, '/reset', { body: JSON.stringify({ env_id: lantern.id }) })).status).toBe(429);
        const other = { localAddress: '127.0.0.2' };
        expect(
          (await http(server.url, '/reset', { ...other, body: JSON.stringify({ env_id: lantern.id }) })).status,
        ).toBe(200);
        const calm = JSON.stringify({ env_id: trap.id, action: { text: 'calm' } });
        expect((await http(server.url, '/step', { ...other, body: calm })).status).toBe(200);
        await v.finish();
        expect(server.stats().workerReplacements).toBe(MAX_CLIENT_KILLS);
        expect(server.stats().replays).toBeGreaterThanOrEqual(MAX_CLIENT_KILLS);
      } finally {
        await server.close();
      }
    },
  );

  it(
    "eight hostile requests at once: still two kills — the requests lost to their own client's kill are not replayed",
    { timeout: 120_000 },
    async () => {
      const server = await trapServer();
      try {
        const v = await victims(server, plan, 1);
        const burst = Array.from({ length: 8 }, () =>
          http(server.url, '/step', { localAddress: '127.0.0.3', body: spring }),
        );
        await v.step();
        const replies = await Promise.all(burst);
        await v.step();
        const by = (st: number) => replies.filter((r) => r.status === st).length;
        expect(by(500)).toBe(MAX_CLIENT_KILLS);
        expect(by(429)).toBe(8 - MAX_CLIENT_KILLS);
        for (const r of replies.filter((x) => x.status === 429))
          expect(body(r)).toMatchObject({ error: 'KillBudgetError', scope: 'client', client: '127.0.0.3' });
        expect(server.stats().workerReplacements).toBe(MAX_CLIENT_KILLS);
        await v.finish();
        for (let i = 0; i < 500 && server.stats().liveEnvs > 0; i++) await new Promise((r) => setTimeout(r, 20));
        expect(server.stats().liveEnvs).toBe(0);
      } finally {
        await server.close();
      }
    },
  );

  it(
    'clients on many addresses: the environment is refused to HTTP after four kills; /ws may still play it',
    { timeout: 120_000 },
    async () => {
      const server = await trapServer();
      try {
        const v = await victims(server, plan, 3);
        const seen: Record<string, number[]> = {};
        for (const address of ['127.0.0.4', '127.0.0.5', '127.0.0.6'])
          for (let i = 0; i < 3; i++) {
            const [r] = await Promise.all([
              http(server.url, '/step', { localAddress: address, body: spring }),
              v.step(),
            ]);
            (seen[address] ??= []).push(r.status);
            if (address === '127.0.0.6')
              expect(body(r)).toMatchObject({
                error: 'KillBudgetError',
                scope: 'environment',
                env_id: trap.id,
                kills: MAX_ENV_KILLS,
              });
          }
        expect(seen).toEqual({
          '127.0.0.4': [500, 500, 429],
          '127.0.0.5': [500, 500, 429],
          '127.0.0.6': [429, 429, 429],
        });
        expect(server.stats().workerReplacements).toBe(MAX_ENV_KILLS);
        // another environment over HTTP, from a fresh address, and the trap over /ws, are served
        const fresh = { localAddress: '127.0.0.7' };
        expect(
          (await http(server.url, '/reset', { ...fresh, body: JSON.stringify({ env_id: lantern.id }) })).status,
        ).toBe(200);
        expect((await http(server.url, '/reset', { ...fresh, body: JSON.stringify({ env_id: trap.id }) })).status).toBe(
          429,
        );
        const ws = await OpenEnvWsClient.connect(server.url);
        expect((await ws.reset({ env_id: trap.id })).type).toBe('observation');
        await ws.close();
        await v.finish();
      } finally {
        await server.close();
      }
    },
  );
});

describe('KillBudget: one rule for /ws sessions and HTTP callers', () => {
  const kill = () => new SandboxTimeoutError('killed', { killed: true });

  it("charges only watchdog kills for the caller's own call, within a window, and says when it may go on", () => {
    let t = 0;
    const b = new KillBudget(2, 1000, () => t);
    expect(b.charge('a', new Error('plain'))).toBe(0);
    expect(b.charge('a', new SandboxTimeoutError('lost', { lost: true }))).toBe(0);
    expect(b.charge('a', kill())).toBe(1);
    t = 400;
    expect(b.charge('a', kill())).toBe(2);
    expect(b.spent('a')).toBe(true);
    expect(b.spent('b')).toBe(false);
    expect(b.retryAfterMs('a')).toBe(600);
    t = 1000;
    expect(b.spent('a')).toBe(false);
    expect(b.kills('a')).toBe(1);
    t = 1400;
    expect(b.kills('a')).toBe(0);
  });

  it('HttpKillBudgets refuses the spent client or environment with typed data', () => {
    let t = 0;
    const h = new HttpKillBudgets(() => t, 60_000);
    for (let i = 0; i < MAX_CLIENT_KILLS; i++) h.charge('10.0.0.1', 'e', kill());
    expect(() => h.check('10.0.0.2', 'e')).not.toThrow();
    let err: unknown;
    try {
      h.check('10.0.0.1', 'other');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KillBudgetError);
    expect((err as KillBudgetError).data).toEqual({
      scope: 'client',
      client: '10.0.0.1',
      kills: 2,
      max: 2,
      retry_after_s: 60,
    });
    for (let i = MAX_CLIENT_KILLS; i < MAX_ENV_KILLS; i++) h.charge(`10.0.1.${i}`, 'e', kill());
    expect(() => h.check('10.0.0.9', 'e')).toThrow(KillBudgetError);
    expect(() => h.check('10.0.0.9', 'f')).not.toThrow();
    t = 60_000;
    expect(() => h.check('10.0.0.1', 'e')).not.toThrow();
  });

  it('an HTTP client is its IPv4 address (unmapped) or its IPv6 /64', () => {
    expect(clientKey('127.0.0.1')).toBe('127.0.0.1');
    expect(clientKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientKey('2001:db8:0:7::1')).toBe('2001:db8:0:7::/64');
    expect(clientKey('2001:db8:0:7:ffff:1:2:3')).toBe('2001:db8:0:7::/64');
    expect(clientKey('2001:db8::')).toBe('2001:db8:0:0::/64');
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
    expect(clientKey(undefined)).toBe('unknown');
  });
});

describe('--watch reads only what was appended to the archive (#38 item 9)', () => {
  /** An archive line of cycle c, padded so that lines are long (a large archive in few lines). */
  const rec = (c: number, i: number, pad = 0) => line(archiveRecord(c, i, { hint: 'h'.repeat(pad) }));

  async function run(): Promise<{ dir: string; file: string }> {
    const dir = await mkdtemp(join(tmpdir(), 'spade-tail-'));
    return { dir, file: join(dir, 'archive.jsonl') };
  }

  it('unchanged: 0 bytes; appended: the new bytes and the check bytes; replaced or truncated: read whole', async () => {
    const { file } = await run();
    const first = rec(0, 0, 50_000) + rec(0, 1, 50_000);
    await writeFile(file, first);
    const tail = new ArchiveTail(file, MAX_ARCHIVE_BYTES);
    let r = await tail.read();
    expect(r).toMatchObject({ mode: 'full', bytes: Buffer.byteLength(first) });
    expect(r.records.map((a) => [a.cycle, a.index])).toEqual([
      [0, 0],
      [0, 1],
    ]);
    for (let i = 0; i < 5; i++) expect(await tail.read()).toMatchObject({ mode: 'unchanged', bytes: 0, records: [] });

    const more = rec(1, 0);
    await appendFile(file, more);
    r = await tail.read();
    expect(r).toMatchObject({ mode: 'appended', bytes: Buffer.byteLength(more) + CHECK_BYTES });
    expect(r.records.map((a) => [a.cycle, a.index])).toEqual([[1, 0]]);
    expect((await tail.read()).bytes).toBe(0);

    // a line written in two parts: the torn half is left for the next read, not skipped
    const next = rec(1, 1);
    await appendFile(file, next.slice(0, 100));
    r = await tail.read();
    expect(r).toMatchObject({ mode: 'appended', records: [], warnings: [] });
    await appendFile(file, next.slice(100));
    r = await tail.read();
    expect(r.records.map((a) => [a.cycle, a.index])).toEqual([[1, 1]]);
    expect(r.bytes).toBe(Buffer.byteLength(next) + CHECK_BYTES);

    // a repeat and a bad line in an append: named with their line numbers in the whole file
    await appendFile(file, rec(0, 0) + 'not json\n');
    r = await tail.read();
    expect(r.records).toEqual([]);
    expect(r.warnings).toEqual([
      `${file} line 5 repeats line 1 (cycle 0, task 0); the line was skipped.`,
      expect.stringMatching(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} line 6: not valid JSON`)),
    ]);

    // replaced (a new inode renamed over it): read whole, lines counted from 1 again
    const replacement = rec(5, 0) + rec(5, 1);
    await writeFile(`${file}.new`, replacement);
    await rename(`${file}.new`, file);
    r = await tail.read();
    expect(r).toMatchObject({ mode: 'full', bytes: Buffer.byteLength(replacement) });
    expect(r.records.map((a) => [a.cycle, a.index])).toEqual([
      [5, 0],
      [5, 1],
    ]);

    // truncated below what was read: read whole
    await truncate(file, Buffer.byteLength(rec(5, 0)));
    r = await tail.read();
    expect(r).toMatchObject({ mode: 'full', bytes: Buffer.byteLength(rec(5, 0)) });
    expect(r.records.map((a) => [a.cycle, a.index])).toEqual([[5, 0]]);
  });

  it('rewritten in place past its old size (a resumed cycle cut and written again): the check bytes differ, read whole', async () => {
    const { file } = await run();
    await writeFile(file, rec(0, 0) + rec(1, 0, 10));
    const tail = new ArchiveTail(file, MAX_ARCHIVE_BYTES);
    await tail.read();
    // the same inode: cycle 1 cut and written again, longer
    const rewritten = rec(0, 0) + rec(1, 0, 20) + rec(1, 1);
    await writeFile(file, rewritten);
    const r = await tail.read();
    expect(r.mode).toBe('full');
    expect(r.records.map((a) => [a.cycle, a.index, (a.hint ?? '').length])).toEqual([
      [0, 0, 0],
      [1, 0, 20],
      [1, 1, 0],
    ]);
  });

  it('an idle watched server reads nothing per tick, however large the archive; an append reads only itself', async () => {
    const { dir, file } = await run();
    // ~8 MiB of archive in 80 lines
    await writeFile(file, Array.from({ length: 80 }, (_, i) => rec(0, i, 100_000)).join(''));
    const catalog = await loadCatalog([], () => undefined, dir);
    expect(catalog.size).toBe(80);
    const tail = catalog.tailOf(dir);
    const atLoad = tail.bytesRead;
    expect(atLoad).toBeGreaterThan(8_000_000);
    let added = 0;
    const errors: string[] = [];
    expect(
      catalog.watch(
        dir,
        10,
        (n) => (added += n),
        (e) => errors.push(e.message),
      ),
    ).toBe(tail);
    try {
      const until = async (done: () => boolean) => {
        for (let i = 0; i < 1000 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
        expect(done()).toBe(true);
      };
      const reads = tail.reads;
      await until(() => tail.reads >= reads + 10);
      expect(tail.bytesRead).toBe(atLoad);
      const more = rec(1, 0);
      await appendFile(file, more);
      await until(() => added === 1);
      // the append and its check bytes (a tick that met the append half-written reads its first
      // part again, with a second check: still bytes of the append alone, never the archive)
      const forAppend = tail.bytesRead - atLoad;
      expect(forAppend).toBeGreaterThanOrEqual(Buffer.byteLength(more) + CHECK_BYTES);
      expect(forAppend).toBeLessThan(2 * (Buffer.byteLength(more) + CHECK_BYTES));
      const after = tail.reads;
      await until(() => tail.reads >= after + 10);
      expect(tail.bytesRead).toBe(atLoad + forAppend);
      expect(errors).toEqual([]);
    } finally {
      catalog.stop();
    }
  });
});
