/**
 * Packed storage for the frozen base weights (pure: no GPU). A linear weight W (N, K) — stored
 * (out, in) as PyTorch keeps it — is held on the GPU in one of four formats, all as u32 words so
 * that WGSL unpacks them without `shader-f16`:
 *
 *   f32   the reference: one f32 per element (not packed; uploaded as is).
 *   bf16  two bfloat16 per word, element 2i in the low half, 2i + 1 in the high half of word i of
 *         its row (K even). Round to nearest even from f32, so a bf16 checkpoint is stored exactly.
 *         WGSL: bitcast<f32>(w << 16u) / bitcast<f32>(w & 0xffff0000u).
 *   f16   two IEEE binary16 per word, same order (WGSL: unpack2x16float). Exact for f16 checkpoints.
 *   q4    4-bit symmetric group quantisation along the input dimension, groups of 32 with one f16
 *         scale each — the scheme of MLC/WebLLM's q4f16_1 (group quantisation, int4, max_int 7):
 *           s = f16(max|w| over the group / 7)            (the scale rounded to binary16 first)
 *           q = clamp(round(w / s) + 7, 0, 14)           (round half away from zero; s = 0 → q = 7)
 *           w ≈ (q − 7) · s
 *         Eight codes per word, element 8i + j in bits 4j..4j+3 of word i of its row (K % 32 == 0),
 *         so a row is K / 8 words and a group 4 words. After the N·K/8 code words come the N·K/32
 *         scales, two binary16 per word: scale number r·(K/32) + g (row r, group g) in the low half
 *         (even) or high half (odd) of word N·K/8 + ⌊that / 2⌋.
 *
 * Bytes per parameter: f32 4, bf16/f16 2, q4 0.5 + 2/32 = 0.5625. `weightBytes(config, format)`
 * gives a model's total from config.json alone (before any download).
 */
import { ModelLoadError } from '../../core/errors.ts';
import { hfTensorSpecs, type ModelConfig, type TensorRole } from './config.ts';
import { bf16Bits, f32ToF16, halfToFloat, floatToHalf } from './float16.ts';

export type WeightFormat = 'f32' | 'bf16' | 'f16' | 'q4';
export const WEIGHT_FORMATS: readonly WeightFormat[] = ['f32', 'bf16', 'f16', 'q4'];
/** Elements per q4 group (and per f16 scale), as MLC's q4f16_1. */
export const Q4_GROUP = 32;
/** The q4 zero point: codes 0..14 stand for −7..7 times the group's scale. */
const Q4_OFFSET = 7;

/** A weight (N, K) in a packed format: `words` holds the codes (and, for q4, the scales after them). */
export interface PackedWeight {
  format: Exclude<WeightFormat, 'f32'>;
  /** N (output features / rows). */
  rows: number;
  /** K (input features / columns): the dimension packed along. */
  cols: number;
  words: Uint32Array;
  /** q4: word index where the scales start (N·K/8); 16-bit formats: words.length. */
  scaleOffset: number;
}

/** Parse a user-supplied format name (CLI flag, UI select). */
export function parseWeightFormat(s: string): WeightFormat {
  if ((WEIGHT_FORMATS as readonly string[]).includes(s)) return s as WeightFormat;
  throw new ModelLoadError(`weights must be one of ${WEIGHT_FORMATS.join(', ')}; got "${s}"`, {
    code: 'bad-weight-format',
  });
}

/** Throws unless a (rows, cols) weight can be packed in `format` (the kernels need whole words / groups). */
export function checkPackable(rows: number, cols: number, format: WeightFormat): void {
  const need = format === 'q4' ? Q4_GROUP : format === 'f32' ? 1 : 2;
  if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows < 0 || cols % need !== 0)
    throw new ModelLoadError(
      `a (${rows}, ${cols}) weight cannot be stored as ${format}: its input dimension must be a multiple of ${need}; load with weights f32 or bf16`,
      { code: 'bad-weight-format', format, rows, cols },
    );
}

/** u32 words of a packed (rows, cols) weight; f32: one per element. */
export function packedWords(rows: number, cols: number, format: WeightFormat): number {
  checkPackable(rows, cols, format);
  if (format === 'f32') return rows * cols;
  if (format === 'bf16' || format === 'f16') return (rows * cols) / 2;
  const scales = (rows * cols) / Q4_GROUP;
  return (rows * cols) / 8 + Math.ceil(scales / 2);
}

/** The tensors a format packs: every linear weight and the embedding table (also the tied LM head). */
const PACKED_ROLES: ReadonlySet<TensorRole> = new Set<TensorRole>([
  'embed',
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
  'lm_head',
]);

