// matmul: C = alpha * op(A) · op(B)  (or C += ... with ACCUMULATE), row-major, batched over z.
//   op(A) is (M, K): A itself (M, K), or Aᵀ when TRANS_A (A stored as (K, M)).
//   op(B) is (K, N): B itself (K, N), or Bᵀ when TRANS_B (B stored as (N, K)).
// Register-blocked tiling: a workgroup of WG_X × WG_Y threads computes a BM × BN tile of C
// (BM = 4 * WG_Y, BN = 4 * WG_X); each thread owns a 4 × 4 block of it (4 contiguous rows × 4
// contiguous columns), held in four vec4 registers. K is walked in slabs of BK, staged through
// workgroup memory (A as [k][m], B as [k][n]), so each step of the inner loop reads 4 + 4
// adjacent words and does four vec4 multiply-adds. Out-of-range elements stage as 0, so any
// M, N, K works. The accumulators are named vectors, not an indexed array: compilers that do not
// unroll (SwiftShader) would otherwise keep them in memory. Scalar (not vec4) workgroup arrays:
// as fast on an H200 and 1.4× faster on SwiftShader, which handles per-component stores badly.
// Storage types TA / TB are f32, or f16 in the variants matmul.ts makes with preprocessWgsl
// (flags F16 = either is f16, F16_A, F16_B); accumulation is always f32.
// Constants (overrides): WG_X, WG_Y (threads along N and M), BK, TRANS_A, TRANS_B, ACCUMULATE.
// Dispatch: (ceil(N / BN), ceil(M / BM), batch) workgroups.

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

override BM: u32 = 4u * WG_Y;
override BN: u32 = 4u * WG_X;
override NT: u32 = WG_X * WG_Y;

struct Params {
  M: u32,
  N: u32,
  K: u32,
  stride_a: u32, // elements between batches of A (0: A is shared by all batches)
  stride_b: u32, // elements between batches of B (0: shared)
  stride_c: u32, // elements between batches of C
  alpha: f32,
}

@group(0) @binding(0) var<storage, read> a: array<TA>;        // (batch, M, K), or (batch, K, M) if TRANS_A
@group(0) @binding(1) var<storage, read> b: array<TB>;        // (batch, K, N), or (batch, N, K) if TRANS_B
@group(0) @binding(2) var<storage, read_write> c: array<f32>; // (batch, M, N)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> tile_a: array<f32, BK * BM>; // [k][m]
var<workgroup> tile_b: array<f32, BK * BN>; // [k][n]

@compute @workgroup_size(WG_X, WG_Y)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(local_invocation_index) tid: u32,
) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let base_a = wid.z * p.stride_a;
  let base_b = wid.z * p.stride_b;
  let base_c = wid.z * p.stride_c;

  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);

  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    // Stage op(A)[m0 .. m0+BM, k0 .. k0+BK]; consecutive threads read consecutive addresses of
    // A in either layout.
    for (var i = tid; i < BK * BM; i += NT) {
      var kk: u32;
      var mm: u32;
      if (TRANS_A) {
        mm = i % BM;
        kk = i / BM;
      } else {
        kk = i % BK;
        mm = i / BK;
      }
      let gm = m0 + mm;
      let gk = k0 + kk;
      var v = 0.0;
      if (gm < p.M && gk < p.K) {
        if (TRANS_A) {
          v = f32(a[base_a + gk * p.M + gm]);
        } else {
          v = f32(a[base_a + gm * p.K + gk]);
        }
      }
      tile_a[kk * BM + mm] = v;
    }
    // Stage op(B)[k0 .. k0+BK, n0 .. n0+BN].
    for (var i = tid; i < BK * BN; i += NT) {
      var kk: u32;
      var nn: u32;
      if (TRANS_B) {
        kk = i % BK;
        nn = i / BK;
      } else {
        nn = i % BN;
        kk = i / BN;
      }
      let gn = n0 + nn;
      let gk = k0 + kk;
      var v = 0.0;
      if (gn < p.N && gk < p.K) {
        if (TRANS_B) {
          v = f32(b[base_b + gn * p.K + gk]);
        } else {
          v = f32(b[base_b + gk * p.N + gn]);
        }
      }
      tile_b[kk * BN + nn] = v;
    }
    workgroupBarrier();

    for (var kk = 0u; kk < BK; kk++) {
      let ia = kk * BM + 4u * lid.y;
      let ib = kk * BN + 4u * lid.x;
      let ra = vec4<f32>(tile_a[ia], tile_a[ia + 1u], tile_a[ia + 2u], tile_a[ia + 3u]);
      let rb = vec4<f32>(tile_b[ib], tile_b[ib + 1u], tile_b[ib + 2u], tile_b[ib + 3u]);
      acc0 += ra.x * rb;
      acc1 += ra.y * rb;
      acc2 += ra.z * rb;
      acc3 += ra.w * rb;
    }
    workgroupBarrier();
  }

  let gm0 = m0 + 4u * lid.y;
  let gn0 = n0 + 4u * lid.x;
  store_row(base_c, gm0, gn0, acc0);
  store_row(base_c, gm0 + 1u, gn0, acc1);
  store_row(base_c, gm0 + 2u, gn0, acc2);
  store_row(base_c, gm0 + 3u, gn0, acc3);
}

fn store_row(base_c: u32, gm: u32, gn0: u32, acc: vec4<f32>) {
  if (gm >= p.M) {
    return;
  }
  let row = base_c + gm * p.N;
  for (var j = 0u; j < 4u; j++) {
    let gn = gn0 + j;
    if (gn < p.N) {
      var v = p.alpha * acc[j];
      if (ACCUMULATE) {
        v += c[row + gn];
      }
      c[row + gn] = v;
    }
  }
}
