// No silent default that changes results, and no secret from a URL anywhere (#41, #38 item 5):
// - a run against a server that reports no window says, before its first cycle, the window it uses
//   and where it came from (the 4,096 fallback, --context-window, the server), and at the end how many
//   calls it clamped — the same count as metrics.jsonl's;
// - a missing key is said before the first call (a warning for an unknown host, a refusal for a known
//   hosted API);
// - a base URL with a user name or password is refused before any call, in every spelling, and the
//   secret appears in no file of the run directory and no output — also when it comes in a --config
//   file or a recording's settings;
// - a run in which no model call succeeded exits 1.
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import {
  findUrlWithCredentials,
  keyNeed,
  redactUrlCredentials,
  urlWithCredentials,
} from '../../src/core/llm/base_url.ts';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { OpenAIChatModel } from '../../src/core/llm/openai_model.ts';
import { testConnection } from '../../src/core/llm/server_check.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { SERVER_PRESETS } from '../../src/state/models.svelte.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

async function spade(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(...l.split('\n')) });
  return { code, out, err, json: () => JSON.parse(out[out.length - 1]!) };
}

const SMALL = [
  '--iterations',
  '1',
  '--corpus',
  'none',
  '--skills',
  'mathematical,logical_deduction',
  '--set',
  'skillsPerCycle=2',
  'envsPerSkill=1',
  'playsPerEnv=1',
];

let dir: string;
let server: FakeServer;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spade-defaults-'));
  const trio = scriptedTrio();
  // no `models`: GET /models answers 404, as llama.cpp and Ollama report no window
  server = await startFakeOpenAI({ reply: async (body) => (await trio.chat(body.messages as ChatMessage[])).text });
});
afterAll(() => server.close());

/** Every file under `root` (recursively), as text. */
async function filesOf(root: string): Promise<[string, string][]> {
  if (!existsSync(root)) return [];
  const out: [string, string][] = [];
  for (const f of await readdir(root, { recursive: true })) {
    const p = join(root, String(f));
    if ((await stat(p)).isFile()) out.push([p, await readFile(p, 'utf8')]);
  }
  return out;
}

describe('the context window is said, with its source, and clamping is counted', () => {
  it('the 4,096 fallback at the start, the clamp count (as metrics.jsonl has it) at the end', async () => {
    const out = join(dir, 'fallback');
    // a designer reply of up to 4,000 tokens does not fit beside its prompt in 4,096 tokens: clamped
    const r = await spade(
      'run',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'm',
      '--out',
      out,
      ...SMALL,
      'designerMaxTokens=4000',
    );
    expect(r.code, r.err.join('\n')).toBe(0);
    const at = r.err.findIndex((l) => l.startsWith('context window: '));
    expect(r.err[at]).toMatch(
      /^context window: 4,096 tokens, the fallback: the server reports none .*--context-window/,
    );
    // said before the cycle's first progress line
    expect(at).toBeLessThan(r.err.findIndex((l) => l.startsWith('cycle 1/1: ')));
    const metrics = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { budget: { clamped: number; calls: number } });
    const clamped = metrics.reduce((a, m) => a + m.budget.clamped, 0);
    const calls = metrics.reduce((a, m) => a + m.budget.calls, 0);
    expect(clamped).toBeGreaterThan(0); // designerMaxTokens 3000 does not fit beside a designer prompt in 4,096
    const end = r.err.find((l) => l.startsWith('context: '));
    expect(end).toMatch(
      new RegExp(
        `^context: ${clamped} of ${calls} designer, repair, validator and hint calls had max_tokens clamped to fit the 4,096-token window`,
      ),
    );
    expect(r.err.indexOf(end!)).toBeGreaterThan(r.err.findIndex((l) => /^cycle 1\/1: 2\/2 environments/.test(l)));
  });

  it('--context-window, or the window the server reports', async () => {
    const declared = await spade(
      'run',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'm',
      '--context-window',
      '8192',
      '--out',
      join(dir, 'declared'),
      ...SMALL,
    );
    expect(declared.err).toContain('context window: 8,192 tokens, from --context-window (the server reports none)');
    server.behaviour.models = [{ id: 'm', object: 'model', max_model_len: 16384 }];
    try {
      const served = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'm',
        '--out',
        join(dir, 'served'),
        ...SMALL,
      );
      expect(served.err).toContain('context window: 16,384 tokens, as the server reports it (GET /v1/models)');
      const capped = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'm',
        '--context-window',
        '8192',
        '--out',
        join(dir, 'capped'),
        ...SMALL,
      );
      expect(capped.err).toContain('context window: 8,192 tokens, from --context-window (the server reports 16,384)');
    } finally {
      delete server.behaviour.models;
    }
  });
});

