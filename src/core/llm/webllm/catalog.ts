/**
 * The WebLLM model catalog: the prebuilt models we offer, their size, VRAM and context window, and
 * lookups over them (by id, the other precision, smaller alternatives).
 *
 * Pure TypeScript; the numbers are copied from `prebuiltAppConfig.model_list` of web-llm 0.2.86.
 * tests/unit/webllm.test.ts checks every entry against that list, so a version bump that renames or
 * drops a model fails there. The other pure parts of the webllm backend sit beside this file
 * (feasibility, custom_records, errors, progress, side_channel); the browser half (worker, engine,
 * cache) is src/platform/browser/webllm_model.ts.
 *
 *   npx vitest run tests/unit/webllm.test.ts
 */

export type WebLlmQuantization = 'q4f16_1' | 'q4f32_1';

export interface WebLlmCatalogEntry {
  /** web-llm model_id (the key of its prebuilt model record). */
  id: string;
  /** Human name shown in the model picker. */
  label: string;
  /** Nominal parameter count, from the model card. */
  params: number;
  quantization: WebLlmQuantization;
  /** `vram_required_MB` of the web-llm record (weights + KV cache at the context window below). */
  vramRequiredMB: number;
  /** Context window in tokens (the record's `overrides.context_window_size`). */
  contextWindow: number;
  /** The model's kernels use f16: the adapter must expose `shader-f16`. */
  needsShaderF16: boolean;
  /** web-llm's `low_resource_required`: marked as runnable on limited devices (phones, iGPUs). */
  lowResourceRequired: boolean;
  /** A minimum `maxStorageBufferBindingSize`, when the record names one. */
  bufferSizeRequiredBytes?: number;
  /** One line on what the model is good for. */
  note: string;
}

function pair(
  base: string,
  label: string,
  params: number,
  f16: { vram: number; low: boolean },
  f32: { vram: number; low: boolean },
  note: string,
  contextWindow = 4096,
): WebLlmCatalogEntry[] {
  return [
    {
      id: `${base}-q4f16_1-MLC`,
      label: `${label} (q4f16)`,
      params,
      quantization: 'q4f16_1',
      vramRequiredMB: f16.vram,
      contextWindow,
      needsShaderF16: true,
      lowResourceRequired: f16.low,
      note,
    },
    {
      id: `${base}-q4f32_1-MLC`,
      label: `${label} (q4f32)`,
      params,
      quantization: 'q4f32_1',
      vramRequiredMB: f32.vram,
      contextWindow,
      needsShaderF16: false,
      lowResourceRequired: f32.low,
      note,
    },
  ];
}

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
  ),
  ...pair(
    'Qwen3-0.6B',
    'Qwen3 0.6B',
    0.6e9,
    { vram: 1403.34, low: true },
    { vram: 1924.98, low: true },
    'Reasoning model: thinks in <think> blocks before answering, so replies are longer.',
  ),
  ...pair(
    'Llama-3.2-1B-Instruct',
    'Llama 3.2 1B Instruct',
    1.24e9,
    { vram: 879.04, low: true },
    { vram: 1128.82, low: true },
    'Good instruction following for its size.',
  ),
  ...pair(
    'Qwen2.5-1.5B-Instruct',
    'Qwen2.5 1.5B Instruct',
    1.54e9,
    { vram: 1629.75, low: true },
    { vram: 1888.97, low: true },
    'The default balance of quality and speed for self-play.',
  ),
  ...pair(
    'Qwen2.5-Coder-1.5B-Instruct',
    'Qwen2.5 Coder 1.5B Instruct',
    1.54e9,
    { vram: 1629.75, low: false },
    { vram: 1888.97, low: false },
    'Code-tuned: the best small designer of JavaScript environments.',
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
