/**
 * A catalogue of hostile chat-completions replies (the stream class of hostile cases, beside the
 * hostile programs of src/core/env/hostile.ts), and a local HTTP server that plays them, for tests
 * and the heap measurement only. Each entry is a response body, written piece by piece with
 * back-pressure (an endless one until the client hangs up, or SERVER_CAP_CHARS), and what the openai
 * backend must make of it: a ModelCallError of a given kind naming the bound or field, or a reply.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

export type StreamExpect =
  | { error: 'too_large'; limit: 'line' | 'event' | 'event_lines' | 'body' | 'logprobs' }
  | { error: 'bad_reply'; field?: string }
  | { error: 'server'; message?: RegExp }
  | { text: string; finishReason: string; usage?: { promptTokens: number; completionTokens: number } };

export interface HostileStream {
  name: string;
  /** 'size': over a size bound; 'type': a field of the wrong type; 'odd': odd but legal, or a server error. */
  group: 'size' | 'type' | 'odd';
  /** The body's pieces, in order; may be endless. */
  body: () => Iterable<string>;
  /** Sent as one application/json body instead of text/event-stream. */
  json?: boolean;
  /** Called with logprobs wanted (the model declares them and the call asks). */
  logprobs?: boolean;
  expect: StreamExpect;
}

/** The most a hostile body writes before it ends by itself: far above every bound under test. */
export const SERVER_CAP_CHARS = 64 << 20;

const sse = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  sse({ id: 'c1', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, ...choice }], ...extra });
const USAGE_OK = { prompt_tokens: 3, completion_tokens: 1 };
const ROLE = chunk({ delta: { role: 'assistant', content: '' } });
const FINISH = chunk({ delta: {}, finish_reason: 'stop' });
const USAGE = sse({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: USAGE_OK });
const DONE = 'data: [DONE]\n\n';
/** A well-formed stream around `middle`. */
const around = (...middle: string[]) => [ROLE, ...middle, FINISH, USAGE, DONE];
/** A well-formed non-streamed reply with `choice` and `extra` merged in. */
const whole = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: 'c1',
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop', ...choice }],
    usage: USAGE_OK,
    ...extra,
  });

function* forever(piece: string): Iterable<string> {
  for (;;) yield piece;
}
/** An object nested `depth` levels deep, as JSON text (JSON.stringify of it overflows the stack). */
const deep = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

/** Values of the wrong type for a field the protocol types as a string (null aside: it is legal). */
const NOT_STRINGS: unknown[] = [5, true, {}, { text: 'hi' }, ['h', 'i'], []];
const NOT_COUNTS: unknown[] = ['5', -1, 1.5, 1e300, {}, [3], true];
const NOT_OBJECTS: unknown[] = ['hi', 5, ['a'], true];

