// `spade serve` against hostile clients, pages, sources and environments (hardening round 4): every
// malformed request answered with a bounded reply and the process never exits (checked on a live
// `spade serve` child process, which then plays a session to a win); the Origin and Host allow-lists
// on every route; a session that keeps tripping the watchdog closed while its neighbours replay and
// win; the turn limit and replay cap enforced by the server; served sources loaded and reset before
// they are offered; ids that cannot be forged into a collision; sampling weights in log space.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { mkdir, mkdtemp, writeFile, appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordFromCode, type EnvRecord } from '../../src/core/env/envset.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { UsageError } from '../../src/core/errors.ts';
import { EnvCatalog, loadCatalog, sampleEnv } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';
import { OpenEnvWsClient } from '../../src/platform/node/serve/ws_client.ts';
import { forgeSameId } from '../helpers/forge_id.ts';
import { archiveRecord, line } from '../helpers/run_records.ts';
import { solutionOf } from '../helpers/solution_of.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const lantern = SEED_ENVS.find((e) => e.title === 'Lantern Lock')!;

interface Reply {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** One HTTP request with any headers (Host and Origin included), its body as text. */
function http(
  base: string,
  path: string,
  opts: { method?: string; body?: string; headers?: Record<string, string> } = {},
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
    // a connection the server closed while the body was still being sent (a refused huge body)
    req.on('error', (err: NodeJS.ErrnoException) =>
      ['EPIPE', 'ECONNRESET'].includes(err.code ?? '') ? resolve({ status: -1, text: '{}', headers: {} }) : reject(err),
    );
    req.end(opts.body);
  });
}

