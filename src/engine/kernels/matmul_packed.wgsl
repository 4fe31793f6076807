// matmul_packed: C = alpha · A · op(W)  (or C += … with ACCUMULATE), A (M, K) f32 activations,
// W a frozen weight packed as bf16 / f16 / q4 in u32 words (io/pack.ts; packed_weight.wgsl,
// prepended by matmul_packed.ts, reads it), unpacked to f32 while staging the tile.
//   TRANS_B: op(W) = Wᵀ with W stored (N, K) — the forward y = x · Wᵀ of a linear layer.
//   else:    op(W) = W  with W stored (K, N) — the input gradient dx = dy · W of the frozen base.
// W is always packed along its stored columns (wcols = K when TRANS_B, N otherwise).
// The tiling is matmul.wgsl's: WG_X × WG_Y threads compute a (4·WG_Y) × (4·WG_X) tile, 4 × 4 per
// thread in four vec4 registers, K in slabs of BK through workgroup memory; any M, N, K.
// Constants (overrides): WG_X, WG_Y, BK, TRANS_B, ACCUMULATE. Dispatch: (ceil(N / BN), ceil(M / BM)).

override WG_X: u32 = 16u;
override WG_Y: u32 = 16u;
override BK: u32 = 16u;
override TRANS_B: bool = true;
override ACCUMULATE: bool = false;

override BM: u32 = 4u * WG_Y;
override BN: u32 = 4u * WG_X;
override NT: u32 = WG_X * WG_Y;

struct Params { M: u32, N: u32, K: u32, wcols: u32, soff: u32, alpha: f32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;        // (M, K)
@group(0) @binding(1) var<storage, read> w: array<u32>;        // W (N, K) if TRANS_B else (K, N), packed
@group(0) @binding(2) var<storage, read_write> c: array<f32>; // (M, N)
@group(0) @binding(3) var<uniform> p: Params;

fn w_word(i: u32) -> u32 { return w[i]; } // the packed words, for packed_weight.wgsl

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
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);

  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    for (var i = tid; i < BK * BM; i += NT) {
      let kk = i % BK;
      let mm = i / BK;
      let gm = m0 + mm;
      let gk = k0 + kk;
      var v = 0.0;
      if (gm < p.M && gk < p.K) {
        v = a[gm * p.K + gk];
      }
      tile_a[kk * BM + mm] = v;
    }
    // op(W)[k0 .. k0+BK, n0 .. n0+BN]; consecutive threads read consecutive stored columns
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
          v = w_at(gn, gk, p.wcols, p.soff);
        } else {
          v = w_at(gk, gn, p.wcols, p.soff);
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
  store_row(gm0, gn0, acc0);
  store_row(gm0 + 1u, gn0, acc1);
  store_row(gm0 + 2u, gn0, acc2);
  store_row(gm0 + 3u, gn0, acc3);
}

fn store_row(gm: u32, gn0: u32, acc: vec4<f32>) {
  if (gm >= p.M) {
    return;
  }
  let row = gm * p.N;
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
