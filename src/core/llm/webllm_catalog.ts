/**
 * WebLLM catalog and the pure half of the webllm backend: which prebuilt models we offer, whether a
 * GPU can run them, custom model records, error mapping and download-progress formatting.
 *
 * Pure TypeScript (no DOM, no WebGPU); it imports only types from @mlc-ai/web-llm, so the numbers
 * below are copied from `prebuiltAppConfig.model_list` of web-llm 0.2.86. tests/unit/webllm.test.ts
 * checks every entry against that list, so a version bump that renames or drops a model fails there.
 * The browser half (worker, engine, cache) is src/platform/browser/webllm_model.ts.
 *
 *   npx vitest run tests/unit/webllm.test.ts
 */
import type { InitProgressReport, ModelRecord } from '@mlc-ai/web-llm';
import { DeviceLostError, ModelCallError, ModelLoadError, SpadeError, WebGpuUnavailableError } from '../errors.ts';

// ---------------------------------------------------------------------------------------------
// Catalog
// ---------------------------------------------------------------------------------------------

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

/** web-llm's runtime refuses to start below these limits (detectGPUDevice in web-llm 0.2.86). */
export const WEBLLM_MIN_LIMITS = {
  /** It asks for 1 GiB and falls back to 256 MiB. */
  maxBufferSize: 256 * 2 ** 20,
  /** It asks for 1 GiB and falls back to 128 MiB. */
  maxStorageBufferBindingSize: 128 * 2 ** 20,
  maxComputeWorkgroupStorageSize: 32 * 2 ** 10,
} as const;

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

function mb(bytes: number): string {
  return `${Math.round(bytes / 2 ** 20)} MB`;
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

function suggestion(modelId: string | undefined): string {
  const picks = smallerModels(modelId);
  if (picks.length === 0) return 'pick a smaller model';
  const names = picks.map((e) => `${e.id} (~${Math.round(e.vramRequiredMB)} MB)`);
  return `pick a smaller model such as ${names.join(' or ')}`;
}

// ---------------------------------------------------------------------------------------------
// Feasibility
// ---------------------------------------------------------------------------------------------

/**
 * The part of the engine's GpuReport (src/engine/device.ts) that feasibility reads; declared here
 * because the pure core may not import from src/engine. A GpuReport is assignable to it.
 */
export interface GpuReportLike {
  isFallback: boolean;
  features: { shaderF16: boolean };
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number; maxComputeWorkgroupStorageSize: number };
}

export interface FeasibilityOptions {
  /** The GPU memory the user says this model may use, MB. Browsers do not report VRAM. */
  vramBudgetMB?: number;
}

export interface Feasibility {
  ok: boolean;
  /** Why it cannot run (empty when ok). */
  reasons: string[];
  /** Runs, but the user should know (software adapter, ...). */
  warnings: string[];
}

/** Anything a feasibility check needs from a model: a catalog entry or a custom record's view. */
export type FeasibilityInput = Pick<WebLlmCatalogEntry, 'id' | 'vramRequiredMB' | 'needsShaderF16'> &
  Partial<Pick<WebLlmCatalogEntry, 'bufferSizeRequiredBytes'>>;

/** Can this adapter run this model? Every failed check becomes one reason that says what to do. */
export function assessFeasibility(
  entry: FeasibilityInput,
  report: GpuReportLike,
  options: FeasibilityOptions = {},
): Feasibility {
  const reasons: string[] = [];
  const warnings: string[] = [];
  const l = report.limits;
  if (entry.needsShaderF16 && !report.features.shaderF16) {
    const twin = precisionTwin(entry.id);
    reasons.push(
      `${entry.id} needs the shader-f16 GPU feature, which this adapter lacks` +
        (twin ? `; use ${twin.id} instead.` : '; use a q4f32_1 model instead.'),
    );
  }
  if (l.maxBufferSize < WEBLLM_MIN_LIMITS.maxBufferSize) {
    reasons.push(
      `This adapter's maxBufferSize is ${mb(l.maxBufferSize)}; WebLLM needs at least ${mb(WEBLLM_MIN_LIMITS.maxBufferSize)}.`,
    );
  }
  const needBinding = Math.max(WEBLLM_MIN_LIMITS.maxStorageBufferBindingSize, entry.bufferSizeRequiredBytes ?? 0);
  if (l.maxStorageBufferBindingSize < needBinding) {
    reasons.push(
      `This adapter's maxStorageBufferBindingSize is ${mb(l.maxStorageBufferBindingSize)}; ${entry.id} needs at least ${mb(needBinding)}.`,
    );
  }
  if (l.maxComputeWorkgroupStorageSize < WEBLLM_MIN_LIMITS.maxComputeWorkgroupStorageSize) {
    reasons.push(
      `This adapter's maxComputeWorkgroupStorageSize is ${l.maxComputeWorkgroupStorageSize} bytes; WebLLM needs at least ${WEBLLM_MIN_LIMITS.maxComputeWorkgroupStorageSize}.`,
    );
  }
  const budget = options.vramBudgetMB;
  if (budget !== undefined && entry.vramRequiredMB > budget) {
    reasons.push(
      `${entry.id} needs about ${Math.round(entry.vramRequiredMB)} MB of GPU memory, more than the ${Math.round(budget)} MB budget.`,
    );
  }
  if (report.isFallback) {
    warnings.push('This is a software (fallback) adapter: models will run, but very slowly.');
  }
  return { ok: reasons.length === 0, reasons, warnings };
}

