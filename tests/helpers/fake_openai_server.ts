/**
 * A local HTTP server that speaks the chat-completions protocol, for tests only:
 * streaming (SSE) and non-streaming replies, scripted failures (429s, 500s), slow
 * replies. Listens on 127.0.0.1 on a free port; records every request body.
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
}

export interface FakeServer {
  url: string;
  requests: Record<string, unknown>[];
  behaviour: FakeBehaviour;
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
  const state = { behaviour, failed: 0 };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
    requests.push(body);
    const b = state.behaviour;
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
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      words.forEach((w, i) => {
        const chunk = {
          id: 'c1',
          object: 'chat.completion.chunk',
          created: 0,
          model: body.model,
          choices: [
            {
              index: 0,
              delta: { content: w },
              finish_reason: null,
              ...(b.logprobs ? { logprobs: { content: [lp(w, i)] } } : {}),
            },
          ],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      });
      res.write(
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: body.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
      );
      res.write(
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: body.model, choices: [], usage })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
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
    get behaviour() {
      return state.behaviour;
    },
    set behaviour(v: FakeBehaviour) {
      state.behaviour = v;
      state.failed = 0;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
