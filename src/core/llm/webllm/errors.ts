/**
 * What went wrong in web-llm: classifies anything it throws (class name first, message second) and
 * maps it to one of the project's error classes with a message that says what to do, and whom to
 * blame (data.blame: the network, the browser's storage quota, the GPU adapter, the model record, the
 * request). A load of an f16 build on an adapter without shader-f16 is the adapter's fault whatever
 * web-llm reports first (without network access it is a failed download). Pure TypeScript.
 */
import { DeviceLostError, ModelCallError, ModelLoadError, SpadeError, WebGpuUnavailableError } from '../../errors.ts';
import { findCatalogEntry, precisionTwin, smallerModels } from './catalog.ts';

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
  /** Whether the adapter offers shader-f16, when known (the GPU report). */
  adapterHasShaderF16?: boolean;
}

/** Whose fault a failure is: what the user has to fix. */
export type WebLlmBlame = 'network' | 'storage' | 'adapter' | 'model' | 'request' | 'other';

const BLAME: Record<WebLlmErrorCategory, WebLlmBlame> = {
  device_lost: 'adapter',
  shader_f16: 'adapter',
  webgpu_unavailable: 'adapter',
  gpu_limits: 'adapter',
  out_of_memory: 'adapter',
  quota: 'storage',
  network: 'network',
  integrity: 'network',
  model_not_found: 'model',
  context_window: 'request',
  bad_request: 'request',
  not_loaded: 'request',
  unknown: 'other',
};

/** Whose fault a category of failure is. */
export function blameOf(category: WebLlmErrorCategory): WebLlmBlame {
  return BLAME[category];
}

/** Does this model id name an f16 build (catalog entry, else the MLC quantization in its id)? */
function needsF16(modelId: string): boolean {
  return findCatalogEntry(modelId)?.needsShaderF16 ?? /-q\df16_/.test(modelId);
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

/** The "pick a smaller model such as …" clause of a message (see smallerModels). */
function suggestion(modelId: string | undefined): string {
  const picks = smallerModels(modelId);
  if (picks.length === 0) return 'pick a smaller model';
  const names = picks.map((e) => `${e.id} (~${Math.round(e.vramRequiredMB)} MB)`);
  return `pick a smaller model such as ${names.join(' or ')}`;
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
  let category = classifyWebLlmError(err);
  const load = ctx.phase === 'load';
  if (
    load &&
    ctx.modelId &&
    ctx.adapterHasShaderF16 === false &&
    needsF16(ctx.modelId) &&
    category !== 'webgpu_unavailable'
  )
    category = 'shader_f16'; // whatever failed first (often the download), this build cannot run here
  const model = ctx.modelId ?? 'the model';
  const entry = ctx.modelId ? findCatalogEntry(ctx.modelId) : undefined;
  const data = {
    category,
    blame: blameOf(category),
    modelId: ctx.modelId ?? null,
    phase: ctx.phase,
    cause: `${name}: ${message}`,
  };
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
        `Browser storage is full (the site's cache quota), so ${model} could not be cached. Delete cached models you no longer use, free disk space, or ${smaller}.`,
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
        `Downloading ${model} failed on the network: ${withPeriod(message)} Check your connection and try again: finished shards stay in the browser cache, so the download resumes. For a custom model, check that its URLs are right.`,
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