const fieldCases = (): HostileStream[] => [
  ...NOT_STRINGS.map((v): HostileStream => ({
    group: 'type',
    name: `delta.content = ${JSON.stringify(v)}`,
    body: () => around(chunk({ delta: { content: 'h' } }), chunk({ delta: { content: v } })),
    expect: { error: 'bad_reply', field: 'choices[0].delta.content' },
  })),
  ...NOT_STRINGS.map((v): HostileStream => ({
    group: 'type',
    name: `message.content = ${JSON.stringify(v)} (not streamed)`,
    json: true,
    body: () => [whole({ message: { role: 'assistant', content: v } })],
    expect: { error: 'bad_reply', field: 'choices[0].message.content' },
  })),
  ...NOT_STRINGS.map((v): HostileStream => ({
    group: 'type',
    name: `finish_reason = ${JSON.stringify(v)}`,
    body: () => [ROLE, chunk({ delta: { content: 'hi' }, finish_reason: v }), USAGE, DONE],
    expect: { error: 'bad_reply', field: 'choices[0].finish_reason' },
  })),
  ...['"abc"', '5', '{"0":{"delta":{"content":"hi"}}}'].map((v): HostileStream => ({
    group: 'type',
    name: `choices = ${v}`,
    body: () => [`data: {"choices":${v}}\n\n`, DONE],
    expect: { error: 'bad_reply', field: 'choices' },
  })),
  ...NOT_OBJECTS.map((v): HostileStream => ({
    group: 'type',
    name: `choices[0] = ${JSON.stringify(v)}`,
    body: () => [sse({ choices: [v] }), DONE],
    expect: { error: 'bad_reply', field: 'choices[0]' },
  })),
  ...NOT_OBJECTS.map((v): HostileStream => ({
    group: 'type',
    name: `delta = ${JSON.stringify(v)}`,
    body: () => around(chunk({ delta: v })),
    expect: { error: 'bad_reply', field: 'choices[0].delta' },
  })),
  ...NOT_OBJECTS.map((v): HostileStream => ({
    group: 'type',
    name: `usage = ${JSON.stringify(v)}`,
    body: () => [ROLE, chunk({ delta: { content: 'hi' }, finish_reason: 'stop' }), sse({ choices: [], usage: v })],
    expect: { error: 'bad_reply', field: 'usage' },
  })),
  ...NOT_COUNTS.map((v): HostileStream => ({
    group: 'type',
    name: `usage.completion_tokens = ${JSON.stringify(v)}`,
    body: () => [
      ROLE,
      chunk({ delta: { content: 'hi' }, finish_reason: 'stop' }),
      sse({ choices: [], usage: { prompt_tokens: 3, completion_tokens: v } }),
    ],
    expect: { error: 'bad_reply', field: 'usage.completion_tokens' },
  })),
  ...NOT_COUNTS.map((v): HostileStream => ({
    group: 'type',
    name: `usage.prompt_tokens = ${JSON.stringify(v)} (not streamed)`,
    json: true,
    body: () => [whole({}, { usage: { prompt_tokens: v, completion_tokens: 1 } })],
    expect: { error: 'bad_reply', field: 'usage.prompt_tokens' },
  })),
  ...(
    [
      [5, 'choices[0].logprobs'],
      [{ content: 5 }, 'choices[0].logprobs.content'],
      [{ content: { token: 'h' } }, 'choices[0].logprobs.content'],
      [{ content: [null] }, 'choices[0].logprobs.content[0]'],
      [{ content: [{ token: 'h', logprob: -0.1 }, 'x'] }, 'choices[0].logprobs.content[1]'],
      [{ content: [{ token: 5, logprob: -0.1 }] }, 'choices[0].logprobs.content[0].token'],
      [{ content: [{ token: 'h', logprob: '-0.1' }] }, 'choices[0].logprobs.content[0].logprob'],
      [{ content: [{ token: 'h', logprob: null }] }, 'choices[0].logprobs.content[0].logprob'],
    ] as const
  ).flatMap(([v, field]): HostileStream[] => [
    {
      group: 'type',
      name: `logprobs = ${JSON.stringify(v)}`,
      logprobs: true,
      body: () => around(chunk({ delta: { content: 'hi' }, logprobs: v })),
      expect: { error: 'bad_reply', field },
    },
    {
      group: 'type',
      name: `logprobs = ${JSON.stringify(v)}, not asked for`,
      body: () => around(chunk({ delta: { content: 'hi' }, logprobs: v })),
      expect: { text: 'hi', finishReason: 'stop' },
    },
  ]),
];

const sizeCases = (): HostileStream[] => [
  {
    group: 'size',
    name: 'data: lines that never end their event',
    body: () => forever('data: ' + 'x'.repeat(100) + '\n'),
    expect: { error: 'too_large', limit: 'event_lines' },
  },
  {
    group: 'size',
    name: 'empty data: lines that never end their event',
    body: () => forever('data:\n'),
    expect: { error: 'too_large', limit: 'event_lines' },
  },
  {
    group: 'size',
    name: 'long data: lines that never end their event',
    body: () => forever('data: ' + 'x'.repeat(100_000) + '\n'),
    expect: { error: 'too_large', limit: 'event' },
  },
  {
    group: 'size',
    name: 'one line with no line break at all',
    body: () => forever('x'.repeat(65_536)),
    expect: { error: 'too_large', limit: 'line' },
  },
  {
    group: 'size',
    name: 'lines ended by a bare CR (one endless line to us)',
    body: () => forever('data: {"choices":[]}\r\r'),
    expect: { error: 'too_large', limit: 'line' },
  },
  {
    group: 'size',
    name: 'empty chunks forever',
    body: () => forever(sse({ choices: [] })),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'chunks with empty content forever',
    body: () => forever(chunk({ delta: { content: '' } })),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'comment lines forever',
    body: () => forever(': keep-alive\n'),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'blank lines forever',
    body: () => forever('\n\n\n\n'),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'event: lines forever',
    body: () => forever('event: message\n'),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'tool_calls garbage forever',
    body: () => forever(chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: 'x'.repeat(1000) } }] } })),
    expect: { error: 'too_large', limit: 'body' },
  },
  {
    group: 'size',
    name: 'log-probs with no content, forever',
    logprobs: true,
    body: () =>
      forever(
        chunk({
          delta: { content: '' },
          logprobs: { content: Array.from({ length: 1000 }, () => ({ token: 't', logprob: -1 })) },
        }),
      ),
    expect: { error: 'too_large', limit: 'logprobs' },
  },
];

