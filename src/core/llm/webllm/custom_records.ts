/**
 * Custom WebLLM models: records for models the user compiled with MLC LLM and hosts themselves —
 * validation of what the user typed (one TypeBox schema, core/wire_schema.ts, plus the checks a
 * JSON Schema does not carry: URLs, the catalog's ids), and conversion to web-llm's ModelRecord and
 * to a feasibility input. Pure TypeScript; only types come from @mlc-ai/web-llm.
 */
import type { ModelRecord } from '@mlc-ai/web-llm';
import { Type, type Static } from '@sinclair/typebox';
import { expected, saying, Wire } from '../../wire_schema.ts';
import { findCatalogEntry } from './catalog.ts';
import type { FeasibilityInput } from './feasibility.ts';

const CUSTOM_LIMITS = { maxVramMB: 65536, minContext: 256, maxContext: 131072, maxIdLength: 128 } as const;

const URL_WORDS = 'an https:// URL (http:// is allowed only for localhost)';

/**
 * A model the user compiled with MLC LLM and hosts themselves: model_id (not a catalog id), model
 * (the base URL of the weights: the folder holding mlc-chat-config.json and the param shards),
 * model_lib (the URL of the compiled model library, a .wasm file) and, if known, its VRAM, context
 * window and need for shader-f16. No other fields.
 */
const CUSTOM_RECORD = new Wire(
  Type.Object(
    {
      model_id: saying(
        Type.String({ minLength: 1, maxLength: CUSTOM_LIMITS.maxIdLength, pattern: '^[A-Za-z0-9._-]+$' }),
        { expected: `1-${CUSTOM_LIMITS.maxIdLength} letters, digits, '.', '_' or '-'` },
      ),
      model: saying(Type.String(), { expected: URL_WORDS }),
      model_lib: saying(Type.String(), { expected: `${URL_WORDS} of a .wasm file` }),
      vram_required_MB: Type.Optional(
        saying(Type.Number({ exclusiveMinimum: 0, maximum: CUSTOM_LIMITS.maxVramMB }), {
          expected: `a number of megabytes above 0 and at most ${CUSTOM_LIMITS.maxVramMB}`,
        }),
      ),
      context_window: Type.Optional(
        saying(Type.Integer({ minimum: CUSTOM_LIMITS.minContext, maximum: CUSTOM_LIMITS.maxContext }), {
          expected: `a whole number of tokens from ${CUSTOM_LIMITS.minContext} to ${CUSTOM_LIMITS.maxContext}`,
        }),
      ),
      needs_f16: Type.Optional(Type.Boolean()),
    },
    { additionalProperties: false },
  ),
);

/** A model the user compiled with MLC LLM and hosts themselves (CUSTOM_RECORD). */
export type CustomModelRecord = Static<typeof CUSTOM_RECORD.schema>;

export type CustomModelValidation = { ok: true; value: CustomModelRecord } | { ok: false; errors: string[] };

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Most problems listed for one record (a record of 10 000 unknown fields is 20 lines and a count). */
export const MAX_PROBLEMS = 20;

/** A URL field's value normalised, or what is wrong with it (the schema has checked it is a string). */
function checkUrl(field: string, value: string): { href: string } | { problem: string } {
  if (value.trim() === '') return { problem: `${field} is required.` };
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return { problem: `${field} is not a valid URL.` };
  }
  const local = url.protocol === 'http:' && LOCAL_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !local)
    return { problem: `${field} must be an https:// URL (http:// is allowed only for localhost).` };
  if (url.username || url.password) return { problem: `${field} must not contain a user name or password.` };
  if (field === 'model_lib' && !url.pathname.endsWith('.wasm'))
    return { problem: 'model_lib must point to a .wasm file.' };
  return { href: url.href };
}

/**
 * Check a user-supplied custom model record. Returns the normalized record, or every problem found
 * (one message per problem, each naming the field and what it must be; unknown fields first).
 */
export function validateCustomModel(input: unknown): CustomModelValidation {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, errors: ['A custom model must be an object with model_id, model and model_lib.'] };
  }
  const r = CUSTOM_RECORD.read(input, MAX_PROBLEMS);
  const unknown: string[] = [];
  const problems = new Map<string, string>();
  if (!r.ok)
    for (const i of r.issues) {
      const field = String(i.loc[0]);
      if (i.kind === 'extra') unknown.push(`Unknown field "${field}".`);
      else
        problems.set(field, i.kind === 'missing' ? `${field} is required.` : `${field} must be ${expected(i.schema)}.`);
    }
  // what a JSON Schema does not say, for the fields it passed
  const rec = r.value as Record<string, unknown>;
  const passed = (field: string): string | undefined =>
    !problems.has(field) && typeof rec[field] === 'string' ? rec[field] : undefined;
  const id = passed('model_id');
  if (id !== undefined && findCatalogEntry(id))
    problems.set('model_id', `model_id "${id}" is already a catalog model; pick another name.`);
  const urls: Record<string, string> = {};
  for (const field of ['model', 'model_lib'] as const) {
    const text = passed(field);
    if (text === undefined) continue;
    const u = checkUrl(field, text);
    if ('problem' in u) problems.set(field, u.problem);
    else urls[field] = u.href;
  }
  const errors = [
    ...unknown,
    ...Object.keys(CUSTOM_RECORD.schema.properties).flatMap((k) => (problems.has(k) ? [problems.get(k)!] : [])),
  ];
  if (!r.ok && r.total > r.issues.length) errors.push(`${r.total - r.issues.length} more problem(s) left out.`);
  if (!r.ok || errors.length > 0) return { ok: false, errors };
  const value: CustomModelRecord = { model_id: r.value.model_id, model: urls.model!, model_lib: urls.model_lib! };
  if (r.value.vram_required_MB !== undefined) value.vram_required_MB = r.value.vram_required_MB;
  if (r.value.context_window !== undefined) value.context_window = r.value.context_window;
  if (r.value.needs_f16 !== undefined) value.needs_f16 = r.value.needs_f16;
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
