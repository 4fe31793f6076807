// The webllm backend without weights: the catalog against web-llm's own prebuilt list, feasibility on
// fake adapters, custom-record validation, error mapping, progress formatting, and the ChatModel over
// a fake worker that speaks web-llm's message protocol (streaming, abort, log-probs, device loss).
//   npx vitest run tests/unit/webllm.test.ts
import { functionCallingModelIds, prebuiltAppConfig, type ModelRecord } from '@mlc-ai/web-llm';
import { describe, expect, it } from 'vitest';
import type { GpuReport } from '../../src/engine/runtime/device.ts';
import {
  DeviceLostError,
  ModelCallError,
  ModelLoadError,
  SpadeError,
  WebGpuUnavailableError,
  deserializeError,
  serializeError,
} from '../../src/core/errors.ts';
import {
  WEBLLM_CATALOG,
  findCatalogEntry,
  formatParams,
  precisionTwin,
  smallerModels,
} from '../../src/core/llm/webllm/catalog.ts';
import {
  customFeasibilityInput,
  customToModelRecord,
  validateCustomModel,
} from '../../src/core/llm/webllm/custom_records.ts';
import {
  blameOf,
  classifyWebLlmError,
  describeThrown,
  mapWebLlmError,
  type WebLlmErrorCategory,
} from '../../src/core/llm/webllm/errors.ts';
import { assessCatalog, assessFeasibility, filterCatalog } from '../../src/core/llm/webllm/feasibility.ts';
import { DEFAULT_MODELS, defaultWebLlmModel } from '../../src/core/llm/default_models.ts';
import { formatDownloadProgress, type DownloadProgress } from '../../src/core/llm/webllm/progress.ts';
import {
  WebLlmChatModel,
  buildAppConfig,
  buildChatRequest,
  type LlmWorkerLike,
} from '../../src/platform/browser/webllm_model.ts';

const MiB = 2 ** 20;

function gpu(
  over: { shaderF16?: boolean; isFallback?: boolean; limits?: Partial<GpuReport['limits']> } = {},
): GpuReport {
  return {
    vendor: 'fake',
    architecture: 'test',
    description: 'fake adapter',
    isFallback: over.isFallback ?? false,
    features: { shaderF16: over.shaderF16 ?? true, subgroups: false, timestampQuery: false },
    limits: {
      maxStorageBufferBindingSize: 2 ** 31 - 4,
      maxBufferSize: 2 ** 32,
      maxComputeWorkgroupSizeX: 256,
      maxComputeInvocationsPerWorkgroup: 256,
      maxComputeWorkgroupStorageSize: 32768,
      ...over.limits,
    },
  };
}

// ---------------------------------------------------------------------------------------------

