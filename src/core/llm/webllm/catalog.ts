/**
 * The WebLLM model catalog: the prebuilt models we offer, their size, VRAM and context window, and
 * lookups over them (by id, the other precision, smaller alternatives).
 *
 * Pure TypeScript; the numbers are copied from `prebuiltAppConfig.model_list` of web-llm 0.2.86.
 * tests/unit/webllm.test.ts checks every entry against that list, so a version bump that renames or
 * drops a model fails there.
 *
 * Context windows: every web-llm record says 4096 tokens, which a SPADE designer call (prompt +
 * reply) overflows. Where the model was trained on a longer context and its KV cache stays small
 * (grouped-query attention), we create the engine with `context_window_size` 8192 (web-llm's
 * `chatOpts`, which override the record's `overrides`); the entry's contextWindow is that window and
 * its vramRequiredMB is the record's figure plus the larger KV cache (layers x 2 x KV heads x head
 * dim x 2 bytes per token for f16 builds, x 4 for f32 builds, which keep the cache in f32).
 * SmolLM2-360M (a wiring check) and Phi-3.5-mini (no GQA: +1.5 GiB per 4k tokens) keep 4096. The other pure parts of the webllm backend sit beside this file
 * (feasibility, custom_records, errors, progress, side_channel); the browser half (worker, engine,
 * cache) is src/platform/browser/webllm_model.ts.
 *
 *   npx vitest run tests/unit/webllm.test.ts
 */

type WebLlmQuantization = 'q4f16_1' | 'q4f32_1';

export interface WebLlmCatalogEntry {
  /** web-llm model_id (the key of its prebuilt model record). */
  id: string;
  /** Human name shown in the model picker. */
  label: string;
  /** Nominal parameter count, from the model card. */
  params: number;
  quantization: WebLlmQuantization;
  /** GPU memory at `contextWindow`: the record's `vram_required_MB` plus the KV cache beyond its window. */
  vramRequiredMB: number;
  /** Context window in tokens we load the model with (web-llm `chatOpts.context_window_size`). */
  contextWindow: number;
  /** `vram_required_MB` of the web-llm record (weights + KV cache at the record's window). */
  recordVramMB: number;
  /** The record's `overrides.context_window_size`. */
  recordContextWindow: number;
  /** The model's kernels use f16: the adapter must expose `shader-f16`. */
  needsShaderF16: boolean;
  /** web-llm's `low_resource_required`: marked as runnable on limited devices (phones, iGPUs). */
  lowResourceRequired: boolean;
  /** A minimum `maxStorageBufferBindingSize`, when the record names one. */
  bufferSizeRequiredBytes?: number;
  /** One line on what the model is good for. */
  note: string;
}

/** The window of every web-llm 0.2.86 record in this catalog. */
const RECORD_WINDOW = 4096;

/** A larger window: the tokens to load with and the f16 KV-cache bytes per token (from the model's config.json). */
interface Window {
  tokens: number;
  kvBytesPerTokenF16: number;
}

/** GQA models: layers x 2 (K and V) x KV heads x head dim x 2 bytes. */
const kv = (layers: number, kvHeads: number, headDim: number) => layers * 2 * kvHeads * headDim * 2;

function pair(
  base: string,
  label: string,
  params: number,
  f16: { vram: number; low: boolean },
  f32: { vram: number; low: boolean },
  note: string,
  window?: Window,
): WebLlmCatalogEntry[] {
  const tokens = window?.tokens ?? RECORD_WINDOW;
  const extraMB = (bytesPerToken: number) => ((tokens - RECORD_WINDOW) * bytesPerToken) / 2 ** 20;
  const build = (q: WebLlmQuantization, r: { vram: number; low: boolean }, kvScale: number): WebLlmCatalogEntry => ({
    id: `${base}-${q}-MLC`,
    label: `${label} (${q.slice(0, 5)})`,
    params,
    quantization: q,
    vramRequiredMB: Math.round((r.vram + extraMB((window?.kvBytesPerTokenF16 ?? 0) * kvScale)) * 100) / 100,
    contextWindow: tokens,
    recordVramMB: r.vram,
    recordContextWindow: RECORD_WINDOW,
    needsShaderF16: q === 'q4f16_1',
    lowResourceRequired: r.low,
    note,
  });
  return [build('q4f16_1', f16, 1), build('q4f32_1', f32, 2)];
}

/** 8,192 tokens: a designer prompt (~1.2–2.7k tokens) plus a full reply fits with room to spare. */
const W8K = 8192;

/**
 * Small instruct models, smallest first. Every q4f16_1 build needs shader-f16 even where web-llm's
 * record does not list it (its kernels are compiled with f16 arithmetic); the q4f32_1 twin runs on
 * any WebGPU adapter at a larger VRAM cost. Phi-3.5-mini's "-1k" records (1024-token context) are
 * left out: a SPADE designer prompt alone is longer than that.
 */
