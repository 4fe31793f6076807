/**
 * Hugging Face `config.json` → a typed ModelConfig for the Llama family this engine runs:
 *
 *   llama  LlamaForCausalLM (Llama 2/3, SmolLM2, TinyLlama, ...): optional llama3 RoPE scaling,
 *          optional attention_bias (q/k/v/o biases), tied or separate lm_head
 *   qwen2  Qwen2ForCausalLM (Qwen2, Qwen2.5): q/k/v biases always, no o bias
 *   qwen3  Qwen3ForCausalLM: per-head RMSNorm on q and k (q_norm/k_norm, shape (head_dim)) before
 *          RoPE, explicit head_dim (often != hidden/heads), no biases unless attention_bias
 *
 * Everything else (MoE, sliding-window attention, other RoPE scalings, non-SiLU MLPs, ...) is
 * rejected with a ModelLoadError whose data.issues lists each problem, as are sizes and RoPE
 * values out of range (LIMITS: a hostile config.json must not size a loop or a table).
 *
 * Both config styles are read: `rope_theta` + `rope_scaling` (transformers 4.x) and
 * `rope_parameters` (transformers 5).
 *
 * The checkpoint's tensor names and shapes (`hfTensorSpecs`) follow from the config: weights are
 * stored (out, in), as PyTorch's nn.Linear keeps them.
 */
import { ModelLoadError } from '../../core/errors.ts';
import { ownField } from '../../core/schema.ts';

export type Architecture = 'llama' | 'qwen2' | 'qwen3';

const HF_ARCHITECTURES: Record<string, Architecture> = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};
const ARCH_CLASS: Record<Architecture, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

/** Llama 3.1-style frequency-dependent RoPE scaling. */
interface Llama3RopeScaling {
  type: 'llama3';
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositionEmbeddings: number;
}

export interface ModelConfig {
  architecture: Architecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Per-head dimension: `head_dim` when given, else hidden / heads. */
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** null: plain RoPE. */
  ropeScaling: Llama3RopeScaling | null;
  /** lm_head shares model.embed_tokens.weight (no lm_head.weight needed). */
  tieWordEmbeddings: boolean;
  /** q_proj/k_proj/v_proj have biases (Qwen2 always; Llama/Qwen3 when attention_bias). */
  qkvBias: boolean;
  /** o_proj has a bias (Llama/Qwen3 with attention_bias). */
  oBias: boolean;
  /** Per-head RMSNorm on q and k (Qwen3). */
  qkNorm: boolean;
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  /** One or more end-of-sequence ids (Llama 3.1 lists three). */
  eosTokenIds: number[];
  /** `torch_dtype`/`dtype` from the config, informational ("bfloat16", ...); null when absent. */
  dtype: string | null;
}

type Json = Record<string, unknown>;

/**
 * Largest value accepted per config.json field. Each is several times the largest released model
 * (Llama 3.1 405B: 126 layers, hidden 16384, intermediate 53248, 128 heads; vocabularies up to
 * ~256k; contexts up to 10M), small enough that no loop or table sized by them can run away.
 */
const LIMITS: Record<string, number> = {
  vocab_size: 1 << 22,
  hidden_size: 1 << 16,
  intermediate_size: 1 << 18,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  num_key_value_heads: 1024,
  head_dim: 1024,
  max_position_embeddings: 1 << 26,
  original_max_position_embeddings: 1 << 26,
  rms_norm_eps: 0.1,
  rope_theta: 1e12,
  factor: 1024,
  low_freq_factor: 1000,
  high_freq_factor: 1000,
};
/** Smallest value accepted (the rest only need to be positive). */
const LIMITS_MIN = {
  rms_norm_eps: 1e-12,
  // llama3 scaling divides long wavelengths by factor (< 1 would stretch them) and divides
  // original_max_position_embeddings by both frequency factors
  factor: 1,
  low_freq_factor: 1e-3,
  high_freq_factor: 1e-3,
};

