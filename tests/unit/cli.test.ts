// The `spade` command's black-box contracts: exit codes 0/1/2, --json's last line is one JSON
// object; validate, play, share, chat and run (record with a server, replay, resume).
import { mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

async function spade(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err, json: () => JSON.parse(out[out.length - 1]!) };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spade-cli-'));
  await writeFile(join(dir, 'good.js'), FAKE_ENV);
  await writeFile(join(dir, 'hang.js'), HOSTILE.find((h) => h.name === 'infinite loop in step')!.code);
});

describe('spade CLI', () => {
  it('exits 2 with usage on bad commands and flags', async () => {
    expect((await spade()).code).toBe(2);
    expect((await spade('nope')).code).toBe(2);
    expect((await spade('validate')).code).toBe(2);
    expect((await spade('play', 'a.js', 'b.js')).code).toBe(2);
    const r = await spade('run', '--out');
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toContain('--out needs a value');
  });

  it('validate: 0 when all pass, 1 with an actionable message when one fails, --json last line', async () => {
    const ok = await spade('validate', join(dir, 'good.js'), '--json');
    expect(ok.code).toBe(0);
    expect(ok.json()).toMatchObject({ ok: true, files: [{ ok: true, className: 'FakeHuntEnv' }] });
    const bad = await spade('validate', join(dir, 'good.js'), join(dir, 'hang.js'));
    expect(bad.code).toBe(1);
    expect(bad.out.join('\n')).toMatch(
      /FAIL .*hang\.js[\s\S]*✗ step: SandboxTimeoutError: step ran past its 250 ms limit/,
    );
    expect(bad.out.at(-1)).toBe('1 of 2 passed');
  });

  it('play: runs given actions and the solution, deterministically per seed', async () => {
    const a = await spade('play', join(dir, 'good.js'), '--seed', '3', '--solution', '--json');
    expect(a.code).toBe(0);
    expect(a.json().return).toBe(1);
    const b = await spade(
      'play',
      join(dir, 'good.js'),
      '--seed',
      '3',
      '--actions',
      '\\boxed{5}',
      '\\boxed{oops}',
      '--json',
    );
    expect(b.json().transcript.map((t: { action: string | null }) => t.action)).toEqual([
      null,
      '\\boxed{5}',
      '\\boxed{oops}',
    ]);
    expect(
      (await spade('play', join(dir, 'good.js'), '--seed', '3', '--actions', '\\boxed{5}', '--json')).json()
        .transcript[1],
    ).toEqual(b.json().transcript[1]);
  });

  it("play: a game's action is sent as \\boxed{...} unless it holds one; --raw sends it as given", async () => {
    const wrapped = await spade('play', join(dir, 'good.js'), '--seed', '3', '--actions', '5', '\\boxed{6}', '--json');
    expect(wrapped.code).toBe(0);
    expect(wrapped.json().transcript.map((t: { action: string | null }) => t.action)).toEqual([
      null,
      '\\boxed{5}',
      '\\boxed{6}',
    ]);
    const raw = await spade('play', join(dir, 'good.js'), '--seed', '3', '--actions', '5', '--raw', '--json');
    expect(raw.json().transcript[1].action).toBe('5');
    // the same move, typed bare or boxed, gets the same answer from the game
    const boxed = await spade('play', join(dir, 'good.js'), '--seed', '3', '--actions', '\\boxed{5}', '--json');
    expect(boxed.json().transcript[1]).toEqual(wrapped.json().transcript[1]);
  });

  it('share: encode → decode round trip; a hostile link exits 1 with a message', async () => {
    const enc = await spade('share', 'encode', join(dir, 'good.js'), '--json');
    expect(enc.code).toBe(0);
    const link = enc.json().link as string;
    const dec = await spade('share', 'decode', link, '--out', join(dir, 'set.json'), '--json');
    expect(dec.json().set.envs[0].code).toBe(FAKE_ENV);
    expect(JSON.parse(await readFile(join(dir, 'set.json'), 'utf8')).envs).toHaveLength(1);
    const bad = await spade('share', 'decode', 'http://x/#set=1.%%%', '--json');
    expect(bad.code).toBe(1);
    expect(bad.json()).toMatchObject({ ok: false, error: { name: 'ShareLinkError' } });
  });
});

