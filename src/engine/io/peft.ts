/**
 * LoRA adapters in the PEFT format, so an adapter trained here loads in `peft` (Python) and back:
 *
 *   adapter_config.json       { "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8,
 *                               "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"],
 *                               "bias": "none", "base_model_name_or_path": "...", ... }
 *   adapter_model.safetensors base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_A.weight  (r, in)
 *                             base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_B.weight  (out, r)
 *                             base_model.model.model.layers.{i}.mlp.{gate,up,down}_proj.lora_{A,B}.weight
 *
 * The adapted linear layer computes  y = W x + (alpha / r) · B (A x)  — `loraScaling(config)`.
 * (PEFT's `use_rslora` uses alpha / sqrt(r); on import that is folded into an equivalent alpha
 * so the plain structure always means alpha / r.)
 *
 * In memory an adapter is `{ config: {r, alpha, targets}, tensors }`, tensors keyed by
 * `loraKey(layer, module, 'A' | 'B')` = "{layer}.{module}.{A|B}", e.g. "3.q_proj.A".
 */
import { ModelLoadError } from '../../core/errors.ts';
import { capIssues, type ModelConfig } from './config.ts';
import {
  parseSafetensors,
  tensorF32,
  writeSafetensors,
  type SafetensorsDType,
  type TensorToWrite,
} from './safetensors.ts';

export const LORA_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraModule = (typeof LORA_MODULES)[number];
export type LoraSide = 'A' | 'B';

export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';

export interface LoraConfig {
  r: number;
  alpha: number;
  targets: LoraModule[];
}

interface LoraTensor {
  /** A: (r, in); B: (out, r). */
  shape: number[];
  data: Float32Array;
}

export interface LoraAdapter {
  config: LoraConfig;
  tensors: Map<string, LoraTensor>;
}

/** Multiplier of B·A in the adapted layer: alpha / r. */
export function loraScaling(config: Pick<LoraConfig, 'r' | 'alpha'>): number {
  return config.alpha / config.r;
}

export function loraKey(layer: number, module: LoraModule, side: LoraSide): string {
  return `${layer}.${module}.${side}`;
}

export function parseLoraKey(key: string): { layer: number; module: LoraModule; side: LoraSide } {
  const m = /^(\d+)\.(\w+)\.([AB])$/.exec(key);
  if (!m || !(LORA_MODULES as readonly string[]).includes(m[2]!))
    throw new RangeError(`"${key}" is not a LoRA key (expected "{layer}.{module}.{A|B}")`);
  return { layer: Number(m[1]), module: m[2] as LoraModule, side: m[3] as LoraSide };
}

const isAttn = (m: LoraModule) => m === 'q_proj' || m === 'k_proj' || m === 'v_proj' || m === 'o_proj';

/** PEFT's tensor name for one LoRA factor. */
export function peftTensorName(layer: number, module: LoraModule, side: LoraSide): string {
  return `base_model.model.model.layers.${layer}.${isAttn(module) ? 'self_attn' : 'mlp'}.${module}.lora_${side}.weight`;
}

// Accepts PEFT's saved names, with or without an adapter name (".default") before ".weight".
const PEFT_NAME = /^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.[\w-]+)?\.weight$/;

/** Input and output widths of a target module for a model config (A is (r, in), B is (out, r)). */
export function loraModuleDims(c: ModelConfig, module: LoraModule): { in: number; out: number } {
  const H = c.hiddenSize;
  switch (module) {
    case 'q_proj':
      return { in: H, out: c.numHeads * c.headDim };
    case 'k_proj':
    case 'v_proj':
      return { in: H, out: c.numKvHeads * c.headDim };
    case 'o_proj':
      return { in: c.numHeads * c.headDim, out: H };
    case 'gate_proj':
    case 'up_proj':
      return { in: H, out: c.intermediateSize };
    case 'down_proj':
      return { in: c.intermediateSize, out: H };
  }
}

/**
 * Check an adapter's internal consistency (and its widths against a model config when given):
 * only configured targets appear; every target has its A and B in every layer (every layer of
 * the model when given, else every layer the adapter has factors for), A is (r, in), B is
 * (out, r), data lengths match, every value is finite. Throws ModelLoadError listing the issues
 * by PEFT tensor name; `source` says where the adapter came from (file names) in the message.
 */