describe('a missing API key is said before the first call', () => {
  it('a host off this computer: a warning, before the first request, and the run goes on', async () => {
    const before = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    const realFetch = globalThis.fetch;
    const events: string[] = [];
    // models.example.com stands for any server off this network; the requests reach the fake server
    globalThis.fetch = ((url: string | URL | Request, init?: RequestInit) => {
      events.push('request');
      const u = String(url instanceof Request ? url.url : url).replace('http://models.example.com/v1', server.url);
      return realFetch(u, init);
    }) as typeof fetch;
    try {
      const out: string[] = [];
      const code = await main(
        ['chat', '--backend', 'openai', '--base-url', 'http://models.example.com/v1', '--model', 'm', 'Hi', '--json'],
        { out: (l) => out.push(l), err: (l) => events.push(l) },
      );
      expect(code).toBe(0);
      const warning = events.findIndex((e) =>
        e.startsWith('warning: no API key: set OPENAI_API_KEY or pass --api-key; continuing without one'),
      );
      expect(warning).toBeGreaterThanOrEqual(0);
      expect(warning).toBeLessThan(events.indexOf('request'));
      expect(events[warning]).toContain('models.example.com');
    } finally {
      globalThis.fetch = realFetch;
      if (before !== undefined) process.env.OPENAI_API_KEY = before;
    }
  });

  it('a known hosted API: refused before any call (exit 2); this computer: nothing said', async () => {
    const before = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      const r = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        'https://api.openai.com/v1',
        '--model',
        'gpt-4o-mini',
        '--out',
        join(dir, 'nokey'),
      );
      expect(r.code).toBe(2);
      expect(r.err).toEqual([
        'spade run: no API key for api.openai.com, which answers nothing without one: set OPENAI_API_KEY or pass --api-key KEY (sent to api.openai.com only, never written to the run)',
      ]);
      expect(existsSync(join(dir, 'nokey'))).toBe(false);
      const local = await spade(
        'chat',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'm',
        'Hi',
        '--json',
      );
      expect(local.code).toBe(0);
      expect(local.err.join('\n')).not.toMatch(/API key/);
    } finally {
      if (before !== undefined) process.env.OPENAI_API_KEY = before;
    }
    // every hosted route the app offers is a host that needs a key
    for (const p of SERVER_PRESETS) expect(keyNeed(p.baseURL), p.name).toBe(p.kind === 'hosted' ? 'required' : 'none');
    expect(keyNeed('http://192.168.1.20:8000/v1')).toBe('none');
    expect(keyNeed('http://gpu-box:8000/v1')).toBe('none');
    expect(keyNeed('https://llm.example.org/v1')).toBe('likely');
  });
});