export const WEBLLM_CATALOG: readonly WebLlmCatalogEntry[] = [
  ...pair(
    'SmolLM2-360M-Instruct',
    'SmolLM2 360M Instruct',
    362e6,
    { vram: 376.06, low: true },
    { vram: 579.61, low: true },
    'Smallest and fastest; fine for wiring checks, weak at writing environment code.',
  ),
  ...pair(
    'Qwen2.5-0.5B-Instruct',
    'Qwen2.5 0.5B Instruct',
    494e6,
    { vram: 944.62, low: true },
    { vram: 1060.2, low: true },
    'Small general model that follows the \\boxed{} action format.',
    { tokens: W8K, kvBytesPerTokenF16: kv(24, 2, 64) },
  ),
  ...pair(
    'Qwen3-0.6B',
    'Qwen3 0.6B',
    0.6e9,
    { vram: 1403.34, low: true },
    { vram: 1924.98, low: true },
    'Reasoning model; thinking is off by default (config thinking), so it answers directly.',
    { tokens: W8K, kvBytesPerTokenF16: kv(28, 8, 128) },
  ),
  ...pair(
    'Llama-3.2-1B-Instruct',
    'Llama 3.2 1B Instruct',
    1.24e9,
    { vram: 879.04, low: true },
    { vram: 1128.82, low: true },
    'Good instruction following for its size.',
    { tokens: W8K, kvBytesPerTokenF16: kv(16, 8, 64) },
  ),
  ...pair(
    'Qwen2.5-1.5B-Instruct',
    'Qwen2.5 1.5B Instruct',
    1.54e9,
    { vram: 1629.75, low: true },
    { vram: 1888.97, low: true },
    'The default balance of quality and speed for self-play.',
    { tokens: W8K, kvBytesPerTokenF16: kv(28, 2, 128) },
  ),
  ...pair(
    'Qwen2.5-Coder-1.5B-Instruct',
    'Qwen2.5 Coder 1.5B Instruct',
    1.54e9,
    { vram: 1629.75, low: false },
    { vram: 1888.97, low: false },
    'Code-tuned: the best small designer of JavaScript environments.',
    { tokens: W8K, kvBytesPerTokenF16: kv(28, 2, 128) },
  ),
  ...pair(
    'Phi-3.5-mini-instruct',
    'Phi-3.5 mini Instruct',
    3.82e9,
    { vram: 3672.07, low: false },
    { vram: 5483.12, low: false },
    'Largest here: strongest reasoning, needs a discrete GPU.',
  ),
];

export function findCatalogEntry(id: string): WebLlmCatalogEntry | undefined {
  return WEBLLM_CATALOG.find((e) => e.id === id);
}

/** The same model in the other precision (q4f16_1 ⇄ q4f32_1), when the catalog has it. */
export function precisionTwin(id: string): WebLlmCatalogEntry | undefined {
  const other = id.includes('q4f16_1') ? id.replace('q4f16_1', 'q4f32_1') : id.replace('q4f32_1', 'q4f16_1');
  return other === id ? undefined : findCatalogEntry(other);
}

/** "1.5B", "360M": the parameter count in short form. */
export function formatParams(n: number): string {
  return n >= 1e9 ? `${+(n / 1e9).toFixed(2)}B` : `${Math.round(n / 1e6)}M`;
}

/**
 * Up to `n` catalog models that need clearly less VRAM than `modelId`, the largest of those first,
 * in the same precision (an f16 model failed, so the adapter has shader-f16 and the f16 builds are
 * the smaller ones; an f32 model may mean it lacks it). Models of equal VRAM count once. An unknown
 * model gets the smallest f32 models, which run anywhere.
 */
export function smallerModels(modelId: string | undefined, n = 2): WebLlmCatalogEntry[] {
  const cur = modelId ? findCatalogEntry(modelId) : undefined;
  const quant: WebLlmQuantization = cur?.quantization ?? 'q4f32_1';
  const pool = WEBLLM_CATALOG.filter((e) => e.quantization === quant && e.id !== modelId);
  const ordered = cur
    ? pool
        .filter((e) => e.vramRequiredMB < cur.vramRequiredMB * 0.85)
        .sort((a, b) => b.vramRequiredMB - a.vramRequiredMB)
    : [...pool].sort((a, b) => a.vramRequiredMB - b.vramRequiredMB);
  const out: WebLlmCatalogEntry[] = [];
  for (const e of ordered) {
    if (out.length < n && !out.some((o) => o.vramRequiredMB === e.vramRequiredMB)) out.push(e);
  }
  return out;
}