function validateLoraAdapter(adapter: LoraAdapter, model?: ModelConfig, source?: string): void {
  const issues: string[] = [];
  const { r, alpha, targets } = adapter.config;
  if (!Number.isSafeInteger(r) || r < 1) issues.push(`r must be a positive integer, got ${r}`);
  if (!Number.isFinite(alpha) || alpha <= 0) issues.push(`alpha must be a positive number, got ${alpha}`);
  for (const t of targets)
    if (!(LORA_MODULES as readonly string[]).includes(t)) issues.push(`unsupported target module ${t}`);
  const layers = new Set<number>();
  for (const [key, t] of adapter.tensors) {
    let k;
    try {
      k = parseLoraKey(key);
    } catch (err) {
      issues.push((err as Error).message);
      continue;
    }
    layers.add(k.layer);
    const name = peftTensorName(k.layer, k.module, k.side);
    if (!targets.includes(k.module)) issues.push(`${name}: ${k.module} is not in the target modules`);
    if (t.shape.length !== 2 || t.data.length !== t.shape[0]! * t.shape[1]!)
      issues.push(`${name}: shape ${JSON.stringify(t.shape)} does not match ${t.data.length} values`);
    else if (k.side === 'A' && t.shape[0] !== r)
      issues.push(`${name}: A must be (r=${r}, in), got ${JSON.stringify(t.shape)}`);
    else if (k.side === 'B' && t.shape[1] !== r)
      issues.push(`${name}: B must be (out, r=${r}), got ${JSON.stringify(t.shape)}`);
    for (let i = 0; i < t.data.length; i++)
      if (!Number.isFinite(t.data[i]!)) {
        issues.push(`${name}: value ${i} is ${t.data[i]} (every factor value must be finite)`);
        break;
      }
    if (model) {
      if (k.layer >= model.numLayers) issues.push(`${name}: the model has ${model.numLayers} layers`);
      const d = loraModuleDims(model, k.module);
      const want = k.side === 'A' ? [r, d.in] : [d.out, r];
      if (t.shape[0] !== want[0] || t.shape[1] !== want[1])
        issues.push(`${name}: shape ${JSON.stringify(t.shape)}, the model needs ${JSON.stringify(want)}`);
    }
  }
  if (targets.length > 0 && adapter.tensors.size === 0)
    issues.push(`the target modules are ${targets.join(', ')} but there are no LoRA factors`);
  const claimed = model ? Array.from({ length: model.numLayers }, (_, i) => i) : [...layers].sort((a, b) => a - b);
  for (const layer of claimed)
    for (const m of targets)
      for (const side of ['A', 'B'] as const)
        if (!adapter.tensors.has(loraKey(layer, m, side))) issues.push(`missing ${peftTensorName(layer, m, side)}`);
  if (issues.length) {
    const listed = capIssues(issues);
    throw new ModelLoadError(`Invalid LoRA adapter${source ? ` (${source})` : ''}: ${listed.join('; ')}`, {
      issues: listed,
      issueCount: issues.length,
    });
  }
}

export interface PeftExportOptions {
  /** `base_model_name_or_path` (e.g. "HuggingFaceTB/SmolLM2-135M-Instruct"). */
  baseModel?: string | null;
  /** Stored dtype of the factors (default F32, lossless). */
  dtype?: SafetensorsDType;
  /** Extra `__metadata__` strings. */
  metadata?: Record<string, string>;
}

export interface PeftFiles {
  /** The adapter_config.json object. */
  adapterConfig: Record<string, unknown>;
  /** adapter_config.json as UTF-8 text. */
  adapterConfigJson: string;
  /** adapter_model.safetensors bytes. */
  weights: Uint8Array;
}

/** Write an adapter as PEFT's two files. */
export function exportPeft(adapter: LoraAdapter, opts: PeftExportOptions = {}): PeftFiles {
  validateLoraAdapter(adapter);
  const dtype = opts.dtype ?? 'F32';
  const keys = [...adapter.tensors.keys()].map((k) => ({ k, p: parseLoraKey(k) }));
  keys.sort(
    (a, b) =>
      a.p.layer - b.p.layer ||
      LORA_MODULES.indexOf(a.p.module) - LORA_MODULES.indexOf(b.p.module) ||
      a.p.side.localeCompare(b.p.side),
  );
  const out = new Map<string, TensorToWrite>();
  for (const { k, p } of keys) {
    const t = adapter.tensors.get(k)!;
    out.set(peftTensorName(p.layer, p.module, p.side), { dtype, shape: [...t.shape], data: t.data });
  }
  const weights = writeSafetensors(out, { format: 'pt', ...opts.metadata });
  const targets = LORA_MODULES.filter((m) => adapter.config.targets.includes(m));
  const adapterConfig: Record<string, unknown> = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: opts.baseModel ?? null,
    r: adapter.config.r,
    lora_alpha: adapter.config.alpha,
    lora_dropout: 0,
    target_modules: targets,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    use_rslora: false,
    use_dora: false,
    revision: null,
  };
  return { adapterConfig, adapterConfigJson: JSON.stringify(adapterConfig, null, 2) + '\n', weights };
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Read PEFT's adapter_config.json (object or text) and adapter_model.safetensors into the plain
 * structure. Rejects what cannot be represented: non-LoRA adapters, DoRA, trained biases,
 * fan_in_fan_out, per-module rank/alpha patterns, targets other than the seven projections.
 * Pass the base model's config to check the factor widths too.
 */
