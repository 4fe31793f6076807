/**
 * Custom WebLLM models: records for models the user compiled with MLC LLM and hosts themselves —
 * validation of what the user typed, and conversion to web-llm's ModelRecord and to a feasibility
 * input. Pure TypeScript; only types come from @mlc-ai/web-llm.
 */
import type { ModelRecord } from '@mlc-ai/web-llm';
import { findCatalogEntry } from './catalog.ts';
import type { FeasibilityInput } from './feasibility.ts';

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
