// The Run view's count of model calls (state/run.svelte.ts `tallied`): every call through the wrapped
// model is counted as answered or as a failure of its kind, with the last failure's message, and the
// wrapper passes the model through unchanged (replies, errors, token counting). Also the message a
// `#run=` link gets when its host gives no answer (state/run_review.svelte.ts): it names every cause the browser cannot tell apart.
import { describe, expect, it } from 'vitest';
import { ContextBudgetError, ModelCallError } from '../../src/core/errors.ts';
import type { ChatModel, ChatResult } from '../../src/core/llm/chat_model.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { RunState, tallied, type CallTally } from '../../src/state/run.svelte.ts';

const ok: ChatResult = { text: 'hi', finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 1 }, ms: 1 };

function scripted(outcomes: (ChatResult | Error)[]): ChatModel {
  let i = 0;
  return {
    backend: 'openai',
    model: 'm',
    capabilities: { streaming: true, logprobs: false, trainable: false, contextWindow: 4096 },
    countTokens: async (messages) => messages.length * 7,
    async chat() {
      const o = outcomes[i++]!;
      if (o instanceof Error) throw o;
      return o;
    },
  };
}

describe('the run counts its model calls', () => {
  it('answered and failed by kind, the last failure kept, replies and errors passed through', async () => {
    const aborted = Object.assign(new Error('The model call was cancelled.'), { name: 'AbortError' });
    const outcomes = [
      ok,
      new ModelCallError('The call to http://x/v1 timed out after 120 s', { kind: 'timeout' }),
      ok,
      aborted,
      new ModelCallError('The call to http://x/v1 failed: ECONNREFUSED', { kind: 'connection' }),
      new ContextBudgetError('The prompt does not fit'),
      new ModelCallError('The call to http://x/v1 timed out after 30 s of silence', { kind: 'timeout' }),
    ];
    const tally: CallTally = { done: 0, failed: 0, byKind: {}, last: null };
    const m = tallied(scripted(outcomes), tally);
    expect(m.backend).toBe('openai');
    expect(await m.countTokens!([{ role: 'user', content: 'x' }])).toBe(7);
    for (const o of outcomes) {
      const r = m.chat([{ role: 'user', content: 'x' }]);
      if (o instanceof Error) await expect(r).rejects.toBe(o);
      else expect(await r).toBe(o);
    }
    expect(tally).toEqual({
      done: 2,
      failed: 5,
      byKind: { timeout: 2, cancelled: 1, connection: 1, 'too long for the context': 1 },
      last: 'The call to http://x/v1 timed out after 30 s of silence',
    });
  });
});

describe('a #run= link whose host gives no answer', () => {
  it('names the causes the browser cannot tell apart, not CORS alone', async () => {
    const run = new RunState(new MemoryStore());
    const refused = (() => Promise.reject(new TypeError('Failed to fetch'))) as unknown as typeof fetch;
    expect(await run.review.openRunUrl('https://unreachable.example/a.spade-run.json', refused)).toBe(false);
    expect(run.review.openError).toMatch(/Failed to fetch\. No answer came back: the host may be down or unreachable/);
    expect(run.review.openError).toMatch(/mistyped/);
    expect(run.review.openError).toMatch(/CORS/);
    // an answer that came back is reported as it is, with no guessing
    const notFound = (async () => new Response('no', { status: 404 })) as typeof fetch;
    expect(await run.review.openRunUrl('https://example.org/gone.json', notFound)).toBe(false);
    expect(run.review.openError).toMatch(/HTTP 404/);
    expect(run.review.openError).not.toMatch(/CORS/);
  });
});