/** Bytes written straight to the server's socket; what comes back before it closes (or 2 s). */
function rawSocket(base: string, bytes: string): Promise<string> {
  const u = new URL(base);
  return new Promise((resolve) => {
    const s = connect(Number(u.port), u.hostname);
    let got = '';
    const done = () => resolve(got);
    s.on('data', (d) => (got += d.toString()));
    s.on('close', done);
    s.on('error', done);
    s.setTimeout(2000, () => s.destroy());
    s.write(bytes);
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

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const deepObj = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

/** Malformed HTTP requests: each must get a bounded JSON answer (never a crash). */
function hostileHttp(): { name: string; path: string; body?: string; method?: string; status: number[] }[] {
  const manyKeys = `{"action": {"text": "x", ${Array.from({ length: 50_000 }, (_, i) => `"k${i}": ${i}`).join(', ')}}}`;
  const calls = JSON.stringify({ action: { tool_calls: Array.from({ length: 2000 }, () => ({ nope: 1 })) } });
  return [
    { name: '20 000-deep seed', path: '/reset', body: `{"seed": ${deep(20_000)}}`, status: [422] },
    { name: '6 000-deep seed object', path: '/reset', body: `{"seed": ${deepObj(6_000)}}`, status: [422] },
    { name: 'deep env_id', path: '/reset', body: `{"env_id": ${deep(30_000)}}`, status: [422] },
    { name: 'deep episode_id', path: '/reset', body: `{"episode_id": ${deepObj(30_000)}}`, status: [422] },
    { name: 'deep sample', path: '/reset', body: `{"sample": ${deep(30_000)}}`, status: [422] },
    { name: 'deep hint', path: '/reset', body: `{"hint": ${deep(30_000)}}`, status: [422] },
    { name: 'deep body', path: '/reset', body: deep(100_000), status: [422] },
    { name: 'deep action', path: '/step', body: `{"action": ${deep(20_000)}}`, status: [422] },
    { name: 'deep action text', path: '/step', body: `{"action": {"text": ${deep(20_000)}}}`, status: [422] },
    {
      name: 'deep tool-call arguments',
      path: '/step',
      body: `{"action": {"tool_calls": [{"name": "f", "arguments": ${deepObj(20_000)}}]}}`,
      status: [422],
    },
    {
      name: 'deep tool-call arguments as JSON text',
      path: '/step',
      body: JSON.stringify({ action: { tool_calls: [{ name: 'f', arguments: deepObj(20_000) }] } }),
      status: [422],
    },
    {
      name: 'deep timeout_s',
      path: '/step',
      body: `{"action": {"text": "x"}, "timeout_s": ${deep(20_000)}}`,
      status: [422],
    },
    {
      name: 'deep request_id',
      path: '/step',
      body: `{"action": {"text": "x"}, "request_id": ${deep(20_000)}}`,
      status: [422],
    },
    { name: '50 000 extra action keys', path: '/step', body: manyKeys, status: [422] },
    { name: '2 000 bad tool calls', path: '/step', body: calls, status: [422] },
    {
      name: 'a 200 000-character key',
      path: '/step',
      body: `{"action": {"${'k'.repeat(200_000)}": 1}}`,
      status: [422],
    },
    { name: 'unclosed deep JSON', path: '/reset', body: '['.repeat(200_000), status: [422] },
    { name: 'not JSON', path: '/step', body: '{oops', status: [422] },
    { name: 'null', path: '/step', body: 'null', status: [422] },
    { name: 'a list', path: '/step', body: '[]', status: [422] },
    { name: 'a string', path: '/reset', body: '"x"', status: [422] },
    { name: '1e999', path: '/reset', body: '1e999', status: [422] },
    { name: 'invalid UTF-8', path: '/reset', body: '{"seed": "\udc00\ud800"}', status: [422] },
    { name: 'over the body limit', path: '/reset', body: `{"x": "${'y'.repeat(2 ** 20 + 10)}"}`, status: [413, -1] },
    { name: 'a long unknown path', path: `/${'p'.repeat(6000)}`, status: [404] },
    { name: 'a wrong method', path: '/reset', method: 'PUT', body: '{}', status: [405] },
  ];
}

/** Malformed /ws messages: each answered (or the session closed), never a crash. */
function hostileWs(): string[] {
  return [
    `{"type": "reset", "data": {"seed": ${deep(20_000)}}}`,
    `{"type": "reset", "data": ${deep(20_000)}}`,
    `{"type": "step", "data": ${deep(20_000)}}`,
    `{"type": "step", "data": {"text": "x", "metadata": ${deepObj(20_000)}}}`,
    `{"type": ${deep(20_000)}}`,
    `{"type": "${'t'.repeat(500_000)}"}`,
    `{"type": "state", ${Array.from({ length: 20_000 }, (_, i) => `"k${i}": ${deep(20)}`).join(', ')}}`,
    `{"type": "reset", "${'k'.repeat(300_000)}": ${deep(10_000)}}`,
    '{oops',
    '['.repeat(300_000),
  ];
}

function expectBounded(r: Reply, name: string) {
  expect(r.text.length, name).toBeLessThan(64 * 1024);
  expect(() => JSON.parse(r.text) as unknown, name).not.toThrow();
}

describe('malformed requests: bounded answers, never an exit', () => {
  let server: SpadeServer;
  beforeAll(async () => {
    server = await SpadeServer.start({ catalog: new EnvCatalog('s', [lantern]), port: 0, workers: 1 });
  });
  afterAll(() => server.close());

  it.each(hostileHttp())('HTTP: $name', async (h) => {
    const r = await http(server.url, h.path, { method: h.method, body: h.body });
    expect(h.status, `${h.name}: ${r.text.slice(0, 200)}`).toContain(r.status);
    expectBounded(r, h.name);
  });

  it('echoes a deep input as a short summary, never the input', async () => {
    const r = await http(server.url, '/reset', { body: `{"seed": ${deep(20_000)}}` });
    const detail = (JSON.parse(r.text) as { detail: { loc: string[]; input: unknown }[] }).detail;
    expect(detail[0]!.loc).toEqual(['body', 'seed']);
    expect(JSON.stringify(detail[0]!.input)).toMatch(/^\[\[\["\[list of 1\]"\]\]\]$/);
    const many = await http(server.url, '/step', {
      body: hostileHttp().find((h) => h.name.startsWith('50 000'))!.body,
    });
    const d = (JSON.parse(many.text) as { detail: { type: string; msg: string }[] }).detail;
    expect(d).toHaveLength(21);
    expect(d.at(-1)).toMatchObject({ type: 'too_many_errors', msg: expect.stringMatching(/^49980 more/) as string });
  });

  it('half-open connections (slowloris: partial headers, partial bodies, stalled upgrades) starve no one', async () => {
    const u = new URL(server.url);
    const sockets = Array.from({ length: 200 }, (_, i) => {
      const s = connect(Number(u.port), u.hostname);
      s.on('error', () => undefined);
      s.write(
        i % 3 === 0
          ? 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: '
          : i % 3 === 1
            ? 'POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{"seed":'
            : 'GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n',
      );
      return s;
    });
    try {
      expect((await http(server.url, '/health')).status).toBe(200);
      const c = await OpenEnvWsClient.connect(server.url);
      expect((await c.reset({ env_id: lantern.id, seed: 2 })).type).toBe('observation');
      await c.close();
      expect(server.stats().liveEnvs).toBe(0);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it('/ws: each hostile message is answered or ends only its own session; the next session plays on', async () => {
    for (const m of hostileWs()) {
      const c = await OpenEnvWsClient.connect(server.url);
      c.sendRaw(m);
      const r = await c.next();
      if (r) {
        expect(r.type, m.slice(0, 40)).toBe('error');
        expect(JSON.stringify(r).length).toBeLessThan(64 * 1024);
      }
      c.terminate();
    }
    const c = await OpenEnvWsClient.connect(server.url);
    expect((await c.reset({ env_id: lantern.id, seed: 1 })).type).toBe('observation');
    await c.close();
    expect(server.stats().liveEnvs).toBe(0);
  });
});

describe('a live `spade serve` process survives every malformed request, then plays to a win', () => {
  let child: ChildProcess;
  let url = '';
  let stderr = '';
  beforeAll(async () => {
    child = spawn(process.execPath, ['bin/spade.js', 'serve', 'seeds', '--port', '0', '--workers', '1', '--json'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    let out = '';
    url = await new Promise<string>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/[^\s]+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error(`exited early: ${out} ${stderr}`)));
    });
  });
  afterAll(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('answers them all and is still up', async () => {
    for (const h of hostileHttp()) {
      const r = await http(url, h.path, { method: h.method, body: h.body });
      expect(h.status, h.name).toContain(r.status);
    }
    // refused pages and hosts, over HTTP and /ws
    expect((await http(url, '/reset', { body: '{}', headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect((await http(url, '/reset', { body: '{}', headers: { host: 'evil.example' } })).status).toBe(421);
    expect(await wsOpen(url, { origin: 'http://127.0.0.1:1' })).toBe(403);
    // broken framing, a request without Host, a header flood, a half-sent body
    expect(await rawSocket(url, 'GARBAGE\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    expect(await rawSocket(url, 'GET /health HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    expect(
      await rawSocket(url, `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX: ${'x'.repeat(100_000)}\r\n\r\n`),
    ).toMatch(/^HTTP\/1\.1 431/);
    await rawSocket(url, 'POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"se');
    for (const m of hostileWs()) {
      const c = await OpenEnvWsClient.connect(url);
      c.sendRaw(m);
      await c.next();
      c.terminate();
    }
    // a flood of pipelined messages on one session
    const flood = await OpenEnvWsClient.connect(url);
    for (let i = 0; i < 40; i++) flood.sendRaw(`{"type": "reset", "data": {"seed": ${deep(5_000)}}}`);
    // each is answered (or, past 16 waiting, the session is closed)
    for (let i = 0; i < 40 && (await flood.next()); i++);
    flood.terminate();
    expect(child.exitCode).toBeNull();

    // and a session still plays to a win
    const plan = await solutionOf(lantern, 4);
    const c = await OpenEnvWsClient.connect(url);
    expect((await c.reset({ env_id: lantern.id, seed: 4 })).type).toBe('observation');
    let last;
    for (const text of plan) last = await c.step({ text });
    expect(last!.data).toMatchObject({ done: true, reward: 1 });
    await c.close();
    expect(child.exitCode).toBeNull();
    expect(stderr).not.toMatch(/RangeError|Maximum call stack|Unhandled/);
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

describe('Origin and Host allow-lists on every route', () => {
  let server: SpadeServer;
  let port = '';
  beforeAll(async () => {
    server = await SpadeServer.start({ catalog: new EnvCatalog('s', [lantern]), port: 0, workers: 1 });
    port = new URL(server.url).port;
  });
  afterAll(() => server.close());

  it('refuses a page on another origin — another port of localhost included — on every route and on /ws', async () => {
    const foreign = [
      'http://evil.example',
      `http://127.0.0.1:${Number(port) + 1}`,
      `http://localhost:5173`,
      'null',
      'file://',
      `https://127.0.0.1:${port}`,
    ];
    for (const origin of foreign) {
      for (const [path, body] of [
        ['/reset', '{}'],
        ['/step', '{"action": {"text": "x"}}'],
        ['/metadata', undefined],
        ['/health', undefined],
        ['/schema', undefined],
      ] as const) {
        const r = await http(server.url, path, { body, headers: { origin } });
        expect(r.status, `${origin} ${path}`).toBe(403);
        expect(JSON.parse(r.text)).toMatchObject({ error: 'OriginRefusedError' });
        expect(r.headers['access-control-allow-origin']).toBeUndefined();
      }
      expect(await wsOpen(server.url, { origin }), origin).toBe(403);
    }
    // a browser's no-cors GET carries no Origin but says it is cross-site
    expect((await http(server.url, '/metadata', { headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await http(server.url, '/metadata', { headers: { 'sec-fetch-site': 'same-site' } })).status).toBe(403);
    // the server's own origin, and clients that are not browsers, pass
    for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`])
      expect((await http(server.url, '/reset', { body: '{}', headers: { origin } })).status).toBe(200);
    expect(
      (await http(server.url, '/reset', { body: '{}', headers: { 'sec-fetch-site': 'same-origin' } })).status,
    ).toBe(200);
    expect(await wsOpen(server.url)).toBe('open');
    expect(server.stats().liveEnvs).toBe(0);
  });

  it('refuses a rebound Host (a page that re-pointed its own name here), on every route and on /ws', async () => {
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      'localhost.evil.example',
      'evillocalhost',
      '127.0.0.1.nip.io',
      'x y',
      `[::1`,
    ]) {
      const r = await http(server.url, '/reset', { body: '{}', headers: { host } });
      expect([421, 400], host).toContain(r.status);
      if (r.status === 421) expect(JSON.parse(r.text)).toMatchObject({ error: 'HostRefusedError' });
      expect((await http(server.url, '/health', { headers: { host } })).status, host).not.toBe(200);
      expect(await wsOpen(server.url, { host }), host).not.toBe('open');
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `app.localhost:${port}`, `[::1]:${port}`, '10.0.0.7'])
      expect((await http(server.url, '/health', { headers: { host } })).status, host).toBe(200);
  });

  it('--allow-origin adds an origin (with CORS and its preflight), --allow-host a name; nothing else', async () => {
    await expect(
      SpadeServer.start({
        catalog: new EnvCatalog('s', [lantern]),
        port: 0,
        workers: 1,
        allowOrigins: ['localhost:5173'],
      }),
    ).rejects.toThrow(UsageError);
    const s = await SpadeServer.start({
      catalog: new EnvCatalog('s', [lantern]),
      port: 0,
      workers: 1,
      allowOrigins: ['http://localhost:5173'],
      allowHosts: ['trainer.internal'],
    });
    try {
      const ok = await http(s.url, '/reset', { body: '{}', headers: { origin: 'http://localhost:5173' } });
      expect(ok.status).toBe(200);
      expect(ok.headers['access-control-allow-origin']).toBe('http://localhost:5173');
      const pre = await http(s.url, '/reset', { method: 'OPTIONS', headers: { origin: 'http://localhost:5173' } });
      expect(pre.status).toBe(204);
      expect(pre.headers['access-control-allow-headers']).toMatch(/authorization/);
      expect(await wsOpen(s.url, { origin: 'http://localhost:5173' })).toBe('open');
      for (const origin of ['http://localhost:5174', 'https://localhost:5173', 'http://localhost:5173.evil.example'])
        expect((await http(s.url, '/reset', { body: '{}', headers: { origin } })).status, origin).toBe(403);
      expect((await http(s.url, '/health', { headers: { host: 'trainer.internal:8000' } })).status).toBe(200);
      expect((await http(s.url, '/health', { headers: { host: 'other.internal' } })).status).toBe(421);
    } finally {
      await s.close();
    }
  });

  it('with a token, hints (and every route but /health) only to clients that present it', async () => {
    const s = await SpadeServer.start({ catalog: new EnvCatalog('s', [lantern]), port: 0, workers: 1, token: 't0k' });
    try {
      const body = JSON.stringify({ env_id: lantern.id, hint: true });
      expect((await http(s.url, '/reset', { body })).status).toBe(401);
      expect((await http(s.url, '/reset', { body, headers: { authorization: 'Bearer nope' } })).status).toBe(401);
      expect(await wsOpen(s.url)).toBe(401);
      const r = await http(s.url, '/reset', { body, headers: { authorization: 'Bearer t0k' } });
      expect((JSON.parse(r.text) as { observation: { hint: string } }).observation.hint).toBe(lantern.hint);
      // a foreign page is refused before the token is even looked at
      expect(
        (await http(s.url, '/reset', { body, headers: { authorization: 'Bearer t0k', origin: 'http://evil.example' } }))
          .status,
      ).toBe(403);
    } finally {
      await s.close();
    }
  });
});

describe('a session that keeps tripping the watchdog is closed; its neighbours replay and win', () => {
  // a loop inside a built-in on one action: QuickJS cannot interrupt it, so the watchdog kills the worker
  const trap = recordFromCode(
    `// @title Trap\nclass TrapEnv { reset(s){ this.t = 0; return ['go', {}]; } step(a){ this.t++; if (a.includes('spring')) { let n = 0; Array.prototype.join.call({ get length() { return n++ ? 2 ** 32 - 1 : 0; } }); } return ['x', 0, false, this.t >= 12, {}]; } solution(){ return ['\\\\boxed{1}', '\\\\boxed{2}']; } }`,
  );

  // its own limit: ~6 s idle (four watchdog kills), 14 s with two CPU-bound processes beside it;
  // 150 s is over 20x idle
  it(
    'four kills from two hostile sessions on one worker: both closed; the victims finish unchanged',
    { timeout: 150_000 },
    async () => {
      const server = await SpadeServer.start({
        catalog: new EnvCatalog('s', [lantern, trap]),
        port: 0,
        workers: 1,
        graceMs: 300,
        limits: { ...DEFAULT_LIMITS, stepMs: 200 },
      });
      try {
        const plan = await solutionOf(lantern, 6);
        expect(plan.length).toBeGreaterThanOrEqual(3);
        const victims = await Promise.all([0, 1].map(() => OpenEnvWsClient.connect(server.url)));
        for (const v of victims) expect((await v.reset({ env_id: lantern.id, seed: 6 })).type).toBe('observation');
        const replies: unknown[][] = [[], []];
        let step = 0;
        const victimStep = async (i: number) => {
          const r = await victims[i]!.step({ text: plan[Math.min(step, plan.length - 1)]! });
          replies[i]!.push(r.data);
          return r;
        };
        for (let attacker = 0; attacker < 2; attacker++) {
          const bad = await OpenEnvWsClient.connect(server.url);
          for (let trip = 0; trip < 2; trip++) {
            expect((await bad.reset({ env_id: trap.id })).type).toBe('observation');
            // a victim's step queued behind the trap on the same worker
            const [hit, queued] = await Promise.all([bad.step({ text: 'spring' }), victimStep(step % 2)]);
            expect(hit.data).toMatchObject({
              code: 'EXECUTION_ERROR',
              message: expect.stringMatching(/SandboxTimeoutError/) as string,
            });
            expect(queued.type, JSON.stringify(queued.data).slice(0, 300)).toBe('observation');
          }
          // the second kill closes the session, with the reason
          const why = await bad.next();
          expect(why?.data).toMatchObject({
            code: 'SESSION_ERROR',
            message: expect.stringMatching(/killed 2 times/) as string,
          });
          expect(await bad.next()).toBeNull();
          expect(bad.closed?.code).toBe(1008);
          step++;
        }
        expect(server.stats().workerReplacements).toBe(4);
        expect(server.stats().replays).toBeGreaterThanOrEqual(4);
        // each victim plays its episode to the end: the same transcript as an undisturbed play
        for (const i of [0, 1]) {
          const taken = replies[i]!.length;
          let last: unknown = replies[i]!.at(-1);
          for (const text of plan.slice(taken)) last = (await victims[i]!.step({ text })).data;
          expect(last, `victim ${i}`).toMatchObject({ done: true, reward: 1 });
        }
        for (const v of victims) await v.close();
        for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
        expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0 });
      } finally {
        await server.close();
      }
    },
  );
});

describe('the server enforces the turn limit and caps what it keeps for replay', () => {
  const endless = recordFromCode(
    `// @title Endless\nclass EndlessEnv { reset(s){ return ['go', {}]; } step(a){ return ['more', 0, false, false, {}]; } solution(){ return ['\\\\boxed{1}', '\\\\boxed{2}']; } }`,
  );

  it('truncates an episode the environment never ends at --max-turns, and refuses steps past it', async () => {
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [endless]),
      port: 0,
      workers: 1,
      maxTurns: 5,
    });
    try {
      const c = await OpenEnvWsClient.connect(server.url);
      await c.reset({ env_id: endless.id });
      for (let t = 1; t <= 4; t++) expect((await c.step({ text: 'x' })).data).toMatchObject({ done: false });
      expect((await c.step({ text: 'x' })).data).toMatchObject({
        done: true,
        observation: { truncated: true, terminated: false, step: 5 },
      });
      for (let t = 0; t < 3; t++)
        expect((await c.step({ text: 'x'.repeat(60_000) })).data).toMatchObject({
          code: 'EXECUTION_ERROR',
          message: expect.stringMatching(/episode is over/) as string,
        });
      expect((await c.state()).data).toMatchObject({ step_count: 5, done: true });
      // a reset starts a fresh episode with a fresh count
      await c.reset({ env_id: endless.id });
      expect((await c.step({ text: 'x' })).data).toMatchObject({ done: false, observation: { step: 1 } });
      await c.close();
    } finally {
      await server.close();
    }
  });

  it('truncates the episode at the step that passes the replay cap', async () => {
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [endless]),
      port: 0,
      workers: 1,
      maxTurns: 50,
      maxReplayChars: 100_000,
    });
    try {
      const c = await OpenEnvWsClient.connect(server.url);
      await c.reset({ env_id: endless.id });
      expect((await c.step({ text: 'a'.repeat(40_000) })).data).toMatchObject({ done: false });
      expect((await c.step({ text: 'b'.repeat(40_000) })).data).toMatchObject({ done: false });
      expect((await c.step({ text: 'c'.repeat(40_000) })).data).toMatchObject({
        done: true,
        observation: { truncated: true },
      });
      expect((await c.step({ text: 'd' })).data).toMatchObject({ code: 'EXECUTION_ERROR' });
      await c.close();
      const md = JSON.parse((await http(server.url, '/metadata')).text) as { limits: Record<string, number> };
      expect(md.limits).toEqual({ max_turns: 50, max_replay_chars: 100_000 });
    } finally {
      await server.close();
    }
  });
});

describe('served sources are loaded and reset before they are offered', () => {
  const bad: [string, string, RegExp][] = [
    ['syntax.js', '// @title Broken\nclass BrokenEnv { reset( {', /SyntaxError|SandboxRuntimeError/],
    ['noclass.js', '// @title Nothing\nconst x = 1;', /Env/],
    [
      'throws.js',
      `// @title Thrower\nclass ThrowEnv { reset(s){ throw new Error('no reset for you'); } step(a){ return ['x', 0, false, false, {}]; } solution(){ return []; } }`,
      /no reset for you/,
    ],
    [
      'hangs.js',
      `// @title Hanger\nclass HangEnv { reset(s){ for(;;){} } step(a){ return ['x', 0, false, false, {}]; } solution(){ return []; } }`,
      /SandboxTimeoutError/,
    ],
    [
      'badshape.js',
      `// @title Shape\nclass ShapeEnv { reset(s){ return 'just text'; } step(a){ return ['x', 0, false, false, {}]; } solution(){ return []; } }`,
      /reset/,
    ],
  ];

  it('at start-up: each bad source is left out and named with its file and reason; the good ones serve', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-serve-src-'));
    await writeFile(join(dir, 'good.js'), FAKE_ENV);
    for (const [f, code] of bad) await writeFile(join(dir, f), code);
    const logs: string[] = [];
    const catalog = await loadCatalog([join(dir, 'good.js'), ...bad.map(([f]) => join(dir, f))], (l) => logs.push(l));
    expect(catalog.size).toBe(1 + bad.length);
    const server = await SpadeServer.start({
      catalog,
      port: 0,
      workers: 1,
      graceMs: 300,
      limits: { ...DEFAULT_LIMITS, resetMs: 300 },
      log: (l) => logs.push(l),
    });
    try {
      const md = JSON.parse((await http(server.url, '/metadata')).text) as { environments: { title: string }[] };
      expect(md.environments.map((e) => e.title)).toEqual(['Fake Hunt']);
      for (const [f, , why] of bad) {
        const lineFor = logs.find((l) => l.startsWith(join(dir, f)));
        expect(lineFor, f).toBeDefined();
        expect(lineFor).toMatch(/is not served: /);
        expect(lineFor).toMatch(why);
      }
      expect(server.stats().liveEnvs).toBe(0);
    } finally {
      await server.close();
    }
  });

  it('a source whose reset gets the worker killed takes none of the other checks with it', async () => {
    const killer = recordFromCode(
      `// @title Killer\nclass KillerEnv { reset(s){ let n = 0; Array.prototype.join.call({ get length() { return n++ ? 2 ** 32 - 1 : 0; } }); return ['go', {}]; } step(a){ return ['x', 0, false, false, {}]; } solution(){ return []; } }`,
    );
    const logs: string[] = [];
    const catalog = new EnvCatalog('s', [...SEED_ENVS.slice(0, 6), killer, ...SEED_ENVS.slice(6, 10)]);
    const server = await SpadeServer.start({
      catalog,
      port: 0,
      workers: 1,
      graceMs: 300,
      limits: { ...DEFAULT_LIMITS, resetMs: 300 },
      log: (l) => logs.push(l),
    });
    try {
      expect(catalog.list().map((e) => e.title)).toEqual(SEED_ENVS.slice(0, 10).map((e) => e.title));
      expect(logs).toHaveLength(1);
      expect(logs[0]).toMatch(/"Killer" is not served: SandboxTimeoutError/);
      expect(server.stats().workerReplacements).toBeGreaterThanOrEqual(1);
    } finally {
      await server.close();
    }
  });

  it('under --watch: a new environment that fails to load or reset is named once and never served', async () => {
    const run = join(await mkdtemp(join(tmpdir(), 'spade-serve-watch-')), 'live');
    await mkdir(run);
    await writeFile(join(run, 'archive.jsonl'), line(archiveRecord(0, 0, { code: FAKE_ENV, title: 'c0' })));
    const logs: string[] = [];
    const catalog = await loadCatalog([], (l) => logs.push(l), run);
    const server = await SpadeServer.start({ catalog, port: 0, workers: 1, log: (l) => logs.push(l) });
    let added = 0;
    catalog.watch(
      run,
      30,
      (n) => (added += n),
      (e) => logs.push(e.message),
    );
    try {
      await appendFile(
        join(run, 'archive.jsonl'),
        line(archiveRecord(1, 0, { code: bad[2]![1], title: 'thrower' })) +
          line(archiveRecord(1, 1, { code: `// @title c1\n${FAKE_ENV}`, title: 'c1' })),
      );
      for (let i = 0; i < 500 && added < 1; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      expect(added).toBe(1);
      expect(catalog.list().map((e) => e.title)).toEqual(['c0', 'c1']);
      const refused = logs.filter((l) => l.includes('"thrower" is not served'));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toContain(`${join(run, 'archive.jsonl')} (cycle 1, task 0)`);
    } finally {
      await server.close();
    }
  });
});

describe('ids that cannot be forged into a collision', () => {
  const impostorBody = `// @title Impostor\nclass ImpostorEnv { reset(s){ this.t = 0; return ['Say anything.', {}]; } step(a){ this.t++; return ['You win.', 1, this.t >= 2, false, {}]; } solution(){ return ['\\\\boxed{1}', '\\\\boxed{2}']; } }`;

  it("a program built to take a seed's id is renamed and said so, in either order; the seed keeps its id", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-serve-ids-'));
    const file = join(dir, 'impostor.js');
    await writeFile(file, forgeSameId(lantern.code, impostorBody));
    for (const order of [
      [file, 'seeds'],
      ['seeds', file],
    ]) {
      const logs: string[] = [];
      const catalog = await loadCatalog(order, (l) => logs.push(l));
      expect(catalog.get(lantern.id)?.code).toBe(lantern.code);
      expect(catalog.get(`${lantern.id}~2`)?.title).toBe('Impostor');
      expect(catalog.size).toBe(SEED_ENVS.length + 1);
      expect(logs.join('\n')).toMatch(
        new RegExp(
          `impostor\\.js: "Impostor" has the id ${lantern.id} of a seed environment but other code: served as ${lantern.id}~2`,
        ),
      );
    }
    // and over the wire: env_id of the seed plays the seed
    const server = await SpadeServer.start({ catalog: await loadCatalog([file, 'seeds']), port: 0, workers: 1 });
    try {
      const c = await OpenEnvWsClient.connect(server.url);
      const r = (await c.reset({ env_id: lantern.id, seed: 1 })).data.observation as { title: string };
      expect(r.title).toBe('Lantern Lock');
      await c.close();
    } finally {
      await server.close();
    }
  });

  it('two programs forged to one id from two files: the second is renamed, both are served', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-serve-ids-'));
    const first = `${FAKE_ENV}\n// ${'p'.repeat(200)}`;
    await writeFile(join(dir, 'a.js'), first);
    await writeFile(join(dir, 'b.js'), forgeSameId(first, impostorBody));
    const logs: string[] = [];
    const catalog = await loadCatalog([join(dir, 'a.js'), join(dir, 'b.js'), join(dir, 'a.js')], (l) => logs.push(l));
    expect(catalog.list().map((e) => e.title)).toEqual(['Fake Hunt', 'Impostor']);
    expect(new Set(catalog.list().map((e) => e.id)).size).toBe(2);
    expect(logs.some((l) => l.includes('b.js') && l.includes('served as'))).toBe(true);
  });
});

describe('sampling weights in log space', () => {
  const scored = (code: string, regret: number, winRate = 0.5) => recordFromCode(code, { stats: { regret, winRate } });
  const envs = SEED_ENVS.slice(0, 4).map((e) => e.code);
  const picks = (set: EnvRecord[], rule: 'regret' | 'learnability') =>
    new Set(Array.from({ length: 40 }, (_, i) => sampleEnv(set, rule, (i + 0.5) / 40).id));

  it('huge scores do not always pick the last environment', () => {
    for (const big of [1e308, Number.MAX_VALUE, 1.5e308]) {
      const set = [scored(envs[0]!, big), scored(envs[1]!, big), scored(envs[2]!, big)];
      expect(picks(set, 'regret').size, String(big)).toBe(3);
    }
    // proportions hold across the range: a 1e308 beside 1e-308 takes (nearly) every draw
    const skewed = [scored(envs[0]!, 1e-308), scored(envs[1]!, 1e308), scored(envs[2]!, 0)];
    expect([...picks(skewed, 'regret')]).toEqual([skewed[1]!.id]);
    // equal large and small weights split evenly
    const halves = [scored(envs[0]!, 3e307), scored(envs[1]!, 3e307)];
    expect(sampleEnv(halves, 'regret', 0.49).id).toBe(halves[0]!.id);
    expect(sampleEnv(halves, 'regret', 0.51).id).toBe(halves[1]!.id);
  });

  it('zero and negative weights are never picked while another is positive; none positive is uniform', () => {
    const set = [scored(envs[0]!, -1e308), scored(envs[1]!, 0.25), scored(envs[2]!, 0)];
    expect([...picks(set, 'regret')]).toEqual([set[1]!.id]);
    const none = [scored(envs[0]!, -5), scored(envs[1]!, 0)];
    expect(picks(none, 'regret').size).toBe(2);
  });
});
