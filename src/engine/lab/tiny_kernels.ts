/**
 * The Lab's fast path, attention on WebAssembly SIMD (tiny_kernels.wat): for a block of consecutive
 * rows of one sequence — a turn's new tokens — two rows at a time, one per f64x2 lane, over heads of
 * 16 channels. The scores and the weighted sums are each lane's own sum in the scalar loop's order
 * (f64 products of f32 values, added from +0 in ascending order), the max, the exponentials (the
 * reference's Math.exp) and their sum stay here, so every value equals tiny_lm.ts's JavaScript loop
 * (attendRow16) bit for bit — tests/unit/tiny_lm.test.ts runs both. About twice as fast on the
 * Lab's turns (docs/benchmarks.md). Null where WebAssembly SIMD is not there: the loops run instead.
 */
import { TINY_KERNELS_WASM } from './tiny_kernels_wasm.ts';

interface Exports {
  memory: WebAssembly.Memory;
  scores2(qp: number, kp: number, kstride: number, n: number, ep: number, sc: number): void;
  wsum2(ep: number, vp: number, vstride: number, n: number, op: number): void;
}

/** Byte offsets of the fixed slots: the two rows' q as 16 lane pairs, the 16 lane pairs out; then the per-call regions. */
const QP = 0;
const OP = 256;
const EP = 512;
const PAGE = 65536;

export class AttentionKernel {
  private readonly x: Exports;
  private f64: Float64Array;

  private constructor(x: Exports) {
    this.x = x;
    this.f64 = new Float64Array(x.memory.buffer);
  }

  /** The kernel, or null where WebAssembly (with SIMD) is not available. */
  static create(): AttentionKernel | null {
    if (typeof WebAssembly !== 'object') return null;
    const bytes = Uint8Array.from(atob(TINY_KERNELS_WASM), (c) => c.charCodeAt(0));
    if (!WebAssembly.validate(bytes)) return null;
    const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}); // ~1 KiB: synchronous compile is allowed
    return new AttentionKernel(instance.exports as unknown as Exports);
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
    const K = EP + nMax * 16;
    const V = K + nMax * width * 8;
    this.room(V + nMax * width * 8);
    const m = this.f64;
    m.set(ks.subarray(0, nMax * width), K / 8);
    m.set(vs.subarray(0, nMax * width), V / 8);
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
          m[2 * d] = qr[qa + d]!;
          m[2 * d + 1] = qr[qb + d]!;
        }
        this.x.scores2(QP, K + kvh * 128, stride, nb, EP, sc);
        let ma = -Infinity;
        for (let j = 0; j < na; j++) ma = Math.max(ma, m[e0 + 2 * j]!);
        let sa = 0;
        for (let j = 0; j < na; j++) {
          const x = Math.exp(m[e0 + 2 * j]! - ma);
          m[e0 + 2 * j] = x;
          sa += x;
        }
        let sb = 0;
        if (pair) {
          let mb = -Infinity;
          for (let j = 0; j < nb; j++) mb = Math.max(mb, m[e0 + 2 * j + 1]!);
          for (let j = 0; j < nb; j++) {
            const x = Math.exp(m[e0 + 2 * j + 1]! - mb);
            m[e0 + 2 * j + 1] = x;
            sb += x;
          }
        }
        // both lanes over row a's keys; row b's own last key is added after them (its sum stays in order)
        this.x.wsum2(EP, V + kvh * 128, stride, na, OP);
        const o = OP / 8;
        for (let d = 0; d < 16; d++) att[qa + d] = m[o + 2 * d]! / sa;
        if (pair) {
          const eb = m[e0 + 2 * na + 1]!;
          const vo = (na * Hkv + kvh) * 16;
          for (let d = 0; d < 16; d++) att[qb + d] = (m[o + 2 * d + 1]! + eb * vs[vo + d]!) / sb;
        }
      }
    }
  }
}
