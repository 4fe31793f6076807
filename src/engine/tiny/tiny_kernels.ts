/**
 * The Lab's fast path on WebAssembly SIMD (tiny_kernels.wat):
 *   - attention for a block of consecutive rows of one sequence — a turn's new tokens — two rows at
 *     a time, one per f64x2 lane, over heads of 16 channels — the row maxima, and the exponentials
 *     with their sums too (expsub2 in the module is fdlibm's exp, V8's Math.exp, step for step, so the
 *     same values bit for bit); the second row's last key and the maxima's log stay here;
 *   - the trainer's attention over packed segments (tiny_attention.ts segmentAttention and
 *     attentionBack, D = 16): the forward two rows of a segment at a time as above, the backward one
 *     (row, head) at a time wholly in the module (back16: no exponentials there);
 *   - the projections (x·Wᵀ and the adapter's delta), two outputs a lane pair, the weights kept in
 *     the module's memory as f64 (the base once, the adapter once per version).
 * Each lane is the scalar loop's own sum in its order (f64 products of f32 values, added from +0 in
 * ascending order, rounded to f32 where the loops store into a Float32Array), so every value equals
 * the JavaScript loops (tiny_lm.ts and its tiny_*.ts) bit for bit — tests/unit/tiny_lm.test.ts
 * runs both. Null where WebAssembly SIMD is not there: the loops run instead.
 */
import { probOffsets, type ExpRow } from './tiny_attention.ts';
import { TINY_KERNELS_WASM } from './tiny_kernels_wasm.ts';

interface Exports {
  memory: WebAssembly.Memory;
  scores2(qp: number, kp: number, kstride: number, n: number, ep: number, sc: number, nmax: number, op: number): void;
  wsum2(ep: number, vp: number, vstride: number, n: number, op: number): void;
  expsub2(ep: number, n: number, mp: number, store: number): void;
  swiglu2(gp: number, up: number, n: number): void;
  back16(
    fp: number,
    qp: number,
    gp: number,
    kp: number,
    vp: number,
    dkp: number,
    dvp: number,
    stride: number,
    n: number,
    pp: number,
    dpp: number,
    scale: number,
  ): void;
  mm(
    a: number,
    ai: number,
    ap: number,
    b: number,
    out: number,
    M: number,
    N: number,
    K: number,
    acc: number,
    alpha: number,
  ): void;
}

/**
 * An adapter's A and B for one projection in the module's memory (byte offsets): Aᵀ (nIn, r) and Bᵀ
 * (r, nOut) for the forward, A (r, nIn) and B (nOut, r) for the backward; with its rank and scale.
 */
export interface KernelLora {
  At: number;
  Bt: number;
  A: number;
  B: number;
  r: number;
  scale: number;
}

const PAGE = 65536;

export class TinyKernels implements ExpRow {
  private readonly x: Exports;
  private f64: Float64Array;
  /** Stored arrays (weights) by key: byte offset and length; they fill the memory from 0, the scratch follows. */
  private readonly stored = new Map<string, { at: number; n: number }>();
  private storedEnd = 0;

  private constructor(x: Exports) {
    this.x = x;
    this.f64 = new Float64Array(x.memory.buffer);
  }