const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Which supported architecture a config.json describes, or a ModelLoadError saying why none. */
export function detectArchitecture(json: unknown): Architecture {
  if (!isObj(json)) throw new ModelLoadError('config.json must be a JSON object', { issues: ['not an object'] });
  const supported = Object.keys(HF_ARCHITECTURES).join(', ');
  const archs = json.architectures;
  if (Array.isArray(archs) && archs.length > 0) {
    const known = archs.map((a) => (typeof a === 'string' ? ownField(HF_ARCHITECTURES, a) : undefined)).find(Boolean);
    if (known) return known;
    throw new ModelLoadError(
      `Unsupported model architecture ${archs.map((a) => JSON.stringify(a)).join(', ')}; this engine runs ${supported} (SmolLM2 is Llama). Pick one of those, or use an OpenAI-compatible server for other models.`,
      { issues: [`architectures: ${JSON.stringify(archs)}`] },
    );
  }
  const mt = json.model_type;
  if (mt === 'llama' || mt === 'qwen2' || mt === 'qwen3') return mt;
  throw new ModelLoadError(
    `Unsupported model_type ${JSON.stringify(mt ?? null)} (no "architectures" given); this engine runs ${supported}.`,
    { issues: [`model_type: ${JSON.stringify(mt ?? null)}`] },
  );
}

/** Parse a Hugging Face config.json (object or JSON text). Throws ModelLoadError listing every issue. */
export function modelConfigFromHf(input: unknown): ModelConfig {
  let json = input;
  if (typeof json === 'string') {
    try {
      json = JSON.parse(json);
    } catch (err) {
      throw new ModelLoadError(`config.json is not valid JSON: ${(err as Error).message}`, {
        issues: ['invalid JSON'],
      });
    }
  }
  const architecture = detectArchitecture(json);
  const j = json as Json;
  const issues: string[] = [];
  const { int, num, bool, tokenId } = hfFields(j, issues);

  if (isObj(j.text_config)) issues.push('nested text_config (a multimodal model) is not supported');
  const vocabSize = int('vocab_size');
  const hiddenSize = int('hidden_size');
  const intermediateSize = int('intermediate_size');
  const numLayers = int('num_hidden_layers');
  const numHeads = int('num_attention_heads');
  const numKvHeads = int('num_key_value_heads', numHeads);
  if (numKvHeads > numHeads)
    issues.push(`num_key_value_heads (${numKvHeads}) must not exceed num_attention_heads (${numHeads})`);
  else if (numHeads % numKvHeads !== 0)
    issues.push(`num_attention_heads (${numHeads}) must be a multiple of num_key_value_heads (${numKvHeads})`);
  const headDim = headDimOf(j, int, issues, architecture, hiddenSize, numHeads);
  if (headDim % 2 !== 0) issues.push(`head_dim (${headDim}) must be even for RoPE`);
  const rmsNormEps = num(j, 'rms_norm_eps', 1e-6, '', LIMITS_MIN.rms_norm_eps);
  const maxPositionEmbeddings = int('max_position_embeddings', 2048);

  const act = j.hidden_act ?? j.hidden_activation ?? 'silu';
  if (act !== 'silu' && act !== 'swish') issues.push(`hidden_act ${JSON.stringify(act)} is not supported (only silu)`);
  if (j.mlp_bias === true) issues.push('mlp_bias true is not supported');
  if (j.use_sliding_window === true) issues.push('use_sliding_window true (sliding-window attention) is not supported');
  if (typeof j.num_experts === 'number' && j.num_experts > 0)
    issues.push('mixture-of-experts models are not supported');

  const { ropeTheta, ropeScaling } = ropeOf(j, num, issues);

  const attentionBias = bool('attention_bias', false);
  const qkvBias = architecture === 'qwen2' ? true : attentionBias;
  const oBias = architecture === 'qwen2' ? false : attentionBias;
  const tieWordEmbeddings = bool('tie_word_embeddings', false);

  const bosTokenId = tokenId('bos_token_id');
  const eosTokenIds = eosTokenIdsOf(j, tokenId, issues);
  const dtypeRaw = j.torch_dtype ?? j.dtype;
  const dtype = typeof dtypeRaw === 'string' ? dtypeRaw : null;

  if (issues.length)
    throw new ModelLoadError(`config.json (${ARCH_CLASS[architecture]}) cannot be used: ${issues.join('; ')}`, {
      issues,
    });
  return {
    architecture,
    vocabSize,
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps,
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings,
    qkvBias,
    oBias,
    qkNorm: architecture === 'qwen3',
    maxPositionEmbeddings,
    bosTokenId,
    eosTokenIds,
    dtype,
  };
}

/**
 * Readers of config.json's fields that note each bad value in `issues`: positive integers (`int`, in
 * [1, LIMITS]), positive numbers (`num`), booleans and token ids.
 */
