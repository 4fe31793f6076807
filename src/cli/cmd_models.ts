/**
 * `spade models [--json]` — the WebLLM catalog (id, size, VRAM, context, shader-f16).
 * `spade chat --backend openai --base-url URL --model M [--api-key K] [--temperature T] [--max-tokens N] "prompt"`
 *   — stream one reply: a quick way to check a server.
 */
import { UsageError } from '../core/errors.ts';
import { formatParams, WEBLLM_CATALOG } from '../core/llm/webllm/catalog.ts';
import { JSON_FLAG, numberFlag, intFlag, parseCommand, type CommandSpec, type Io } from './args.ts';
import { MODEL_FLAGS, modelFromFlags } from './model_flags.ts';

export const CHAT: CommandSpec = {
  name: 'chat',
  usage: '--backend openai --base-url URL --model M [flags] "prompt"',
  summary: 'Stream one reply from a model: a quick way to check a server (and its key) before a run.',
  positionals: true,
  flags: {
    ...MODEL_FLAGS,
    temperature: { value: 'T', help: 'sampling temperature', default: 0.6 },
    'max-tokens': { value: 'N', help: 'reply tokens at most', default: 256 },
    json: JSON_FLAG,
  },
  example: [
    'spade chat --backend openai --base-url http://127.0.0.1:11434/v1 --model qwen2.5:1.5b "Say hi"',
    'OPENAI_API_KEY=sk-... spade chat --backend openai --base-url https://api.openai.com/v1 --model gpt-4o-mini "Say hi"',
  ],
};

export const MODELS: CommandSpec = {
  name: 'models',
  usage: '[--json]',
  summary: 'The WebLLM model catalog (size, GPU memory, context) and the other backends.',
  flags: { json: JSON_FLAG },
  example: 'spade models',
};

export async function chat(argv: string[], io: Io): Promise<number> {
  const a = parseCommand(CHAT, argv, io);
  if (!a) return 0;
  const prompt = a.positional.join(' ').trim();
  if (!prompt)
    throw new UsageError('chat needs a prompt, e.g. spade chat --backend openai --base-url URL --model M "Hello"');
  const model = await modelFromFlags(a, undefined, undefined, (l) => io.err(l));
  const json = a.flags.has('json');
  const temperature = numberFlag(a, 'temperature');
  const max_tokens = intFlag(a, 'max-tokens');
  const r = await model.chat([{ role: 'user', content: prompt }], {
    temperature,
    max_tokens,
    onToken: json ? undefined : (d) => process.stdout.write(d),
  });
  if (json)
    io.out(
      JSON.stringify({ ok: true, text: r.text, finishReason: r.finishReason, usage: r.usage, ms: Math.round(r.ms) }),
    );
  else {
    process.stdout.write('\n');
    const tps = r.usage.completionTokens / (r.ms / 1000);
    io.err(
      `[${r.finishReason}, ${r.usage.completionTokens} tokens in ${(r.ms / 1000).toFixed(1)} s, ${tps.toFixed(1)} tokens/s]`,
    );
  }
  return 0;
}

export async function models(argv: string[], io: Io): Promise<number> {
  const a = parseCommand(MODELS, argv, io);
  if (!a) return 0;
  if (a.flags.has('json')) {
    io.out(JSON.stringify({ ok: true, backends: ['webllm', 'openai', 'local', 'replay'], webllm: WEBLLM_CATALOG }));
    return 0;
  }
  io.out('WebLLM catalog (browser, on your GPU; q4f16_1 builds need shader-f16):');
  for (const m of WEBLLM_CATALOG) {
    io.out(
      `  ${m.id.padEnd(44)} ${formatParams(m.params).padStart(6)}  ${String(Math.round(m.vramRequiredMB)).padStart(5)} MB  ctx ${m.contextWindow}${m.needsShaderF16 ? '  f16' : ''}`,
    );
  }
  io.out(
    'Other backends: openai (any OpenAI-compatible server: spade chat --backend openai ...), local (our engine), replay (recorded transcripts).',
  );
  return 0;
}
