// matmul_tile: the tiled product loop of matmul.wgsl and matmul_packed.wgsl,
//   C[z] = alpha · op(A)[z] · op(B)[z]   (C[z] += … with ACCUMULATE),
// op(A) (M, K), op(B) (K, N), C row-major (M, N) from c[c_base(z)].
// A workgroup of WG_X × WG_Y threads computes a BM × BN tile of C (BM = TM · WG_Y, BN = 4 · WG_X,
// TM = 8 with flag TM8, else 4). Thread (tx, ty) owns rows ty + r · WG_Y (r < TM) and columns
// tx + j · WG_X (j < 4), held in TM vec4 registers: neighbouring threads read neighbouring words of
// the staged tiles (no shared-memory bank conflicts) and write neighbouring words of C. K is walked
// in slabs of BK, staged through workgroup memory as [k][m] and [k][n] rows padded by one word, so
// the staging writes of either operand layout also fall in distinct banks. The accumulators are
// named vectors, not an indexed array: compilers that do not unroll (SwiftShader) would otherwise
// keep them in memory. Out-of-range elements stage as 0, so any M, N, K works.
// Split-K: the grid's z is slice · p.batch + batch. Slice s walks K in [s · p.k_slice,
// (s + 1) · p.k_slice) (p.k_slice a multiple of BK; p.k_slice ≥ K for one slice) and writes its
// partial product at c_base(wid.z), the includer's (slice, batch, M, N) layout; with one slice that
// is c_base(z), the output itself. matmul.ts sums the slices (splitk_reduce.wgsl).
// With flag DOUBLE_BUF the staged tiles are double-buffered: slab k + 1 is staged into one buffer
// while slab k is multiplied out of the other, one barrier per slab instead of two.
// Staging reads one element at a time through the includer's load_a(z, m, k) / load_b(z, k, n),
// or, with flags VEC4_A / VEC4_B, four along the operand's contiguous stored dimension through
// load_a4 / load_b4 (the caller sets them only when that dimension is a multiple of 4, so a group
// of four is wholly inside or outside the matrix).
// The includer declares: overrides WG_X, WG_Y, BK (a multiple of 4), TRANS_A, TRANS_B (consts
// will do), ACCUMULATE; uniforms p with M, N, K, alpha, batch, k_slice; the output binding
// c: array<f32>; and c_base(z), the loaders. Dispatch: (ceil(N / BN), ceil(M / BM), slices · batch).

// #if TM8
override TM: u32 = 8u;
// #else
override TM: u32 = 4u;
// #endif
override BM: u32 = TM * WG_Y;
override BN: u32 = 4u * WG_X;
override SA: u32 = BM + 1u; // padded row strides of the staged tiles
override SB: u32 = BN + 1u;
override NT: u32 = WG_X * WG_Y;
// #if DOUBLE_BUF
override NBUF: u32 = 2u;
// #else
override NBUF: u32 = 1u;
// #endif

var<workgroup> tile_a: array<f32, NBUF * BK * SA>; // [buffer][k][m]
var<workgroup> tile_b: array<f32, NBUF * BK * SB>; // [buffer][k][n]

/** Stage op(A)[m0 .. m0+BM, k0 .. k0+BK] at tile_a[at0 ..]: consecutive threads read consecutive stored words. */
fn stage_a(z: u32, m0: u32, k0: u32, tid: u32, at0: u32) {
  // #if VEC4_A
  for (var i = tid; i < BK * BM / 4u; i += NT) {
    var mm: u32;
    var kk: u32;
    if (TRANS_A) {
      mm = 4u * (i % (BM / 4u));
      kk = i / (BM / 4u);
    } else {
      kk = 4u * (i % (BK / 4u));
      mm = i / (BK / 4u);
    }
    let gm = m0 + mm;
    let gk = k0 + kk;
    var v = vec4<f32>(0.0);
    if (gm < p.M && gk < p.K) {
      v = load_a4(z, gm, gk);
    }
    if (TRANS_A) {
      let at = at0 + kk * SA + mm;
      tile_a[at] = v.x;
      tile_a[at + 1u] = v.y;
      tile_a[at + 2u] = v.z;
      tile_a[at + 3u] = v.w;
    } else {
      let at = at0 + kk * SA + mm;
      tile_a[at] = v.x;
      tile_a[at + SA] = v.y;
      tile_a[at + 2u * SA] = v.z;
      tile_a[at + 3u * SA] = v.w;
    }
  }
  // #else
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
      v = load_a(z, gm, gk);
    }
    tile_a[at0 + kk * SA + mm] = v;
  }
  // #endif
}