function hfFields(j: Json, issues: string[]) {
  // Integers in [1, max]; an out-of-range value reads as 1 so later checks stay cheap.
  const int = (key: string, fallback?: number): number => {
    const v = j[key] ?? fallback;
    const max = LIMITS[key] ?? Number.MAX_SAFE_INTEGER;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
      issues.push(`${key} must be a positive integer, got ${JSON.stringify(v ?? null)}`);
      return 1;
    }
    if (v > max) {
      issues.push(`${key} is ${v}, above the largest this engine accepts (${max})`);
      return 1;
    }
    return v;
  };
  // Finite numbers in (0, max], or [min, max] when min is given; NaN (failing every later comparison) when not.
  const num = (obj: Json, key: string, fallback?: number, where = '', min?: number): number => {
    const v = obj[key] ?? fallback;
    const max = LIMITS[key] ?? Number.MAX_VALUE;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      issues.push(`${where}${key} must be a positive number, got ${JSON.stringify(v ?? null)}`);
      return NaN;
    }
    if ((min !== undefined && v < min) || v > max) {
      issues.push(`${where}${key} is ${v}, outside [${min ?? 0}, ${max}]`);
      return NaN;
    }
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = j[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') {
      issues.push(`${key} must be true or false, got ${JSON.stringify(v)}`);
      return fallback;
    }
    return v;
  };
  const tokenId = (key: string): number | null => {
    const v = j[key];
    if (v === undefined || v === null) return null;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
    issues.push(`${key} must be a token id, got ${JSON.stringify(v)}`);
    return null;
  };
  return { int, num, bool, tokenId };
}

type HfFields = ReturnType<typeof hfFields>;

/** head_dim: as given, else Qwen3's default 128, else hidden_size / num_attention_heads (which must divide). */
function headDimOf(
  j: Json,
  int: HfFields['int'],
  issues: string[],
  architecture: Architecture,
  hiddenSize: number,
  numHeads: number,
): number {
  let headDim: number;
  if (j.head_dim !== undefined && j.head_dim !== null) headDim = int('head_dim');
  else if (architecture === 'qwen3') headDim = int('head_dim', 128);
  else {
    headDim = Math.floor(hiddenSize / numHeads);
    if (hiddenSize % numHeads !== 0)
      issues.push(
        `hidden_size (${hiddenSize}) is not divisible by num_attention_heads (${numHeads}) and no head_dim is given`,
      );
  }
  return headDim;
}

/**
 * RoPE's theta and scaling (none, or Llama 3.1's): transformers 5 keeps everything in
 * rope_parameters; 4.x uses rope_theta + rope_scaling.
 */
function ropeOf(
  j: Json,
  num: HfFields['num'],
  issues: string[],
): { ropeTheta: number; ropeScaling: Llama3RopeScaling | null } {
  const rp = isObj(j.rope_parameters) ? j.rope_parameters : null;
  const ropeTheta =
    rp && rp.rope_theta !== undefined ? num(rp, 'rope_theta', 10000, 'rope_parameters.') : num(j, 'rope_theta', 10000);
  // theta ≤ 1 gives frequencies ≥ 1 that do not fall with the dimension (kernels/rope.ts refuses it)
  if (ropeTheta <= 1) issues.push(`rope_theta must be greater than 1, got ${ropeTheta}`);
  let ropeScaling: Llama3RopeScaling | null = null;
  const rs = rp ?? (isObj(j.rope_scaling) ? j.rope_scaling : null);
  if (j.rope_scaling !== undefined && j.rope_scaling !== null && !isObj(j.rope_scaling))
    issues.push('rope_scaling must be an object or null');
  if (rs) {
    const where = rp ? 'rope_parameters.' : 'rope_scaling.';
    const type = rs.rope_type ?? rs.type ?? 'default';
    if (type === 'llama3') {
      ropeScaling = {
        type: 'llama3',
        factor: num(rs, 'factor', undefined, where, LIMITS_MIN.factor),
        lowFreqFactor: num(rs, 'low_freq_factor', undefined, where, LIMITS_MIN.low_freq_factor),
        highFreqFactor: num(rs, 'high_freq_factor', undefined, where, LIMITS_MIN.high_freq_factor),
        originalMaxPositionEmbeddings: num(rs, 'original_max_position_embeddings', undefined, where),
      };
      if (ropeScaling.highFreqFactor <= ropeScaling.lowFreqFactor)
        issues.push(`${where}high_freq_factor must be greater than low_freq_factor`);
      const orig = ropeScaling.originalMaxPositionEmbeddings;
      if (Number.isFinite(orig) && !Number.isSafeInteger(orig))
        issues.push(`${where}original_max_position_embeddings must be a whole number of positions`);
    } else if (type !== 'default') {
      issues.push(`RoPE scaling type ${JSON.stringify(type)} is not supported (only llama3 or none)`);
    }
  }
  return { ropeTheta, ropeScaling };
}

