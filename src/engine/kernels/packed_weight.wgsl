// packed_weight: not an op of its own — the functions that read a frozen weight W (R, C) held as
// u32 words in the layouts of io/pack.ts (C is the packed, input dimension). packed_weight.ts
// appends this to matmul_packed.wgsl and embedding_packed.wgsl (matvec.ts to matvec.wgsl), which
// define `fn w_word(i: u32) -> u32` (word i of the packed weight; usually `return w[i];`, the
// fused matvec picks one of several weight bindings) and pass C and the q4 scale offset. Exactly one
// flag of BF16 / F16 / Q4 is set (wgsl_preprocess). No `shader-f16`: bf16 is the top half of an
// f32 (shifts), f16 goes through unpack2x16float, q4 codes through extractBits.

// One element W[row, col] (cols = C; soff = word index of the q4 scales, N·C/8).
fn w_at(row: u32, col: u32, cols: u32, soff: u32) -> f32 {
  let i = row * cols + col;
// #if BF16
  let wd = w_word(i >> 1u);
  return bitcast<f32>(select(wd << 16u, wd & 0xffff0000u, (i & 1u) == 1u));
// #endif
// #if F16
  return unpack2x16float(w_word(i >> 1u))[i & 1u];
// #endif
// #if Q4
  let q = extractBits(w_word(i >> 3u), 4u * (i & 7u), 4u);
  return (f32(q) - 7.0) * q4_scale(i >> 5u, soff);
// #endif
}

// Eight consecutive elements W[row, 8c .. 8c + 7] (C % 8 == 0 in every format): (lo, hi) halves.
fn w_chunk8(row: u32, c: u32, cols: u32, soff: u32) -> array<vec4<f32>, 2> {
  let i = row * cols + 8u * c; // first element; a multiple of 8
// #if BF16
  let b = i >> 1u;
  let d0 = w_word(b);
  let d1 = w_word(b + 1u);
  let d2 = w_word(b + 2u);
  let d3 = w_word(b + 3u);
  let m = 0xffff0000u;
  return array<vec4<f32>, 2>(
    bitcast<vec4<f32>>(vec4<u32>(d0 << 16u, d0 & m, d1 << 16u, d1 & m)),
    bitcast<vec4<f32>>(vec4<u32>(d2 << 16u, d2 & m, d3 << 16u, d3 & m)));
// #endif
// #if F16
  let b = i >> 1u;
  return array<vec4<f32>, 2>(
    vec4<f32>(unpack2x16float(w_word(b)), unpack2x16float(w_word(b + 1u))),
    vec4<f32>(unpack2x16float(w_word(b + 2u)), unpack2x16float(w_word(b + 3u))));
// #endif
// #if Q4
  let wd = w_word(i >> 3u);
  let s = q4_scale(i >> 5u, soff);
  let lo = vec4<f32>(vec4<u32>(extractBits(wd, 0u, 4u), extractBits(wd, 4u, 4u),
                               extractBits(wd, 8u, 4u), extractBits(wd, 12u, 4u)));
  let hi = vec4<f32>(vec4<u32>(extractBits(wd, 16u, 4u), extractBits(wd, 20u, 4u),
                               extractBits(wd, 24u, 4u), extractBits(wd, 28u, 4u)));
  return array<vec4<f32>, 2>((lo - 7.0) * s, (hi - 7.0) * s);
// #endif
}

// #if Q4
// Scale of group g (groups of 32 in row-major order): two binary16 per word after the codes.
fn q4_scale(g: u32, soff: u32) -> f32 {
  return unpack2x16float(w_word(soff + (g >> 1u)))[g & 1u];
}
// #endif