const otherCases = (): HostileStream[] => [
  {
    group: 'odd',
    name: 'content null (legal: empty) around real content',
    body: () => [
      chunk({ delta: { role: 'assistant', content: null } }),
      chunk({ delta: { content: 'hi' } }),
      chunk({ delta: { content: null }, finish_reason: 'stop' }),
      USAGE,
      DONE,
    ],
    expect: { text: 'hi', finishReason: 'stop', usage: { promptTokens: 3, completionTokens: 1 } },
  },
  {
    group: 'odd',
    name: 'message.content null (legal: empty, not streamed)',
    json: true,
    body: () => [whole({ message: { role: 'assistant', content: null } })],
    expect: { text: '', finishReason: 'stop' },
  },
  ...['__proto__', 'constructor', 'toString', 'hasOwnProperty'].map((reason): HostileStream => ({
    group: 'odd',
    name: `finish_reason = "${reason}"`,
    body: () => [ROLE, chunk({ delta: { content: 'hi' }, finish_reason: reason }), USAGE, DONE],
    expect: { text: 'hi', finishReason: 'stop' },
  })),
  {
    group: 'odd',
    name: 'tool_calls of every wrong type (not read)',
    body: () =>
      around(
        chunk({ delta: { content: 'h', tool_calls: 5 } }),
        chunk({ delta: { content: 'i', tool_calls: [null, { function: { arguments: { a: [1] } } }] } }),
      ),
    expect: { text: 'hi', finishReason: 'stop' },
  },
  {
    group: 'odd',
    name: 'a chunk nested 100 000 deep',
    body: () => around(`data: {"choices":[{"delta":{"content":"hi"}}],"x":${deep(100_000)}}\n\n`),
    expect: { text: 'hi', finishReason: 'stop' },
  },
  {
    group: 'odd',
    name: 'an error event nested 100 000 deep',
    body: () => [ROLE, `event: error\ndata: {"error":${deep(100_000)}}\n\n`],
    expect: { error: 'server', message: /nested too deep to print/ },
  },
  {
    group: 'odd',
    name: 'an error object whose message is not a string',
    body: () => [ROLE, sse({ error: { message: { nested: ['x'] }, code: 500 } })],
    expect: { error: 'server', message: /answered with an error: \{"message":\{"nested":\["x"\]\}/ },
  },
  {
    group: 'odd',
    name: 'a chunk that is a JSON array',
    body: () => [ROLE, 'data: [1,2,3]\n\n'],
    expect: { error: 'bad_reply' },
  },
];

/** Every hostile stream, in a fixed order. */
export function hostileStreams(): HostileStream[] {
  return [...sizeCases(), ...fieldCases(), ...otherCases()];
}

export interface HostileServer {
  url: string;
  /** The case the next request gets. */
  play: HostileStream | null;
  /** How the last response ended: 'client' (the client hung up first) or 'server' (the body ran out). */
  lastEnd: 'client' | 'server' | null;
  /** Characters written into the last response. */
  lastWritten: number;
  close(): Promise<void>;
}

/** A server on 127.0.0.1 that answers every chat-completions request with the case in `play`. */
export async function startHostileServer(): Promise<HostileServer> {
  const state: HostileServer = {
    url: '',
    play: null,
    lastEnd: null,
    lastWritten: 0,
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const c = state.play;
    if (!req.url?.endsWith('/chat/completions') || !c) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': c.json ? 'application/json' : 'text/event-stream' });
    state.lastEnd = null;
    state.lastWritten = 0;
    res.on('close', () => (state.lastEnd ??= res.writableEnded ? 'server' : 'client'));
    const pieces = c.body()[Symbol.iterator]();
    // Pieces go out in batches of about 64 KB, so a flood of tiny pieces costs the server little.
    const pump = () => {
      while (!res.destroyed) {
        let batch = '';
        let done = false;
        while (batch.length < 65_536) {
          const next = pieces.next();
          if (next.done || state.lastWritten + batch.length > SERVER_CAP_CHARS) {
            done = true;
            break;
          }
          batch += next.value;
        }
        state.lastWritten += batch.length;
        if (done) {
          res.end(batch);
          return;
        }
        if (!res.write(batch)) {
          res.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  state.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/v1`;
  return state;
}
