;; The Lab's fast path (tiny_lm.ts) on WebAssembly SIMD: attention's two inner sums for two query rows
;; at once, one per f64x2 lane, over a head of 16 channels (the Lab's models), and the matmul, two
;; outputs a lane pair. Every lane is the scalar loop's own sum in its order (f64 products of f32
;; values, added from +0 in ascending order, no fused multiply-add), so the values equal tiny_lm.ts's
;; JavaScript loops bit for bit; the exponentials stay in JavaScript (Math.exp, the reference's).
;; Built into tiny_kernels_wasm.ts by scripts/build_tiny_kernels.js.
(module
  (memory (export "memory") 1)

  ;; scores2: for each key j < n, e[j] = (Σ_d qa[d]·k_j[d], Σ_d qb[d]·k_j[d]) · sc, d = 0..15 ascending.
  ;; qp: 16 lane pairs (qa[d], qb[d]); kp: key 0's 16 f64 values, key j at kp + j·kstride bytes;
  ;; ep: n lane pairs out.
  (func (export "scores2") (param $qp i32) (param $kp i32) (param $kstride i32) (param $n i32) (param $ep i32) (param $sc f64)
    (local $j i32) (local $k i32) (local $e i32) (local $acc v128) (local $scv v128)
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
        (v128.store (local.get $e) (f64x2.mul (local.get $acc) (local.get $scv)))
        (local.set $k (i32.add (local.get $k) (local.get $kstride)))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next))))

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

  ;; max2: out = (max_j ea_j, max_j eb_j) over the n lane pairs at ep (f64x2.max: NaN wins, +0 over −0,
  ;; as Math.max), from −inf.
  (func (export "max2") (param $ep i32) (param $n i32) (param $op i32)
    (local $j i32) (local $e i32) (local $m v128)
    (local.set $m (f64x2.splat (f64.const -inf)))
    (local.set $e (local.get $ep))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $m (f64x2.max (local.get $m) (v128.load (local.get $e))))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $next)))
    (v128.store (local.get $op) (local.get $m))
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
)
