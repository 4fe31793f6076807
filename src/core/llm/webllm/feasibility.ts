/**
 * Can this GPU run that WebLLM model? Checks an adapter report (features, limits, software fallback)
 * and the user's VRAM budget against a catalog entry or a custom record, one reason per failed check.
 * Which model to offer by default is core/llm/default_models.ts. Pure TypeScript.
 */
import { precisionTwin, WEBLLM_CATALOG, type WebLlmCatalogEntry } from './catalog.ts';

/** web-llm's runtime refuses to start below these limits (detectGPUDevice in web-llm 0.2.86). */
const WEBLLM_MIN_LIMITS = {
  /** It asks for 1 GiB and falls back to 256 MiB. */
  maxBufferSize: 256 * 2 ** 20,
  /** It asks for 1 GiB and falls back to 128 MiB. */
  maxStorageBufferBindingSize: 128 * 2 ** 20,
  maxComputeWorkgroupStorageSize: 32 * 2 ** 10,
} as const;

function mb(bytes: number): string {
  return `${Math.round(bytes / 2 ** 20)} MB`;
}

/**
 * The part of the engine's GpuReport (src/engine/runtime/device.ts) that feasibility reads; declared here
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
