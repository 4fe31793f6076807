// The sandbox pools follow the run's concurrency budget: `spade run` sizes its Node pool from
// `concurrency` (concurrencySizes().cliSandboxWorkers), and the page's shared pool is sized from
// the run's budget, replaced for another size only while idle. The pool factories are wrapped to
// record the sizes asked for (the Node one still makes a real pool).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { concurrencySizes, DEFAULTS } from '../../src/core/config.ts';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

const made = vi.hoisted(() => ({ node: [] as number[], browser: [] as FakePool[] }));
interface FakePool {
  size: number;
  idle: boolean;
  terminated: boolean;
  terminate(): Promise<void>;
}

vi.mock('../../src/platform/node/sandbox_pool.ts', async (importActual) => {
  const actual = await importActual<typeof import('../../src/platform/node/sandbox_pool.ts')>();
  return {
    ...actual,
    createNodeSandboxPool: (opts: { size?: number } = {}) => {
      made.node.push(opts.size ?? 1);
      return actual.createNodeSandboxPool(opts);
    },
  };
});
vi.mock('../../src/platform/browser/sandbox_pool.ts', () => ({
  createBrowserSandboxPool: (opts: { size?: number } = {}) => {
    const pool: FakePool = {
      size: opts.size ?? 1,
      idle: true,
      terminated: false,
      terminate: async () => {
        pool.terminated = true;
      },
    };
    made.browser.push(pool);
    return pool;
  },
}));

const { main } = await import('../../src/cli/spade.ts');
const { sandboxPool } = await import('../../src/state/envs.svelte.ts');

describe('the CLI sandbox pool', () => {
  let server: FakeServer;
  beforeAll(async () => {
    server = await startFakeOpenAI({
      reply: async (body) => (await scriptedTrio().chat(body.messages as ChatMessage[])).text,
    });
  });
  afterAll(() => server.close());

  it('`spade run` makes its pool from `concurrency`', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-pools-'));
    for (const concurrency of [1, 8]) {
      const err: string[] = [];
      const code = await main(
        [
          'run',
          ...['--backend', 'openai', '--base-url', server.url, '--model', 'tiny'],
          ...['--out', join(dir, `c${concurrency}`), '--corpus', 'none', '--skills', 'mathematical'],
          ...['--set', 'skillsPerCycle=1', '--set', 'envsPerSkill=1', '--set', 'playsPerEnv=1'],
          ...['--set', `concurrency=${concurrency}`, '--json'],
        ],
        { out: () => undefined, err: (l) => err.push(l) },
      );
      expect(code, err.join('\n')).toBe(0);
    }
    expect(made.node).toEqual([1, 8].map((c) => concurrencySizes(c).cliSandboxWorkers));
    expect(made.node).toEqual([1, 4]);
  });
});

describe("the page's sandbox pool", () => {
  it('is sized from the budget, replaced for another size only while idle, and shared otherwise', () => {
    const first = sandboxPool() as unknown as FakePool;
    expect(first.size).toBe(concurrencySizes(DEFAULTS.concurrency).browserSandboxWorkers);
    expect(sandboxPool()).toBe(first); // hand play and checks share it
    const small = sandboxPool(1) as unknown as FakePool; // a run with a budget of 1, the pool idle
    expect(first.terminated).toBe(true);
    expect(small.size).toBe(2);
    small.idle = false; // a game played by hand is loaded
    expect(sandboxPool(3)).toBe(small);
    expect(small.terminated).toBe(false);
    small.idle = true;
    expect((sandboxPool(3) as unknown as FakePool).size).toBe(3);
    expect(made.browser.map((p) => p.size)).toEqual([4, 2, 3]);
  });
});
