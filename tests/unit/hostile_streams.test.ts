// The openai backend against every hostile reply of tests/helpers/hostile_streams.ts, over a real
// local socket: each ends with a ModelCallError naming the bound or the field it broke (or, where the
// protocol allows the value, a clean reply), and an endless one is hung up on by the client, near its
// bound (the server counts what it wrote). Also `spade chat` against an SSE event that never ends, and
// stripThinking on 196 KB of hostile tags, its work counted. No wall-clock assertions; it prints the
// figures the issue asks for (slowest containment, peak heap growth).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { ModelCallError } from '../../src/core/errors.ts';
import { OpenAIChatModel } from '../../src/core/llm/openai_model.ts';
import { stripThinking } from '../../src/core/llm/thinking.ts';
import {
  hostileStreams,
  SERVER_CAP_CHARS,
  startHostileServer,
  type HostileServer,
} from '../helpers/hostile_streams.ts';

/** Small limits keep the run quick: lines and events ≤ 1.1 M characters, the body ≤ 3.6 M. */
const MAX_REPLY_CHARS = 10_000;

describe('openai backend: hostile replies (the stream class of the hostile catalogue)', () => {
  let server: HostileServer;
  beforeAll(async () => {
    server = await startHostileServer();
  });
  afterAll(() => server.close());

  /** How the last response ended, once its socket has closed (a wait, not a time bound: it returns at the close). */
  const hungUp = async () => {
    for (let i = 0; i < 3000 && server.lastEnd === null; i++) await new Promise((r) => setTimeout(r, 10));
    return server.lastEnd;
  };
  /**
   * What the client let the server write before it hung up: its bound (≤ 3.6 M characters here) plus
   * the sockets' buffers, far under the server's own cap, which a client reading on would reach.
   */
  const READ_BOUND = SERVER_CAP_CHARS / 4;

  it.each([
    ['size', 'over a size bound: a ModelCallError naming the bound, and the client hangs up'],
    ['type', 'a field of the wrong type: a ModelCallError naming the field and the server'],
    ['odd', 'odd but legal values: a clean reply; server errors: a ModelCallError with their message'],
  ] as const)('contains every %s case (%s)', async (group, _what) => {
    const cases = hostileStreams().filter((c) => c.group === group);
    expect(cases.length).toBeGreaterThan(5);
    const problems: string[] = [];
    let slowest = { ms: 0, name: '' };
    let heaviest = { bytes: 0, name: '' };
    for (const c of cases) {
      server.play = c;
      const m = new OpenAIChatModel({
        baseURL: server.url,
        model: 'm',
        maxRetries: 0,
        maxReplyChars: MAX_REPLY_CHARS,
        logprobs: Boolean(c.logprobs),
      });
      const base = process.memoryUsage().heapUsed;
      let peak = base;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
      const streamed: unknown[] = [];
      const t0 = performance.now();
      const outcome = await m
        .chat([{ role: 'user', content: 'hi' }], { onToken: (d) => streamed.push(d), logprobs: c.logprobs })
        .catch((e: unknown) => e);
      const ms = performance.now() - t0;
      clearInterval(sampler);
      if (ms > slowest.ms) slowest = { ms, name: c.name };
      if (peak - base > heaviest.bytes) heaviest = { bytes: peak - base, name: c.name };
      const bad = (why: string) => problems.push(`${c.name}: ${why}`);
      if (streamed.some((d) => typeof d !== 'string')) bad('onToken got a value that is not a string');
      const e = c.expect;
      if ('error' in e) {
        if (!(outcome instanceof ModelCallError)) {
          bad(`ended with ${(outcome as Error)?.name}: ${(outcome as Error)?.message ?? JSON.stringify(outcome)}`);
          continue;
        }
        const data = outcome.data;
        if (data.kind !== e.error) bad(`kind ${String(data.kind)}, expected ${e.error}: ${outcome.message}`);
        if (e.error === 'too_large') {
          if (data.limit !== e.limit) bad(`limit ${String(data.limit)}, expected ${e.limit}`);
          if (!outcome.message.includes('Raise maxReplyChars')) bad(`no advice: ${outcome.message}`);
          if ((await hungUp()) !== 'client') bad('the client did not hang up: the server ran out first');
          else if (server.lastWritten > READ_BOUND) bad(`the client read ${server.lastWritten} characters first`);
        }
        if (e.error === 'bad_reply' && e.field !== undefined) {
          if (data.field !== e.field) bad(`field ${String(data.field)}, expected ${e.field}`);
          if (!outcome.message.includes(`sent ${e.field} = `) || !outcome.message.includes(server.url))
            bad(`the message names neither the field nor the server: ${outcome.message}`);
        }
        if (e.error === 'server' && e.message && !e.message.test(outcome.message)) bad(`message: ${outcome.message}`);
      } else {
        if (outcome instanceof Error) {
          bad(`ended with ${outcome.name}: ${outcome.message}`);
          continue;
        }
        const r = outcome as Awaited<ReturnType<OpenAIChatModel['chat']>>;
        if (r.text !== e.text) bad(`text ${JSON.stringify(r.text)}, expected ${JSON.stringify(e.text)}`);
        if (r.finishReason !== e.finishReason) bad(`finishReason ${String(r.finishReason)}`);
        if (e.usage && JSON.stringify(r.usage) !== JSON.stringify(e.usage)) bad(`usage ${JSON.stringify(r.usage)}`);
      }
    }
    console.log(
      `${cases.length} hostile streams (${group}); slowest containment ${slowest.ms.toFixed(0)} ms (${slowest.name}); ` +
        `largest heap growth ${(heaviest.bytes / 2 ** 20).toFixed(1)} MB (${heaviest.name}, server included)`,
    );
    expect(problems).toEqual([]);
  });

  it('spade chat ends an SSE event that never ends with a ModelCallError saying what happened (default limits)', async () => {
    server.play = hostileStreams().find((c) => c.name === 'data: lines that never end their event')!;
    const err: string[] = [];
    const code = await main(['chat', '--backend', 'openai', '--base-url', server.url, '--model', 'm', 'hi'], {
      out: () => undefined,
      err: (l) => err.push(l),
    });
    expect(code).toBe(1);
    expect(err.join('\n')).toMatch(
      /spade chat: ModelCallError: The server at http:\/\/127\.0\.0\.1:\d+\/v1 sent one SSE event of over 1000 data: lines \(never ended by a blank line\); the reply was dropped\./,
    );
    expect(await hungUp()).toBe('client');
    expect(server.lastWritten).toBeLessThan(READ_BOUND);
  });
});