describe('spade chat / run against a local chat-completions server', () => {
  let server: FakeServer;
  beforeAll(async () => {
    // the server answers like the test doubles: designer, hint writer or agent by the system prompt
    const trio = scriptedTrio();
    server = await startFakeOpenAI({ reply: async (body) => (await trio.chat(body.messages as ChatMessage[])).text });
  });
  afterAll(() => server.close());

  it('chat streams a reply', async () => {
    const r = await spade(
      'chat',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'tiny',
      'Hello',
      '--json',
    );
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ ok: true, finishReason: 'stop' });
  });

  it('run records a run, replays it identically, refuses to overwrite, resumes', async () => {
    const rec = join(dir, 'run.jsonl');
    const common = [
      '--iterations',
      '1',
      '--set',
      'playsPerEnv=1',
      '--corpus',
      'none',
      '--skills',
      'mathematical,logical_deduction',
      '--set',
      'skillsPerCycle=2',
      '--set',
      'envsPerSkill=1',
    ];
    const a = await spade(
      'run',
      '--backend',
      'openai',
      '--base-url',
      server.url,
      '--model',
      'tiny',
      '--out',
      join(dir, 'A'),
      '--record',
      rec,
      ...common,
      '--json',
    );
    expect(a.code, a.err.join('\n')).toBe(0);
    expect(a.json()).toMatchObject({ ok: true, cycles: 1, environments: 2 });
    const b = await spade('run', '--backend', 'replay', '--replay', rec, '--out', join(dir, 'B'), ...common, '--json');
    expect(b.code, b.err.join('\n')).toBe(0);
    const archive = async (d: string) =>
      (await readFile(join(dir, d, 'archive.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    expect(await archive('B')).toEqual(await archive('A'));
    // with no settings at all, a replay takes them from the recording, and says so
    const c = await spade('run', '--backend', 'replay', '--replay', rec, '--out', join(dir, 'C'), '--json');
    expect(c.code, c.err.join('\n')).toBe(0);
    expect(c.err.join('\n')).toContain('settings taken from the recording (seed');
    expect(await archive('C')).toEqual(await archive('A'));
    for (const f of ['config.json', 'rollouts.jsonl', 'metrics.jsonl', 'memory.json'])
      expect((await readFile(join(dir, 'B', f), 'utf8')).length).toBeGreaterThan(2);
    const again = await spade('run', '--backend', 'replay', '--replay', rec, '--out', join(dir, 'B'), ...common);
    expect(again.code).toBe(2);
    expect(again.err.join('\n')).toContain('already holds a run; pass --resume');
    const more = await spade(
      'run',
      '--backend',
      'replay',
      '--replay',
      rec,
      '--out',
      join(dir, 'B'),
      '--resume',
      '--iterations',
      '1',
      '--json',
    );
    expect(more.json()).toMatchObject({ cycles: 1 });
  });

  it('--resume without --iterations goes on to the cycles the run was started with', async () => {
    const out = join(dir, 'R');
    const flags = ['--backend', 'openai', '--base-url', server.url, '--model', 'tiny', '--out', out];
    const small = [
      '--corpus',
      'none',
      '--skills',
      'mathematical',
      '--set',
      'skillsPerCycle=1',
      '--set',
      'envsPerSkill=1',
      '--set',
      'playsPerEnv=1',
    ];
    const first = await spade('run', ...flags, '--iterations', '1', ...small, '--json');
    expect(first.json()).toMatchObject({ cycles: 1 });
    // as if the run had been started for 2 cycles and stopped after the first
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as { iterations: number };
    expect(config.iterations).toBe(1);
    await writeFile(join(out, 'config.json'), JSON.stringify({ ...config, iterations: 2 }));
    const resumed = await spade('run', ...flags, '--resume', '--json');
    expect(resumed.code, resumed.err.join('\n')).toBe(0);
    expect(resumed.json()).toMatchObject({ cycles: 2 });
  });
});

describe('spade run with an API key (a hosted API)', () => {
  it('sends --api-key, or OPENAI_API_KEY, as a Bearer header and writes it nowhere in the run', async () => {
    const key = 'sk-test-4f9c2b7e1d';
    const server = await startFakeOpenAI({
      reply: async (body) => (await scriptedTrio().chat(body.messages as ChatMessage[])).text,
    });
    try {
      const out = join(dir, 'K');
      const rec = join(dir, 'K.jsonl');
      const small = ['--iterations', '1', '--corpus', 'none', '--skills', 'mathematical'];
      const sets = ['--set', 'skillsPerCycle=1', '--set', 'envsPerSkill=1', '--set', 'playsPerEnv=1'];
      const base = ['run', '--backend', 'openai', '--base-url', server.url, '--model', 'm', ...small, ...sets];
      const r = await spade(...base, '--api-key', key, '--out', out, '--record', rec, '--json');
      expect(r.code, r.err.join('\n')).toBe(0);
      expect(server.authorizations.length).toBeGreaterThan(2);
      expect(new Set(server.authorizations)).toEqual(new Set([`Bearer ${key}`]));
      const files = [...(await readdir(out, { recursive: true })).map((f) => join(out, String(f))), rec];
      for (const f of files) {
        if (!(await stat(f)).isFile()) continue;
        expect(await readFile(f, 'utf8'), f).not.toContain(key);
      }
      // from the environment when the flag is absent
      const before = process.env.OPENAI_API_KEY;
      process.env.OPENAI_API_KEY = `${key}-env`;
      try {
        server.authorizations.length = 0;
        const e = await spade(...base, '--out', join(dir, 'K2'), '--json');
        expect(e.code, e.err.join('\n')).toBe(0);
        expect(new Set(server.authorizations)).toEqual(new Set([`Bearer ${key}-env`]));
      } finally {
        if (before === undefined) delete process.env.OPENAI_API_KEY;
        else process.env.OPENAI_API_KEY = before;
      }
    } finally {
      await server.close();
    }
  });
});

describe('spade models', () => {
  it('lists the WebLLM catalog, --json last line', async () => {
    const r = await spade('models', '--json');
    expect(r.code).toBe(0);
    expect(r.json().webllm.map((m: { id: string }) => m.id)).toContain('Qwen2.5-0.5B-Instruct-q4f32_1-MLC');
    expect((await spade('models')).out.join('\n')).toMatch(/SmolLM2-360M-Instruct-q4f16_1-MLC .* f16/);
  });
});

describe('spade run --memory', () => {
  it('starts a run from an imported env_memory.json, and rejects a bad one', async () => {
    const memFile = join(dir, 'env_memory.json');
    await writeFile(memFile, JSON.stringify([{ skill: 'mathematical', code: FAKE_ENV, win_rate: 0.5, regret: 0.3 }]));
    const rec = join(dir, 'mem-run.jsonl');
    const server = await startFakeOpenAI({
      reply: async (body) => (await scriptedTrio().chat(body.messages as ChatMessage[])).text,
    });
    try {
      const common = [
        '--iterations',
        '1',
        '--set',
        'playsPerEnv=1',
        '--set',
        'skillsPerCycle=1',
        '--corpus',
        'none',
        '--skills',
        'mathematical',
      ];
      const r = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'm',
        '--out',
        join(dir, 'M'),
        '--record',
        rec,
        '--memory',
        memFile,
        ...common,
        '--json',
      );
      expect(r.code, r.err.join('\n')).toBe(0);
      // the designer was shown the imported environment as its example
      const first = JSON.parse((await readFile(rec, 'utf8')).split('\n')[1]!);
      expect(first.request.messages[1].content).toContain('win rate 0.50, regret 0.30');
      const bad = await spade(
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'm',
        '--out',
        join(dir, 'M2'),
        '--memory',
        join(dir, 'good.js'),
        ...common,
      );
      expect(bad.code).toBe(2);
      expect(bad.err.join('\n')).toContain('--memory');
    } finally {
      await server.close();
    }
  });
});