  /** The kernels, or null where WebAssembly (with SIMD) is not available. */
  static create(): TinyKernels | null {
    if (typeof WebAssembly !== 'object') return null;
    const bytes = Uint8Array.from(atob(TINY_KERNELS_WASM), (c) => c.charCodeAt(0));
    if (!WebAssembly.validate(bytes)) return null;
    const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}); // ~1 KiB: synchronous compile is allowed
    return new TinyKernels(instance.exports as unknown as Exports);
  }

  /** Keep `data` (as f64) under `key`, in place when it was kept before with the same length; its byte offset. */
  put(key: string, data: Float32Array): number {
    let s = this.stored.get(key);
    if (!s || s.n !== data.length) {
      s = { at: this.storedEnd, n: data.length };
      this.storedEnd += Math.ceil(data.length / 2) * 16;
      this.stored.set(key, s);
      this.room(this.storedEnd);
    }
    this.f64.set(data, s.at / 8);
    return s.at;
  }

  /** a (M, K) · b (K, N) into out (M, N), or added to out; byte offsets (mm's rows of a, N a multiple of 8). */
  private mmNN(a: number, b: number, out: number, M: number, N: number, K: number, acc: boolean, alpha = 1) {
    this.x.mm(a, K * 8, 8, b, out, M, N, K, acc ? 1 : 0, alpha);
  }

  /** out (M, N) += alpha · a (K, M)ᵀ · b (K, N) (mm reading a transposed). */
  private mmTN(a: number, b: number, out: number, M: number, N: number, K: number, alpha: number) {
    this.x.mm(a, 8, M * 8, b, out, M, N, K, 1, alpha);
  }

  /** Copy n values of src into the memory at byte offset `at` (as f64); the offset after them. */
  private in(src: Float32Array, n: number, at: number): number {
    this.f64.set(src.subarray(0, n), at / 8);
    return at + n * 8;
  }

  /** Copy n values at byte offset `at` out into dst (a Float32Array: stored rounded, as the loops store). */
  private out(at: number, n: number, dst: Float32Array): void {
    dst.set(this.f64.subarray(at / 8, at / 8 + n));
  }

  /** e[j] = exp(e[j] − m) for j < n (attendRow16's exponentials), two a lane pair. */
  expRow(e: Float64Array, n: number, m: number): void {
    const MP = this.scratch();
    const EP = MP + 32;
    const pairs = Math.ceil(n / 2);
    this.room(EP + pairs * 16);
    const f = this.f64;
    f[MP / 8] = m;
    f[MP / 8 + 1] = m;
    f.set(e.subarray(0, n), EP / 8);
    this.x.expsub2(EP, pairs, MP, 1);
    e.set(f.subarray(EP / 8, EP / 8 + n));
  }

  /** s = f32(g·σ(g)·u) over the first n values (outputRows' SwiGLU loop, tiny_math.ts's sigmoid), two a lane pair. */
  swiglu(g: Float32Array, u: Float32Array, s: Float32Array, n: number): void {
    const G = this.scratch();
    const U = G + Math.ceil(n / 2) * 16;
    this.room(U + Math.ceil(n / 2) * 16);
    this.in(g, n, G);
    this.in(u, n, U);
    this.x.swiglu2(G, U, Math.ceil(n / 2));
    this.out(G, n, s);
  }

  /**
   * out (M, nOut) = f32(x·Wᵀ (+ out with `acc`)), then with an adapter xa = f32(x·Aᵀ) (copied into
   * `xaOut` when given) and out = f32(scale·xa·Bᵀ + out): TinyLm.linear's values. w: Wᵀ's offset
   * from put(); nOut and r multiples of 8.
   */
  linear(
    x: Float32Array,
    M: number,
    nIn: number,
    nOut: number,
    out: Float32Array,
    acc: boolean,
    w: number,
    lora: KernelLora | null,
    xaOut?: Float32Array,
  ): void {
    const r = lora?.r ?? 0;
    const X = this.scratch();
    const Y = X + M * nIn * 8;
    const XA = Y + M * nOut * 8;
    this.room(XA + M * r * 8);
    this.in(x, M * nIn, X);
    if (acc) this.in(out, M * nOut, Y);
    this.mmNN(X, w, Y, M, nOut, nIn, acc);
    if (lora) {
      this.mmNN(X, lora.At, XA, M, r, nIn, false);
      this.mmNN(XA, lora.Bt, Y, M, nOut, r, true, lora.scale);
      if (xaOut) this.out(XA, M * r, xaOut);
    }
    this.out(Y, M * nOut, out);
  }

  /**
   * The backward of one projection with its adapter (tiny_train.ts backward's linBack, the same steps in
   * the same order): dx = f32(dy·W (+ dx with `acc`)) when dx is given, gB += f32(s·dyᵀ·xa),
   * dyB = f32(dy·B), gA += f32(s·dyBᵀ·x), dx = f32(s·dyB·A + dx). w: W (nOut, nIn)'s offset.
   */
  linearBack(
    T: number,
    nIn: number,
    nOut: number,
    x: Float32Array,
    dy: Float32Array,
    xa: Float32Array,
    dx: Float32Array | null,
    acc: boolean,
    w: number,
    lora: KernelLora,
    gA: Float32Array,
    gB: Float32Array,
  ): void {
    const r = lora.r;
    const sc = lora.scale;
    const DY = this.scratch();
    const X = DY + T * nOut * 8;
    const XA = X + T * nIn * 8;
    const DX = XA + T * r * 8;
    const GA = DX + T * nIn * 8;
    const GB = GA + r * nIn * 8;
    const DYB = GB + nOut * r * 8;
    this.room(DYB + T * r * 8);
    this.in(dy, T * nOut, DY);
    this.in(x, T * nIn, X);
    this.in(xa, T * r, XA);
    this.in(gA, r * nIn, GA);
    this.in(gB, nOut * r, GB);
    if (dx) {
      if (acc) this.in(dx, T * nIn, DX);
      this.mmNN(DY, w, DX, T, nIn, nOut, acc);
    }
    this.mmTN(DY, XA, GB, nOut, r, T, sc);
    this.mmNN(DY, lora.B, DYB, T, r, nOut, false);
    this.mmTN(DYB, X, GA, r, nIn, T, sc);
    if (dx) {
      this.mmNN(DYB, lora.A, DX, T, nIn, r, true, sc);
      this.out(DX, T * nIn, dx);
    }
    this.out(GA, r * nIn, gA);
    this.out(GB, nOut * r, gB);
  }

  /**
   * The scratch of two-row attention (attendBlock, segmentAttention16), byte offsets: the two rows' q
   * as 16 lane pairs (QP), the 16 lane pairs out (OP), n lane pairs of scores (EP), and the first n
   * keys and values (rows of `width`) copied in as f64 (K, V).
   */
  private pairScratch(ks: Float32Array, vs: Float32Array, n: number, width: number) {
    const QP = this.scratch();
    const OP = QP + 256;
    const EP = OP + 256;
    const K = EP + n * 16;
    const V = K + n * width * 8;
    this.room(V + n * width * 8);
    this.f64.set(ks.subarray(0, n * width), K / 8);
    this.f64.set(vs.subarray(0, n * width), V / 8);
    return { QP, OP, EP, K, V };
  }

  /** Where the per-call scratch starts (after the stored arrays, 16-byte aligned). */
  private scratch(): number {
    return Math.ceil(this.storedEnd / 16) * 16;
  }

  /** Memory for `bytes`, grown (and the view made again) when short. */
  private room(bytes: number): void {
    const mem = this.x.memory;
    if (mem.buffer.byteLength < bytes) mem.grow(Math.ceil((bytes - mem.buffer.byteLength) / PAGE));
    if (this.f64.buffer !== mem.buffer) this.f64 = new Float64Array(mem.buffer);
  }

  /**
   * attendRow16 for rows row0 .. row0 + nRows − 1 of one sequence, at positions pos0, pos0 + 1, …:
   * each row over the sequence's keys 0..its position. qr and att: rows of Hq·16; ks, vs: the
   * sequence's (pos, Hkv·16) rows.
   */
  attendBlock(
    qr: Float32Array,
    ks: Float32Array,
    vs: Float32Array,
    att: Float32Array,
    row0: number,
    nRows: number,
    pos0: number,
    Hq: number,
    Hkv: number,
    sc: number,
  ): void {
    const nMax = pos0 + nRows;
    const width = Hkv * 16;
    const { QP, OP, EP, K, V } = this.pairScratch(ks, vs, nMax, width);
    const m = this.f64;
    const stride = width * 8;
    const e0 = EP / 8;
    for (let hh = 0; hh < Hq; hh++) {
      const kvh = Math.floor(hh / (Hq / Hkv));
      for (let i = 0; i < nRows; i += 2) {
        const pair = i + 1 < nRows;
        const qa = ((row0 + i) * Hq + hh) * 16;
        const qb = pair ? qa + Hq * 16 : qa;
        const na = pos0 + i + 1;
        const nb = pair ? na + 1 : na;
        for (let d = 0; d < 16; d++) {
          m[QP / 8 + 2 * d] = qr[qa + d]!;
          m[QP / 8 + 2 * d + 1] = qr[qb + d]!;
        }
        this.x.scores2(QP, K + kvh * 128, stride, nb, EP, sc, na, OP);
        // each row's max (row b's last key after the others: max is exact in any order), then
        // e = exp(s − max) and their sums in key order, both lanes on the module (row b's last key here)
        const o = OP / 8;
        const last = e0 + 2 * na + 1;
        const mb = pair ? Math.max(m[o + 1]!, m[last]!) : m[o + 1]!;
        m[o + 1] = mb;
        this.x.expsub2(EP, na, OP, 1);
        const sa = m[o + 2]!;
        let sb = m[o + 3]!;
        if (pair) {
          const xb = Math.exp(m[last]! - mb);
          m[last] = xb;
          sb += xb;
        }
        // both lanes over row a's keys; row b's own last key is added after them (its sum stays in order)
        this.x.wsum2(EP, V + kvh * 128, stride, na, OP);
        for (let d = 0; d < 16; d++) att[qa + d] = m[o + 2 * d]! / sa;
        if (pair) {
          const eb = m[e0 + 2 * na + 1]!;
          const vo = (na * Hkv + kvh) * 16;
          for (let d = 0; d < 16; d++) att[qb + d] = (m[o + 2 * d + 1]! + eb * vs[vo + d]!) / sb;
        }
      }
    }
  }

  /**
   * segmentAttention (tiny_attention.ts) for D = 16: each row's scores over its segment's keys lo..t,
   * their log-sum-exp, p_j = exp(s_j − lse) (kept, returned) and Σ_j p_j·v_j into `out` (f32) — the
   * sums on scores2/wsum2 two rows of a segment at a time (the second row's own last key added after
   * them, in order), the exponentials and the maxima's log here: attentionRow16's values bit for bit.
   */
  segmentAttention16(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    T: number,
    segStart: Int32Array,
    pOff: Int32Array,
    Hq: number,
    Hkv: number,
  ): Float64Array {
    const width = Hkv * 16;
    const stride = width * 8;
    const { QP, OP, EP, K, V } = this.pairScratch(k, v, T, width);
    const m = this.f64;
    const probs = new Float64Array(pOff[T]!);
    const sc = 1 / Math.sqrt(16);
    const e0 = EP / 8;
    const o = OP / 8;
    for (let t = 0; t < T;) {
      const lo = segStart[t]!;
      const pair = t + 1 < T && segStart[t + 1] === lo;
      const na = t + 1 - lo;
      const nb = pair ? na + 1 : na;
      for (let h = 0; h < Hq; h++) {
        const kvo = (lo * Hkv + Math.floor(h / (Hq / Hkv))) * 16;
        const qa = (t * Hq + h) * 16;
        const qb = pair ? qa + Hq * 16 : qa;
        for (let d = 0; d < 16; d++) {
          m[QP / 8 + 2 * d] = q[qa + d]!;
          m[QP / 8 + 2 * d + 1] = q[qb + d]!;
        }
        this.x.scores2(QP, K + kvo * 8, stride, nb, EP, sc, na, OP);
        // row a over its na keys, row b (when paired) over na + 1: max, Σ exp(s − max), lse, then p —
        // both lanes on the module, row b's last key here (after the others, so its sum stays in order)
        const last = e0 + 2 * na + 1;
        const mxb = pair ? Math.max(m[o + 1]!, m[last]!) : m[o + 1]!;
        m[o + 1] = mxb;
        this.x.expsub2(EP, na, OP, 0);
        const lsea = m[o]! + Math.log(m[o + 2]!);
        const lseb = pair ? mxb + Math.log(m[o + 3]! + Math.exp(m[last]! - mxb)) : lsea;
        m[o] = lsea;
        m[o + 1] = lseb;
        this.x.expsub2(EP, na, OP, 1);
        if (pair) m[last] = Math.exp(m[last]! - lseb);
        for (let lane = 0; lane < (pair ? 2 : 1); lane++) {
          const n = lane ? nb : na;
          const po = pOff[t + lane]! + h * n;
          for (let j = 0, at = e0 + lane; j < n; j++, at += 2) probs[po + j] = m[at]!;
        }
        this.x.wsum2(EP, V + kvo * 8, stride, na, OP);
        for (let d = 0; d < 16; d++) out[qa + d] = m[o + 2 * d]!;
        if (pair) {
          const pb = m[e0 + 2 * na + 1]!;
          const vo = kvo + na * width;
          for (let d = 0; d < 16; d++) out[qb + d] = m[o + 2 * d + 1]! + pb * v[vo + d]!;
        }
      }
      t += pair ? 2 : 1;
    }
    return probs;
  }

  /**
   * attentionBack (tiny_attention.ts) for D = 16 on back16: rows ascending, heads within a row, keys
   * within a head, as the loops go — so every accumulator of dq, dk and dv gets its terms in the same
   * order and the gradients equal the loops' bit for bit.
   */
  attentionBack16(
    dof: Float32Array,
    t: { qr: Float32Array; kr: Float32Array; v: Float32Array; p: Float64Array },
    segStart: Int32Array,
    Hq: number,
    Hkv: number,
  ): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
    const T = segStart.length;
    const nq = T * Hq * 16;
    const nkv = T * Hkv * 16;
    const pOff = probOffsets(T, Hq, segStart);
    const F = this.scratch();
    const Q = F + nq * 8;
    const K = Q + nq * 8;
    const V = K + nkv * 8;
    const P = V + nkv * 8;
    const DQ = P + pOff[T]! * 8;
    const DK = DQ + nq * 8;
    const DV = DK + nkv * 8;
    const DP = DV + nkv * 8;
    this.room(DP + T * 8);
    const m = this.f64;
    m.set(dof.subarray(0, nq), F / 8);
    m.set(t.qr.subarray(0, nq), Q / 8);
    m.set(t.kr.subarray(0, nkv), K / 8);
    m.set(t.v.subarray(0, nkv), V / 8);
    m.set(t.p.subarray(0, pOff[T]!), P / 8);
    m.fill(0, DQ / 8, DP / 8);
    const stride = Hkv * 16 * 8;
    const scale = 1 / Math.sqrt(16);
    for (let ti = 0; ti < T; ti++) {
      const lo = segStart[ti]!;
      const n = ti + 1 - lo;
      for (let h = 0; h < Hq; h++) {
        const row = (ti * Hq + h) * 16 * 8;
        const kv = (lo * Hkv + Math.floor(h / (Hq / Hkv))) * 16 * 8;
        const po = (pOff[ti]! + h * n) * 8;
        this.x.back16(F + row, Q + row, DQ + row, K + kv, V + kv, DK + kv, DV + kv, stride, n, P + po, DP, scale);
      }
    }
    return {
      dq: m.slice(DQ / 8, DQ / 8 + nq),
      dk: m.slice(DK / 8, DK / 8 + nkv),
      dv: m.slice(DV / 8, DV / 8 + nkv),
    };
  }
}
