// matmul_packed: C = alpha · A · op(W)  (or C += … with ACCUMULATE), A (M, K) f32 activations,
// W a frozen weight packed as bf16 / f16 / q4 in u32 words (io/pack.ts; packed_weight.wgsl,
// appended by matmul_packed.ts, reads it), unpacked to f32 while staging the tile.
//   TRANS_B: op(W) = Wᵀ with W stored (N, K) — the forward y = x · Wᵀ of a linear layer.
//   else:    op(W) = W  with W stored (K, N) — the input gradient dx = dy · W of the frozen base.
// W is always packed along its stored columns (wcols = K when TRANS_B, N otherwise).
// The tiling is shared/matmul_tile.wgsl's (flags TM8, VEC4_A: A read as vec4 when K % 4 = 0).
// Split-K (matmul_packed.ts): with S slices, c is the (S, M, N) partials scratch, slice s at s · M · N.
// Constants (overrides): WG_X, WG_Y, BK, TRANS_B, ACCUMULATE. Dispatch: (ceil(N / BN), ceil(M / BM), S).

override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override BK: u32 = 16u;
override TRANS_B: bool = true;
override ACCUMULATE: bool = false;
const TRANS_A: bool = false;

struct Params {
  M: u32,
  N: u32,
  K: u32,
  wcols: u32,
  soff: u32,
  alpha: f32,
  batch: u32, // 1
  k_slice: u32, // K per split-K slice (a multiple of BK; at least K for one slice)
}

@group(0) @binding(1) var<storage, read> w: array<u32>;        // W (N, K) if TRANS_B else (K, N), packed
@group(0) @binding(2) var<storage, read_write> c: array<f32>; // (M, N), or (S, M, N) partials
@group(0) @binding(3) var<uniform> p: Params;

fn w_word(i: u32) -> u32 { return w[i]; } // the packed words, for packed_weight.wgsl

// #if VEC4_A
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>; // (M, K)

fn load_a4(z: u32, m: u32, k: u32) -> vec4<f32> {
  return a[(m * p.K + k) / 4u];
}
// #else
@group(0) @binding(0) var<storage, read> a: array<f32>; // (M, K)

fn load_a(z: u32, m: u32, k: u32) -> f32 {
  return a[m * p.K + k];
}
// #endif

fn load_b(z: u32, k: u32, n: u32) -> f32 {
  if (TRANS_B) {
    return w_at(n, k, p.wcols, p.soff);
  }
  return w_at(k, n, p.wcols, p.soff);
}

fn c_base(z: u32) -> u32 {
  return z * p.M * p.N;
}

// #include "matmul_tile.wgsl"