describe('catalog', () => {
  const prebuilt = new Map<string, ModelRecord>(prebuiltAppConfig.model_list.map((r) => [r.model_id, r]));

  it('lists both precisions of the seven chosen models', () => {
    expect(WEBLLM_CATALOG.map((e) => e.id)).toEqual([
      'SmolLM2-360M-Instruct-q4f16_1-MLC',
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
      'Qwen2.5-0.5B-Instruct-q4f16_1-MLC',
      'Qwen2.5-0.5B-Instruct-q4f32_1-MLC',
      'Qwen3-0.6B-q4f16_1-MLC',
      'Qwen3-0.6B-q4f32_1-MLC',
      'Llama-3.2-1B-Instruct-q4f16_1-MLC',
      'Llama-3.2-1B-Instruct-q4f32_1-MLC',
      'Qwen2.5-1.5B-Instruct-q4f16_1-MLC',
      'Qwen2.5-1.5B-Instruct-q4f32_1-MLC',
      'Qwen2.5-Coder-1.5B-Instruct-q4f16_1-MLC',
      'Qwen2.5-Coder-1.5B-Instruct-q4f32_1-MLC',
      'Phi-3.5-mini-instruct-q4f16_1-MLC',
      'Phi-3.5-mini-instruct-q4f32_1-MLC',
    ]);
    expect(new Set(WEBLLM_CATALOG.map((e) => e.id)).size).toBe(WEBLLM_CATALOG.length);
  });

  it.each(WEBLLM_CATALOG.map((e) => [e.id, e] as const))('%s matches its web-llm prebuilt record', (id, entry) => {
    const rec = prebuilt.get(id);
    expect(rec, `${id} is missing from web-llm's prebuiltAppConfig: update the catalog`).toBeDefined();
    expect(entry.recordVramMB).toBe(rec!.vram_required_MB);
    expect(entry.lowResourceRequired).toBe(rec!.low_resource_required);
    expect(entry.recordContextWindow).toBe(rec!.overrides?.context_window_size);
    // a larger window than the record's costs the KV cache on top of the record's VRAM, never less
    expect(entry.contextWindow).toBeGreaterThanOrEqual(entry.recordContextWindow);
    if (entry.contextWindow === entry.recordContextWindow) expect(entry.vramRequiredMB).toBe(entry.recordVramMB);
    else expect(entry.vramRequiredMB).toBeGreaterThan(entry.recordVramMB);
    expect(entry.bufferSizeRequiredBytes).toBe(rec!.buffer_size_required_bytes);
    expect(rec!.model_type ?? 0).toBe(0); // an LLM, not an embedding or vision model
    // Where web-llm declares shader-f16 we must too; we also declare it for every q4f16 build.
    if (rec!.required_features?.includes('shader-f16')) expect(entry.needsShaderF16).toBe(true);
    expect(entry.needsShaderF16).toBe(entry.quantization === 'q4f16_1');
    expect(id).toContain(entry.quantization);
    expect(entry.params).toBeGreaterThan(1e8);
    expect(entry.label.length).toBeGreaterThan(0);
  });

  it('pairs each f16 build with its f32 twin and back', () => {
    expect(precisionTwin('Qwen3-0.6B-q4f16_1-MLC')?.id).toBe('Qwen3-0.6B-q4f32_1-MLC');
    expect(precisionTwin('Qwen3-0.6B-q4f32_1-MLC')?.id).toBe('Qwen3-0.6B-q4f16_1-MLC');
    expect(precisionTwin('Llama-3.1-8B-Instruct-q4f16_1-MLC')).toBeUndefined();
    for (const e of WEBLLM_CATALOG) expect(precisionTwin(e.id)).toBeDefined();
  });

  it('formats parameter counts', () => {
    expect(formatParams(362e6)).toBe('362M');
    expect(formatParams(1.54e9)).toBe('1.54B');
    expect(formatParams(0.6e9)).toBe('600M');
    expect(formatParams(3.82e9)).toBe('3.82B');
  });

  it('loads the Qwen and Llama 3.2 records with an 8,192-token window and counts its KV cache', () => {
    const window = (id: string) => findCatalogEntry(id)!.contextWindow;
    for (const e of WEBLLM_CATALOG) expect(e.contextWindow, e.id).toBe(/^(Qwen|Llama-3\.2)/.test(e.id) ? 8192 : 4096);
    expect(window('Phi-3.5-mini-instruct-q4f16_1-MLC')).toBe(4096); // no GQA: +1.5 GiB per 4k tokens
    // Qwen2.5-1.5B: 28 layers x 2 x 2 KV heads x 128 dims x 2 bytes = 28 KiB per token; 4096 more tokens = 112 MiB
    expect(findCatalogEntry('Qwen2.5-1.5B-Instruct-q4f16_1-MLC')!.vramRequiredMB).toBeCloseTo(1629.75 + 112, 6);
    expect(findCatalogEntry('Qwen2.5-1.5B-Instruct-q4f32_1-MLC')!.vramRequiredMB).toBeCloseTo(1888.97 + 224, 6); // f32 cache
    // Qwen3-0.6B: 28 x 2 x 8 x 128 x 2 = 112 KiB per token: 448 MiB more
    expect(findCatalogEntry('Qwen3-0.6B-q4f16_1-MLC')!.vramRequiredMB).toBeCloseTo(1403.34 + 448, 6);
  });

  it('suggests smaller models of a precision the adapter can run', () => {
    expect(smallerModels('Qwen2.5-1.5B-Instruct-q4f32_1-MLC').map((e) => e.id)).toEqual([
      'Llama-3.2-1B-Instruct-q4f32_1-MLC',
      'Qwen2.5-0.5B-Instruct-q4f32_1-MLC',
    ]);
    // an f16 model failed, so the adapter has shader-f16: the (smaller) f16 builds are suggested;
    // the 1.5B instruct and coder builds need the same VRAM and count once
    expect(smallerModels('Phi-3.5-mini-instruct-q4f16_1-MLC').map((e) => e.id)).toEqual([
      'Qwen3-0.6B-q4f16_1-MLC',
      'Qwen2.5-1.5B-Instruct-q4f16_1-MLC',
    ]);
    // Llama 1B f32 at 8k (1385 MB): Qwen2.5-0.5B f32 (1156 MB) is clearly smaller
    expect(smallerModels('Llama-3.2-1B-Instruct-q4f32_1-MLC').map((e) => e.id)).toEqual([
      'Qwen2.5-0.5B-Instruct-q4f32_1-MLC',
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
    ]);
    expect(smallerModels('SmolLM2-360M-Instruct-q4f16_1-MLC')).toEqual([]);
    expect(smallerModels('my-custom-model').map((e) => e.id)).toEqual([
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
      'Qwen2.5-0.5B-Instruct-q4f32_1-MLC',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('feasibility', () => {
  const f16 = findCatalogEntry('Qwen2.5-1.5B-Instruct-q4f16_1-MLC')!;
  const f32 = findCatalogEntry('Qwen2.5-1.5B-Instruct-q4f32_1-MLC')!;

  it('runs everything on a capable adapter', () => {
    expect(assessFeasibility(f16, gpu())).toEqual({ ok: true, reasons: [], warnings: [] });
    expect(filterCatalog(gpu())).toHaveLength(WEBLLM_CATALOG.length);
  });

  it('rules out f16 builds without shader-f16 and names the f32 twin', () => {
    const r = assessFeasibility(f16, gpu({ shaderF16: false }));
    expect(r.ok).toBe(false);
    expect(r.reasons).toEqual([
      'Qwen2.5-1.5B-Instruct-q4f16_1-MLC needs the shader-f16 GPU feature, which this adapter lacks; use Qwen2.5-1.5B-Instruct-q4f32_1-MLC instead.',
    ]);
    expect(assessFeasibility(f32, gpu({ shaderF16: false })).ok).toBe(true);
    const kept = filterCatalog(gpu({ shaderF16: false }));
    expect(kept).toHaveLength(7);
    expect(kept.every((e) => e.quantization === 'q4f32_1')).toBe(true);
  });

  it('reports every limit below what web-llm asks for', () => {
    const tiny = gpu({
      limits: {
        maxBufferSize: 128 * MiB,
        maxStorageBufferBindingSize: 64 * MiB,
        maxComputeWorkgroupStorageSize: 16384,
      },
    });
    expect(assessFeasibility(f32, tiny).reasons).toEqual([
      "This adapter's maxBufferSize is 128 MB; WebLLM needs at least 256 MB.",
      "This adapter's maxStorageBufferBindingSize is 64 MB; Qwen2.5-1.5B-Instruct-q4f32_1-MLC needs at least 128 MB.",
      "This adapter's maxComputeWorkgroupStorageSize is 16384 bytes; WebLLM needs at least 32768.",
    ]);
    expect(filterCatalog(tiny)).toEqual([]);
    // WebGPU's default limits (256 MB buffers, 128 MB bindings) are enough for the catalog
    const defaults = gpu({ limits: { maxBufferSize: 256 * MiB, maxStorageBufferBindingSize: 128 * MiB } });
    expect(filterCatalog(defaults)).toHaveLength(WEBLLM_CATALOG.length);
  });

  it("checks a record's own binding-size requirement", () => {
    const big = { id: 'big-model', vramRequiredMB: 100, needsShaderF16: false, bufferSizeRequiredBytes: 262144000 };
    expect(assessFeasibility(big, gpu({ limits: { maxStorageBufferBindingSize: 128 * MiB } })).reasons).toEqual([
      "This adapter's maxStorageBufferBindingSize is 128 MB; big-model needs at least 250 MB.",
    ]);
  });

  it('compares VRAM needs with the user budget', () => {
    const r = assessFeasibility(f32, gpu(), { vramBudgetMB: 1500 });
    expect(r.reasons).toEqual([
      'Qwen2.5-1.5B-Instruct-q4f32_1-MLC needs about 2113 MB of GPU memory, more than the 1500 MB budget.',
    ]);
    expect(filterCatalog(gpu(), { vramBudgetMB: 1010 }).map((e) => e.id)).toEqual([
      'SmolLM2-360M-Instruct-q4f16_1-MLC',
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
      'Qwen2.5-0.5B-Instruct-q4f16_1-MLC',
      'Llama-3.2-1B-Instruct-q4f16_1-MLC',
    ]);
    expect(filterCatalog(gpu({ shaderF16: false }), { vramBudgetMB: 600 }).map((e) => e.id)).toEqual([
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
    ]);
  });

  it('warns about a software adapter without ruling models out', () => {
    const r = assessFeasibility(f32, gpu({ isFallback: true }));
    expect(r.ok).toBe(true);
    expect(r.warnings).toEqual(['This is a software (fallback) adapter: models will run, but very slowly.']);
  });

  it('assesses the whole catalog in order', () => {
    const all = assessCatalog(gpu({ shaderF16: false }));
    expect(all.map((a) => a.entry.id)).toEqual(WEBLLM_CATALOG.map((e) => e.id));
    expect(all.filter((a) => !a.feasibility.ok)).toHaveLength(7);
  });
});

describe('default WebLLM model', () => {
  it('is Qwen2.5 1.5B in f16 where the adapter has shader-f16, its q4f32 twin where it lacks it, the smallest on a software adapter', () => {
    expect(defaultWebLlmModel(gpu())).toBe('Qwen2.5-1.5B-Instruct-q4f16_1-MLC');
    // a software adapter (SwiftShader) gets the smallest model that runs: each token costs CPU time
    const swiftshader = gpu({ shaderF16: false, isFallback: true });
    const id = defaultWebLlmModel(swiftshader, { vramBudgetMB: 4096 });
    expect(id).toBe('SmolLM2-360M-Instruct-q4f32_1-MLC');
    expect(assessFeasibility(findCatalogEntry(id)!, swiftshader, { vramBudgetMB: 4096 }).ok).toBe(true);
  });

  it('reads one table: every preferred model exists in both builds, and the roles share one source', () => {
    for (const [cls, d] of Object.entries(DEFAULT_MODELS)) {
      expect(d.why.length, cls).toBeGreaterThan(20);
      expect(new Set(Object.values(d.roles)).size, cls).toBe(1);
      for (const base of d.preference)
        for (const b of ['q4f16_1', 'q4f32_1'])
          expect(findCatalogEntry(`${base}-${b}-MLC`), `${base} ${b}`).toBeDefined();
    }
    expect(defaultWebLlmModel(null)).toBe(`${DEFAULT_MODELS.unknown.preference[0]}-q4f32_1-MLC`);
  });

  it('steps down to the largest preferred model within the VRAM budget, never an f16 build without shader-f16', () => {
    const noF16 = gpu({ shaderF16: false });
    expect(defaultWebLlmModel(noF16, { vramBudgetMB: 1500 })).toBe('Llama-3.2-1B-Instruct-q4f32_1-MLC'); // 1385 MB
    expect(defaultWebLlmModel(noF16, { vramBudgetMB: 1200 })).toBe('Qwen2.5-0.5B-Instruct-q4f32_1-MLC'); // 1156 MB
    expect(defaultWebLlmModel(noF16, { vramBudgetMB: 600 })).toBe('SmolLM2-360M-Instruct-q4f32_1-MLC'); // 580 MB
    // with shader-f16 the smaller f16 build of the first choice fits where its f32 twin would not
    expect(defaultWebLlmModel(gpu(), { vramBudgetMB: 1800 })).toBe('Qwen2.5-1.5B-Instruct-q4f16_1-MLC'); // 1742 MB
    for (const budget of [600, 1000, 1200, 1500, 2000, 4096, 16384]) {
      const id = defaultWebLlmModel(noF16, { vramBudgetMB: budget });
      expect(id, `budget ${budget}`).toContain('q4f32_1');
      expect(assessFeasibility(findCatalogEntry(id)!, noF16, { vramBudgetMB: budget }).ok, `budget ${budget}`).toBe(
        true,
      );
    }
  });

  it('falls back to builds that run anywhere when nothing is known or nothing fits', () => {
    expect(defaultWebLlmModel(null)).toBe('Qwen2.5-1.5B-Instruct-q4f32_1-MLC');
    expect(defaultWebLlmModel(gpu({ shaderF16: false }), { vramBudgetMB: 300 })).toBe(
      'SmolLM2-360M-Instruct-q4f32_1-MLC',
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe('custom model records', () => {
  const good = {
    model_id: 'MyLlama-q4f32_1-MLC',
    model: 'https://huggingface.co/me/MyLlama-q4f32_1-MLC',
    model_lib: 'https://example.org/libs/MyLlama-q4f32_1-webgpu.wasm',
  };

  it('accepts a minimal record and normalizes URLs', () => {
    expect(validateCustomModel(good)).toEqual({ ok: true, value: good });
    const local = validateCustomModel({
      model_id: 'dev',
      model: 'http://localhost:8000/weights/',
      model_lib: 'http://127.0.0.1:8000/lib.wasm',
      vram_required_MB: 900,
      context_window: 2048,
      needs_f16: true,
    });
    expect(local).toEqual({
      ok: true,
      value: {
        model_id: 'dev',
        model: 'http://localhost:8000/weights/',
        model_lib: 'http://127.0.0.1:8000/lib.wasm',
        vram_required_MB: 900,
        context_window: 2048,
        needs_f16: true,
      },
    });
  });

  const cases: [string, unknown, string[]][] = [
    ['not an object', 'x', ['A custom model must be an object with model_id, model and model_lib.']],
    ['an array', [], ['A custom model must be an object with model_id, model and model_lib.']],
    ['empty', {}, ['model_id is required.', 'model is required.', 'model_lib is required.']],
    ['bad id', { ...good, model_id: 'my model/1' }, ["model_id must be 1-128 letters, digits, '.', '_' or '-'."]],
    ['long id', { ...good, model_id: 'a'.repeat(129) }, ["model_id must be 1-128 letters, digits, '.', '_' or '-'."]],
    [
      'catalog id',
      { ...good, model_id: 'Qwen3-0.6B-q4f16_1-MLC' },
      ['model_id "Qwen3-0.6B-q4f16_1-MLC" is already a catalog model; pick another name.'],
    ],
    ['not a URL', { ...good, model: 'huggingface.co/me/x' }, ['model is not a valid URL.']],
    [
      'plain http',
      { ...good, model: 'http://example.org/w' },
      ['model must be an https:// URL (http:// is allowed only for localhost).'],
    ],
    [
      'file URL',
      { ...good, model_lib: 'file:///tmp/lib.wasm' },
      ['model_lib must be an https:// URL (http:// is allowed only for localhost).'],
    ],
    [
      'credentials',
      { ...good, model: 'https://me:secret@example.org/w' },
      ['model must not contain a user name or password.'],
    ],
    ['not wasm', { ...good, model_lib: 'https://example.org/lib.js' }, ['model_lib must point to a .wasm file.']],
    [
      'bad vram',
      { ...good, vram_required_MB: -1 },
      ['vram_required_MB must be a number of megabytes above 0 and at most 65536.'],
    ],
    [
      'vram as text',
      { ...good, vram_required_MB: '900' },
      ['vram_required_MB must be a number of megabytes above 0 and at most 65536.'],
    ],
    [
      'bad context',
      { ...good, context_window: 100.5 },
      ['context_window must be a whole number of tokens from 256 to 131072.'],
    ],
    ['bad f16', { ...good, needs_f16: 'yes' }, ['needs_f16 must be true or false.']],
    ['unknown field', { ...good, modelLib: 'x' }, ['Unknown field "modelLib".']],
  ];
  it.each(cases)('rejects %s with exact messages', (_name, input, errors) => {
    expect(validateCustomModel(input)).toEqual({ ok: false, errors });
  });

  it('becomes a web-llm ModelRecord and a feasibility input', () => {
    const v = validateCustomModel({ ...good, vram_required_MB: 700, context_window: 2048, needs_f16: true });
    if (!v.ok) throw new Error('expected a valid record');
    expect(customToModelRecord(v.value)).toEqual({
      model_id: good.model_id,
      model: good.model,
      model_lib: good.model_lib,
      vram_required_MB: 700,
      overrides: { context_window_size: 2048 },
      required_features: ['shader-f16'],
    });
    const input = customFeasibilityInput(v.value);
    expect(assessFeasibility(input, gpu({ shaderF16: false })).reasons).toEqual([
      'MyLlama-q4f32_1-MLC needs the shader-f16 GPU feature, which this adapter lacks; use a q4f32_1 model instead.',
    ]);
    const appConfig = buildAppConfig([v.value]);
    expect(appConfig.model_list.at(-1)?.model_id).toBe(good.model_id);
    expect(appConfig.model_list.length).toBe(prebuiltAppConfig.model_list.length + 1);
  });
});

// ---------------------------------------------------------------------------------------------

describe('error mapping', () => {
  // Errors cross web-llm's worker as err.toString(); these are web-llm 0.2.86's own texts.
  const WEBLLM = {
    deviceLost:
      'DeviceLostError: The WebGPU device was lost while loading the model. This issue often occurs due to running out of memory (OOM). To resolve this, try reloading with a model that has fewer parameters or uses a smaller context length.',
    f16: 'ShaderF16SupportError: This model requires WebGPU extension shader-f16, which is not enabled in this browser. You can try to launch Chrome Canary in command line with flag "--enable-dawn-features=allow_unsafe_apis".',
    noWebGpu:
      "WebGPUNotAvailableError: WebGPU is not supported in your current environment, but it is necessary to run the WebLLM engine. Please make sure that your browser supports WebGPU and that it is enabled in your browser settings. You can also consult your browser's compatibility chart to see if it supports WebGPU. For more information about WebGPU support in your browser, visit https://webgpureport.org/",
    limits:
      'Error: Cannot initialize runtime because of requested maxStorageBufferBindingSize exceeds limit. requested=128MB, limit=64MB. ',
    notFound:
      'ModelNotFoundError: Cannot find model record in appConfig for Foo-MLC. Please check if the model ID is correct and included in the model_list configuration.',
    quotaStore:
      'Error: Failed to store https://huggingface.co/x/resolve/main/params_shard_3.bin with error: QuotaExceededError: The quota has been exceeded.',
    fetch: 'TypeError: Failed to fetch',
    cacheFetch: 'Error: Cannot fetch https://huggingface.co/x/resolve/main/mlc-chat-config.json',
    context:
      'ContextWindowSizeExceededError: Prompt tokens exceed context window size: number of prompt tokens: 5000; context window size: 4096\nConsider shortening the prompt, or increase `context_window_size`, or using sliding window via `sliding_window_size`.',
    notLoaded:
      'WorkerEngineModelNotLoadedError: WebWorkerMLCEngine is not loaded with a model. Did you call `engine.reload()`?',
    seed: 'SeedTypeError: `seed` should be an integer, but got 1.5',
    integrity: 'IntegrityError: Integrity check failed for https://x/params_shard_0.bin',
  };

  it('reads name and message from strings, Errors and plain objects', () => {
    expect(describeThrown(WEBLLM.seed)).toEqual({
      name: 'SeedTypeError',
      message: '`seed` should be an integer, but got 1.5',
    });
    expect(describeThrown('plain text')).toEqual({ name: 'Error', message: 'plain text' });
    expect(describeThrown(new TypeError('boom'))).toEqual({ name: 'TypeError', message: 'boom' });
    expect(describeThrown({ name: 'QuotaExceededError', message: 'full' })).toEqual({
      name: 'QuotaExceededError',
      message: 'full',
    });
    expect(describeThrown(42)).toEqual({ name: 'Error', message: '42' });
  });

  const categories: [string, unknown, WebLlmErrorCategory][] = [
    ['device lost (web-llm)', WEBLLM.deviceLost, 'device_lost'],
    ['device lost (GPU message)', new Error('GPUDevice was lost: the device is lost'), 'device_lost'],
    ['shader-f16', WEBLLM.f16, 'shader_f16'],
    ['no WebGPU', WEBLLM.noWebGpu, 'webgpu_unavailable'],
    ['small limits', WEBLLM.limits, 'gpu_limits'],
    ['quota while storing', WEBLLM.quotaStore, 'quota'],
    ['quota DOMException', new DOMException('The quota has been exceeded.', 'QuotaExceededError'), 'quota'],
    ['out of memory', new Error('GPUOutOfMemoryError: Failed to allocate buffer'), 'out_of_memory'],
    ['model not found', WEBLLM.notFound, 'model_not_found'],
    ['network', WEBLLM.fetch, 'network'],
    ['cache fetch', WEBLLM.cacheFetch, 'network'],
    ['integrity', WEBLLM.integrity, 'integrity'],
    ['context window', WEBLLM.context, 'context_window'],
    ['not loaded', WEBLLM.notLoaded, 'not_loaded'],
    ['bad request', WEBLLM.seed, 'bad_request'],
    ['anything else', new Error('something odd'), 'unknown'],
  ];
  it.each(categories)('classifies %s', (_n, err, cat) => {
    expect(classifyWebLlmError(err)).toBe(cat);
  });

  it('device lost while loading: DeviceLostError suggesting smaller models', () => {
    const e = mapWebLlmError(WEBLLM.deviceLost, { phase: 'load', modelId: 'Qwen2.5-1.5B-Instruct-q4f16_1-MLC' });
    expect(e).toBeInstanceOf(DeviceLostError);
    expect(e.message).toBe(
      'The GPU device was lost while loading Qwen2.5-1.5B-Instruct-q4f16_1-MLC, usually because it ran out of GPU memory. Reload the page and pick a smaller model such as Llama-3.2-1B-Instruct-q4f16_1-MLC (~1007 MB) or Qwen2.5-0.5B-Instruct-q4f16_1-MLC (~993 MB).',
    );
    expect(e.data).toMatchObject({
      category: 'device_lost',
      phase: 'load',
      modelId: 'Qwen2.5-1.5B-Instruct-q4f16_1-MLC',
    });
  });

  it('device lost while generating: DeviceLostError saying to load again', () => {
    const e = mapWebLlmError('DeviceLostError: GPU hung', {
      phase: 'chat',
      modelId: 'Llama-3.2-1B-Instruct-q4f32_1-MLC',
    });
    expect(e).toBeInstanceOf(DeviceLostError);
    expect(e.message).toBe(
      'The GPU device was lost while Llama-3.2-1B-Instruct-q4f32_1-MLC was generating (driver reset, tab in the background, or out of memory). Load the model again to continue; if it happens again, pick a smaller model such as Qwen2.5-0.5B-Instruct-q4f32_1-MLC (~1156 MB) or SmolLM2-360M-Instruct-q4f32_1-MLC (~580 MB).',
    );
  });

  it('shader-f16 missing: ModelLoadError naming the f32 twin', () => {
    const e = mapWebLlmError(WEBLLM.f16, { phase: 'load', modelId: 'SmolLM2-360M-Instruct-q4f16_1-MLC' });
    expect(e).toBeInstanceOf(ModelLoadError);
    expect(e.message).toBe(
      'SmolLM2-360M-Instruct-q4f16_1-MLC needs the WebGPU shader-f16 feature, which this browser or GPU does not offer. Pick SmolLM2-360M-Instruct-q4f32_1-MLC instead (same model, f32 kernels).',
    );
  });

  it('no WebGPU: WebGpuUnavailableError', () => {
    const e = mapWebLlmError(WEBLLM.noWebGpu, { phase: 'load', modelId: 'x' });
    expect(e).toBeInstanceOf(WebGpuUnavailableError);
    expect(e.message).toMatch(/^WebGPU is not available, so WebLLM cannot run here\. .*OpenAI-compatible server/);
  });

  it('limits, quota, memory, not found, network, integrity: ModelLoadError with advice', () => {
    const id = 'Qwen3-0.6B-q4f32_1-MLC';
    const limits = mapWebLlmError(WEBLLM.limits, { phase: 'load', modelId: id });
    expect(limits).toBeInstanceOf(ModelLoadError);
    expect(limits.message).toBe(
      "This GPU's WebGPU limits are too small to run Qwen3-0.6B-q4f32_1-MLC: Cannot initialize runtime because of requested maxStorageBufferBindingSize exceeds limit. requested=128MB, limit=64MB. Try another browser or GPU, or use an OpenAI-compatible server.",
    );
    const quota = mapWebLlmError(WEBLLM.quotaStore, { phase: 'load', modelId: id });
    expect(quota).toBeInstanceOf(ModelLoadError);
    expect(quota.message).toBe(
      "Browser storage is full (the site's cache quota), so Qwen3-0.6B-q4f32_1-MLC could not be cached. Delete cached models you no longer use, free disk space, or pick a smaller model such as Qwen2.5-1.5B-Instruct-q4f32_1-MLC (~2113 MB) or Llama-3.2-1B-Instruct-q4f32_1-MLC (~1385 MB).",
    );
    const oom = mapWebLlmError(new Error('Out of memory'), { phase: 'load', modelId: id });
    expect(oom).toBeInstanceOf(ModelLoadError);
    expect(oom.message).toMatch(
      /^Not enough GPU memory to load Qwen3-0\.6B-q4f32_1-MLC \(needs about 2821 MB\)\. Close other GPU-heavy tabs or pick a smaller model such as /,
    );
    const nf = mapWebLlmError(WEBLLM.notFound, { phase: 'load', modelId: 'Foo-MLC' });
    expect(nf).toBeInstanceOf(ModelLoadError);
    expect(nf.message).toBe(
      'WebLLM has no model called Foo-MLC. Pick one from the catalog, or add it as a custom model with its weights and model_lib URLs.',
    );
    const net = mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: id });
    expect(net).toBeInstanceOf(ModelLoadError);
    expect(net.message).toBe(
      'Downloading Qwen3-0.6B-q4f32_1-MLC failed on the network: Failed to fetch. Check your connection and try again: finished shards stay in the browser cache, so the download resumes. For a custom model, check that its URLs are right.',
    );
    const integ = mapWebLlmError(WEBLLM.integrity, { phase: 'load', modelId: id });
    expect(integ).toBeInstanceOf(ModelLoadError);
    expect(integ.message).toMatch(/Delete the cached copy of Qwen3-0\.6B-q4f32_1-MLC and download it again\.$/);
  });

  it('chat-time failures: ModelCallError', () => {
    const id = 'Qwen2.5-0.5B-Instruct-q4f16_1-MLC';
    const ctx = mapWebLlmError(WEBLLM.context, { phase: 'chat', modelId: id });
    expect(ctx).toBeInstanceOf(ModelCallError);
    expect(ctx.message).toBe(
      "The conversation does not fit Qwen2.5-0.5B-Instruct-q4f16_1-MLC's context window of 8192 tokens. Shorten the prompt (fewer documents or memory items) or lower max_tokens.",
    );
    const oom = mapWebLlmError(new Error('out of memory'), { phase: 'chat', modelId: id });
    expect(oom).toBeInstanceOf(ModelCallError);
    expect(oom.message).toMatch(/ran out of memory while generating\. Shorten the prompt or lower max_tokens, or pick/);
    expect(mapWebLlmError(WEBLLM.notLoaded, { phase: 'chat', modelId: id }).message).toBe(
      'No WebLLM model is loaded. Load Qwen2.5-0.5B-Instruct-q4f16_1-MLC before chatting.',
    );
    const bad = mapWebLlmError(WEBLLM.seed, { phase: 'chat', modelId: id });
    expect(bad).toBeInstanceOf(ModelCallError);
    expect(bad.message).toBe('WebLLM rejected the request: `seed` should be an integer, but got 1.5.');
    const other = mapWebLlmError(new Error('something odd'), { phase: 'chat', modelId: id });
    expect(other).toBeInstanceOf(ModelCallError);
    expect(other.message).toBe('Qwen2.5-0.5B-Instruct-q4f16_1-MLC failed while generating: something odd.');
    const otherLoad = mapWebLlmError('weird', { phase: 'load', modelId: id });
    expect(otherLoad).toBeInstanceOf(ModelLoadError);
    expect(otherLoad.message).toMatch(/^Loading Qwen2\.5-0\.5B-Instruct-q4f16_1-MLC failed: weird\. Reload the page/);
  });

  it('says whom to blame: the network, the cache quota or the adapter', () => {
    const id = 'Qwen2.5-1.5B-Instruct-q4f32_1-MLC';
    expect(mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: id }).data).toMatchObject({
      category: 'network',
      blame: 'network',
    });
    expect(mapWebLlmError(WEBLLM.quotaStore, { phase: 'load', modelId: id }).data).toMatchObject({
      category: 'quota',
      blame: 'storage',
    });
    expect(mapWebLlmError(WEBLLM.limits, { phase: 'load', modelId: id }).data.blame).toBe('adapter');
    expect(mapWebLlmError(WEBLLM.f16, { phase: 'load', modelId: id }).data.blame).toBe('adapter');
    expect(blameOf('out_of_memory')).toBe('adapter');
    expect(blameOf('integrity')).toBe('network');
    expect(blameOf('model_not_found')).toBe('model');
    expect(blameOf('unknown')).toBe('other');
  });

  it('blames the adapter, not the network, when an f16 build fails on an adapter without shader-f16', () => {
    // offline SwiftShader: the download fails first, but the build could never have run here
    const id = 'SmolLM2-360M-Instruct-q4f16_1-MLC';
    const e = mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: id, adapterHasShaderF16: false });
    expect(e).toBeInstanceOf(ModelLoadError);
    expect(e.message).toBe(
      'SmolLM2-360M-Instruct-q4f16_1-MLC needs the WebGPU shader-f16 feature, which this browser or GPU does not offer. Pick SmolLM2-360M-Instruct-q4f32_1-MLC instead (same model, f32 kernels).',
    );
    expect(e.data).toMatchObject({ category: 'shader_f16', blame: 'adapter', cause: 'TypeError: Failed to fetch' });
    // the same failure of an f32 build, or on an adapter with shader-f16, is the network's
    const f32 = 'SmolLM2-360M-Instruct-q4f32_1-MLC';
    expect(mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: f32, adapterHasShaderF16: false }).data.blame).toBe(
      'network',
    );
    expect(mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: id, adapterHasShaderF16: true }).data.blame).toBe(
      'network',
    );
    // a custom f16 record (not in the catalog) is judged by its id
    expect(
      mapWebLlmError(WEBLLM.fetch, { phase: 'load', modelId: 'My-Model-q4f16_1-MLC', adapterHasShaderF16: false }).data
        .category,
    ).toBe('shader_f16');
  });

  it('passes SpadeErrors through and survives a worker boundary', () => {
    const own = new ModelCallError('already mapped');
    expect(mapWebLlmError(own, { phase: 'chat' })).toBe(own);
    const mapped = mapWebLlmError(WEBLLM.f16, { phase: 'load', modelId: 'Qwen3-0.6B-q4f16_1-MLC' });
    const back = deserializeError(serializeError(mapped));
    expect(back).toBeInstanceOf(ModelLoadError);
    expect(back).toBeInstanceOf(SpadeError);
    expect((back as SpadeError).data).toEqual(mapped.data);
  });
});

// ---------------------------------------------------------------------------------------------

describe('download progress', () => {
  const t0 = 1_000_000;

  it('reads bytes from a fetch report and estimates total and ETA', () => {
    const p = formatDownloadProgress(
      {
        progress: 0.25,
        timeElapsed: 10,
        text: 'Fetching param cache[6/24]: 200MB fetched. 25% completed, 10 secs elapsed. It can take a while when we first visit this page to populate the cache. Later refreshes will become faster.',
      },
      t0,
      t0 + 10_000,
    );
    expect(p).toMatchObject({
      percent: 25,
      stage: 'fetching',
      bytesLoaded: 200 * MiB,
      bytesTotal: 800 * MiB,
      etaSeconds: 30,
      elapsedSeconds: 10,
    });
  });

  it('prefers the caller total and fills bytes from progress when the text has none', () => {
    const p = formatDownloadProgress(
      { progress: 0.5, timeElapsed: 0, text: 'Start to fetch params' },
      t0,
      t0 + 4000,
      1000,
    );
    expect(p).toEqual({
      percent: 50,
      stage: 'fetching',
      text: 'Start to fetch params',
      bytesLoaded: 500,
      bytesTotal: 1000,
      etaSeconds: 4,
      elapsedSeconds: 4,
    });
  });

  it('names the cache-load, shader and done stages', () => {
    const load = formatDownloadProgress(
      {
        progress: 0.5,
        timeElapsed: 1,
        text: 'Loading model from cache[12/24]: 300MB loaded. 50% completed, 1 secs elapsed.',
      },
      t0,
      t0 + 2000,
    );
    expect(load).toMatchObject({ stage: 'loading', percent: 50, bytesLoaded: 300 * MiB, etaSeconds: 2 });
    const shaders = formatDownloadProgress(
      { progress: 0.4, timeElapsed: 3, text: 'Loading GPU shader modules[40/100]: 40% completed, 3 secs elapsed.' },
      t0,
      t0 + 3000,
    );
    expect(shaders.stage).toBe('shaders');
    expect(shaders.percent).toBe(40);
    expect(shaders.etaSeconds).toBeUndefined();
    expect(shaders.bytesLoaded).toBeUndefined();
    const done = formatDownloadProgress(
      { progress: 1, timeElapsed: 9, text: 'Finish loading on WebGPU - nvidia' },
      t0,
      t0 + 9000,
    );
    expect(done).toMatchObject({ stage: 'done', percent: 100 });
    expect(done.etaSeconds).toBeUndefined();
  });

  it('clamps odd input and never divides by zero', () => {
    const start = formatDownloadProgress({ progress: 0, timeElapsed: 0, text: '' }, t0, t0);
    expect(start).toEqual({ percent: 0, stage: 'preparing', text: '', elapsedSeconds: 0 });
    expect(formatDownloadProgress({ progress: 1.7, timeElapsed: 0, text: 'x' }, t0, t0).percent).toBe(100);
    expect(formatDownloadProgress({ progress: Number.NaN, timeElapsed: 0, text: 'x' }, t0, t0).percent).toBe(0);
    expect(formatDownloadProgress({ progress: -1, timeElapsed: 0, text: 'x' }, t0, t0 - 50).elapsedSeconds).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// The ChatModel over a fake worker that answers web-llm's client protocol (no GPU, no weights).

type Msg = { kind: string; uuid: string; content: unknown };

interface FakeScript {
  reloadError?: string;
  /** Never answer reload (for cancel tests). */
  reloadHangs?: boolean;
  tokens?: string[];
  /** Post a device-lost message after this many streamed chunks, then go silent. */
  loseDeviceAfter?: number;
  /** Delay per decoded chunk, ms. */
  chunkMs?: number;
}

class FakeLlmWorker implements LlmWorkerLike {
  onmessage: ((ev: MessageEvent) => void) | null = null;
  onerror: ((ev: ErrorEvent) => void) | null = null;
  terminated = false;
  kinds: string[] = [];
  requests: Record<string, unknown>[] = [];
  /** The content of each reload message: {modelId: string[], chatOpts?: object[]}. */
  reloads: unknown[] = [];
  private interrupted = false;
  private streams = new Map<string, { i: number; phase: 'tokens' | 'final' | 'usage' | 'end'; finish?: string }>();
  private silent = false;

  constructor(private readonly script: FakeScript = {}) {}

  postMessage(message: unknown): void {
    const msg = message as Msg;
    this.kinds.push(msg.kind);
    setTimeout(() => void this.handle(msg), 0);
  }

  terminate(): void {
    this.terminated = true;
  }

  private emit(data: unknown): void {
    if (!this.terminated && !this.silent) this.onmessage?.(new MessageEvent('message', { data }));
  }

  private reply(uuid: string, content: unknown): void {
    this.emit({ kind: 'return', uuid, content });
  }

  private async handle(msg: Msg): Promise<void> {
    const tokens = this.script.tokens ?? ['Hel', 'lo', ' world'];
    switch (msg.kind) {
      case 'setAppConfig':
      case 'setLogLevel':
        return;
      case 'reload': {
        this.reloads.push(msg.content);
        this.emit({
          kind: 'initProgressCallback',
          uuid: '',
          content: { progress: 0, timeElapsed: 0, text: 'Start to fetch params' },
        });
        this.emit({
          kind: 'initProgressCallback',
          uuid: '',
          content: {
            progress: 0.5,
            timeElapsed: 1,
            text: 'Fetching param cache[1/2]: 100MB fetched. 50% completed, 1 secs elapsed.',
          },
        });
        if (this.script.reloadHangs) return;
        if (this.script.reloadError) {
          this.emit({ kind: 'throw', uuid: msg.uuid, content: this.script.reloadError });
          return;
        }
        this.emit({
          kind: 'initProgressCallback',
          uuid: '',
          content: { progress: 1, timeElapsed: 2, text: 'Finish loading on WebGPU - fake' },
        });
        this.reply(msg.uuid, null);
        return;
      }
      case 'interruptGenerate':
        this.interrupted = true;
        this.reply(msg.uuid, null);
        return;
      case 'unload':
        this.reply(msg.uuid, null);
        return;
      case 'chatCompletionStreamInit': {
        const c = msg.content as { request: Record<string, unknown>; streamId: string };
        this.requests.push(c.request);
        this.streams.set(c.streamId, { i: 0, phase: 'tokens' });
        this.interrupted = false; // web-llm resets the flag when a generation starts
        this.reply(msg.uuid, null);
        return;
      }
      case 'completionStreamNextChunk': {
        const { streamId } = msg.content as { streamId: string };
        const s = this.streams.get(streamId)!;
        await new Promise((r) => setTimeout(r, this.script.chunkMs ?? 1));
        if (this.script.loseDeviceAfter !== undefined && s.i >= this.script.loseDeviceAfter) {
          this.emit({ kind: 'spade:device-lost', reason: 'unknown', message: 'GPU hung' });
          this.silent = true;
          return;
        }
        const base = { id: 'c', model: 'm', object: 'chat.completion.chunk', created: 0 };
        if (s.phase === 'tokens') {
          if (this.interrupted) s.finish = 'abort';
          else if (s.i >= tokens.length) s.finish = 'stop';
          if (s.finish) {
            s.phase = 'usage';
            this.reply(msg.uuid, {
              ...base,
              choices: [
                { index: 0, delta: { content: '', role: 'assistant' }, finish_reason: s.finish, logprobs: null },
              ],
            });
            return;
          }
          const content = tokens[s.i++]!;
          this.reply(msg.uuid, {
            ...base,
            choices: [{ index: 0, delta: { content, role: 'assistant' }, finish_reason: null, logprobs: null }],
          });
          return;
        }
        if (s.phase === 'usage') {
          s.phase = 'end';
          this.reply(msg.uuid, {
            ...base,
            choices: [],
            usage: { prompt_tokens: 12, completion_tokens: s.i, total_tokens: 12 + s.i, extra: {} },
          });
          return;
        }
        this.streams.delete(streamId);
        this.reply(msg.uuid, undefined);
        return;
      }
      case 'completionStreamReturn':
        this.reply(msg.uuid, null);
        return;
      case 'chatCompletionNonStreaming': {
        const c = msg.content as { request: Record<string, unknown> };
        this.requests.push(c.request);
        this.reply(msg.uuid, {
          id: 'c',
          model: 'm',
          object: 'chat.completion',
          created: 0,
          choices: [
            {
              index: 0,
              finish_reason: 'length',
              message: { role: 'assistant', content: tokens.join('') },
              logprobs: c.request.logprobs
                ? {
                    content: tokens.map((t, i) => ({
                      token: t,
                      logprob: -0.5 * (i + 1),
                      bytes: null,
                      top_logprobs: [],
                    })),
                  }
                : null,
            },
          ],
          usage: { prompt_tokens: 7, completion_tokens: tokens.length, total_tokens: 7 + tokens.length, extra: {} },
        });
        return;
      }
      default:
        throw new Error(`fake worker: unexpected ${msg.kind}`);
    }
  }
}

const MODEL = 'Qwen2.5-0.5B-Instruct-q4f32_1-MLC';
const USER = [{ role: 'user' as const, content: 'hi' }];

describe('WebLlmChatModel over a fake worker', () => {
  it('loads with progress and declares its capabilities', async () => {
    const worker = new FakeLlmWorker();
    const seen: DownloadProgress[] = [];
    const model = await WebLlmChatModel.load(MODEL, (p) => seen.push(p), undefined, { createWorker: () => worker });
    expect(model.backend).toBe('webllm');
    expect(model.model).toBe(MODEL);
    expect(model.capabilities).toEqual({ streaming: true, logprobs: true, trainable: false, contextWindow: 8192 });
    expect(seen.map((p) => p.stage)).toEqual(['fetching', 'fetching', 'done']);
    expect(seen[1]).toMatchObject({ percent: 50, bytesLoaded: 100 * MiB, bytesTotal: 200 * MiB });
    await model.unload();
    expect(worker.kinds).toContain('unload');
    expect(worker.terminated).toBe(true);
  });

  it('streams tokens and maps usage and finish reason', async () => {
    const worker = new FakeLlmWorker({ tokens: ['a', 'b', 'c'] });
    const model = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => worker });
    const deltas: string[] = [];
    const r = await model.chat(USER, { onToken: (d) => deltas.push(d), temperature: 0.6, max_tokens: 50, seed: 3 });
    expect(deltas).toEqual(['a', 'b', 'c']);
    expect(r).toMatchObject({ text: 'abc', finishReason: 'stop', usage: { promptTokens: 12, completionTokens: 3 } });
    expect(r.ms).toBeGreaterThanOrEqual(0);
    expect(worker.requests[0]).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.6,
      max_tokens: 50,
      seed: 3,
    });
    await model.unload();
  });

  it('runs unstreamed for log-probs and returns them', async () => {
    const worker = new FakeLlmWorker({ tokens: ['x', 'y'] });
    const model = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => worker });
    const deltas: string[] = [];
    const r = await model.chat(USER, { logprobs: true, onToken: (d) => deltas.push(d) });
    expect(r.text).toBe('xy');
    expect(r.finishReason).toBe('length');
    expect(r.usage).toEqual({ promptTokens: 7, completionTokens: 2 });
    expect(r.logprobs).toEqual([
      { token: 'x', logprob: -0.5 },
      { token: 'y', logprob: -1 },
    ]);
    expect(deltas).toEqual(['xy']);
    expect(worker.requests[0]).toMatchObject({ stream: false, logprobs: true });
    await model.unload();
  });

  it('abort interrupts generation and returns the text so far', async () => {
    const worker = new FakeLlmWorker({ tokens: Array.from({ length: 200 }, () => 't'), chunkMs: 2 });
    const model = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => worker });
    const ctl = new AbortController();
    let n = 0;
    const r = await model.chat(USER, {
      signal: ctl.signal,
      onToken: () => {
        if (++n === 3) ctl.abort();
      },
    });
    expect(worker.kinds).toContain('interruptGenerate');
    expect(r.finishReason).toBe('abort');
    expect(r.text.length).toBeGreaterThanOrEqual(3);
    expect(r.text.length).toBeLessThan(200);
    // an already-aborted signal never reaches the worker
    const before = worker.requests.length;
    await expect(model.chat(USER, { signal: ctl.signal })).rejects.toMatchObject({ name: 'AbortError' });
    expect(worker.requests.length).toBe(before);
    await model.unload();
  });

  it('bounds each call: time-outs interrupt and fail with ModelCallError, a long reply is cut at maxReplyChars', async () => {
    const slow = new FakeLlmWorker({ tokens: ['a', 'b', 'c'], chunkMs: 300 });
    const m1 = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => slow });
    m1.limits = { callTimeoutMs: 60_000, idleTimeoutMs: 100, maxReplyChars: 1000 };
    const idle = await m1.chat(USER, { onToken: () => {} }).catch((e: unknown) => e);
    expect((idle as Error).name).toBe('ModelCallError');
    expect((idle as { data: unknown }).data).toMatchObject({ kind: 'timeout', timeout: 'idle' });
    expect(slow.kinds).toContain('interruptGenerate');
    await m1.unload();
    const long = new FakeLlmWorker({ tokens: Array.from({ length: 500 }, () => 't'), chunkMs: 5 });
    const m2 = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => long });
    m2.limits = { callTimeoutMs: 150, idleTimeoutMs: 60_000, maxReplyChars: 1000 };
    const total = await m2.chat(USER, { onToken: () => {} }).catch((e: unknown) => e);
    expect((total as { data: unknown }).data).toMatchObject({ kind: 'timeout', timeout: 'total' });
    m2.limits = { callTimeoutMs: 60_000, idleTimeoutMs: 60_000, maxReplyChars: 5 };
    const r = await m2.chat(USER, { onToken: () => {} });
    expect(r).toMatchObject({ text: 'ttttt', finishReason: 'length' });
    const unstreamed = await m2.chat(USER, { logprobs: true });
    expect(unstreamed).toMatchObject({ text: 'ttttt', finishReason: 'length' });
    await m2.unload();
  });

  it('device lost mid-generation surfaces as DeviceLostError, now and on later calls', async () => {
    const worker = new FakeLlmWorker({ tokens: ['a', 'b', 'c', 'd'], loseDeviceAfter: 2 });
    const model = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => worker });
    const lost: DeviceLostError[] = [];
    model.onDeviceLost((e) => lost.push(e));
    const err = await model.chat(USER, { onToken: () => {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeviceLostError);
    expect((err as DeviceLostError).message).toMatch(
      /^The GPU device was lost while Qwen2\.5-0\.5B-Instruct-q4f32_1-MLC was generating/,
    );
    expect((err as DeviceLostError).data).toMatchObject({ category: 'device_lost', reason: 'unknown', phase: 'chat' });
    expect(lost).toHaveLength(1);
    expect(model.lost).toBe(err);
    await expect(model.chat(USER)).rejects.toBe(err);
    await model.unload();
    expect(worker.terminated).toBe(true);
  });

  it('maps load failures and terminates the worker', async () => {
    const worker = new FakeLlmWorker({
      reloadError:
        'ShaderF16SupportError: This model requires WebGPU extension shader-f16, which is not enabled in this browser.',
    });
    const err = await WebLlmChatModel.load('Qwen3-0.6B-q4f16_1-MLC', undefined, undefined, {
      createWorker: () => worker,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as Error).message).toMatch(/Pick Qwen3-0\.6B-q4f32_1-MLC instead/);
    expect(worker.terminated).toBe(true);
  });

  it('cancels a load: the worker is terminated and the call rejects with AbortError', async () => {
    const worker = new FakeLlmWorker({ reloadHangs: true });
    const ctl = new AbortController();
    const seen: DownloadProgress[] = [];
    const p = WebLlmChatModel.load(
      MODEL,
      (prog) => {
        seen.push(prog);
        if (prog.percent === 50) ctl.abort();
      },
      ctl.signal,
      { createWorker: () => worker },
    );
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    expect(worker.terminated).toBe(true);
  });

  it('refuses an unknown model before starting a worker', async () => {
    let started = false;
    const err = await WebLlmChatModel.load('Nope-q4f16_1-MLC', undefined, undefined, {
      createWorker: () => {
        started = true;
        return new FakeLlmWorker();
      },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as Error).message).toMatch(/^WebLLM has no model called Nope-q4f16_1-MLC\./);
    expect(started).toBe(false);
  });

  it('creates the engine with the catalog window (chatOpts.context_window_size) where it is larger', async () => {
    const worker = new FakeLlmWorker();
    const model = await WebLlmChatModel.load(MODEL, undefined, undefined, { createWorker: () => worker });
    expect(worker.reloads).toEqual([{ modelId: [MODEL], chatOpts: [{ context_window_size: 8192 }] }]);
    expect(model.capabilities.contextWindow).toBe(8192);
    const small = new FakeLlmWorker();
    const smol = await WebLlmChatModel.load('SmolLM2-360M-Instruct-q4f32_1-MLC', undefined, undefined, {
      createWorker: () => small,
    });
    expect(small.reloads).toEqual([{ modelId: ['SmolLM2-360M-Instruct-q4f32_1-MLC'] }]); // the record's 4096
    expect(smol.capabilities.contextWindow).toBe(4096);
  });

  it('refuses an f16 build before any download when the adapter lacks shader-f16', async () => {
    let started = false;
    const err = await WebLlmChatModel.load('Qwen2.5-0.5B-Instruct-q4f16_1-MLC', undefined, undefined, {
      adapter: gpu({ shaderF16: false }),
      createWorker: () => {
        started = true;
        return new FakeLlmWorker();
      },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as ModelLoadError).message).toMatch(/Pick Qwen2\.5-0\.5B-Instruct-q4f32_1-MLC instead/);
    expect((err as ModelLoadError).data.blame).toBe('adapter');
    expect(started).toBe(false);
  });

  it('blames the adapter when an f16 load fails on an adapter without shader-f16 (custom record)', async () => {
    const worker = new FakeLlmWorker({ reloadError: 'TypeError: Failed to fetch' });
    const custom = {
      model_id: 'My-Model-q4f16_1-MLC',
      model: 'https://huggingface.co/me/My-Model-q4f16_1-MLC',
      model_lib: 'https://example.com/lib.wasm',
      vram_required_MB: 500,
    };
    const v = validateCustomModel(custom);
    if (!v.ok) throw new Error(v.errors.join('; '));
    const err = await WebLlmChatModel.load('My-Model-q4f16_1-MLC', undefined, undefined, {
      adapter: gpu({ shaderF16: false }),
      customModels: [v.value],
      createWorker: () => worker,
    }).catch((e: unknown) => e);
    expect((err as ModelLoadError).data).toMatchObject({ category: 'shader_f16', blame: 'adapter' });
  });

  it('turns Qwen3 thinking off with extra_body and strips think blocks from replies', async () => {
    const worker = new FakeLlmWorker({ tokens: ['<think>', 'draft \\boxed{wrong}', '</think>', '\n\n', 'Answer'] });
    const model = await WebLlmChatModel.load('Qwen3-0.6B-q4f32_1-MLC', undefined, undefined, {
      createWorker: () => worker,
    });
    const streamed: string[] = [];
    const r = await model.chat(USER, { onToken: (d) => streamed.push(d) });
    expect(r.text).toBe('Answer');
    expect(streamed.join('')).toContain('<think>'); // the live view shows everything
    expect(worker.requests[0]!.extra_body).toEqual({ enable_thinking: false });
    model.thinking = 'on';
    await model.chat(USER);
    expect(worker.requests[1]!.extra_body).toBeUndefined();
  });
});

