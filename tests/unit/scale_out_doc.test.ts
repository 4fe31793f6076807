// docs/scale-out.md's TRL script, run as the page prints it: the Python block is taken from the page
// and run with Debian's python3 and python3-websockets (10.4 on Debian 12: the script's fallback to
// the asyncio client) against `spade serve` behind a token, with stand-ins for TRL, peft, datasets and
// transformers (tests/helpers/trl_standin/) that check what GRPOTrainer at the page's TRL commit
// checks and play each served environment's reference solution through the script's SpadeGame and
// SpadeToolTask tools in place of a model. Every episode is won with the return `spade play` gives; the
// script needs no reward_funcs (its environments' get_reward is the reward source), and without
// get_reward the stand-in refuses it as TRL does; PushAdapter loads the adapter at a stand-in vLLM.
// Skips, saying why, when no python3 here can import websockets (.ci/run installs it).
import { spawn, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { play } from '../../src/cli/cmd_env.ts';
import { SEED_ENVS, SEED_FILES } from '../../src/core/env/seeds/index.ts';
import { EnvCatalog } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const RUNNER = join(ROOT, 'tests/helpers/trl_standin/run_doc_script.py');
const SEEDS_DIR = join(ROOT, 'src/core/env/seeds/');
const TOKEN = 'doc-trainer-token';

/** Debian's python3 first (where python3-websockets installs), then whatever python3 is on PATH. */
const python = ['/usr/bin/python3', 'python3'].find(
  (p) => spawnSync(p, ['-c', 'import websockets'], { stdio: 'ignore' }).status === 0,
);

/** The page's one Python block. */
async function docScript(): Promise<string> {
  const md = await readFile(join(ROOT, 'docs/scale-out.md'), 'utf8');
  const blocks = [...md.matchAll(/^```python\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
  expect(blocks).toHaveLength(1);
  return blocks[0]!;
}

/** A model's tool calls for one transcript action: `\boxed{c}` → act(c); a tool call → call_tool; an answer → answer. */
function toolCall(action: string): (string | number)[] {
  const boxed = /^\\boxed\{([\s\S]*)\}$/.exec(action);
  if (boxed) return ['act', boxed[1]!];
  const call = /^<tool_call>([\s\S]*)<\/tool_call>$/.exec(action);
  if (call) {
    const c = JSON.parse(call[1]!) as { name: string; arguments: unknown };
    return ['call_tool', c.name, JSON.stringify(c.arguments)];
  }
  const answer = /^<answer>([\s\S]*)<\/answer>$/.exec(action);
  if (answer) return ['answer', answer[1]!];
  throw new Error(`no tool for ${action}`);
}

function runPython(script: string, cwd: string, env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(python!, [RUNNER, script], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe.skipIf(!python)('docs/scale-out.md: the TRL script against spade serve', () => {
  let server: SpadeServer;
  let vllm: Server;
  let vllmUrl = '';
  const vllmCalls: { route: string; body: Record<string, unknown> }[] = [];
  let dir: string;
  let plan: Record<string, { seed: number; calls: (string | number)[][] }>;
  let expected: Record<string, number>;

  beforeAll(async () => {
    server = await SpadeServer.start({
      catalog: new EnvCatalog('seeds', SEED_ENVS),
      port: 0,
      workers: 2,
      token: TOKEN,
    });
    vllm = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        vllmCalls.push({ route: req.url!, body: JSON.parse(body) as Record<string, unknown> });
        res.writeHead(req.url === '/v1/unload_lora_adapter' ? 404 : 200).end('{}');
      });
    });
    await new Promise<void>((r) => vllm.listen(0, '127.0.0.1', r));
    vllmUrl = `http://127.0.0.1:${(vllm.address() as { port: number }).port}`;
    dir = await mkdtemp(join(tmpdir(), 'spade-trl-'));
    plan = {};
    expected = {};
    const files = Object.keys(SEED_FILES);
    for (const [i, file] of files.entries()) {
      const out: string[] = [];
      const code = await play([join(SEEDS_DIR, file), '--solution', '--json', '--seed', String(i + 1)], {
        out: (l) => out.push(l),
        err: () => undefined,
      });
      expect(code).toBe(0);
      const p = JSON.parse(out.at(-1)!) as { return: number; transcript: { action: string | null }[] };
      const id = SEED_ENVS[i]!.id;
      plan[id] = { seed: i + 1, calls: p.transcript.slice(1).map((t) => toolCall(t.action!)) };
      expected[id] = p.return;
    }
    await writeFile(join(dir, 'plan.json'), JSON.stringify(plan));
  }, 120_000);
  afterAll(async () => {
    await server.close();
    await new Promise((r) => vllm.close(r));
  });

  const env = () => ({
    SPADE_URL: server.url,
    SPADE_TOKEN: TOKEN,
    VLLM_URL: vllmUrl,
    SPADE_PLAN: join(dir, 'plan.json'),
  });

  it('plays every served environment to a win through its tools, with no reward_funcs, and pushes the adapter', async () => {
    await writeFile(join(dir, 'train_spade.py'), await docScript());
    const r = await runPython('train_spade.py', dir, env());
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      env_id: string;
      environment: string;
      reward: number;
      observations: string[];
    }[];
    // one rollout per served environment (the curriculum's 4,096 uniform draws cover all 16)
    expect(got.map((g) => g.env_id).sort()).toEqual(Object.keys(plan).sort());
    for (const g of got) {
      const seed = SEED_ENVS.find((e) => e.id === g.env_id)!;
      expect(g.environment).toBe(seed.setting);
      expect(g.observations[0]).toMatch(/\S/);
      expect(g.reward, g.env_id).toBeGreaterThan(0);
      expect(g.reward, g.env_id).toBe(expected[g.env_id]);
    }
    // PushAdapter: the first unload finds nothing (404, printed), then the checkpoint is loaded as 'agent'
    expect(vllmCalls).toEqual([
      { route: '/v1/unload_lora_adapter', body: { lora_name: 'agent' } },
      {
        route: '/v1/load_lora_adapter',
        body: { lora_name: 'agent', lora_path: join(dir, 'spade-grpo', 'checkpoint-25') },
      },
    ]);
    for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((res) => setTimeout(res, 20));
  }, 120_000);

  it('without get_reward the trainer has no reward source, as TRL says', async () => {
    const script = (await docScript()).replace('def get_reward(self) -> float:', 'def _no_reward(self) -> float:');
    expect(script).toContain('_no_reward');
    await writeFile(join(dir, 'no_reward.py'), script);
    const r = await runPython('no_reward.py', dir, env());
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('ValueError: No reward source provided');
  }, 120_000);

  it('without the token, spade serve refuses the script', async () => {
    const r = await runPython('train_spade.py', dir, { ...env(), SPADE_TOKEN: '' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/401/);
  }, 120_000);
});