/** eos_token_id: one id or a list of them. */
function eosTokenIdsOf(j: Json, tokenId: HfFields['tokenId'], issues: string[]): number[] {
  let eosTokenIds: number[] = [];
  if (Array.isArray(j.eos_token_id)) {
    eosTokenIds = j.eos_token_id.filter((v): v is number => Number.isSafeInteger(v) && (v as number) >= 0);
    if (eosTokenIds.length !== j.eos_token_id.length) issues.push('eos_token_id list must hold token ids only');
  } else {
    const e = tokenId('eos_token_id');
    if (e !== null) eosTokenIds = [e];
  }
  return eosTokenIds;
}

/**
 * The config.json a Hugging Face loader would read for this ModelConfig (transformers 4.x style).
 * `modelConfigFromHf(modelConfigToHf(c))` gives back `c`. Used to write test checkpoints.
 */
export function modelConfigToHf(c: ModelConfig): Record<string, unknown> {
  if (c.architecture === 'qwen2' && (!c.qkvBias || c.oBias))
    throw new RangeError('qwen2 always has q/k/v biases and no o_proj bias');
  if (c.architecture !== 'qwen2' && c.qkvBias !== c.oBias)
    throw new RangeError(`${c.architecture}: attention_bias sets q/k/v and o biases together`);
  if (c.qkNorm !== (c.architecture === 'qwen3')) throw new RangeError('qk_norm comes with qwen3 and only qwen3');
  const out: Record<string, unknown> = {
    architectures: [ARCH_CLASS[c.architecture]],
    model_type: c.architecture,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    max_position_embeddings: c.maxPositionEmbeddings,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling: c.ropeScaling && {
      rope_type: 'llama3',
      factor: c.ropeScaling.factor,
      low_freq_factor: c.ropeScaling.lowFreqFactor,
      high_freq_factor: c.ropeScaling.highFreqFactor,
      original_max_position_embeddings: c.ropeScaling.originalMaxPositionEmbeddings,
    },
    tie_word_embeddings: c.tieWordEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
  };
  if (c.architecture !== 'qwen2') out.attention_bias = c.qkvBias;
  if (c.architecture !== 'llama') out.use_sliding_window = false;
  if (c.dtype) out.torch_dtype = c.dtype;
  return out;
}

// --- tensor names ----------------------------------------------------------------------------

export type TensorRole =
  | 'embed'
  | 'final_norm'
  | 'lm_head'
  | 'input_norm'
  | 'post_attention_norm'
  | 'q_proj'
  | 'k_proj'
  | 'v_proj'
  | 'o_proj'
  | 'q_bias'
  | 'k_bias'
  | 'v_bias'
  | 'o_bias'
  | 'q_norm'
  | 'k_norm'
  | 'gate_proj'
  | 'up_proj'
  | 'down_proj';

export interface TensorSpec {
  name: string;
  shape: number[];
  role: TensorRole;
  /** Layer index, or null for embed / final norm / lm_head. */
  layer: number | null;
}

/** Names of one decoder layer's tensors (bias and q/k-norm names only where the config has them). */
export interface LayerTensorNames {
  inputNorm: string;
  q: string;
  k: string;
  v: string;
  o: string;
  qBias?: string;
  kBias?: string;
  vBias?: string;
  oBias?: string;
  qNorm?: string;
  kNorm?: string;
  postAttentionNorm: string;
  gate: string;
  up: string;
  down: string;
}

export function layerTensorNames(c: ModelConfig, i: number): LayerTensorNames {
  const p = `model.layers.${i}`;
  const names: LayerTensorNames = {
    inputNorm: `${p}.input_layernorm.weight`,
    q: `${p}.self_attn.q_proj.weight`,
    k: `${p}.self_attn.k_proj.weight`,
    v: `${p}.self_attn.v_proj.weight`,
    o: `${p}.self_attn.o_proj.weight`,
    postAttentionNorm: `${p}.post_attention_layernorm.weight`,
    gate: `${p}.mlp.gate_proj.weight`,
    up: `${p}.mlp.up_proj.weight`,
    down: `${p}.mlp.down_proj.weight`,
  };
  if (c.qkvBias) {
    names.qBias = `${p}.self_attn.q_proj.bias`;
    names.kBias = `${p}.self_attn.k_proj.bias`;
    names.vBias = `${p}.self_attn.v_proj.bias`;
  }
  if (c.oBias) names.oBias = `${p}.self_attn.o_proj.bias`;
  if (c.qkNorm) {
    names.qNorm = `${p}.self_attn.q_norm.weight`;
    names.kNorm = `${p}.self_attn.k_norm.weight`;
  }
  return names;
}

