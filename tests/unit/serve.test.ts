// `spade serve`: conformance with OpenEnv's protocol (the HTTP and WebSocket message sequences its
// own EnvClient and HTTPEnvServer use, with their response and error shapes), sampling, the hint,
// the bearer token, hostile sessions (malformed and binary frames, huge frames, floods, too many
// sessions, hanging environments and a worker killed under its neighbours), idle reaping, a watched
// run directory, concurrent sessions without leaks, and graceful shutdown.
import { spawn } from 'node:child_process';
import { appendFile, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordFromCode } from '../../src/core/env/envset.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { UsageError } from '../../src/core/errors.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { EnvCatalog, sampleEnv } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';
import { OpenEnvWsClient } from '../../src/platform/node/serve/ws_client.ts';
import { solutionOf } from '../helpers/solution_of.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

const lantern = SEED_ENVS.find((e) => e.title === 'Lantern Lock')!;
const tool = SEED_ENVS.find((e) => e.setting === 'tool_use')!;

async function http(server: SpadeServer, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(server.url + path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('spade serve: OpenEnv conformance', () => {
  let server: SpadeServer;
  let lanternPlan: string[];
  beforeAll(async () => {
    server = await SpadeServer.start({ catalog: new EnvCatalog('seeds', SEED_ENVS), port: 0, workers: 1 });
    lanternPlan = await solutionOf(lantern, 3);
  });
  afterAll(() => server.close());

  it('answers the HTTP routes with OpenEnv shapes: /health, /schema, /metadata, /state', async () => {
    expect(await http(server, '/health')).toEqual({ status: 200, body: { status: 'healthy' } });
    const schema = await http(server, '/schema');
    expect(Object.keys(schema.body).sort()).toEqual(['action', 'observation', 'state']);
    const md = (await http(server, '/metadata')).body;
    for (const k of ['name', 'description', 'readme_content', 'version', 'author', 'documentation_url'])
      expect(md).toHaveProperty(k);
    const envs = md.environments as { env_id: string; skill: string; scores: Record<string, unknown> }[];
    expect(envs.map((e) => e.env_id)).toEqual(SEED_ENVS.map((e) => e.id));
    expect(envs[0]!.skill).toBe(SEED_ENVS[0]!.skill);
    expect(Object.keys(envs[0]!.scores).sort()).toEqual([
      'designer_reward',
      'learnability',
      'regret',
      'win_rate',
      'win_rate_hinted',
    ]);
    expect(await http(server, '/state')).toEqual({ status: 200, body: { episode_id: null, step_count: 0 } });
    expect((await http(server, '/nope')).status).toBe(404);
    expect((await http(server, '/reset')).status).toBe(405);
  });

  it('POST /reset and /step: ResetResponse and StepResponse; 422 with pydantic-shaped details', async () => {
    // OpenEnv's own ResetRequest examples: {seed, episode_id} and {}
    const r = await http(server, '/reset', { seed: 42, episode_id: 'episode-001', env_id: lantern.id });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['done', 'observation', 'reward']);
    expect(r.body).toMatchObject({
      reward: null,
      done: false,
      observation: { env_id: lantern.id, seed: 42, terminated: false },
    });
    expect((await http(server, '/reset', {})).status).toBe(200);
    expect((await http(server, '/reset', '')).status).toBe(200);
    const s = await http(server, '/step', {
      action: { text: lanternPlan[0] },
      timeout_s: 30,
      env_id: lantern.id,
      seed: 3,
    });
    expect(s.status).toBe(200);
    expect(s.body).toMatchObject({ done: false, reward: 0, observation: { step: 1, env_id: lantern.id } });
    const bad = await http(server, '/step', { action: { message: 'hi' } });
    expect(bad.status).toBe(422);
    expect((bad.body.detail as { type: string; loc: unknown[] }[])[0]).toMatchObject({
      type: 'extra_forbidden',
      loc: ['body', 'action', 'message'],
    });
    expect((await http(server, '/step', { timeout_s: 30 })).body.detail).toEqual([
      { type: 'missing', loc: ['body', 'action'], msg: 'Field required', input: { timeout_s: 30 } },
    ]);
    expect((await http(server, '/step', { action: { text: 'x' }, timeout_s: 0 })).status).toBe(422);
    expect((await http(server, '/reset', { seed: -1 })).status).toBe(422);
    expect((await http(server, '/reset', { env_id: 'nope' })).status).toBe(422);
    expect((await http(server, '/reset', '{not json')).status).toBe(422);
  });

  it("replays EnvClient's WebSocket sequence: reset, step… to a win, state, close", async () => {
    const c = await OpenEnvWsClient.connect(server.url);
    const r = await c.reset({ seed: 3, env_id: lantern.id, episode_id: 'ep-1' });
    expect(r.type).toBe('observation');
    expect(Object.keys(r.data).sort()).toEqual(['done', 'observation', 'reward']);
    expect((r.data.observation as { hint: unknown }).hint).toBeNull();
    let last = r;
    for (const text of lanternPlan) last = await c.step({ text });
    expect(last.data).toMatchObject({ done: true, reward: 1, observation: { terminated: true } });
    expect(await c.state()).toEqual({
      type: 'state',
      data: { episode_id: 'ep-1', step_count: lanternPlan.length, env_id: lantern.id, seed: 3, done: true },
    });
    // a finished episode takes no more steps; the session stays usable
    expect((await c.step({ text: lanternPlan[0] })).data.code).toBe('EXECUTION_ERROR');
    expect((await c.reset({ env_id: lantern.id, seed: 3 })).type).toBe('observation');
    await c.close();
    expect(c.closed?.code).toBe(1000);
  });

  it('sends the WebSocket errors OpenEnv sends, and the session survives them', async () => {
    const c = await OpenEnvWsClient.connect(server.url);
    expect((await c.step({ text: 'x' })).data).toMatchObject({
      code: 'EXECUTION_ERROR',
      message: expect.stringMatching(/reset/),
    });
    c.sendRaw('{oops');
    expect((await c.next())!.data).toMatchObject({
      code: 'INVALID_JSON',
      message: expect.stringMatching(/^Invalid JSON: /),
    });
    expect((await c.call({ type: 'jump' })).data).toEqual({
      message: 'Unknown message type: jump',
      code: 'UNKNOWN_TYPE',
    });
    const v = await c.call({ type: 'step', data: { text: 5 }, extra: 1 });
    expect(v.data).toMatchObject({ message: 'Invalid message', code: 'VALIDATION_ERROR' });
    expect(v.data.errors).toEqual([
      { type: 'extra_forbidden', loc: ['extra'], msg: 'Extra inputs are not permitted', input: 1 },
    ]);
    expect((await c.call({ type: 'step' })).data).toMatchObject({
      code: 'VALIDATION_ERROR',
      errors: [{ type: 'missing', loc: ['data'] }],
    });
    expect((await c.reset({ sample: 'hardest' })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.reset({ env_id: 'missing' })).data.code).toBe('EXECUTION_ERROR');
    expect((await c.reset({ env_id: lantern.id })).type).toBe('observation');
    await c.close();
  });

  it('sends the hint only to a session that asks for it; tool-use resets carry the tool schemas', async () => {
    const c = await OpenEnvWsClient.connect(server.url);
    const plain = (await c.reset({ env_id: lantern.id, seed: 1 })).data.observation as Record<string, unknown>;
    expect(plain.hint).toBeNull();
    expect(JSON.stringify(plain)).not.toContain(lantern.hint);
    const hinted = (await c.reset({ env_id: lantern.id, seed: 1, hint: true })).data.observation as Record<
      string,
      unknown
    >;
    expect(hinted.hint).toBe(lantern.hint);
    expect(hinted.text).toBe(plain.text);
    const t = (await c.reset({ env_id: tool.id, seed: 1 })).data.observation as {
      tools: { function: { name: string } }[];
    };
    expect(t.tools.length).toBeGreaterThan(0);
    // a structured tool call reaches the environment as the agent writes it
    const name = t.tools[0]!.function.name;
    const r = await c.step({ tool_calls: [{ type: 'function', function: { name, arguments: '{}' } }] });
    expect(r.type).toBe('observation');
    await c.close();
  });
});

describe('spade serve: choosing environments', () => {
  const scored = (code: string, regret: number, winRate: number) =>
    recordFromCode(code, { stats: { regret, winRate } });
  const a = scored(FAKE_ENV, 0, 1);
  const b = scored(lantern.code, 0.5, 0.5);

  it('weights by regret or learnability, and falls back to uniform when nothing is scored', () => {
    for (let i = 0; i < 20; i++) {
      expect(sampleEnv([a, b], 'regret', i / 20).id).toBe(b.id);
      expect(sampleEnv([a, b], 'learnability', i / 20).id).toBe(b.id);
    }
    expect(new Set([0.1, 0.9].map((u) => sampleEnv([a, b], 'uniform', u).id)).size).toBe(2);
    expect(new Set([0.1, 0.9].map((u) => sampleEnv(SEED_ENVS.slice(0, 2), 'regret', u).id)).size).toBe(2);
  });

  it('a reset with a sampling rule trains on the curriculum; a seed makes the pick reproducible', async () => {
    const server = await SpadeServer.start({ catalog: new EnvCatalog('t', [a, b]), port: 0, workers: 1 });
    try {
      const c = await OpenEnvWsClient.connect(server.url);
      for (let seed = 0; seed < 4; seed++) {
        const r = await c.reset({ sample: 'regret', seed });
        expect((r.data.observation as { env_id: string }).env_id).toBe(b.id);
      }
      const picks = async () => {
        const out: string[] = [];
        for (let seed = 0; seed < 6; seed++)
          out.push(((await c.reset({ sample: 'uniform', seed })).data.observation as { env_id: string }).env_id);
        return out;
      };
      const first = await picks();
      expect(await picks()).toEqual(first);
      expect(new Set(first).size).toBe(2);
      await c.close();
    } finally {
      await server.close();
    }
  });

  it('a watched run directory adds its new valid environments as the loop writes them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-serve-run-'));
    const line = (cycle: number, code: string, valid: boolean) =>
      `${JSON.stringify({ cycle, index: 0, skill: 'logical_deduction', setting: 'games', difficulty: 'easy', envId: null, title: `c${cycle}`, code, hint: 'h', source: null, valid, firstAttemptValid: valid, attempts: [], validator: null, stats: { noHint: [1, 0], withHint: [1, 1], winRate: 0.5, winRateHinted: 1, regret: 0.5, raw: 0.5, designerReward: 0.5, timedOut: false, blacklisted: false }, leak: null })}\n`;
    await writeFile(join(dir, 'archive.jsonl'), line(0, FAKE_ENV, true) + line(0, 'broken', false));
    const { readRunDir } = await import('../../src/platform/node/serve/env_catalog.ts');
    const catalog = new EnvCatalog(
      'run',
      (await readRunDir(dir)).entries.map((e) => e.rec),
    );
    expect(catalog.size).toBe(1);
    const added = new Promise<number>((resolve) => catalog.watch(dir, 50, resolve, () => undefined));
    await appendFile(join(dir, 'archive.jsonl'), line(1, lantern.code, true));
    expect(await added).toBe(1);
    expect(catalog.list().map((e) => e.title)).toEqual(['c0', 'c1']);
    expect(catalog.list()[1]!.stats.regret).toBe(0.5);
    catalog.stop();
  });
});