/**
 * Bytes a model's weights take on the GPU in `format`, from its config alone: packed tensors
 * (PACKED_ROLES) at packedWords · 4, norms and biases in f32. The engine pads each buffer to 16
 * bytes, so the allocation is at most 16 bytes per tensor more.
 */
export function weightBytes(config: ModelConfig, format: WeightFormat): number {
  let bytes = 0;
  for (const s of hfTensorSpecs(config)) {
    if (PACKED_ROLES.has(s.role) && s.shape.length === 2) bytes += 4 * packedWords(s.shape[0]!, s.shape[1]!, format);
    else bytes += 4 * s.shape.reduce((a, b) => a * b, 1);
  }
  return bytes;
}

const u32OfF32 = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);

/** Pack a weight w (rows, cols) row-major. */
export function packWeight(
  w: Float32Array,
  rows: number,
  cols: number,
  format: Exclude<WeightFormat, 'f32'>,
): PackedWeight {
  if (w.length !== rows * cols) throw new RangeError(`packWeight: ${w.length} values for (${rows}, ${cols})`);
  const words = new Uint32Array(packedWords(rows, cols, format));
  if (format === 'bf16') {
    // two values a word, element 2i in the low half; straight from the f32 bits (no 16-bit copy)
    const u = new Int32Array(w.buffer, w.byteOffset, w.length);
    for (let i = 0; i < words.length; i++) words[i] = bf16Bits(u[2 * i]!) | (bf16Bits(u[2 * i + 1]!) << 16); // stored mod 2^32
    return { format, rows, cols, words, scaleOffset: words.length };
  }
  if (format === 'f16') {
    const h = f32ToF16(w);
    for (let i = 0; i < words.length; i++) words[i] = (h[2 * i]! | (h[2 * i + 1]! << 16)) >>> 0;
    return { format, rows, cols, words, scaleOffset: words.length };
  }
  const scaleOffset = (rows * cols) / 8;
  const groups = (rows * cols) / Q4_GROUP; // groups never straddle rows: cols % 32 == 0
  for (let g = 0; g < groups; g++) {
    const base = g * Q4_GROUP;
    let maxAbs = 0;
    for (let j = 0; j < Q4_GROUP; j++) maxAbs = Math.max(maxAbs, Math.abs(w[base + j]!));
    const sBits = floatToHalf(maxAbs / Q4_OFFSET);
    const s = halfToFloat(sBits);
    words[scaleOffset + (g >> 1)]! |= (g & 1 ? sBits << 16 : sBits) >>> 0;
    for (let j = 0; j < Q4_GROUP; j++) {
      const v = s > 0 ? w[base + j]! / s : 0;
      const r = Math.sign(v) * Math.round(Math.abs(v)); // half away from zero
      const q = Math.min(2 * Q4_OFFSET, Math.max(0, r + Q4_OFFSET));
      const i = base + j;
      words[i >> 3] = (words[i >> 3]! | (q << (4 * (i & 7)))) >>> 0;
    }
  }
  return { format, rows, cols, words, scaleOffset };
}

/** The f32 values a packed weight stands for (the CPU reference of every packed kernel). */
export function unpackWeight(p: PackedWeight): Float32Array {
  const n = p.rows * p.cols;
  const out = new Float32Array(n);
  const w = p.words;
  if (p.format === 'bf16') {
    const u = u32OfF32(out);
    for (let i = 0; i < n; i++) u[i] = i & 1 ? w[i >> 1]! & 0xffff0000 : (w[i >> 1]! << 16) >>> 0;
    return out;
  }
  if (p.format === 'f16') {
    for (let i = 0; i < n; i++) out[i] = halfToFloat(i & 1 ? w[i >> 1]! >>> 16 : w[i >> 1]! & 0xffff);
    return out;
  }
  for (let i = 0; i < n; i++) {
    const g = Math.floor(i / Q4_GROUP);
    const sw = w[p.scaleOffset + (g >> 1)]!;
    const s = halfToFloat(g & 1 ? sw >>> 16 : sw & 0xffff);
    const q = (w[i >> 3]! >>> (4 * (i & 7))) & 0xf;
    out[i] = (q - Q4_OFFSET) * s;
  }
  return out;
}

/** Round-trip through a format: what a weight is on the GPU, as f32 (f32: unchanged). */
export function quantiseLike(w: Float32Array, rows: number, cols: number, format: WeightFormat): Float32Array {
  return format === 'f32' ? w : unpackWeight(packWeight(w, rows, cols, format));
}
