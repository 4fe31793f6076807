/**
 * The default model of each role on each class of adapter, in one table (DEFAULT_MODELS), and the
 * function that resolves it against this adapter and the VRAM budget (defaultWebLlmModel). Both the
 * Run panel (what a run will use) and the Models panel (what Load loads) read it through
 * ModelsState, so they always name the same model. Pure TypeScript.
 */
import type { ModelRole } from './chat_model.ts';
import { WEBLLM_CATALOG } from './webllm/catalog.ts';
import { assessFeasibility, type FeasibilityOptions, type GpuReportLike } from './webllm/feasibility.ts';

/**
 * What the app knows of the adapter: `hardware` (a GPU), `software` (a fallback adapter such as
 * SwiftShader: every token is CPU time) or `unknown` (WebGPU not checked yet, or not available).
 */
export type AdapterClass = 'hardware' | 'software' | 'unknown';

function adapterClass(report: Pick<GpuReportLike, 'isFallback'> | null | undefined): AdapterClass {
  if (!report) return 'unknown';
  return report.isFallback ? 'software' : 'hardware';
}

interface DefaultModels {
  /** Where each role's model comes from. */
  roles: Record<ModelRole, 'webllm'>;
  /**
   * WebLLM base models, best first; the first this adapter runs within the VRAM budget is the
   * default, as its q4f16_1 build where the adapter has shader-f16 (less memory, faster), else its
   * q4f32_1 twin. The three roles share it: one download, one copy in GPU memory.
   */
  preference: readonly string[];
  why: string;
}

const BY_QUALITY = [
  'Qwen2.5-1.5B-Instruct',
  'Llama-3.2-1B-Instruct',
  'Qwen2.5-0.5B-Instruct',
  'Qwen3-0.6B',
  'SmolLM2-360M-Instruct',
] as const;

const ALL_WEBLLM: Record<ModelRole, 'webllm'> = { designer: 'webllm', hint: 'webllm', agent: 'webllm' };

/** The table: each adapter class's default for every role, with its reason. */
export const DEFAULT_MODELS: Record<AdapterClass, DefaultModels> = {
  hardware: {
    roles: ALL_WEBLLM,
    preference: BY_QUALITY,
    why: 'Qwen2.5 1.5B writes usable environment code and fits most GPUs; the smaller ones are for GPUs or budgets it does not fit',
  },
  software: {
    roles: ALL_WEBLLM,
    preference: [...BY_QUALITY].reverse(),
    why: 'a software adapter computes every token on the CPU, so the smallest model that runs (a wiring check: a 2 GB download of the first choice would take minutes per reply; for a real run use a hosted API or a CPU server)',
  },
  unknown: {
    roles: ALL_WEBLLM,
    preference: BY_QUALITY,
    why: 'until WebGPU is checked, the first choice as its q4f32_1 build, which runs on any adapter that runs WebLLM at all',
  },
};

/** A WebLLM base model's build: q4f16_1 (needs shader-f16) or q4f32_1. */
function build(base: string, f16: boolean): string {
  return `${base}-${f16 ? 'q4f16_1' : 'q4f32_1'}-MLC`;
}

/**
 * The default WebLLM model (every role's) on this adapter: the first of its class's preference that
 * it can run within the VRAM budget. Without a report, the first choice's q4f32 build. When nothing
 * fits, the smallest model's q4f32 build: its Load button then says why it cannot run.
 */
export function defaultWebLlmModel(report: GpuReportLike | null, options: FeasibilityOptions = {}): string {
  const { preference } = DEFAULT_MODELS[adapterClass(report)];
  if (!report) return build(preference[0]!, false);
  for (const base of preference)
    for (const f16 of report.features.shaderF16 ? [true, false] : [false]) {
      const entry = WEBLLM_CATALOG.find((e) => e.id === build(base, f16));
      if (entry && assessFeasibility(entry, report, options).ok) return entry.id;
    }
  return build(BY_QUALITY.at(-1)!, false);
}
