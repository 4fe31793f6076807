// matmul: C = alpha * op(A) · op(B)  (or C += ... with ACCUMULATE), row-major, batched over z.
//   op(A) is (M, K): A itself (M, K), or Aᵀ when TRANS_A (A stored as (K, M)).
//   op(B) is (K, N): B itself (K, N), or Bᵀ when TRANS_B (B stored as (N, K)).
// The tiling (register blocks of TM × 4 per thread, padded staging) is shared/matmul_tile.wgsl's;
// this file says where the operands live. Storage types TA / TB are f32, or f16 in the variants
// matmul.ts makes (flags F16 = either is f16, F16_A, F16_B); accumulation is always f32. With
// VEC4_A / VEC4_B (f32 only) an operand is read as vec4 along its stored rows, which matmul.ts
// sets when their length is a multiple of 4.
// Split-K (matmul.ts): with S slices, c is the (S, batch, M, N) partials scratch, slice s of batch
// z at c_base(s · batch + z); with one slice, c is the output (batch, M, N).
// Constants (overrides): WG_X, WG_Y (threads along N and M), BK, TRANS_A, TRANS_B, ACCUMULATE.
// Dispatch: (ceil(N / BN), ceil(M / BM), S · batch) workgroups.

// #if F16
enable f16;
// #endif
// #if F16_A
alias TA = f16;
// #else
alias TA = f32;
// #endif
// #if F16_B
alias TB = f16;
// #else
alias TB = f32;
// #endif

override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override BK: u32 = 16u;
override TRANS_A: bool = false;
override TRANS_B: bool = false;
override ACCUMULATE: bool = false;

struct Params {
  M: u32,
  N: u32,
  K: u32,
  stride_a: u32, // elements between batches of A (0: A is shared by all batches)
  stride_b: u32, // elements between batches of B (0: shared)
  stride_c: u32, // elements between batches of C
  alpha: f32,
  batch: u32,
  k_slice: u32, // K per split-K slice (a multiple of BK; at least K for one slice)
}

@group(0) @binding(2) var<storage, read_write> c: array<f32>; // (batch, M, N), or (S, batch, M, N) partials
@group(0) @binding(3) var<uniform> p: Params;

/** Where element (r, s) of a stored (rows, cols) matrix sits, past batch z's offset. */
fn at(base: u32, r: u32, s: u32, cols: u32) -> u32 {
  return base + r * cols + s;
}

// #if VEC4_A
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>; // (batch, M, K), or (batch, K, M) if TRANS_A

fn load_a4(z: u32, m: u32, k: u32) -> vec4<f32> {
  if (TRANS_A) {
    return a[at(z * p.stride_a, k, m, p.M) / 4u];
  }
  return a[at(z * p.stride_a, m, k, p.K) / 4u];
}
// #else
@group(0) @binding(0) var<storage, read> a: array<TA>; // (batch, M, K), or (batch, K, M) if TRANS_A

fn load_a(z: u32, m: u32, k: u32) -> f32 {
  if (TRANS_A) {
    return f32(a[at(z * p.stride_a, k, m, p.M)]);
  }
  return f32(a[at(z * p.stride_a, m, k, p.K)]);
}
// #endif

// #if VEC4_B
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>; // (batch, K, N), or (batch, N, K) if TRANS_B

fn load_b4(z: u32, k: u32, n: u32) -> vec4<f32> {
  if (TRANS_B) {
    return b[at(z * p.stride_b, n, k, p.K) / 4u];
  }
  return b[at(z * p.stride_b, k, n, p.N) / 4u];
}
// #else
@group(0) @binding(1) var<storage, read> b: array<TB>; // (batch, K, N), or (batch, N, K) if TRANS_B

fn load_b(z: u32, k: u32, n: u32) -> f32 {
  if (TRANS_B) {
    return f32(b[at(z * p.stride_b, n, k, p.K)]);
  }
  return f32(b[at(z * p.stride_b, k, n, p.N)]);
}
// #endif

fn c_base(z: u32) -> u32 {
  return z * p.stride_c;
}

// #include "matmul_tile.wgsl"
