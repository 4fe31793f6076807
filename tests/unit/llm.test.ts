// The ChatModel interface end to end: the openai backend against a local chat-completions
// server (streaming and not, errors, slow replies, 429s), and record → replay, identical twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roleOptions, type ChatMessage } from '../../src/core/llm/chat_model.ts';
import { Limiter } from '../../src/core/limiter.ts';
import { OpenAIChatModel } from '../../src/core/llm/openai_model.ts';
import { RecordingChatModel, ReplayChatModel, parseReplay } from '../../src/core/llm/replay.ts';
import { ModelCallError, ReplayMismatchError } from '../../src/core/errors.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

const user = (content: string): ChatMessage[] => [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content },
];

describe('openai backend', () => {
  let server: FakeServer;
  beforeAll(async () => {
    server = await startFakeOpenAI();
  });
  afterAll(() => server.close());

  it('answers without streaming and sends the sampling options', async () => {
    server.behaviour = {};
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny' });
    const r = await m.chat(user('hello there'), { ...roleOptions('hint'), seed: 5, stop: ['\n\n'] });
    expect(r.text).toBe('echo: hello there');
    expect(r.finishReason).toBe('stop');
    expect(r.usage).toEqual({ promptTokens: 7, completionTokens: 3 });
    expect(server.requests.at(-1)).toMatchObject({
      model: 'tiny',
      temperature: 0.3,
      top_p: 0.95,
      max_tokens: 200,
      seed: 5,
      stop: ['\n\n'],
    });
  });

  it('streams tokens through onToken, with usage and log-probs', async () => {
    server.behaviour = { logprobs: true };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', logprobs: true });
    const pieces: string[] = [];
    const r = await m.chat(user('one two three'), { onToken: (d) => pieces.push(d), logprobs: true });
    expect(pieces.join('')).toBe('echo: one two three');
    expect(pieces.length).toBe(4);
    expect(r.text).toBe('echo: one two three');
    expect(r.usage.completionTokens).toBe(4);
    expect(r.logprobs?.map((l) => l.logprob)).toEqual([-0.1, -0.2, -0.30000000000000004, -0.4]);
  });

  it('retries 429s and 5xx with backoff, then succeeds', async () => {
    server.behaviour = { failFirst: { count: 2, status: 429 } };
    const n0 = server.requests.length;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxRetries: 3 });
    expect((await m.chat(user('again'))).text).toBe('echo: again');
    expect(server.requests.length - n0).toBe(3);
    server.behaviour = { failFirst: { count: 1, status: 503 } };
    expect((await m.chat(user('5xx'))).text).toBe('echo: 5xx');
  });

  it('gives up with a ModelCallError that says what to check', async () => {
    server.behaviour = { failFirst: { count: 10, status: 500 } };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxRetries: 1 });
    const err = await m.chat(user('x')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelCallError);
    expect((err as Error).message).toMatch(/answered 500: .*The server failed; see its logs\./);
    const bad = new OpenAIChatModel({ baseURL: 'http://127.0.0.1:9/v1', model: 'tiny', maxRetries: 0 });
    expect(((await bad.chat(user('x')).catch((e: unknown) => e)) as Error).message).toMatch(
      /Could not reach http:\/\/127\.0\.0\.1:9\/v1/,
    );
    expect(() => new OpenAIChatModel({ baseURL: 'ftp://x', model: 'm' })).toThrow(
      'The base URL must start with http:// or https://',
    );
  });

  it('times out slow replies and can be cancelled', async () => {
    server.behaviour = { delayMs: 1500 };
    const slow = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxRetries: 0, timeoutMs: 200 });
    expect(((await slow.chat(user('x')).catch((e: unknown) => e)) as Error).message).toMatch(
      /did not answer within 0\.2 s/,
    );
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxRetries: 0 });
    const ac = new AbortController();
    const p = m.chat(user('x'), { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    expect(((await p.catch((e: unknown) => e)) as Error).name).toBe('AbortError');
  });

  it('bounds concurrency', async () => {
    const lim = new Limiter(2);
    let active = 0,
      peak = 0;
    await Promise.all(
      Array.from({ length: 6 }, () =>
        lim.run(async () => {
          peak = Math.max(peak, ++active);
          await new Promise((r) => setTimeout(r, 10));
          active--;
        }),
      ),
    );
    expect(peak).toBe(2);
  });
});

describe('record and replay', () => {
  it('replays a recorded transcript identically, twice', async () => {
    const server = await startFakeOpenAI({
      reply: (b) => `reply #${(b.messages as unknown[]).length} t=${b.temperature}`,
    });
    const rec = new RecordingChatModel(new OpenAIChatModel({ baseURL: server.url, model: 'tiny' }));
    const calls: [ChatMessage[], number][] = [
      [user('a'), 0.6],
      [user('b'), 0.3],
      [user('a'), 0.6],
    ];
    const live = [];
    for (const [m, t] of calls) live.push((await rec.chat(m, { temperature: t })).text);
    await server.close();
    const jsonl = rec.toJsonl();
    expect(parseReplay(jsonl).entries).toHaveLength(3);
    for (let run = 0; run < 2; run++) {
      const replay = new ReplayChatModel(jsonl);
      expect(replay.model).toBe('openai:tiny');
      const streamed: string[] = [];
      const got = [];
      for (const [m, t] of calls)
        got.push((await replay.chat(m, { temperature: t, onToken: (d) => streamed.push(d) })).text);
      expect(got).toEqual(live);
      expect(streamed.join('')).toBe(live.join(''));
      expect(replay.remaining()).toBe(0);
    }
  });

  it('refuses a request it never recorded, saying why', async () => {
    const rec = new RecordingChatModel({
      backend: 'x',
      model: 'y',
      capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: 1 },
      chat: async () => ({ text: 'ok', finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 1 }, ms: 0 }),
    });
    await rec.chat(user('known'));
    const replay = new ReplayChatModel(rec.toJsonl());
    await expect(replay.chat(user('known'), { temperature: 0.9 })).rejects.toThrow(ReplayMismatchError);
    await expect(replay.chat(user('other'))).rejects.toThrow(
      /No recorded reply for this request \(last user message: "other"\); the transcript has 1 replies, 1 unused/,
    );
    expect(() => new ReplayChatModel('{"format":"nope"}')).toThrow(/Line 1 must be the header/);
  });

  it('paces streamed replies at the given tokens/s', async () => {
    const rec = new RecordingChatModel({
      backend: 'x',
      model: 'y',
      capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: 1 },
      chat: async () => ({
        text: 'a b c d e',
        finishReason: 'stop',
        usage: { promptTokens: 1, completionTokens: 5 },
        ms: 0,
      }),
    });
    await rec.chat(user('q'));
    const replay = new ReplayChatModel(rec.toJsonl(), { tokensPerSecond: 50 });
    const t0 = performance.now();
    await replay.chat(user('q'), { onToken: () => undefined });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(90); // 5 tokens at 50/s ≈ 100 ms
  });
});