describe('credentials in a base URL', () => {
  const SECRET = 'hunter2SECRET';
  const host = () => server.url.replace('http://', '');
  const variants = () => [
    `http://user:${SECRET}@${host()}`,
    `http://${SECRET}@${host()}`,
    `http://user:${SECRET.replace('S', '%53')}@${host()}`,
    `http://${encodeURIComponent('us@er')}:${SECRET}@${host()}`,
  ];

  it('are found in every spelling and shown as ***', () => {
    for (const v of variants()) {
      const shown = urlWithCredentials(v)!;
      expect(shown, v).toBe(`http://***@${host()}`);
      expect(redactUrlCredentials(`Could not reach ${v}/models.`)).toBe(`Could not reach http://***@${host()}/models.`);
    }
    expect(urlWithCredentials(server.url)).toBeNull();
    expect(findUrlWithCredentials(`{"designer":"x ${variants()[0]} y"}`)).toBe(`http://***@${host()}`);
    expect(findUrlWithCredentials('{"designer":"user@example.com"}')).toBeNull();
  });

  it('spade run and spade chat refuse them before any call; the secret is in no file and no output', async () => {
    const requests = server.requests.length;
    const listings = server.modelListings;
    for (const [i, v] of variants().entries()) {
      const out = join(dir, `creds${i}`);
      const runs = [
        await spade('run', '--backend', 'openai', '--base-url', v, '--model', 'm', '--out', out, ...SMALL, '--json'),
        await spade('chat', '--backend', 'openai', '--base-url', v, '--model', 'm', 'Hi', '--json'),
      ];
      for (const r of runs) {
        expect(r.code, v).toBe(2);
        expect(r.err.join('\n')).toContain(`The base URL carries a user name or password (http://***@${host()})`);
        expect(r.err.join('\n')).toContain('--api-key KEY or OPENAI_API_KEY');
        const output = [...r.out, ...r.err].join('\n');
        expect(output).not.toContain(SECRET);
        expect(output).not.toContain(SECRET.replace('S', '%53'));
      }
      for (const [f, text] of await filesOf(out)) expect(text, f).not.toContain(SECRET);
    }
    expect(server.requests.length).toBe(requests);
    expect(server.modelListings).toBe(listings);
  });

  it("the backend and the Models panel's connection test refuse them too (the app)", async () => {
    for (const v of variants()) {
      expect(() => new OpenAIChatModel({ baseURL: v, model: 'm' })).toThrow(
        /The base URL carries a user name or password \(http:\/\/\*\*\*@/,
      );
      try {
        new OpenAIChatModel({ baseURL: v, model: 'm' });
      } catch (err) {
        expect(JSON.stringify(err) + String(err)).not.toContain(SECRET);
      }
      const report = await testConnection(v, 'm');
      expect(report.ok).toBe(false);
      expect(report.message).toMatch(/user name or password/);
      expect(report.message).not.toContain(SECRET);
    }
  });

  it("in a --config file or a recording's settings: refused, and never echoed or written", async () => {
    const url = variants()[0]!;
    const config = join(dir, 'secret-config.json');
    await writeFile(config, JSON.stringify({ seed: url }));
    const out = join(dir, 'creds-config');
    const r = await spade(
      'run',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'm',
      '--config',
      config,
      '--out',
      out,
      '--json',
    );
    expect(r.code).toBe(2);
    expect([...r.out, ...r.err].join('\n')).not.toContain(SECRET);
    expect(r.err.join('\n')).toContain('http://***@');
    for (const [f, text] of await filesOf(out)) expect(text, f).not.toContain(SECRET);
    // a recording whose header names the model by a URL with credentials
    const rec = join(dir, 'secret.jsonl');
    const ok = await spade(
      'run',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'm',
      '--out',
      join(dir, 'rec-src'),
      '--record',
      rec,
      ...SMALL,
    );
    expect(ok.code, ok.err.join('\n')).toBe(0);
    const lines = (await readFile(rec, 'utf8')).split('\n');
    const header = JSON.parse(lines[0]!) as { run: { spec: { models: Record<string, string> } } };
    header.run.spec.models = { designer: url, hint: url, agent: url };
    await writeFile(rec, [JSON.stringify(header), ...lines.slice(1)].join('\n'));
    const replayOut = join(dir, 'creds-replay');
    const replay = await spade('run', '--backend', 'replay', '--replay', rec, '--out', replayOut, '--json');
    expect(replay.code).toBe(2);
    expect(replay.err.join('\n')).toContain(
      "the run's settings (taken from the recording) hold a URL with a user name or password (http://***@",
    );
    expect([...replay.out, ...replay.err].join('\n')).not.toContain(SECRET);
    for (const [f, text] of await filesOf(replayOut)) expect(text, f).not.toContain(SECRET);
  });
});

describe('a run in which no model call succeeded', () => {
  it('exits 1 and says so, with the last error', async () => {
    const down = await startFakeOpenAI({ failFirst: { count: 1_000_000, status: 401 } });
    try {
      const r = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        down.url,
        '--model',
        'm',
        '--out',
        join(dir, 'down'),
        ...SMALL,
        '--json',
      );
      expect(r.code, r.err.join('\n')).toBe(1);
      expect(r.err.join('\n')).toMatch(/^spade run: no model call succeeded \(\d+ failed; the last: ModelCallError: /m);
      expect(r.json()).toMatchObject({ ok: false, calls: { ok: 0 } });
      expect(r.json().calls.failed).toBeGreaterThan(0);
    } finally {
      await down.close();
    }
  });
});