export function importPeft(
  adapterConfig: unknown,
  weights: ArrayBuffer | Uint8Array,
  model?: ModelConfig,
): LoraAdapter {
  let cfg = adapterConfig;
  if (typeof cfg === 'string') {
    try {
      cfg = JSON.parse(cfg);
    } catch (err) {
      throw new ModelLoadError(`${ADAPTER_CONFIG_FILE} is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (!isObj(cfg)) throw new ModelLoadError(`${ADAPTER_CONFIG_FILE} must be a JSON object`);
  const issues: string[] = [];
  if (cfg.peft_type !== 'LORA') issues.push(`peft_type is ${JSON.stringify(cfg.peft_type)}, only "LORA" is supported`);
  if (cfg.task_type != null && cfg.task_type !== 'CAUSAL_LM')
    issues.push(`task_type is ${JSON.stringify(cfg.task_type)}, expected "CAUSAL_LM"`);
  if (cfg.bias != null && cfg.bias !== 'none')
    issues.push(`bias ${JSON.stringify(cfg.bias)} is not supported (only "none")`);
  if (cfg.use_dora === true) issues.push('DoRA adapters (use_dora) are not supported');
  if (cfg.fan_in_fan_out === true) issues.push('fan_in_fan_out adapters are not supported');
  for (const k of ['rank_pattern', 'alpha_pattern'])
    if (isObj(cfg[k]) && Object.keys(cfg[k] as Json).length > 0)
      issues.push(`${k} (per-module ranks) is not supported`);
  const r = cfg.r;
  const alpha = cfg.lora_alpha ?? r;
  if (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 1)
    issues.push(`r must be a positive integer, got ${JSON.stringify(r)}`);
  if (typeof alpha !== 'number' || !(alpha > 0) || !Number.isFinite(alpha))
    issues.push(`lora_alpha must be a positive number, got ${JSON.stringify(alpha)}`);
  let targets: LoraModule[] = [];
  const tm = cfg.target_modules;
  if (Array.isArray(tm)) {
    for (const t of tm) {
      const short = typeof t === 'string' ? t.split('.').at(-1)! : '';
      if ((LORA_MODULES as readonly string[]).includes(short)) {
        if (!targets.includes(short as LoraModule)) targets.push(short as LoraModule);
      } else issues.push(`target module ${JSON.stringify(t)} is not supported (only ${LORA_MODULES.join(', ')})`);
    }
  } else if (tm !== undefined && tm !== null && typeof tm !== 'string') issues.push('target_modules must be a list');
  if (issues.length)
    throw new ModelLoadError(`Cannot import this PEFT adapter (${ADAPTER_CONFIG_FILE}): ${issues.join('; ')}`, {
      issues,
    });

  const file = parseSafetensors(weights);
  const tensors = new Map<string, LoraTensor>();
  const found = new Set<LoraModule>();
  for (const [name, info] of file.tensors) {
    const m = PEFT_NAME.exec(name);
    const module = m?.[3] as LoraModule | undefined;
    if (
      !m ||
      !module ||
      !(LORA_MODULES as readonly string[]).includes(module) ||
      (m[2] === 'self_attn') !== isAttn(module)
    )
      throw new ModelLoadError(`${ADAPTER_WEIGHTS_FILE}: tensor "${name}" is not a supported LoRA factor`, {
        issues: [`unexpected tensor ${name}`],
      });
    found.add(module);
    const key = loraKey(Number(m[1]), module, m[4] as LoraSide);
    if (tensors.has(key)) throw new ModelLoadError(`${ADAPTER_WEIGHTS_FILE}: "${name}" appears twice`);
    tensors.set(key, { shape: [...info.shape], data: tensorF32(file, name) });
  }
  // target_modules given as a regex string (or missing): take the modules the file holds.
  if (!Array.isArray(tm)) targets = LORA_MODULES.filter((x) => found.has(x));
  const alphaEff = cfg.use_rslora === true ? (alpha as number) * Math.sqrt(r as number) : (alpha as number);
  const adapter: LoraAdapter = { config: { r: r as number, alpha: alphaEff, targets }, tensors };
  validateLoraAdapter(adapter, model, `${ADAPTER_WEIGHTS_FILE} with ${ADAPTER_CONFIG_FILE}`);
  return adapter;
}