describe('spade serve: limits, hostile sessions, shutdown', () => {
  it('refuses to bind off loopback without a token; with one, every route but /health needs it', async () => {
    await expect(
      SpadeServer.start({ catalog: new EnvCatalog('s', SEED_ENVS), host: '0.0.0.0', port: 0 }),
    ).rejects.toThrow(UsageError);
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', SEED_ENVS),
      port: 0,
      workers: 1,
      token: 's3cret',
    });
    try {
      expect((await http(server, '/health')).status).toBe(200);
      expect((await http(server, '/metadata')).status).toBe(401);
      expect((await http(server, '/metadata', undefined, { authorization: 'Bearer wrong!' })).status).toBe(401);
      expect((await http(server, '/metadata', undefined, { authorization: 'Bearer s3cret' })).status).toBe(200);
      await expect(OpenEnvWsClient.connect(server.url)).rejects.toThrow(/401/);
      const c = await OpenEnvWsClient.connect(server.url, { authorization: 'Bearer s3cret' });
      expect((await c.reset({ env_id: lantern.id })).type).toBe('observation');
      await c.close();
    } finally {
      await server.close();
    }
  });

  it('closes a session idle past the limit and disposes its instance', async () => {
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', SEED_ENVS),
      port: 0,
      workers: 1,
      idleTimeoutMs: 300,
    });
    try {
      const c = await OpenEnvWsClient.connect(server.url);
      expect((await c.reset({ env_id: lantern.id })).type).toBe('observation');
      expect(server.stats().liveEnvs).toBe(1);
      expect(await c.next()).toBeNull();
      expect(c.closed?.reason).toMatch(/idle/);
      expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0 });
    } finally {
      await server.close();
    }
  });

  it('contains malformed, binary, huge and flooding clients; refuses sessions past capacity', async () => {
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', SEED_ENVS),
      port: 0,
      workers: 1,
      maxSessions: 3,
      maxMessageBytes: 4096,
      maxQueued: 4,
    });
    try {
      const good = await OpenEnvWsClient.connect(server.url);
      expect((await good.reset({ env_id: lantern.id })).type).toBe('observation');

      const binary = await OpenEnvWsClient.connect(server.url);
      binary.sendRaw('{"type":"state"}', true);
      expect((await binary.next())!.data.code).toBe('SESSION_ERROR');
      expect(await binary.next()).toBeNull();

      const huge = await OpenEnvWsClient.connect(server.url);
      huge.sendRaw({ type: 'step', data: { text: 'x'.repeat(10_000) } });
      expect(await huge.next()).toBeNull();
      expect(huge.closed?.code).toBe(1009);

      const flood = await OpenEnvWsClient.connect(server.url);
      for (let i = 0; i < 50; i++) flood.sendRaw({ type: 'reset', data: { env_id: lantern.id } });
      let replies = 0;
      while (await flood.next()) replies++;
      expect(replies).toBeLessThan(50);
      expect(flood.closed?.code).toBe(1008);

      const more = await Promise.all([1, 2, 3].map(() => OpenEnvWsClient.connect(server.url)));
      // the one past capacity finds the refusal waiting; the others get their state
      const refused = await Promise.all(more.map((c) => c.call({ type: 'state' })));
      expect(refused.filter((r) => r.type === 'state')).toHaveLength(2);
      expect(refused.filter((r) => r.data.code === 'CAPACITY_REACHED')).toHaveLength(1);
      expect(refused.find((r) => r.data.code === 'CAPACITY_REACHED')!.data).toMatchObject({ max_sessions: 3 });

      // the good session was never disturbed
      expect((await good.step({ text: '\\boxed{try RGBY}' })).type).toBe('observation');
      for (const c of [good, ...more]) if (!c.closed) c.terminate();
      for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0 });
    } finally {
      await server.close();
    }
  });

  it('a hanging environment fails only its own session; neighbours on its killed worker play on unchanged', async () => {
    // a loop inside a built-in: QuickJS cannot interrupt it, so the watchdog kills the whole worker
    const hang = recordFromCode(
      `// @title Hang\nclass HangEnv { reset(s){ return ['go', {}]; } step(a){ let n = 0; Array.prototype.join.call({ get length() { return n++ ? 2 ** 32 - 1 : 0; } }); return ['x', 0, false, false, {}]; } solution(){ return ['\\\\boxed{1}']; } }`,
    );
    const server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [lantern, hang]),
      port: 0,
      workers: 1,
      graceMs: 500,
      limits: { ...DEFAULT_LIMITS, stepMs: 200 },
    });
    try {
      const plan = await solutionOf(lantern, 5);
      const victims = await Promise.all([0, 1].map(() => OpenEnvWsClient.connect(server.url)));
      const expected: unknown[] = [];
      for (const v of victims) await v.reset({ env_id: lantern.id, seed: 5 });
      const first = await victims[0]!.step({ text: plan[0] });
      expected.push(first.data);
      await victims[1]!.step({ text: plan[0] });

      const bad = await OpenEnvWsClient.connect(server.url);
      await bad.reset({ env_id: hang.id });
      // victim 1 queues a step behind the hanging one on the same worker
      const [hung, queued] = await Promise.all([bad.step({ text: '\\boxed{1}' }), victims[1]!.step({ text: plan[1] })]);
      expect(hung.data).toMatchObject({
        code: 'EXECUTION_ERROR',
        message: expect.stringMatching(/SandboxTimeoutError/),
      });
      expect(server.stats().workerReplacements).toBe(1);
      expect(queued.type).toBe('observation');
      // both victims finish their episodes with the transcript an undisturbed play gives
      let last0 = first;
      for (const text of plan.slice(1)) last0 = await victims[0]!.step({ text });
      let last1 = queued;
      for (const text of plan.slice(2)) last1 = await victims[1]!.step({ text });
      expect(last0.data).toMatchObject({ done: true, reward: 1 });
      expect(last1.data).toEqual(last0.data);
      expect((await bad.step({ text: '\\boxed{1}' })).data.code).toBe('EXECUTION_ERROR');
      for (const c of [...victims, bad]) await c.close();
      for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0 });
    } finally {
      await server.close();
    }
  });

  // its own limit: ~9 s idle, 15.5 s with two CPU-bound processes beside it; 200 s is over 20x idle
  it(
    'runs 16 concurrent sessions to wins with no leaked instances, then shuts down gracefully',
    { timeout: 200_000 },
    async () => {
      const server = await SpadeServer.start({ catalog: new EnvCatalog('s', SEED_ENVS), port: 0, workers: 2 });
      const plans = await Promise.all(SEED_ENVS.map((e) => solutionOf(e, 0)));
      const results = await Promise.all(
        SEED_ENVS.map(async (e, i) => {
          const c = await OpenEnvWsClient.connect(server.url);
          await c.reset({ env_id: e.id, seed: 0 });
          let last;
          for (const text of plans[i]!) last = await c.step({ text });
          await c.close();
          return last!.data;
        }),
      );
      expect(results.every((r) => r.done === true && Number(r.reward) > 0)).toBe(true);
      for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0, workerReplacements: 0 });
      // a session still open at shutdown is closed with 1001 and its instance disposed
      const open = await OpenEnvWsClient.connect(server.url);
      await open.reset({ env_id: lantern.id });
      expect(server.stats().liveEnvs).toBe(1);
      await server.close();
      expect(await open.next()).toBeNull();
      expect(open.closed?.code).toBe(1001);
      expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0 });
    },
  );

  it('`spade serve` prints its URL, serves, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, ['bin/spade.js', 'serve', '--port', '0', '--workers', '1', '--json'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/[^\s]+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error(`exited early: ${out}`)));
    });
    const health = await fetch(`${url}/health`);
    expect(await health.json()).toEqual({ status: 'healthy' });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const last = JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(last).toMatchObject({ ok: true, sessions: 0, liveEnvs: 0 });
  });
});