/** Stage op(B)[k0 .. k0+BK, n0 .. n0+BN] at tile_b[at0 ..]: consecutive threads read consecutive stored words. */
fn stage_b(z: u32, k0: u32, n0: u32, tid: u32, at0: u32) {
  // #if VEC4_B
  for (var i = tid; i < BK * BN / 4u; i += NT) {
    var kk: u32;
    var nn: u32;
    if (TRANS_B) {
      kk = 4u * (i % (BK / 4u));
      nn = i / (BK / 4u);
    } else {
      nn = 4u * (i % (BN / 4u));
      kk = i / (BN / 4u);
    }
    let gn = n0 + nn;
    let gk = k0 + kk;
    var v = vec4<f32>(0.0);
    if (gn < p.N && gk < p.K) {
      v = load_b4(z, gk, gn);
    }
    let at = at0 + kk * SB + nn;
    if (TRANS_B) {
      tile_b[at] = v.x;
      tile_b[at + SB] = v.y;
      tile_b[at + 2u * SB] = v.z;
      tile_b[at + 3u * SB] = v.w;
    } else {
      tile_b[at] = v.x;
      tile_b[at + 1u] = v.y;
      tile_b[at + 2u] = v.z;
      tile_b[at + 3u] = v.w;
    }
  }
  // #else
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
      v = load_b(z, gk, gn);
    }
    tile_b[at0 + kk * SB + nn] = v;
  }
  // #endif
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(local_invocation_index) tid: u32,
) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let z = wid.z % p.batch;
  let k_lo = (wid.z / p.batch) * p.k_slice;
  let k_hi = min(p.K, k_lo + p.k_slice);

  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  // #if TM8
  var acc4 = vec4<f32>(0.0);
  var acc5 = vec4<f32>(0.0);
  var acc6 = vec4<f32>(0.0);
  var acc7 = vec4<f32>(0.0);
  // #endif

  // #if DOUBLE_BUF
  var buf = 0u; // the buffer holding slab k0
  if (k_lo < k_hi) {
    stage_a(z, m0, k_lo, tid, 0u);
    stage_b(z, k_lo, n0, tid, 0u);
  }
  workgroupBarrier();
  for (var k0 = k_lo; k0 < k_hi; k0 += BK) {
    // The other buffer was last read before the previous step's barrier: stage the next slab there.
    if (k0 + BK < k_hi) {
      stage_a(z, m0, k0 + BK, tid, (1u - buf) * BK * SA);
      stage_b(z, k0 + BK, n0, tid, (1u - buf) * BK * SB);
    }
    let ba = buf * BK * SA;
    let bb = buf * BK * SB;
  // #else
  for (var k0 = k_lo; k0 < k_hi; k0 += BK) {
    stage_a(z, m0, k0, tid, 0u);
    stage_b(z, k0, n0, tid, 0u);
    workgroupBarrier();
    let ba = 0u;
    let bb = 0u;
  // #endif
    for (var kk = 0u; kk < BK; kk++) {
      let ia = ba + kk * SA + lid.y;
      let ib = bb + kk * SB + lid.x;
      let rb = vec4<f32>(tile_b[ib], tile_b[ib + WG_X], tile_b[ib + 2u * WG_X], tile_b[ib + 3u * WG_X]);
      acc0 += tile_a[ia] * rb;
      acc1 += tile_a[ia + WG_Y] * rb;
      acc2 += tile_a[ia + 2u * WG_Y] * rb;
      acc3 += tile_a[ia + 3u * WG_Y] * rb;
      // #if TM8
      acc4 += tile_a[ia + 4u * WG_Y] * rb;
      acc5 += tile_a[ia + 5u * WG_Y] * rb;
      acc6 += tile_a[ia + 6u * WG_Y] * rb;
      acc7 += tile_a[ia + 7u * WG_Y] * rb;
      // #endif
    }
    workgroupBarrier();
    // #if DOUBLE_BUF
    buf = 1u - buf;
    // #endif
  }

  let base_c = c_base(wid.z);
  let gm = m0 + lid.y;
  let gn = n0 + lid.x;
  store_row(base_c, gm, gn, acc0);
  store_row(base_c, gm + WG_Y, gn, acc1);
  store_row(base_c, gm + 2u * WG_Y, gn, acc2);
  store_row(base_c, gm + 3u * WG_Y, gn, acc3);
  // #if TM8
  store_row(base_c, gm + 4u * WG_Y, gn, acc4);
  store_row(base_c, gm + 5u * WG_Y, gn, acc5);
  store_row(base_c, gm + 6u * WG_Y, gn, acc6);
  store_row(base_c, gm + 7u * WG_Y, gn, acc7);
  // #endif
}

/** Row gm of the tile's output: columns gn + j · WG_X. */
fn store_row(base_c: u32, gm: u32, gn: u32, acc: vec4<f32>) {
  if (gm >= p.M) {
    return;
  }
  let row = base_c + gm * p.N;
  for (var j = 0u; j < 4u; j++) {
    let col = gn + j * WG_X;
    if (col < p.N) {
      var v = p.alpha * acc[j];
      if (ACCUMULATE) {
        v += c[row + col];
      }
      c[row + col] = v;
    }
  }
}
