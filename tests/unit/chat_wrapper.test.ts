// The one model wrapper (core/llm/chat_model.ts WrappedChatModel) and the abilities a ChatModel
// declares: a wrapper passes the backend, model, capabilities, countTokens and setDecodeBatch
// (batched decoding, the local engine's) through — the run's call tally (state/run.svelte.ts) and
// the loop's meter included — and changes only chat; a model without an ability stays without it; the
// recorder keeps its transcript replayable by budgeting as its replay will (no countTokens).
import { describe, expect, it } from 'vitest';
import { MeteredChatModel, WrappedChatModel, type ChatModel, type ChatResult } from '../../src/core/llm/chat_model.ts';
import { RecordingChatModel } from '../../src/core/llm/replay.ts';
import { tallied, type CallTally } from '../../src/state/run.svelte.ts';

const reply = (text: string): ChatResult => ({
  text,
  finishReason: 'stop',
  usage: { promptTokens: 1, completionTokens: 2 },
  ms: 0,
});

/** A model with every optional ability, recording what reached it. */
function engineLike() {
  const seen = { batch: [] as number[], options: [] as unknown[] };
  const model: ChatModel = {
    backend: 'local',
    model: 'tiny',
    capabilities: { streaming: true, logprobs: true, trainable: true, contextWindow: 512 },
    chat: async (_m, o) => (seen.options.push(o), reply('ok')),
    countTokens: async (m) => m.length * 10,
    setDecodeBatch: async (n) => void seen.batch.push(n),
  };
  return { model, seen };
}

describe('the one model wrapper', () => {
  it('passes every declared ability through and changes only chat', async () => {
    const { model, seen } = engineLike();
    const capped = new WrappedChatModel(model, (m, o = {}) => model.chat(m, { ...o, max_tokens: 5 }));
    const tally: CallTally = { done: 0, failed: 0, byKind: {}, last: null };
    const metered = new MeteredChatModel(tallied(capped, tally));
    expect([metered.backend, metered.model, metered.capabilities]).toEqual(['local', 'tiny', model.capabilities]);
    expect(await metered.countTokens!([{ role: 'user', content: 'x' }])).toBe(10);
    await metered.setDecodeBatch!(4);
    expect(seen.batch).toEqual([4]);
    expect((await metered.chat([], { temperature: 0.5 })).text).toBe('ok');
    expect(seen.options).toEqual([{ temperature: 0.5, max_tokens: 5 }]);
    expect([tally.done, metered.calls, metered.tokens]).toEqual([1, 1, 2]);
  });

  it('a model without an ability is wrapped without it', () => {
    const plain: ChatModel = {
      backend: 'openai',
      model: 'm',
      capabilities: { streaming: true, logprobs: false, trainable: false, contextWindow: 4096 },
      chat: async () => reply('hi'),
    };
    const w = new MeteredChatModel(plain);
    expect([w.countTokens, w.setDecodeBatch]).toEqual([undefined, undefined]);
  });

  it('the recorder budgets as its replay will: no countTokens, batching passed through', async () => {
    const { model, seen } = engineLike();
    const rec = new RecordingChatModel(model);
    expect(rec.countTokens).toBeUndefined();
    await rec.setDecodeBatch!(2);
    expect(seen.batch).toEqual([2]);
    await rec.chat([{ role: 'user', content: 'q' }]);
    expect(rec.entries).toHaveLength(1);
  });
});