/** Every catalog entry with its feasibility on this adapter, in catalog order. */
export function assessCatalog(
  report: GpuReportLike,
  options: FeasibilityOptions = {},
): { entry: WebLlmCatalogEntry; feasibility: Feasibility }[] {
  return WEBLLM_CATALOG.map((entry) => ({ entry, feasibility: assessFeasibility(entry, report, options) }));
}

/** The catalog entries this adapter can run (within the VRAM budget, when given). */
export function filterCatalog(report: GpuReportLike, options: FeasibilityOptions = {}): WebLlmCatalogEntry[] {
  return assessCatalog(report, options)
    .filter((a) => a.feasibility.ok)
    .map((a) => a.entry);
}

// ---------------------------------------------------------------------------------------------
// Custom model records
// ---------------------------------------------------------------------------------------------

/** A model the user compiled with MLC LLM and hosts themselves. */
export interface CustomModelRecord {
  model_id: string;
  /** Base URL of the weights (the folder holding mlc-chat-config.json and the param shards). */
  model: string;
  /** URL of the compiled model library (.wasm). */
  model_lib: string;
  vram_required_MB?: number;
  context_window?: number;
  needs_f16?: boolean;
}

export type CustomModelValidation = { ok: true; value: CustomModelRecord } | { ok: false; errors: string[] };

const CUSTOM_KEYS = ['model_id', 'model', 'model_lib', 'vram_required_MB', 'context_window', 'needs_f16'];
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export const CUSTOM_LIMITS = { maxVramMB: 65536, minContext: 256, maxContext: 131072, maxIdLength: 128 } as const;

function checkUrl(field: string, value: unknown, errors: string[]): string | undefined {
  if (typeof value !== 'string' || value.trim() === '') {
    errors.push(`${field} is required.`);
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    errors.push(`${field} is not a valid URL.`);
    return undefined;
  }
  const local = url.protocol === 'http:' && LOCAL_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !local) {
    errors.push(`${field} must be an https:// URL (http:// is allowed only for localhost).`);
    return undefined;
  }
  if (url.username || url.password) {
    errors.push(`${field} must not contain a user name or password.`);
    return undefined;
  }
  return url.href;
}

/**
 * Check a user-supplied custom model record. Returns the normalized record, or every problem found
 * (one message per problem, each naming the field).
 */
export function validateCustomModel(input: unknown): CustomModelValidation {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, errors: ['A custom model must be an object with model_id, model and model_lib.'] };
  }
  const rec = input as Record<string, unknown>;
  const errors: string[] = [];
  for (const key of Object.keys(rec)) {
    if (!CUSTOM_KEYS.includes(key)) errors.push(`Unknown field "${key}".`);
  }
  const id = rec.model_id;
  let modelId: string | undefined;
  if (typeof id !== 'string' || id.trim() === '') {
    errors.push('model_id is required.');
  } else if (id.length > CUSTOM_LIMITS.maxIdLength || !/^[A-Za-z0-9._-]+$/.test(id)) {
    errors.push(`model_id must be 1-${CUSTOM_LIMITS.maxIdLength} letters, digits, '.', '_' or '-'.`);
  } else if (findCatalogEntry(id)) {
    errors.push(`model_id "${id}" is already a catalog model; pick another name.`);
  } else {
    modelId = id;
  }
  const model = checkUrl('model', rec.model, errors);
  let modelLib = checkUrl('model_lib', rec.model_lib, errors);
  if (modelLib !== undefined && !new URL(modelLib).pathname.endsWith('.wasm')) {
    errors.push('model_lib must point to a .wasm file.');
    modelLib = undefined;
  }
  const vram = rec.vram_required_MB;
  if (vram !== undefined && (typeof vram !== 'number' || !(vram > 0) || vram > CUSTOM_LIMITS.maxVramMB)) {
    errors.push(`vram_required_MB must be a number of megabytes above 0 and at most ${CUSTOM_LIMITS.maxVramMB}.`);
  }
  const ctx = rec.context_window;
  if (
    ctx !== undefined &&
    (typeof ctx !== 'number' ||
      !Number.isInteger(ctx) ||
      ctx < CUSTOM_LIMITS.minContext ||
      ctx > CUSTOM_LIMITS.maxContext)
  ) {
    errors.push(
      `context_window must be a whole number of tokens from ${CUSTOM_LIMITS.minContext} to ${CUSTOM_LIMITS.maxContext}.`,
    );
  }
  const f16 = rec.needs_f16;
  if (f16 !== undefined && typeof f16 !== 'boolean') errors.push('needs_f16 must be true or false.');
  if (errors.length > 0 || modelId === undefined || model === undefined || modelLib === undefined) {
    return { ok: false, errors };
  }
  const value: CustomModelRecord = { model_id: modelId, model, model_lib: modelLib };
  if (vram !== undefined) value.vram_required_MB = vram as number;
  if (ctx !== undefined) value.context_window = ctx as number;
  if (f16 !== undefined) value.needs_f16 = f16 as boolean;
  return { ok: true, value };
}