describe('spade chat --backend local', () => {
  it('chats with our engine on the CPU references from a checkpoint directory', async () => {
    const { writeTinyCheckpoint } = await import('../helpers/tiny_checkpoint.ts');
    const d = join(dir, 'tiny-llama');
    await writeTinyCheckpoint(d, 'llama', 'f32', 1);
    const r = await spade(
      'chat',
      '--backend',
      'local',
      '--model-dir',
      d,
      '--device',
      'cpu',
      '--max-tokens',
      '4',
      'hi',
      '--json',
    );
    expect(r.code, r.err.join('\n')).toBe(0);
    expect(r.json()).toMatchObject({ ok: true });
    expect(r.json().usage.completionTokens).toBeGreaterThan(0);
    const bad = await spade('chat', '--backend', 'local', 'hi');
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toContain('--model-dir DIR');
  });

  it('config show: every key with its value and source; --json last line; a bad preset is a usage error', async () => {
    const r = await spade(
      'config',
      'show',
      '--preset',
      'paper',
      '--set',
      'playsPerEnv=2',
      '--link',
      '#seed=5',
      '--json',
    );
    expect(r.code, r.err.join('\n')).toBe(0);
    const j = r.json();
    expect(j).toMatchObject({ ok: true, preset: 'paper' });
    expect(j.config).toMatchObject({ envsPerSkill: 8, playsPerEnv: 2, seed: 5, envRewardScaleMode: 'computed' });
    expect(j.source).toMatchObject({
      preset: 'flag',
      envsPerSkill: 'preset',
      playsPerEnv: 'flag',
      seed: 'link',
      difficulty: 'default',
    });
    const text = await spade('config', 'show');
    expect(text.code).toBe(0);
    expect(text.out[0]).toContain('preset laptop');
    expect(text.out.find((l) => l.startsWith('envsPerSkill'))).toMatch(/envsPerSkill\s+2\s+default/);
    const bad = await spade('config', 'show', '--preset', 'huge', '--json');
    expect(bad.code).toBe(2);
    expect(bad.err.join('\n')).toContain('preset must be one of laptop, paper');
  });
});