describe('request building', () => {
  const tools = [{ type: 'function' as const, function: { name: 'lookup', description: 'find', parameters: {} } }];

  it('maps roles and drops tools for models without function calling', () => {
    const req = buildChatRequest(
      [
        { role: 'system', content: 's' },
        { role: 'user', content: 'u', name: 'ann' },
        { role: 'assistant', content: 'a' },
        { role: 'tool', content: 't', tool_call_id: '0' },
      ],
      { tools, stop: [], top_p: 0.9 },
      MODEL,
    );
    expect(req.messages).toEqual([
      { role: 'system', content: 's' },
      { role: 'user', content: 'u', name: 'ann' },
      { role: 'assistant', content: 'a' },
      { role: 'tool', content: 't', tool_call_id: '0' },
    ]);
    expect(req.tools).toBeUndefined();
    expect(req.stop).toBeUndefined();
    expect(req.stream).toBe(false);
    expect(req.top_p).toBe(0.9);
  });

  it('asks only Qwen3 models not to think, and only when thinking is off', () => {
    expect(buildChatRequest(USER, {}, 'Qwen3-0.6B-q4f16_1-MLC').extra_body).toEqual({ enable_thinking: false });
    expect(buildChatRequest(USER, {}, 'Qwen3-0.6B-q4f16_1-MLC', 'on').extra_body).toBeUndefined();
    // other templates would get an empty think block prefixed to the reply
    expect(buildChatRequest(USER, {}, 'Qwen2.5-1.5B-Instruct-q4f16_1-MLC').extra_body).toBeUndefined();
    expect(buildChatRequest(USER, {}, 'Llama-3.2-1B-Instruct-q4f16_1-MLC').extra_body).toBeUndefined();
  });

  it("passes tools to web-llm's function-calling models", () => {
    const id = functionCallingModelIds[0]!;
    expect(buildChatRequest(USER, { tools }, id).tools).toEqual(tools);
  });
});