/** The web-llm ModelRecord for a validated custom model (goes into appConfig.model_list). */
export function customToModelRecord(rec: CustomModelRecord): ModelRecord {
  const out: ModelRecord = { model_id: rec.model_id, model: rec.model, model_lib: rec.model_lib };
  if (rec.vram_required_MB !== undefined) out.vram_required_MB = rec.vram_required_MB;
  if (rec.context_window !== undefined) out.overrides = { context_window_size: rec.context_window };
  if (rec.needs_f16) out.required_features = ['shader-f16'];
  return out;
}

/** A custom record seen as a feasibility input; unknown VRAM counts as 0 (the budget check is skipped). */
export function customFeasibilityInput(rec: CustomModelRecord): FeasibilityInput {
  return { id: rec.model_id, vramRequiredMB: rec.vram_required_MB ?? 0, needsShaderF16: rec.needs_f16 ?? false };
}

// ---------------------------------------------------------------------------------------------
// Error mapping
// ---------------------------------------------------------------------------------------------

export type WebLlmErrorCategory =
  | 'device_lost'
  | 'shader_f16'
  | 'webgpu_unavailable'
  | 'gpu_limits'
  | 'quota'
  | 'out_of_memory'
  | 'model_not_found'
  | 'network'
  | 'integrity'
  | 'context_window'
  | 'not_loaded'
  | 'bad_request'
  | 'unknown';

export interface WebLlmErrorContext {
  /** Loading (download + GPU upload) or a chat call. */
  phase: 'load' | 'chat';
  modelId?: string;
}

/**
 * Name and message of anything web-llm throws. Errors that crossed web-llm's worker arrive as the
 * string `err.toString()`, i.e. "ShaderF16SupportError: This model requires ...".
 */
export function describeThrown(err: unknown): { name: string; message: string } {
  if (typeof err === 'string') {
    const m = /^((?:[A-Za-z_$][\w$]*)?(?:Error|Exception)):\s?([\s\S]*)$/.exec(err);
    return m ? { name: m[1]!, message: m[2]! } : { name: 'Error', message: err };
  }
  if (err instanceof Error) return { name: err.name || 'Error', message: err.message };
  if (typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string') {
    const name = (err as { name?: unknown }).name;
    return { name: typeof name === 'string' ? name : 'Error', message: (err as { message: string }).message };
  }
  return { name: 'Error', message: String(err) };
}

