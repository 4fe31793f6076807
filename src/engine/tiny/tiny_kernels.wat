;; The Lab's fast path (tiny_lm.ts) on WebAssembly SIMD: attention's two inner sums for two query rows
;; at once, one per f64x2 lane, over a head of 16 channels (the Lab's models) — decoding's, and the
;; trainer's forward — the trainer's attention backward of one row (back16), and the matmul, two
;; outputs a lane pair. Every lane is the scalar loop's own sum in its order (f64 products of f32
;; values, added from +0 in ascending order, no fused multiply-add), so the values equal tiny_lm.ts's
;; JavaScript loops bit for bit. The exponentials (expsub2: attention's; swiglu2: SwiGLU's sigmoid)
;; are fdlibm's exp, which is V8's Math.exp, step for step, so they too equal the reference's.
;; Built into tiny_kernels_wasm.ts by scripts/build_tiny_kernels.js.
(module
  (memory (export "memory") 1)

  ;; scores2: for each key j < n, e[j] = (Σ_d qa[d]·k_j[d], Σ_d qb[d]·k_j[d]) · sc, d = 0..15 ascending,
  ;; and the lane pair at op = the maxima of the first nmax of them from −inf (f64x2.max: NaN wins, +0
  ;; over −0, as Math.max). qp: 16 lane pairs (qa[d], qb[d]); kp: key 0's 16 f64 values, key j at
  ;; kp + j·kstride bytes; ep: n lane pairs out.
  (func (export "scores2") (param $qp i32) (param $kp i32) (param $kstride i32) (param $n i32) (param $ep i32) (param $sc f64) (param $nmax i32) (param $op i32)
    (local $j i32) (local $k i32) (local $e i32) (local $acc v128) (local $scv v128) (local $mx v128)
    (local $q0 v128) (local $q1 v128) (local $q2 v128) (local $q3 v128) (local $q4 v128) (local $q5 v128) (local $q6 v128) (local $q7 v128) (local $q8 v128) (local $q9 v128) (local $q10 v128) (local $q11 v128) (local $q12 v128) (local $q13 v128) (local $q14 v128) (local $q15 v128)
    (local.set $scv (f64x2.splat (local.get $sc)))
    (local.set $q0 (v128.load offset=0 (local.get $qp)))
    (local.set $q1 (v128.load offset=16 (local.get $qp)))
    (local.set $q2 (v128.load offset=32 (local.get $qp)))
    (local.set $q3 (v128.load offset=48 (local.get $qp)))
    (local.set $q4 (v128.load offset=64 (local.get $qp)))
    (local.set $q5 (v128.load offset=80 (local.get $qp)))
    (local.set $q6 (v128.load offset=96 (local.get $qp)))
    (local.set $q7 (v128.load offset=112 (local.get $qp)))
    (local.set $q8 (v128.load offset=128 (local.get $qp)))
    (local.set $q9 (v128.load offset=144 (local.get $qp)))
    (local.set $q10 (v128.load offset=160 (local.get $qp)))
    (local.set $q11 (v128.load offset=176 (local.get $qp)))
    (local.set $q12 (v128.load offset=192 (local.get $qp)))
    (local.set $q13 (v128.load offset=208 (local.get $qp)))
    (local.set $q14 (v128.load offset=224 (local.get $qp)))
    (local.set $q15 (v128.load offset=240 (local.get $qp)))
    (local.set $mx (f64x2.splat (f64.const -inf)))
    (local.set $k (local.get $kp))
    (local.set $e (local.get $ep))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $acc (f64x2.splat (f64.const 0)))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q0) (v128.load64_splat offset=0 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q1) (v128.load64_splat offset=8 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q2) (v128.load64_splat offset=16 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q3) (v128.load64_splat offset=24 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q4) (v128.load64_splat offset=32 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q5) (v128.load64_splat offset=40 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q6) (v128.load64_splat offset=48 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q7) (v128.load64_splat offset=56 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q8) (v128.load64_splat offset=64 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q9) (v128.load64_splat offset=72 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q10) (v128.load64_splat offset=80 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q11) (v128.load64_splat offset=88 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q12) (v128.load64_splat offset=96 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q13) (v128.load64_splat offset=104 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q14) (v128.load64_splat offset=112 (local.get $k)))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (local.get $q15) (v128.load64_splat offset=120 (local.get $k)))))
        (local.set $acc (f64x2.mul (local.get $acc) (local.get $scv)))
        (v128.store (local.get $e) (local.get $acc))
        (if (i32.lt_u (local.get $j) (local.get $nmax))
          (then (local.set $mx (f64x2.max (local.get $mx) (local.get $acc)))))
        (local.set $k (i32.add (local.get $k) (local.get $kstride)))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next)))
    (v128.store (local.get $op) (local.get $mx)))

  ;; wsum2: out[d] = (Σ_j ea_j·v_j[d], Σ_j eb_j·v_j[d]), j = 0..n−1 ascending, d = 0..15.
  ;; ep: n lane pairs (ea_j, eb_j); vp: value 0's 16 f64 values, value j at vp + j·vstride bytes;
  ;; op: 16 lane pairs out.
  (func (export "wsum2") (param $ep i32) (param $vp i32) (param $vstride i32) (param $n i32) (param $op i32)
    (local $j i32) (local $v i32) (local $e i32) (local $w v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $a4 v128) (local $a5 v128) (local $a6 v128) (local $a7 v128) (local $a8 v128) (local $a9 v128) (local $a10 v128) (local $a11 v128) (local $a12 v128) (local $a13 v128) (local $a14 v128) (local $a15 v128)
    (local.set $v (local.get $vp))
    (local.set $e (local.get $ep))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $w (v128.load (local.get $e)))
        (local.set $a0 (f64x2.add (local.get $a0) (f64x2.mul (local.get $w) (v128.load64_splat offset=0 (local.get $v)))))
        (local.set $a1 (f64x2.add (local.get $a1) (f64x2.mul (local.get $w) (v128.load64_splat offset=8 (local.get $v)))))
        (local.set $a2 (f64x2.add (local.get $a2) (f64x2.mul (local.get $w) (v128.load64_splat offset=16 (local.get $v)))))
        (local.set $a3 (f64x2.add (local.get $a3) (f64x2.mul (local.get $w) (v128.load64_splat offset=24 (local.get $v)))))
        (local.set $a4 (f64x2.add (local.get $a4) (f64x2.mul (local.get $w) (v128.load64_splat offset=32 (local.get $v)))))
        (local.set $a5 (f64x2.add (local.get $a5) (f64x2.mul (local.get $w) (v128.load64_splat offset=40 (local.get $v)))))
        (local.set $a6 (f64x2.add (local.get $a6) (f64x2.mul (local.get $w) (v128.load64_splat offset=48 (local.get $v)))))
        (local.set $a7 (f64x2.add (local.get $a7) (f64x2.mul (local.get $w) (v128.load64_splat offset=56 (local.get $v)))))
        (local.set $a8 (f64x2.add (local.get $a8) (f64x2.mul (local.get $w) (v128.load64_splat offset=64 (local.get $v)))))
        (local.set $a9 (f64x2.add (local.get $a9) (f64x2.mul (local.get $w) (v128.load64_splat offset=72 (local.get $v)))))
        (local.set $a10 (f64x2.add (local.get $a10) (f64x2.mul (local.get $w) (v128.load64_splat offset=80 (local.get $v)))))
        (local.set $a11 (f64x2.add (local.get $a11) (f64x2.mul (local.get $w) (v128.load64_splat offset=88 (local.get $v)))))
        (local.set $a12 (f64x2.add (local.get $a12) (f64x2.mul (local.get $w) (v128.load64_splat offset=96 (local.get $v)))))
        (local.set $a13 (f64x2.add (local.get $a13) (f64x2.mul (local.get $w) (v128.load64_splat offset=104 (local.get $v)))))
        (local.set $a14 (f64x2.add (local.get $a14) (f64x2.mul (local.get $w) (v128.load64_splat offset=112 (local.get $v)))))
        (local.set $a15 (f64x2.add (local.get $a15) (f64x2.mul (local.get $w) (v128.load64_splat offset=120 (local.get $v)))))
        (local.set $v (i32.add (local.get $v) (local.get $vstride)))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next)))
    (v128.store offset=0 (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1))
    (v128.store offset=32 (local.get $op) (local.get $a2))
    (v128.store offset=48 (local.get $op) (local.get $a3))
    (v128.store offset=64 (local.get $op) (local.get $a4))
    (v128.store offset=80 (local.get $op) (local.get $a5))
    (v128.store offset=96 (local.get $op) (local.get $a6))
    (v128.store offset=112 (local.get $op) (local.get $a7))
    (v128.store offset=128 (local.get $op) (local.get $a8))
    (v128.store offset=144 (local.get $op) (local.get $a9))
    (v128.store offset=160 (local.get $op) (local.get $a10))
    (v128.store offset=176 (local.get $op) (local.get $a11))
    (v128.store offset=192 (local.get $op) (local.get $a12))
    (v128.store offset=208 (local.get $op) (local.get $a13))
    (v128.store offset=224 (local.get $op) (local.get $a14))
    (v128.store offset=240 (local.get $op) (local.get $a15))
  )

  ;; e^x in each f64x2 lane: fdlibm's e_exp.c — V8's Math.exp — step for step, so each lane equals
  ;; Math.exp(x) bit for bit (tests/unit/tiny_lm.test.ts compares them on random and special values).
  ;; fdlibm's branches become selects: |x| > ½ln2 reduces x to r = hi − lo with k = ±1 (|x| < 1.5 ln2)
  ;; or trunc(x/ln2 ± ½); below, k = 0 with hi = x, lo = 0 (the same formula, exactly: 0 − q is −q);
  ;; the result is y scaled by 2ᵏ in its exponent bits (exp2); expfix mends the lanes
  ;; outside 2⁻²⁷ ≤ |x| < 704 (only there can a branch fdlibm takes differ from that path): 1 + x below
  ;; 2⁻²⁷, for k < −1021 the scaling by 2^(k+1000) and then 2⁻¹⁰⁰⁰, +inf and +0 past the thresholds,
  ;; and NaN as x + x. exp2 calls expfix only when a lane needs it.
  (func $exp2 (param $x v128) (result v128)
    (local $bits v128) (local $neg v128) (local $k v128) (local $hi v128) (local $lo v128) (local $r v128)
    (local $t v128) (local $c v128) (local $y v128) (local $v v128)
    (local.set $bits (v128.and (local.get $x) (v128.const i64x2 0x7fffffffffffffff 0x7fffffffffffffff)))
    (local.set $neg (f64x2.lt (local.get $x) (f64x2.splat (f64.const 0))))
    ;; k: ±1 below 1.5 ln2 (hx < 0x3ff0a2b2), else trunc(x·(1/ln2) ± ½); 0 at or below ½ln2 (hx ≤ 0x3fd62e42)
    (local.set $k
      (v128.bitselect
        (v128.bitselect (f64x2.splat (f64.const -1)) (f64x2.splat (f64.const 1)) (local.get $neg))
        (f64x2.trunc (f64x2.add
          (f64x2.mul (f64x2.splat (f64.const 0x1.71547652b82fep+0)) (local.get $x))
          (v128.bitselect (f64x2.splat (f64.const -0.5)) (f64x2.splat (f64.const 0.5)) (local.get $neg))))
        (i64x2.lt_s (local.get $bits) (v128.const i64x2 0x3ff0a2b200000000 0x3ff0a2b200000000))))
    (local.set $k
      (v128.and (local.get $k)
        (i64x2.ge_s (local.get $bits) (v128.const i64x2 0x3fd62e4300000000 0x3fd62e4300000000))))
    (local.set $hi (f64x2.sub (local.get $x) (f64x2.mul (local.get $k) (f64x2.splat (f64.const 0x1.62e42feep-1)))))
    (local.set $lo (f64x2.mul (local.get $k) (f64x2.splat (f64.const 0x1.a39ef35793c76p-33))))
    (local.set $r (f64x2.sub (local.get $hi) (local.get $lo)))
    ;; c = r − t·(P1 + t·(P2 + t·(P3 + t·(P4 + t·P5)))), t = r²; y = 1 − ((lo − r·c/(2 − c)) − hi)
    (local.set $t (f64x2.mul (local.get $r) (local.get $r)))
    (local.set $c
      (f64x2.sub (local.get $r) (f64x2.mul (local.get $t)
        (f64x2.add (f64x2.splat (f64.const 0x1.555555555553ep-3)) (f64x2.mul (local.get $t)
          (f64x2.add (f64x2.splat (f64.const -0x1.6c16c16bebd93p-9)) (f64x2.mul (local.get $t)
            (f64x2.add (f64x2.splat (f64.const 0x1.1566aaf25de2cp-14)) (f64x2.mul (local.get $t)
              (f64x2.add (f64x2.splat (f64.const -0x1.bbd41c5d26bf1p-20)) (f64x2.mul (local.get $t)
                (f64x2.splat (f64.const 0x1.6376972bea4d0p-25)))))))))))))
    (local.set $y
      (f64x2.sub (f64x2.splat (f64.const 1))
        (f64x2.sub
          (f64x2.sub (local.get $lo)
            (f64x2.div (f64x2.mul (local.get $r) (local.get $c)) (f64x2.sub (f64x2.splat (f64.const 2)) (local.get $c))))
          (local.get $hi))))
    ;; y·2ᵏ: k added to the exponent bits
    (local.set $v
      (i64x2.add (local.get $y)
        (i64x2.shl (i64x2.extend_low_i32x4_s (i32x4.trunc_sat_f64x2_s_zero (local.get $k))) (i32.const 52))))
    ;; the lanes outside 2⁻²⁷ ≤ |x| < 704 (and NaN) mended by expfix
    (if (result v128) (v128.any_true (v128.or
          (i64x2.ge_s (local.get $bits) (v128.const i64x2 0x4086000000000000 0x4086000000000000))
          (i64x2.lt_s (local.get $bits) (v128.const i64x2 0x3e30000000000000 0x3e30000000000000))))
      (then (call $expfix (local.get $x) (local.get $y) (local.get $k) (local.get $v)))
      (else (local.get $v)))
  )

  ;; expfix: e^x for lanes outside 2⁻²⁷ ≤ |x| < 704, from exp2's y and k and its common path's out.
  (func $expfix (param $x v128) (param $y v128) (param $k v128) (param $out v128) (result v128)
    (local $bits v128)
    (local.set $bits (v128.and (local.get $x) (v128.const i64x2 0x7fffffffffffffff 0x7fffffffffffffff)))
    ;; below k = −1021: y·2^(k+1000)·2⁻¹⁰⁰⁰
    (local.set $out
      (v128.bitselect
        (f64x2.mul
          (i64x2.add (local.get $y)
            (i64x2.shl
              (i64x2.add (i64x2.extend_low_i32x4_s (i32x4.trunc_sat_f64x2_s_zero (local.get $k))) (v128.const i64x2 1000 1000))
              (i32.const 52)))
          (f64x2.splat (f64.const 0x1p-1000)))
        (local.get $out)
        (f64x2.lt (local.get $k) (f64x2.splat (f64.const -1021)))))
    ;; |x| < 2⁻²⁷ (hx < 0x3e300000): 1 + x
    (local.set $out
      (v128.bitselect (f64x2.add (f64x2.splat (f64.const 1)) (local.get $x)) (local.get $out)
        (i64x2.lt_s (local.get $bits) (v128.const i64x2 0x3e30000000000000 0x3e30000000000000))))
    ;; past the thresholds: +inf above 709.78…, +0 below −745.13…; NaN: x + x
    (local.set $out
      (v128.bitselect (f64x2.splat (f64.const inf)) (local.get $out)
        (f64x2.gt (local.get $x) (f64x2.splat (f64.const 0x1.62e42fefa39efp+9)))))
    (local.set $out
      (v128.bitselect (f64x2.splat (f64.const 0)) (local.get $out)
        (f64x2.lt (local.get $x) (f64x2.splat (f64.const -0x1.74910d52d3051p+9)))))
    (v128.bitselect (f64x2.add (local.get $x) (local.get $x)) (local.get $out)
      (f64x2.ne (local.get $x) (local.get $x)))
  )

  ;; expsub2: for j < n, e_j = exp(s_j − m) in each lane (m: the lane pair at mp), written back over
  ;; s_j when `store` is not 0, and their sums from +0 in ascending j into the lane pair at mp + 16.
  (func (export "expsub2") (param $ep i32) (param $n i32) (param $mp i32) (param $store i32)
    (local $j i32) (local $e i32) (local $m v128) (local $v v128) (local $acc v128)
    (local.set $m (v128.load (local.get $mp)))
    (local.set $e (local.get $ep))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $v (call $exp2 (f64x2.sub (v128.load (local.get $e)) (local.get $m))))
        (if (local.get $store) (then (v128.store (local.get $e) (local.get $v))))
        (local.set $acc (f64x2.add (local.get $acc) (local.get $v)))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next)))
    (v128.store offset=16 (local.get $mp) (local.get $acc))
  )

  ;; swiglu2: for j < n lane pairs, g_j·σ(g_j)·u_j written over g_j (g at gp, u at up) — swiglu.ts's
  ;; sigmoid as tiny_math.ts writes it: t = exp(−|g|), then 1/(1 + t) for g ≥ 0, else t/(1 + t).
  (func (export "swiglu2") (param $gp i32) (param $up i32) (param $n i32)
    (local $j i32) (local $g v128) (local $t v128)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $g (v128.load (local.get $gp)))
        (local.set $t (call $exp2 (f64x2.neg (f64x2.abs (local.get $g)))))
        (v128.store (local.get $gp)
          (f64x2.mul
            (f64x2.mul (local.get $g)
              (f64x2.div
                (v128.bitselect (f64x2.splat (f64.const 1)) (local.get $t) (f64x2.ge (local.get $g) (f64x2.splat (f64.const 0))))
                (f64x2.add (f64x2.splat (f64.const 1)) (local.get $t))))
            (v128.load (local.get $up))))
        (local.set $gp (i32.add (local.get $gp) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next)))
  )

  ;; mm: out (M, N) = f32(alpha·Σ_p a[i, p]·b[p, j] (+ out when acc)), b (K, N) row-major f64, N a
  ;; multiple of 8, a[i, p] at a + i·ai + p·ap bytes (ai = 8K, ap = 8: a (M, K), tiny_lm.ts's mmNN;
  ;; ai = 8, ap = 8M: a (K, M) read transposed, its mmTNacc); each output its own sum over p = 0..K−1
  ;; ascending from +0, eight outputs (four lane pairs) a pass, then alpha·s (+ out) rounded to f32
  ;; (kept as f64), as the loops store into a Float32Array.
  (func (export "mm") (param $a i32) (param $ai i32) (param $ap i32) (param $b i32) (param $out i32) (param $M i32) (param $N i32) (param $K i32) (param $acc i32) (param $alpha f64)
    (local $i i32) (local $j i32) (local $p i32) (local $pa i32) (local $pb i32) (local $po i32) (local $rowb i32) (local $av v128) (local $al v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local.set $al (f64x2.splat (local.get $alpha)))
    (local.set $rowb (i32.shl (local.get $N) (i32.const 3)))
    (local.set $po (local.get $out))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $i) (local.get $M)))
        (local.set $j (i32.const 0))
        (block $cols_done
          (loop $cols
            (br_if $cols_done (i32.ge_u (local.get $j) (local.get $N)))
            (local.set $s0 (f64x2.splat (f64.const 0)))
            (local.set $s1 (f64x2.splat (f64.const 0)))
            (local.set $s2 (f64x2.splat (f64.const 0)))
            (local.set $s3 (f64x2.splat (f64.const 0)))
            (local.set $pa (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $ai))))
            (local.set $pb (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 3))))
            (local.set $p (i32.const 0))
            (block $k_done
              (loop $k
                (br_if $k_done (i32.ge_u (local.get $p) (local.get $K)))
                (local.set $av (v128.load64_splat (local.get $pa)))
                (local.set $s0 (f64x2.add (local.get $s0) (f64x2.mul (local.get $av) (v128.load offset=0 (local.get $pb)))))
                (local.set $s1 (f64x2.add (local.get $s1) (f64x2.mul (local.get $av) (v128.load offset=16 (local.get $pb)))))
                (local.set $s2 (f64x2.add (local.get $s2) (f64x2.mul (local.get $av) (v128.load offset=32 (local.get $pb)))))
                (local.set $s3 (f64x2.add (local.get $s3) (f64x2.mul (local.get $av) (v128.load offset=48 (local.get $pb)))))
                (local.set $pa (i32.add (local.get $pa) (local.get $ap)))
                (local.set $pb (i32.add (local.get $pb) (local.get $rowb)))
                (local.set $p (i32.add (local.get $p) (i32.const 1)))
                (br $k)))
            (local.set $s0 (f64x2.mul (local.get $al) (local.get $s0)))
            (if (local.get $acc) (then (local.set $s0 (f64x2.add (local.get $s0) (v128.load offset=0 (local.get $po))))))
            (v128.store offset=0 (local.get $po) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (local.get $s0))))
            (local.set $s1 (f64x2.mul (local.get $al) (local.get $s1)))
            (if (local.get $acc) (then (local.set $s1 (f64x2.add (local.get $s1) (v128.load offset=16 (local.get $po))))))
            (v128.store offset=16 (local.get $po) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (local.get $s1))))
            (local.set $s2 (f64x2.mul (local.get $al) (local.get $s2)))
            (if (local.get $acc) (then (local.set $s2 (f64x2.add (local.get $s2) (v128.load offset=32 (local.get $po))))))
            (v128.store offset=32 (local.get $po) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (local.get $s2))))
            (local.set $s3 (f64x2.mul (local.get $al) (local.get $s3)))
            (if (local.get $acc) (then (local.set $s3 (f64x2.add (local.get $s3) (v128.load offset=48 (local.get $po))))))
            (v128.store offset=48 (local.get $po) (f64x2.promote_low_f32x4 (f32x4.demote_f64x2_zero (local.get $s3))))
            (local.set $po (i32.add (local.get $po) (i32.const 64)))
            (local.set $j (i32.add (local.get $j) (i32.const 8)))
            (br $cols)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
  )

  ;; back16: one (row, head) of the trainer's attention backward (tiny_attention.ts attentionBackRow16),
  ;; every sum in its order: dp_j = Σ_d f[d]·v_j[d] (d ascending; two keys a pass, one per lane),
  ;; pdp = Σ_j p_j·dp_j (j ascending), then for j ascending ds = p_j·(dp_j − pdp)·scale,
  ;; dv_j[d] += p_j·f[d], g[d] += ds·k_j[d], dk_j[d] += ds·q[d] (eight lane pairs over d), and g
  ;; stored back. fp, qp, gp: 16 f64 each (dO's row, q's row, dq's row, g starting from it); kp, vp,
  ;; dkp, dvp: key/value 0's 16 f64, key j at + j·stride bytes; pp: n f64 (p_j); dpp: n f64 scratch.
  (func (export "back16") (param $fp i32) (param $qp i32) (param $gp i32) (param $kp i32) (param $vp i32) (param $dkp i32) (param $dvp i32) (param $stride i32) (param $n i32) (param $pp i32) (param $dpp i32) (param $scale f64)
    (local $j i32) (local $v i32) (local $w i32) (local $r i32) (local $acc v128) (local $pdp f64) (local $pj f64) (local $ds f64) (local $pv v128) (local $dsv v128)
    (local $f0 v128) (local $f1 v128) (local $f2 v128) (local $f3 v128) (local $f4 v128) (local $f5 v128) (local $f6 v128) (local $f7 v128)
    (local $q0 v128) (local $q1 v128) (local $q2 v128) (local $q3 v128) (local $q4 v128) (local $q5 v128) (local $q6 v128) (local $q7 v128)
    (local $g0 v128) (local $g1 v128) (local $g2 v128) (local $g3 v128) (local $g4 v128) (local $g5 v128) (local $g6 v128) (local $g7 v128)
    ;; dp, two keys a pass: lane 0 key j, lane 1 key j + 1 (the last key of an odd n pairs with itself)
    (local.set $v (local.get $vp))
    (block $dp_done
      (loop $dp
        (br_if $dp_done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $w (select (i32.add (local.get $v) (local.get $stride)) (local.get $v) (i32.lt_u (i32.add (local.get $j) (i32.const 1)) (local.get $n))))
        (local.set $acc (f64x2.splat (f64.const 0)))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=0 (local.get $fp)) (v128.load64_lane offset=0 1 (local.get $w) (v128.load64_splat offset=0 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=8 (local.get $fp)) (v128.load64_lane offset=8 1 (local.get $w) (v128.load64_splat offset=8 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=16 (local.get $fp)) (v128.load64_lane offset=16 1 (local.get $w) (v128.load64_splat offset=16 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=24 (local.get $fp)) (v128.load64_lane offset=24 1 (local.get $w) (v128.load64_splat offset=24 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=32 (local.get $fp)) (v128.load64_lane offset=32 1 (local.get $w) (v128.load64_splat offset=32 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=40 (local.get $fp)) (v128.load64_lane offset=40 1 (local.get $w) (v128.load64_splat offset=40 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=48 (local.get $fp)) (v128.load64_lane offset=48 1 (local.get $w) (v128.load64_splat offset=48 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=56 (local.get $fp)) (v128.load64_lane offset=56 1 (local.get $w) (v128.load64_splat offset=56 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=64 (local.get $fp)) (v128.load64_lane offset=64 1 (local.get $w) (v128.load64_splat offset=64 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=72 (local.get $fp)) (v128.load64_lane offset=72 1 (local.get $w) (v128.load64_splat offset=72 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=80 (local.get $fp)) (v128.load64_lane offset=80 1 (local.get $w) (v128.load64_splat offset=80 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=88 (local.get $fp)) (v128.load64_lane offset=88 1 (local.get $w) (v128.load64_splat offset=88 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=96 (local.get $fp)) (v128.load64_lane offset=96 1 (local.get $w) (v128.load64_splat offset=96 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=104 (local.get $fp)) (v128.load64_lane offset=104 1 (local.get $w) (v128.load64_splat offset=104 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=112 (local.get $fp)) (v128.load64_lane offset=112 1 (local.get $w) (v128.load64_splat offset=112 (local.get $v))))))
        (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (v128.load64_splat offset=120 (local.get $fp)) (v128.load64_lane offset=120 1 (local.get $w) (v128.load64_splat offset=120 (local.get $v))))))
        (f64.store (i32.add (local.get $dpp) (i32.shl (local.get $j) (i32.const 3))) (f64x2.extract_lane 0 (local.get $acc)))
        (if (i32.lt_u (i32.add (local.get $j) (i32.const 1)) (local.get $n))
          (then (f64.store offset=8 (i32.add (local.get $dpp) (i32.shl (local.get $j) (i32.const 3))) (f64x2.extract_lane 1 (local.get $acc)))))
        (local.set $v (i32.add (local.get $w) (local.get $stride)))
        (local.set $j (i32.add (local.get $j) (i32.const 2)))
        (br $dp)))
    ;; pdp = Σ_j p_j·dp_j, from +0, j ascending
    (local.set $j (i32.const 0))
    (block $pdp_done
      (loop $pdp_loop
        (br_if $pdp_done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $pdp (f64.add (local.get $pdp) (f64.mul
          (f64.load (i32.add (local.get $pp) (i32.shl (local.get $j) (i32.const 3))))
          (f64.load (i32.add (local.get $dpp) (i32.shl (local.get $j) (i32.const 3)))))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $pdp_loop)))
    (local.set $f0 (v128.load offset=0 (local.get $fp)))
    (local.set $f1 (v128.load offset=16 (local.get $fp)))
    (local.set $f2 (v128.load offset=32 (local.get $fp)))
    (local.set $f3 (v128.load offset=48 (local.get $fp)))
    (local.set $f4 (v128.load offset=64 (local.get $fp)))
    (local.set $f5 (v128.load offset=80 (local.get $fp)))
    (local.set $f6 (v128.load offset=96 (local.get $fp)))
    (local.set $f7 (v128.load offset=112 (local.get $fp)))
    (local.set $q0 (v128.load offset=0 (local.get $qp)))
    (local.set $q1 (v128.load offset=16 (local.get $qp)))
    (local.set $q2 (v128.load offset=32 (local.get $qp)))
    (local.set $q3 (v128.load offset=48 (local.get $qp)))
    (local.set $q4 (v128.load offset=64 (local.get $qp)))
    (local.set $q5 (v128.load offset=80 (local.get $qp)))
    (local.set $q6 (v128.load offset=96 (local.get $qp)))
    (local.set $q7 (v128.load offset=112 (local.get $qp)))
    (local.set $g0 (v128.load offset=0 (local.get $gp)))
    (local.set $g1 (v128.load offset=16 (local.get $gp)))
    (local.set $g2 (v128.load offset=32 (local.get $gp)))
    (local.set $g3 (v128.load offset=48 (local.get $gp)))
    (local.set $g4 (v128.load offset=64 (local.get $gp)))
    (local.set $g5 (v128.load offset=80 (local.get $gp)))
    (local.set $g6 (v128.load offset=96 (local.get $gp)))
    (local.set $g7 (v128.load offset=112 (local.get $gp)))
    ;; per key: ds, then dv, g and dk, eight lane pairs over d each
    (local.set $j (i32.const 0))
    (local.set $r (i32.const 0))
    (block $keys_done
      (loop $keys
        (br_if $keys_done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $pj (f64.load (i32.add (local.get $pp) (i32.shl (local.get $j) (i32.const 3)))))
        (local.set $ds (f64.mul (f64.mul (local.get $pj)
          (f64.sub (f64.load (i32.add (local.get $dpp) (i32.shl (local.get $j) (i32.const 3)))) (local.get $pdp))) (local.get $scale)))
        (local.set $pv (f64x2.splat (local.get $pj)))
        (local.set $dsv (f64x2.splat (local.get $ds)))
        (local.set $v (i32.add (local.get $dvp) (local.get $r)))
        (v128.store offset=0 (local.get $v) (f64x2.add (v128.load offset=0 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f0))))
        (v128.store offset=16 (local.get $v) (f64x2.add (v128.load offset=16 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f1))))
        (v128.store offset=32 (local.get $v) (f64x2.add (v128.load offset=32 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f2))))
        (v128.store offset=48 (local.get $v) (f64x2.add (v128.load offset=48 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f3))))
        (v128.store offset=64 (local.get $v) (f64x2.add (v128.load offset=64 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f4))))
        (v128.store offset=80 (local.get $v) (f64x2.add (v128.load offset=80 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f5))))
        (v128.store offset=96 (local.get $v) (f64x2.add (v128.load offset=96 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f6))))
        (v128.store offset=112 (local.get $v) (f64x2.add (v128.load offset=112 (local.get $v)) (f64x2.mul (local.get $pv) (local.get $f7))))
        (local.set $v (i32.add (local.get $kp) (local.get $r)))
        (local.set $g0 (f64x2.add (local.get $g0) (f64x2.mul (local.get $dsv) (v128.load offset=0 (local.get $v)))))
        (local.set $g1 (f64x2.add (local.get $g1) (f64x2.mul (local.get $dsv) (v128.load offset=16 (local.get $v)))))
        (local.set $g2 (f64x2.add (local.get $g2) (f64x2.mul (local.get $dsv) (v128.load offset=32 (local.get $v)))))
        (local.set $g3 (f64x2.add (local.get $g3) (f64x2.mul (local.get $dsv) (v128.load offset=48 (local.get $v)))))
        (local.set $g4 (f64x2.add (local.get $g4) (f64x2.mul (local.get $dsv) (v128.load offset=64 (local.get $v)))))
        (local.set $g5 (f64x2.add (local.get $g5) (f64x2.mul (local.get $dsv) (v128.load offset=80 (local.get $v)))))
        (local.set $g6 (f64x2.add (local.get $g6) (f64x2.mul (local.get $dsv) (v128.load offset=96 (local.get $v)))))
        (local.set $g7 (f64x2.add (local.get $g7) (f64x2.mul (local.get $dsv) (v128.load offset=112 (local.get $v)))))
        (local.set $v (i32.add (local.get $dkp) (local.get $r)))
        (v128.store offset=0 (local.get $v) (f64x2.add (v128.load offset=0 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q0))))
        (v128.store offset=16 (local.get $v) (f64x2.add (v128.load offset=16 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q1))))
        (v128.store offset=32 (local.get $v) (f64x2.add (v128.load offset=32 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q2))))
        (v128.store offset=48 (local.get $v) (f64x2.add (v128.load offset=48 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q3))))
        (v128.store offset=64 (local.get $v) (f64x2.add (v128.load offset=64 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q4))))
        (v128.store offset=80 (local.get $v) (f64x2.add (v128.load offset=80 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q5))))
        (v128.store offset=96 (local.get $v) (f64x2.add (v128.load offset=96 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q6))))
        (v128.store offset=112 (local.get $v) (f64x2.add (v128.load offset=112 (local.get $v)) (f64x2.mul (local.get $dsv) (local.get $q7))))
        (local.set $r (i32.add (local.get $r) (local.get $stride)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $keys)))
    (v128.store offset=0 (local.get $gp) (local.get $g0))
    (v128.store offset=16 (local.get $gp) (local.get $g1))
    (v128.store offset=32 (local.get $gp) (local.get $g2))
    (v128.store offset=48 (local.get $gp) (local.get $g3))
    (v128.store offset=64 (local.get $gp) (local.get $g4))
    (v128.store offset=80 (local.get $gp) (local.get $g5))
    (v128.store offset=96 (local.get $gp) (local.get $g6))
    (v128.store offset=112 (local.get $gp) (local.get $g7))
  )
)