describe('stripThinking on hostile replies', () => {
  const SIZE = 196_000;
  const fill = (unit: string, size = SIZE) => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    ['<think> repeated, never closed', fill('<think>'), () => ''],
    ['answers before unclosed tags', fill('a <think>'), () => 'a '],
    ['<think> repeated, closed once at the end', fill('<think>') + '</think> answer', () => 'answer'],
    ['closed blocks', fill('<think>x</think>y'), (t: string) => 'y'.repeat(t.length / 17)],
    ['</think> repeated (the first ends a block the template opened)', fill('</think>'), (t: string) => t.slice(8)],
    ['tag halves that join into unclosed tags once blocks go', fill('<thi<think></think>nk>'), () => ''],
  ])('%s: the right result from 196 KB, in linear time', (_name, text, expected) => {
    expect(stripThinking(text)).toBe(expected(text));
    // The work, counted in place of a clock: the characters indexOf scans (its only search) stay within
    // 4 passes over the text, and the characters slice copies within 2 (the old quadratic scan, which
    // sliced and searched again after each tag, fails both).
    const indexOf = String.prototype.indexOf;
    const slice = String.prototype.slice;
    let scanned = 0;
    let copied = 0;
    const spies = [
      vi.spyOn(String.prototype, 'indexOf').mockImplementation(function (this: string, s: string, from = 0) {
        const at = indexOf.call(this, s, from);
        scanned += (at >= 0 ? at + s.length : this.length) - Math.max(0, from);
        return at;
      }),
      vi.spyOn(String.prototype, 'slice').mockImplementation(function (this: string, start?: number, end?: number) {
        const out = slice.call(this, start, end);
        copied += out.length;
        return out;
      }),
    ];
    try {
      for (const t of [text, text.repeat(4)]) {
        scanned = 0;
        copied = 0;
        stripThinking(t);
        expect(scanned).toBeLessThanOrEqual(4 * t.length + 64);
        expect(copied).toBeLessThanOrEqual(2 * t.length + 64);
      }
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});