/** Which kind of failure a web-llm error is, from its class name first and its message second. */
export function classifyWebLlmError(err: unknown): WebLlmErrorCategory {
  const { name, message } = describeThrown(err);
  const all = `${name}: ${message}`;
  if (name === 'DeviceLostError' || /device (was |is |has been )?lost|lost the (gpu|device)/i.test(all))
    return 'device_lost';
  if (name === 'ShaderF16SupportError' || /shader-f16/i.test(all)) return 'shader_f16';
  if (
    name === 'WebGPUNotAvailableError' ||
    name === 'WebGPUNotFoundError' ||
    /Cannot find WebGPU|WebGPU is not (supported|available)|Unable to find a compatible GPU|navigator\.gpu/i.test(all)
  )
    return 'webgpu_unavailable';
  if (name === 'FeatureSupportError' || /Cannot initialize runtime because of requested max/i.test(all))
    return 'gpu_limits';
  if (name === 'QuotaExceededError' || /quota|storage is full|no space left|not enough (disk|storage) space/i.test(all))
    return 'quota';
  if (/out of memory|\boom\b|OutOfMemory|failed to allocate|allocation failed|cannot allocate/i.test(all))
    return 'out_of_memory';
  if (
    name === 'ModelNotFoundError' ||
    name === 'SpecifiedModelNotFoundError' ||
    /Cannot find model record|\b404\b/i.test(all)
  )
    return 'model_not_found';
  if (name === 'IntegrityError' || /integrity/i.test(all)) return 'integrity';
  if (name === 'ContextWindowSizeExceededError' || /exceed(s)? context window/i.test(all)) return 'context_window';
  if (
    /Failed to fetch|NetworkError|network (error|response)|Load failed|Cannot fetch|fetch failed|Request failed|ERR_[A-Z_]+|ECONNRESET|ETIMEDOUT|timed? ?out/i.test(
      all,
    )
  )
    return 'network';
  if (/NotLoaded|not loaded with a model|Model not loaded/i.test(all)) return 'not_loaded';
  if (
    /ConfigValueError|MinValueError|RangeError|NonNegativeError|DependencyError|MessageOrderError|ContentTypeError|UnsupportedRoleError|SeedTypeError|UnsupportedModelIdError|UnsupportedFieldsError|InvalidStreamOptionsError|StreamingCountError/.test(
      name,
    )
  )
    return 'bad_request';
  return 'unknown';
}

function withPeriod(s: string): string {
  const t = s.trim();
  return /[.!?]$/.test(t) ? t : `${t}.`;
}

/**
 * Turn anything web-llm threw into one of the project's error classes, with a message that says
 * what to do. SpadeErrors pass through unchanged. data: {category, modelId, phase, cause}.
 */
export function mapWebLlmError(err: unknown, ctx: WebLlmErrorContext): SpadeError {
  if (err instanceof SpadeError) return err;
  const { name, message } = describeThrown(err);
  const category = classifyWebLlmError(err);
  const model = ctx.modelId ?? 'the model';
  const entry = ctx.modelId ? findCatalogEntry(ctx.modelId) : undefined;
  const data = { category, modelId: ctx.modelId ?? null, phase: ctx.phase, cause: `${name}: ${message}` };
  const load = ctx.phase === 'load';
  const smaller = suggestion(ctx.modelId);
  switch (category) {
    case 'device_lost':
      return new DeviceLostError(
        load
          ? `The GPU device was lost while loading ${model}, usually because it ran out of GPU memory. Reload the page and ${smaller}.`
          : `The GPU device was lost while ${model} was generating (driver reset, tab in the background, or out of memory). Load the model again to continue; if it happens again, ${smaller}.`,
        data,
      );
    case 'shader_f16': {
      const twin = ctx.modelId ? precisionTwin(ctx.modelId) : undefined;
      return new ModelLoadError(
        `${model} needs the WebGPU shader-f16 feature, which this browser or GPU does not offer. ` +
          (twin ? `Pick ${twin.id} instead (same model, f32 kernels).` : 'Pick a q4f32_1 model instead.'),
        data,
      );
    }
    case 'webgpu_unavailable':
      return new WebGpuUnavailableError(
        'WebGPU is not available, so WebLLM cannot run here. Use a recent Chrome or Edge (on Linux enable ' +
          'chrome://flags/#enable-unsafe-webgpu), or use an OpenAI-compatible server instead.',
        data,
      );
    case 'gpu_limits':
      return new ModelLoadError(
        `This GPU's WebGPU limits are too small to run ${model}: ${withPeriod(message)} Try another browser or GPU, or use an OpenAI-compatible server.`,
        data,
      );
    case 'quota':
      return new ModelLoadError(
        `Browser storage is full, so ${model} could not be cached. Delete cached models you no longer use, free disk space, or ${smaller}.`,
        data,
      );
    case 'out_of_memory':
      return load
        ? new ModelLoadError(
            `Not enough GPU memory to load ${model}${entry ? ` (needs about ${Math.round(entry.vramRequiredMB)} MB)` : ''}. Close other GPU-heavy tabs or ${smaller}.`,
            data,
          )
        : new ModelCallError(
            `${model} ran out of memory while generating. Shorten the prompt or lower max_tokens, or ${smaller}.`,
            data,
          );
    case 'model_not_found':
      return new ModelLoadError(
        `WebLLM has no model called ${model}. Pick one from the catalog, or add it as a custom model with its weights and model_lib URLs.`,
        data,
      );
    case 'network':
      return new ModelLoadError(
        `Downloading ${model} failed: ${withPeriod(message)} Check your connection and try again: finished shards stay in the browser cache, so the download resumes. For a custom model, check that its URLs are right.`,
        data,
      );
    case 'integrity':
      return new ModelLoadError(
        `A downloaded file of ${model} failed its integrity check. Delete the cached copy of ${model} and download it again.`,
        data,
      );
    case 'context_window':
      return new ModelCallError(
        `The conversation does not fit ${model}'s context window${entry ? ` of ${entry.contextWindow} tokens` : ''}. Shorten the prompt (fewer documents or memory items) or lower max_tokens.`,
        data,
      );
    case 'not_loaded':
      return new ModelCallError(`No WebLLM model is loaded. Load ${model} before chatting.`, data);
    case 'bad_request':
      return new ModelCallError(`WebLLM rejected the request: ${withPeriod(message)}`, data);
    default:
      return load
        ? new ModelLoadError(
            `Loading ${model} failed: ${withPeriod(message)} Reload the page and try again, or ${smaller}.`,
            data,
          )
        : new ModelCallError(`${model} failed while generating: ${withPeriod(message)}`, data);
  }
}

