/**
 * IEEE binary16 and bfloat16 conversions on plain typed arrays (pure: no GPU). Used by the
 * safetensors reader/writer (F16/BF16 tensors), by the GPU runtime to widen f16 read-backs, and
 * by f16 weight packing. Rounding is to nearest even in both directions that narrow.
 */

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** IEEE 754 binary16 → number. */
export function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/** number → IEEE 754 binary16 (round to nearest even). */
export function floatToHalf(v: number): number {
  f32buf[0] = v;
  const x = u32buf[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 255) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

export function f16ToF32(src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = halfToFloat(src[i]!);
  return out;
}

export function f32ToF16(src: Float32Array): Uint16Array {
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = floatToHalf(src[i]!);
  return out;
}

/** bfloat16 (upper 16 bits of f32) → f32. */
export function bf16ToF32(src: Uint16Array): Float32Array {
  const out = new Uint32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = src[i]! << 16;
  return new Float32Array(out.buffer);
}

/**
 * The bfloat16 bits of the f32 whose bits are `x` (read through an Int32Array: V8 keeps int32 loads
 * in registers, where uint32 loads past 2^31 become doubles), rounded to nearest even; a NaN stays a
 * (quiet) NaN.
 */
export function bf16Bits(x: number): number {
  if ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** f32 → bfloat16, round to nearest even. */
export function f32ToBf16(src: Float32Array): Uint16Array {
  const u = new Int32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = bf16Bits(u[i]!);
  return out;
}
