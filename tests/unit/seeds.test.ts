// The seed library: every environment passes the checker; the index lists every file; all twelve
// skills are covered; tool-use environments deliver multi-step instructions; ToolUseEnv behaves.
import { readdirSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { GAME_SKILLS, TOOL_SKILLS } from '../../src/core/env/contract.ts';
import { checkEnv } from '../../src/core/env/checker.ts';
import { SEED_ENVS, SEED_FILES } from '../../src/core/env/seeds/index.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';

const host = await SandboxHost.create();
afterAll(() => expect(host.liveCount()).toBe(0));

describe('seed library', () => {
  it('index.ts lists exactly the .js files in the folder (run scripts/gen_seed_index.js)', () => {
    const files = readdirSync(new URL('../../src/core/env/seeds/', import.meta.url))
      .filter((f) => f.endsWith('.js'))
      .sort();
    expect(Object.keys(SEED_FILES).sort()).toEqual(files);
    expect(SEED_ENVS.length).toBeGreaterThanOrEqual(16);
  });

  it('covers all six game skills and all six tool-use skills, with titles, hints and difficulties', () => {
    const games = new Set(SEED_ENVS.filter((e) => e.setting === 'games').map((e) => e.skill));
    const tools = new Set(SEED_ENVS.filter((e) => e.setting === 'tool_use').map((e) => e.skill));
    expect([...games].sort()).toEqual([...GAME_SKILLS].sort());
    expect([...tools].sort()).toEqual([...TOOL_SKILLS].sort());
    for (const e of SEED_ENVS) {
      expect(e.title.length, e.title).toBeGreaterThan(3);
      expect(e.hint.length, `${e.title} hint`).toBeGreaterThan(20);
    }
  });

  it.each(SEED_ENVS.map((e) => [e.title, e] as const))('%s passes every check', async (_t, e) => {
    const r = await checkEnv(host, e.code, { maxTurns: 12 });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.setting).toBe(e.setting);
    expect(Math.max(...r.solutionSteps)).toBeGreaterThanOrEqual(e.difficulty === 'easy' ? 2 : 3);
  });

  it('has at least two tool-use environments with multi-step instructions', async () => {
    let multi = 0;
    for (const e of SEED_ENVS.filter((x) => x.setting === 'tool_use')) {
      const env = await host.load(e.code, 12);
      const [, info] = host.reset(env.id, 0);
      if ((info.instructions as number) > 1) multi++;
      host.dispose(env.id);
    }
    expect(multi).toBeGreaterThanOrEqual(2);
  });
});

const TOOL_ENV = `class MiniEnv extends ToolUseEnv {
  static tools = [{ name: 'peek', description: 'the secret', parameters: { type: 'object', properties: { x: { type: 'number' } } } }];
  reset(seed) { this.secret = 10 + Math.floor(Math.random() * 80); this.calls = 0; return this.start('Find the secret.', ['What is the secret?', 'What is twice the secret?']); }
  peek(args) { this.calls++; if (args.x === -1) throw new Error('x must not be -1'); this.secret += 0; return { secret: this.secret, x: args.x ?? null }; }
  checkAnswer(a, stage) { return Number(a) === (stage === 0 ? this.secret : 2 * this.secret); }
  solution() { return ['<tool_call>{"name": "peek", "arguments": {}}</tool_call>', '<answer>' + this.secret + '</answer>', '<answer>' + 2 * this.secret + '</answer>']; }
}`;

describe('ToolUseEnv (sandbox prelude)', () => {
  it('lists tools, dispatches calls (object or JSON-string arguments), and charges format errors', async () => {
    const env = await host.load(TOOL_ENV, 6);
    const [obs, info] = host.reset(env.id, 1);
    expect(obs).toContain('- peek: the secret');
    expect(obs).toContain('Instruction 1 of 2: What is the secret?');
    expect(info.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'peek',
          description: 'the secret',
          parameters: { type: 'object', properties: { x: { type: 'number' } } },
        },
      },
    ]);
    expect(host.step(env.id, '<tool_call>{"name": "peek", "arguments": {"x": 3}}</tool_call>')[0]).toMatch(
      /^Tool result \(peek\): \{"secret":\d+,"x":3\}$/,
    );
    expect(host.step(env.id, '<tool_call>{"name": "peek", "arguments": "{\\"x\\": 4}"}</tool_call>')[0]).toMatch(
      /"x":4/,
    );
    expect(host.step(env.id, '<tool_call>{"name": "peek", "arguments": {"x": -1}}</tool_call>').slice(0, 3)).toEqual([
      'Tool error (peek): x must not be -1',
      0,
      false,
    ]);
    expect(host.step(env.id, 'just talking').slice(1, 3)).toEqual([-0.1, false]);
    expect(host.step(env.id, '<tool_call>{"name": "nope"}</tool_call>')[0]).toBe(
      'Format error: unknown tool "nope". Available tools: peek.',
    );
    // 6th turn: out of turns → truncated, solution revealed
    const last = host.step(env.id, '<tool_call>{bad</tool_call>');
    expect(last[3]).toBe(true);
    expect(last[0]).toMatch(/Out of turns\. A solution was:\n<tool_call>/);
    host.dispose(env.id);
  });

  it('delivers instructions one at a time; a wrong answer ends the episode', async () => {
    const env = await host.load(TOOL_ENV, 12);
    host.reset(env.id, 2);
    const sol = host.solution(env.id);
    host.step(env.id, sol[0]!);
    const second = host.step(env.id, sol[1]!);
    expect(second.slice(1, 3)).toEqual([0.5, false]);
    expect(second[0]).toContain('Instruction 2 of 2: What is twice the secret?');
    expect(host.step(env.id, sol[2]!).slice(1, 3)).toEqual([1, true]);
    host.reset(env.id, 2);
    const wrong = host.step(env.id, '<answer>-5</answer>');
    expect(wrong.slice(1, 3)).toEqual([0, true]);
    expect(wrong[0]).toContain('Incorrect answer: -5. The episode ends.');
    host.dispose(env.id);
  });
});