// ---------------------------------------------------------------------------------------------
// Download progress
// ---------------------------------------------------------------------------------------------

export type DownloadStage = 'preparing' | 'fetching' | 'loading' | 'shaders' | 'done';

export interface DownloadProgress {
  /** 0..100, whole numbers, of the current stage. */
  percent: number;
  stage: DownloadStage;
  /** web-llm's own line, for a tooltip or log. */
  text: string;
  /** Bytes of weights fetched (stage fetching) or uploaded to the GPU (stage loading). */
  bytesLoaded?: number;
  /** Total bytes of weights: the caller's figure, else estimated from bytesLoaded / progress. */
  bytesTotal?: number;
  /** Seconds left in this stage, from the rate so far (fetching and loading only). */
  etaSeconds?: number;
  elapsedSeconds: number;
}

function stageOf(text: string, progress: number): DownloadStage {
  if (/^Fetching param cache|^Start to fetch params/i.test(text)) return 'fetching';
  if (/^Loading model from cache/i.test(text)) return 'loading';
  if (/^Loading GPU shader modules/i.test(text)) return 'shaders';
  if (/^Finish loading/i.test(text) || (progress >= 1 && text === '')) return 'done';
  return 'preparing';
}

/**
 * Turn web-llm's InitProgressReport into numbers a progress bar can show. `startedAt` and `now` are
 * milliseconds on the same clock; `totalBytes` is the size of the weights when the caller knows it.
 * web-llm's text carries megabytes ("Fetching param cache[3/24]: 120MB fetched. 40% completed, ..."),
 * read here as MiB.
 */
export function formatDownloadProgress(
  report: InitProgressReport,
  startedAt: number,
  now: number,
  totalBytes?: number,
): DownloadProgress {
  const raw = Number.isFinite(report.progress) ? report.progress : 0;
  const progress = Math.min(1, Math.max(0, raw));
  const text = report.text ?? '';
  const stage = stageOf(text, progress);
  const elapsedSeconds = Math.max(0, (now - startedAt) / 1000);
  const out: DownloadProgress = {
    percent: stage === 'done' ? 100 : Math.floor(progress * 100),
    stage,
    text,
    elapsedSeconds,
  };
  const m = /(\d+(?:\.\d+)?)\s*MB (?:fetched|loaded)/i.exec(text);
  if (m) out.bytesLoaded = Math.round(Number(m[1]) * 2 ** 20);
  else if (totalBytes !== undefined && (stage === 'fetching' || stage === 'loading'))
    out.bytesLoaded = Math.round(progress * totalBytes);
  if (totalBytes !== undefined && totalBytes > 0) out.bytesTotal = totalBytes;
  else if (out.bytesLoaded !== undefined && progress >= 0.01) out.bytesTotal = Math.round(out.bytesLoaded / progress);
  if ((stage === 'fetching' || stage === 'loading') && progress > 0 && progress < 1 && elapsedSeconds > 0) {
    out.etaSeconds = Math.round((elapsedSeconds * (1 - progress)) / progress);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Worker side-channel
// ---------------------------------------------------------------------------------------------

/**
 * A message workers/llm.worker.ts posts beside web-llm's own protocol when the GPU device it
 * handed to web-llm is lost. The main thread filters it out before web-llm's client sees it.
 */
export interface WebLlmDeviceLostMessage {
  kind: 'spade:device-lost';
  reason: string;
  message: string;
}

export function isDeviceLostMessage(v: unknown): v is WebLlmDeviceLostMessage {
  return typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'spade:device-lost';
}
