/**
 * A local HTTP server that speaks the chat-completions protocol, for tests only:
 * streaming (SSE) and non-streaming replies, scripted failures (429s, 500s), slow
 * replies, and hostile ones: bytes dripped slowly, a stream left open after its last
 * chunk, an error sent with HTTP 200, an endless reply. Listens on 127.0.0.1 on a
 * free port; records every request body and how each response ended.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

export interface FakeBehaviour {
  /** Reply text for a request (default: echoes the last user message). */
  reply?: (body: Record<string, unknown>) => string | Promise<string>;
  /** Fail the first N requests with this status. */
  failFirst?: { count: number; status: number };
  /** Delay before answering, ms. */
  delayMs?: number;
  /** Include log-probs (one per word). */
  logprobs?: boolean;
  /** Streaming: pause this long between events, ms. */
  chunkDelayMs?: number;
  /** Streaming: write the body one byte at a time, this long apart, ms. */
  dripMs?: number;
  /** Streaming: never end the response, after [DONE] or right after the finish_reason chunk (no usage, no [DONE]). */
  leaveOpen?: 'after_done' | 'after_finish';
  /** Answer HTTP 200 with an error object, as the JSON body or as an SSE data line. */
  errorWith200?: { message: string; as: 'json' | 'sse' };
  /** Streaming: send this piece of content again and again until the client hangs up. */
  endless?: string;
  /** Answer with one JSON body even when the request asks to stream. */
  ignoreStream?: boolean;
  /** GET /models answers {object: 'list', data: models} (vLLM puts max_model_len in each entry); absent: 404. */
  models?: Record<string, unknown>[];
  /** Reject requests that carry chat_template_kwargs with a 400, as a strict hosted API does. */
  rejectTemplateKwargs?: boolean;
}

export interface FakeServer {
  url: string;
  requests: Record<string, unknown>[];
  /** The Authorization header of every request, in order (GET /models included; null when absent). */
  authorizations: (string | null)[];
  behaviour: FakeBehaviour;
  /** Responses the client closed before the server ended them. */
  readonly clientClosed: number;
  /** Characters written into streamed responses so far. */
  readonly written: number;
  /** GET /models requests answered. */
  readonly modelListings: number;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = '';
    req.on('data', (c) => (s += c));
    req.on('end', () => resolve(s));
  });
}

export async function startFakeOpenAI(behaviour: FakeBehaviour = {}): Promise<FakeServer> {
  const requests: Record<string, unknown>[] = [];
  const authorizations: (string | null)[] = [];
  const state = { behaviour, failed: 0, clientClosed: 0, written: 0, modelListings: 0 };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Write, dripping byte by byte when asked; false once the client is gone. */
  const write = async (res: ServerResponse, text: string, b: FakeBehaviour): Promise<boolean> => {
    if (res.destroyed) return false;
    if (!b.dripMs) {
      state.written += text.length;
      if (!res.write(text)) await new Promise((r) => res.once('drain', r).once('close', r));
      return !res.destroyed;
    }
    for (const byte of Buffer.from(text)) {
      if (res.destroyed) return false;
      res.write(Buffer.from([byte]));
      state.written++;
      await sleep(b.dripMs);
    }
    return !res.destroyed;
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    authorizations.push(req.headers.authorization ?? null);
    if (req.method === 'GET' && req.url?.endsWith('/models') && state.behaviour.models) {
      state.modelListings++;
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: state.behaviour.models }));
      return;
    }
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    requests.push(body);
    res.on('close', () => {
      if (!res.writableEnded) state.clientClosed++;
    });
    const b = state.behaviour;
    if (b.rejectTemplateKwargs && 'chat_template_kwargs' in body) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'Unrecognized request argument supplied: chat_template_kwargs' } }));
      return;
    }
    if (b.failFirst && state.failed < b.failFirst.count) {
      state.failed++;
      res.writeHead(b.failFirst.status, { 'content-type': 'application/json', 'retry-after-ms': '10' });
      res.end(JSON.stringify({ error: { message: `scripted failure ${state.failed}`, type: 'server_error' } }));
      return;
    }
    if (b.delayMs) await new Promise((r) => setTimeout(r, b.delayMs));
    const messages = body.messages as { role: string; content: string }[];
    const text = b.reply
      ? await b.reply(body)
      : `echo: ${messages.filter((m) => m.role === 'user').pop()?.content ?? ''}`;
    const words = text.match(/\s*\S+/g) ?? [];
    const lp = (w: string, i: number) => ({ token: w, logprob: -0.1 * (i + 1), bytes: null, top_logprobs: [] });
    const usage = { prompt_tokens: 7, completion_tokens: words.length, total_tokens: 7 + words.length };
    if (b.errorWith200?.as === 'json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: b.errorWith200.message, type: 'invalid_request_error', code: 400 } }));
      return;
    }
    if (body.stream && !b.ignoreStream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: body.model, choices, ...extra })}\n\n`;
      if (b.errorWith200?.as === 'sse') {
        await write(res, event([{ index: 0, delta: { content: 'partial' }, finish_reason: null }]), b);
        res.end(`data: ${JSON.stringify({ error: { message: b.errorWith200.message, type: 'server_error' } })}\n\n`);
        return;
      }
      if (b.endless !== undefined) {
        while (await write(res, event([{ index: 0, delta: { content: b.endless }, finish_reason: null }]), b))
          await new Promise((r) => setImmediate(r));
        return;
      }
      for (const [i, w] of words.entries()) {
        const choice = {
          index: 0,
          delta: { content: w },
          finish_reason: null,
          ...(b.logprobs ? { logprobs: { content: [lp(w, i)] } } : {}),
        };
        if (!(await write(res, event([choice]), b))) return;
        if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
      }
      if (!(await write(res, event([{ index: 0, delta: {}, finish_reason: 'stop' }]), b))) return;
      if (b.leaveOpen === 'after_finish') return;
      if (!(await write(res, event([], { usage }), b))) return;
      if (!(await write(res, 'data: [DONE]\n\n', b))) return;
      if (b.leaveOpen !== 'after_done') res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'c1',
        object: 'chat.completion',
        created: 0,
        model: body.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: text },
            finish_reason: 'stop',
            logprobs: b.logprobs ? { content: words.map(lp) } : null,
          },
        ],
        usage,
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}/v1`,
    requests,
    authorizations,
    get behaviour() {
      return state.behaviour;
    },
    set behaviour(v: FakeBehaviour) {
      state.behaviour = v;
      state.failed = 0;
    },
    get clientClosed() {
      return state.clientClosed;
    },
    get written() {
      return state.written;
    },
    get modelListings() {
      return state.modelListings;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections(); // streams left open on purpose must not keep the server up
        server.close(() => r());
      }),
  };
}