export const EMBED_TOKENS = 'model.embed_tokens.weight';
export const FINAL_NORM = 'model.norm.weight';
export const LM_HEAD = 'lm_head.weight';

/** Every tensor a checkpoint for this config must hold, with its shape, in a stable order. */
/** Number of parameters of a checkpoint with this config (every tensor of hfTensorSpecs). */
export function paramCount(c: ModelConfig): number {
  return hfTensorSpecs(c).reduce((sum, t) => sum + t.shape.reduce((a, b) => a * b, 1), 0);
}

export function hfTensorSpecs(c: ModelConfig): TensorSpec[] {
  const H = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const specs: TensorSpec[] = [{ name: EMBED_TOKENS, shape: [c.vocabSize, H], role: 'embed', layer: null }];
  for (let i = 0; i < c.numLayers; i++) {
    const n = layerTensorNames(c, i);
    const add = (name: string | undefined, shape: number[], role: TensorRole) => {
      if (name) specs.push({ name, shape, role, layer: i });
    };
    add(n.inputNorm, [H], 'input_norm');
    add(n.q, [qDim, H], 'q_proj');
    add(n.qBias, [qDim], 'q_bias');
    add(n.k, [kvDim, H], 'k_proj');
    add(n.kBias, [kvDim], 'k_bias');
    add(n.v, [kvDim, H], 'v_proj');
    add(n.vBias, [kvDim], 'v_bias');
    add(n.o, [H, qDim], 'o_proj');
    add(n.oBias, [H], 'o_bias');
    add(n.qNorm, [c.headDim], 'q_norm');
    add(n.kNorm, [c.headDim], 'k_norm');
    add(n.postAttentionNorm, [H], 'post_attention_norm');
    add(n.gate, [I, H], 'gate_proj');
    add(n.up, [I, H], 'up_proj');
    add(n.down, [H, I], 'down_proj');
  }
  specs.push({ name: FINAL_NORM, shape: [H], role: 'final_norm', layer: null });
  if (!c.tieWordEmbeddings) specs.push({ name: LM_HEAD, shape: [c.vocabSize, H], role: 'lm_head', layer: null });
  return specs;
}

export function hfTensorNames(c: ModelConfig): string[] {
  return hfTensorSpecs(c).map((s) => s.name);
}

/**
 * Check a checkpoint's tensors against the config: every expected tensor present with its shape.
 * Extra tensors are allowed only when harmless (a tied model that still ships lm_head.weight,
 * rotary inv_freq buffers); others are reported. Throws ModelLoadError with data.issues.
 */
export function checkCheckpointTensors(c: ModelConfig, shapes: Map<string, readonly number[]>): void {
  const issues: string[] = [];
  const specs = hfTensorSpecs(c);
  const expected = new Set(specs.map((s) => s.name));
  for (const s of specs) {
    const got = shapes.get(s.name);
    if (!got) issues.push(`missing ${s.name}`);
    else if (got.length !== s.shape.length || got.some((d, k) => d !== s.shape[k]))
      issues.push(`${s.name} has shape ${JSON.stringify(got)}, expected ${JSON.stringify(s.shape)}`);
  }
  for (const name of shapes.keys()) {
    if (expected.has(name)) continue;
    if (name === LM_HEAD && c.tieWordEmbeddings) continue;
    if (name.endsWith('.rotary_emb.inv_freq')) continue;
    issues.push(`unexpected tensor ${name}`);
  }
  if (issues.length) {
    const listed = capIssues(issues);
    throw new ModelLoadError(`The checkpoint does not match its config.json: ${listed.join('; ')}`, {
      issues: listed,
      issueCount: issues.length,
    });
  }
}

/** How many issues an error lists (message and data.issues); a hostile file can have millions. */
const MAX_LISTED_ISSUES = 10;

/** Longest issue kept whole (a tensor name can be as long as the file's header). */
const MAX_ISSUE_CHARS = 300;

/** The first MAX_LISTED_ISSUES issues, each cut to MAX_ISSUE_CHARS, then "… and N more" when there are more. */
export function capIssues(issues: readonly string[]): string[] {
  const cut = (t: string) => (t.length > MAX_ISSUE_CHARS ? `${t.slice(0, MAX_ISSUE_CHARS)}…` : t);
  const shown = issues.slice(0, MAX_LISTED_ISSUES).map(cut);
  if (issues.length > MAX_LISTED_ISSUES) shown.push(`… and ${issues.length - MAX_LISTED_ISSUES} more`);
  return shown;
}
