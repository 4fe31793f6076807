/**
 * The Lab's fast path (tiny_lm.ts), its attention: decoding's rows over a sequence's KV cache
 * (attentionPagedCpu's sums) and training's packed segments, forward and backward (attentionCpu,
 * attentionBackwardCpu), each in its reference's order with f64 sums. The D = 16 versions (the Lab's
 * heads) are the general loops unrolled by hand, q, dO and the sums held in locals: the same sums in
 * the same order, fewer loads.
 */

/** The heads' shape: query heads, key/value heads (Hq / Hkv queries share one) and channels per head. */
interface Heads {
  Hq: number;
  Hkv: number;
  D: number;
}

// --- decoding: one row over its sequence's cached keys ---
/**
 * attentionPagedCpu's sums for one row over its sequence's keys 0..nKeys − 1, every head: scores
 * q·k·sc (summed over d in order, four keys per pass over q), their exponentials once per key
 * (less the max), and Σ_j e_j·v_j / Σ_j e_j (each channel summed over j in order, four per pass).
 * q and att: rows of Hq·D; ks, vs: the sequence's (pos, Hkv·D) rows; e: scratch of ≥ nKeys.
 */
export function attendRow(
  qr: Float32Array,
  ks: Float32Array,
  vs: Float32Array,
  att: Float32Array,
  row: number,
  nKeys: number,
  Hq: number,
  Hkv: number,
  D: number,
  sc: number,
  e: Float64Array,
) {
  const stride = Hkv * D;
  for (let hh = 0; hh < Hq; hh++) {
    const kvh = Math.floor(hh / (Hq / Hkv));
    const qo = (row * Hq + hh) * D;
    let m = -Infinity;
    let j = 0;
    for (; j + 4 <= nKeys; j += 4) {
      const k0 = (j * Hkv + kvh) * D;
      const k1 = k0 + stride;
      const k2 = k1 + stride;
      const k3 = k2 + stride;
      let d0 = 0;
      let d1 = 0;
      let d2 = 0;
      let d3 = 0;
      for (let d = 0; d < D; d++) {
        const qv = qr[qo + d]!;
        d0 += qv * ks[k0 + d]!;
        d1 += qv * ks[k1 + d]!;
        d2 += qv * ks[k2 + d]!;
        d3 += qv * ks[k3 + d]!;
      }
      const x0 = d0 * sc;
      const x1 = d1 * sc;
      const x2 = d2 * sc;
      const x3 = d3 * sc;
      e[j] = x0;
      e[j + 1] = x1;
      e[j + 2] = x2;
      e[j + 3] = x3;
      m = Math.max(m, x0);
      m = Math.max(m, x1);
      m = Math.max(m, x2);
      m = Math.max(m, x3);
    }
    for (; j < nKeys; j++) {
      const ko = (j * Hkv + kvh) * D;
      let dot = 0;
      for (let d = 0; d < D; d++) dot += qr[qo + d]! * ks[ko + d]!;
      const x = dot * sc;
      e[j] = x;
      m = Math.max(m, x);
    }
    let sum = 0;
    for (let jj = 0; jj < nKeys; jj++) {
      const x = Math.exp(e[jj]! - m);
      e[jj] = x;
      sum += x;
    }
    let d = 0;
    for (; d + 4 <= D; d += 4) {
      let a0 = 0;
      let a1 = 0;
      let a2 = 0;
      let a3 = 0;
      let vo = kvh * D + d;
      for (let jj = 0; jj < nKeys; jj++, vo += stride) {
        const ej = e[jj]!;
        a0 += ej * vs[vo]!;
        a1 += ej * vs[vo + 1]!;
        a2 += ej * vs[vo + 2]!;
        a3 += ej * vs[vo + 3]!;
      }
      att[qo + d] = a0 / sum;
      att[qo + d + 1] = a1 / sum;
      att[qo + d + 2] = a2 / sum;
      att[qo + d + 3] = a3 / sum;
    }
    for (; d < D; d++) {
      let a = 0;
      for (let jj = 0; jj < nKeys; jj++) a += e[jj]! * vs[(jj * Hkv + kvh) * D + d]!;
      att[qo + d] = a / sum;
    }
  }
}

/** e[j] = exp(e[j] − m) for j < n, each Math.exp's value (tiny_kernels.ts on WebAssembly). */
export interface ExpRow {
  expRow(e: Float64Array, n: number, m: number): void;
}

/**
 * attendRow for D = 16 (the Lab's models: hidden 16 with one head, or 32 with two): the same sums
 * in the same order, with the row's q and the sixteen weighted sums held in locals.
 */
export function attendRow16(
  qr: Float32Array,
  ks: Float32Array,
  vs: Float32Array,
  att: Float32Array,
  row: number,
  nKeys: number,
  Hq: number,
  Hkv: number,
  sc: number,
  e: Float64Array,
  exps: ExpRow | null = null,
) {
  const stride = Hkv * 16;
  for (let hh = 0; hh < Hq; hh++) {
    const kvh = Math.floor(hh / (Hq / Hkv));
    const qo = (row * Hq + hh) * 16;
    const q0 = qr[qo]!;
    const q1 = qr[qo + 1]!;
    const q2 = qr[qo + 2]!;
    const q3 = qr[qo + 3]!;
    const q4 = qr[qo + 4]!;
    const q5 = qr[qo + 5]!;
    const q6 = qr[qo + 6]!;
    const q7 = qr[qo + 7]!;
    const q8 = qr[qo + 8]!;
    const q9 = qr[qo + 9]!;
    const q10 = qr[qo + 10]!;
    const q11 = qr[qo + 11]!;
    const q12 = qr[qo + 12]!;
    const q13 = qr[qo + 13]!;
    const q14 = qr[qo + 14]!;
    const q15 = qr[qo + 15]!;
    let m = -Infinity;
    for (let j = 0, k = kvh * 16; j < nKeys; j++, k += stride) {
      let d = 0;
      d += q0 * ks[k]!;
      d += q1 * ks[k + 1]!;
      d += q2 * ks[k + 2]!;
      d += q3 * ks[k + 3]!;
      d += q4 * ks[k + 4]!;
      d += q5 * ks[k + 5]!;
      d += q6 * ks[k + 6]!;
      d += q7 * ks[k + 7]!;
      d += q8 * ks[k + 8]!;
      d += q9 * ks[k + 9]!;
      d += q10 * ks[k + 10]!;
      d += q11 * ks[k + 11]!;
      d += q12 * ks[k + 12]!;
      d += q13 * ks[k + 13]!;
      d += q14 * ks[k + 14]!;
      d += q15 * ks[k + 15]!;
      const x = d * sc;
      e[j] = x;
      m = Math.max(m, x);
    }
    let sum = 0;
    if (exps) {
      exps.expRow(e, nKeys, m);
      for (let j = 0; j < nKeys; j++) sum += e[j]!;
    } else
      for (let j = 0; j < nKeys; j++) {
        const x = Math.exp(e[j]! - m);
        e[j] = x;
        sum += x;
      }
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    let a4 = 0;
    let a5 = 0;
    let a6 = 0;
    let a7 = 0;
    let a8 = 0;
    let a9 = 0;
    let a10 = 0;
    let a11 = 0;
    let a12 = 0;
    let a13 = 0;
    let a14 = 0;
    let a15 = 0;
    for (let j = 0, v = kvh * 16; j < nKeys; j++, v += stride) {
      const ej = e[j]!;
      a0 += ej * vs[v]!;
      a1 += ej * vs[v + 1]!;
      a2 += ej * vs[v + 2]!;
      a3 += ej * vs[v + 3]!;
      a4 += ej * vs[v + 4]!;
      a5 += ej * vs[v + 5]!;
      a6 += ej * vs[v + 6]!;
      a7 += ej * vs[v + 7]!;
      a8 += ej * vs[v + 8]!;
      a9 += ej * vs[v + 9]!;
      a10 += ej * vs[v + 10]!;
      a11 += ej * vs[v + 11]!;
      a12 += ej * vs[v + 12]!;
      a13 += ej * vs[v + 13]!;
      a14 += ej * vs[v + 14]!;
      a15 += ej * vs[v + 15]!;
    }
    att[qo] = a0 / sum;
    att[qo + 1] = a1 / sum;
    att[qo + 2] = a2 / sum;
    att[qo + 3] = a3 / sum;
    att[qo + 4] = a4 / sum;
    att[qo + 5] = a5 / sum;
    att[qo + 6] = a6 / sum;
    att[qo + 7] = a7 / sum;
    att[qo + 8] = a8 / sum;
    att[qo + 9] = a9 / sum;
    att[qo + 10] = a10 / sum;
    att[qo + 11] = a11 / sum;
    att[qo + 12] = a12 / sum;
    att[qo + 13] = a13 / sum;
    att[qo + 14] = a14 / sum;
    att[qo + 15] = a15 / sum;
  }
}

// --- training: packed segments (each row sees its own segment's keys lo..t), forward and backward ---

/**
 * attentionCpu's row for D = 16 (segmentAttention's loop with q and the sums in locals): the
 * scores over keys lo..t into s, their log-sum-exp, then p_j = exp(s_j − lse) into probs[po..] and
 * Σ_j p_j·v_j into out[oo..] (rounded to f32 there).
 */
function attentionRow16(
  q: Float32Array,
  qo: number,
  k: Float32Array,
  v: Float32Array,
  kvo: number,
  stride: number,
  n: number,
  s: Float64Array,
  probs: Float64Array,
  po: number,
  out: Float32Array,
) {
  const sc = 1 / Math.sqrt(16);
  const q0 = q[qo]!;
  const q1 = q[qo + 1]!;
  const q2 = q[qo + 2]!;
  const q3 = q[qo + 3]!;
  const q4 = q[qo + 4]!;
  const q5 = q[qo + 5]!;
  const q6 = q[qo + 6]!;
  const q7 = q[qo + 7]!;
  const q8 = q[qo + 8]!;
  const q9 = q[qo + 9]!;
  const q10 = q[qo + 10]!;
  const q11 = q[qo + 11]!;
  const q12 = q[qo + 12]!;
  const q13 = q[qo + 13]!;
  const q14 = q[qo + 14]!;
  const q15 = q[qo + 15]!;
  for (let j = 0, ko = kvo; j < n; j++, ko += stride) {
    let dot = 0;
    dot += q0 * k[ko]!;
    dot += q1 * k[ko + 1]!;
    dot += q2 * k[ko + 2]!;
    dot += q3 * k[ko + 3]!;
    dot += q4 * k[ko + 4]!;
    dot += q5 * k[ko + 5]!;
    dot += q6 * k[ko + 6]!;
    dot += q7 * k[ko + 7]!;
    dot += q8 * k[ko + 8]!;
    dot += q9 * k[ko + 9]!;
    dot += q10 * k[ko + 10]!;
    dot += q11 * k[ko + 11]!;
    dot += q12 * k[ko + 12]!;
    dot += q13 * k[ko + 13]!;
    dot += q14 * k[ko + 14]!;
    dot += q15 * k[ko + 15]!;
    s[j] = dot * sc;
  }
  let m = -Infinity;
  for (let j = 0; j < n; j++) m = Math.max(m, s[j]!);
  let sum = 0;
  for (let j = 0; j < n; j++) sum += Math.exp(s[j]! - m);
  const lse = m + Math.log(sum);
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  let a3 = 0;
  let a4 = 0;
  let a5 = 0;
  let a6 = 0;
  let a7 = 0;
  let a8 = 0;
  let a9 = 0;
  let a10 = 0;
  let a11 = 0;
  let a12 = 0;
  let a13 = 0;
  let a14 = 0;
  let a15 = 0;
  for (let j = 0, vo = kvo; j < n; j++, vo += stride) {
    const p = Math.exp(s[j]! - lse);
    probs[po + j] = p;
    a0 += p * v[vo]!;
    a1 += p * v[vo + 1]!;
    a2 += p * v[vo + 2]!;
    a3 += p * v[vo + 3]!;
    a4 += p * v[vo + 4]!;
    a5 += p * v[vo + 5]!;
    a6 += p * v[vo + 6]!;
    a7 += p * v[vo + 7]!;
    a8 += p * v[vo + 8]!;
    a9 += p * v[vo + 9]!;
    a10 += p * v[vo + 10]!;
    a11 += p * v[vo + 11]!;
    a12 += p * v[vo + 12]!;
    a13 += p * v[vo + 13]!;
    a14 += p * v[vo + 14]!;
    a15 += p * v[vo + 15]!;
  }
  const oo = qo;
  out[oo] = a0;
  out[oo + 1] = a1;
  out[oo + 2] = a2;
  out[oo + 3] = a3;
  out[oo + 4] = a4;
  out[oo + 5] = a5;
  out[oo + 6] = a6;
  out[oo + 7] = a7;
  out[oo + 8] = a8;
  out[oo + 9] = a9;
  out[oo + 10] = a10;
  out[oo + 11] = a11;
  out[oo + 12] = a12;
  out[oo + 13] = a13;
  out[oo + 14] = a14;
  out[oo + 15] = a15;
}

/**
 * The first half of attentionBackwardCpu's row for D = 16: dp_j = dO·v_j for every key (into dp) and
 * Σ_j p_j·dp_j, returned — dO held in locals.
 */
function valueDots16(
  dof: Float32Array,
  qo: number,
  v: Float32Array,
  kvo: number,
  stride: number,
  n: number,
  p: Float64Array,
  po: number,
  dp: Float64Array,
): number {
  const f0 = dof[qo]!;
  const f1 = dof[qo + 1]!;
  const f2 = dof[qo + 2]!;
  const f3 = dof[qo + 3]!;
  const f4 = dof[qo + 4]!;
  const f5 = dof[qo + 5]!;
  const f6 = dof[qo + 6]!;
  const f7 = dof[qo + 7]!;
  const f8 = dof[qo + 8]!;
  const f9 = dof[qo + 9]!;
  const f10 = dof[qo + 10]!;
  const f11 = dof[qo + 11]!;
  const f12 = dof[qo + 12]!;
  const f13 = dof[qo + 13]!;
  const f14 = dof[qo + 14]!;
  const f15 = dof[qo + 15]!;
  for (let j = 0, vo = kvo; j < n; j++, vo += stride) {
    let acc = 0;
    acc += f0 * v[vo]!;
    acc += f1 * v[vo + 1]!;
    acc += f2 * v[vo + 2]!;
    acc += f3 * v[vo + 3]!;
    acc += f4 * v[vo + 4]!;
    acc += f5 * v[vo + 5]!;
    acc += f6 * v[vo + 6]!;
    acc += f7 * v[vo + 7]!;
    acc += f8 * v[vo + 8]!;
    acc += f9 * v[vo + 9]!;
    acc += f10 * v[vo + 10]!;
    acc += f11 * v[vo + 11]!;
    acc += f12 * v[vo + 12]!;
    acc += f13 * v[vo + 13]!;
    acc += f14 * v[vo + 14]!;
    acc += f15 * v[vo + 15]!;
    dp[j] = acc;
  }
  let pdp = 0;
  for (let j = 0; j < n; j++) pdp += p[po + j]! * dp[j]!;
  return pdp;
}

/**
 * attentionBackwardCpu's row for D = 16 (attentionBack's loop): dp_j = dO·v_j and Σ p·dp
 * (valueDots16), then per key dv += p·dO, dq += ds·scale·k, dk += ds·scale·q — dO and the row's dq
 * held in locals; every accumulator still summed in the same order.
 */
function attentionBackRow16(
  dof: Float32Array,
  qr: Float32Array,
  qo: number,
  kr: Float32Array,
  v: Float32Array,
  kvo: number,
  stride: number,
  n: number,
  p: Float64Array,
  po: number,
  dp: Float64Array,
  dq: Float64Array,
  dk: Float64Array,
  dv: Float64Array,
) {
  const scale = 1 / Math.sqrt(16);
  const pdp = valueDots16(dof, qo, v, kvo, stride, n, p, po, dp);
  const f0 = dof[qo]!;
  const f1 = dof[qo + 1]!;
  const f2 = dof[qo + 2]!;
  const f3 = dof[qo + 3]!;
  const f4 = dof[qo + 4]!;
  const f5 = dof[qo + 5]!;
  const f6 = dof[qo + 6]!;
  const f7 = dof[qo + 7]!;
  const f8 = dof[qo + 8]!;
  const f9 = dof[qo + 9]!;
  const f10 = dof[qo + 10]!;
  const f11 = dof[qo + 11]!;
  const f12 = dof[qo + 12]!;
  const f13 = dof[qo + 13]!;
  const f14 = dof[qo + 14]!;
  const f15 = dof[qo + 15]!;
  let g0 = dq[qo]!;
  let g1 = dq[qo + 1]!;
  let g2 = dq[qo + 2]!;
  let g3 = dq[qo + 3]!;
  let g4 = dq[qo + 4]!;
  let g5 = dq[qo + 5]!;
  let g6 = dq[qo + 6]!;
  let g7 = dq[qo + 7]!;
  let g8 = dq[qo + 8]!;
  let g9 = dq[qo + 9]!;
  let g10 = dq[qo + 10]!;
  let g11 = dq[qo + 11]!;
  let g12 = dq[qo + 12]!;
  let g13 = dq[qo + 13]!;
  let g14 = dq[qo + 14]!;
  let g15 = dq[qo + 15]!;
  for (let j = 0, r = kvo; j < n; j++, r += stride) {
    const pj = p[po + j]!;
    const ds = pj * (dp[j]! - pdp) * scale;
    dv[r]! += pj * f0;
    dv[r + 1]! += pj * f1;
    dv[r + 2]! += pj * f2;
    dv[r + 3]! += pj * f3;
    dv[r + 4]! += pj * f4;
    dv[r + 5]! += pj * f5;
    dv[r + 6]! += pj * f6;
    dv[r + 7]! += pj * f7;
    dv[r + 8]! += pj * f8;
    dv[r + 9]! += pj * f9;
    dv[r + 10]! += pj * f10;
    dv[r + 11]! += pj * f11;
    dv[r + 12]! += pj * f12;
    dv[r + 13]! += pj * f13;
    dv[r + 14]! += pj * f14;
    dv[r + 15]! += pj * f15;
    g0 += ds * kr[r]!;
    g1 += ds * kr[r + 1]!;
    g2 += ds * kr[r + 2]!;
    g3 += ds * kr[r + 3]!;
    g4 += ds * kr[r + 4]!;
    g5 += ds * kr[r + 5]!;
    g6 += ds * kr[r + 6]!;
    g7 += ds * kr[r + 7]!;
    g8 += ds * kr[r + 8]!;
    g9 += ds * kr[r + 9]!;
    g10 += ds * kr[r + 10]!;
    g11 += ds * kr[r + 11]!;
    g12 += ds * kr[r + 12]!;
    g13 += ds * kr[r + 13]!;
    g14 += ds * kr[r + 14]!;
    g15 += ds * kr[r + 15]!;
    dk[r]! += ds * qr[qo]!;
    dk[r + 1]! += ds * qr[qo + 1]!;
    dk[r + 2]! += ds * qr[qo + 2]!;
    dk[r + 3]! += ds * qr[qo + 3]!;
    dk[r + 4]! += ds * qr[qo + 4]!;
    dk[r + 5]! += ds * qr[qo + 5]!;
    dk[r + 6]! += ds * qr[qo + 6]!;
    dk[r + 7]! += ds * qr[qo + 7]!;
    dk[r + 8]! += ds * qr[qo + 8]!;
    dk[r + 9]! += ds * qr[qo + 9]!;
    dk[r + 10]! += ds * qr[qo + 10]!;
    dk[r + 11]! += ds * qr[qo + 11]!;
    dk[r + 12]! += ds * qr[qo + 12]!;
    dk[r + 13]! += ds * qr[qo + 13]!;
    dk[r + 14]! += ds * qr[qo + 14]!;
    dk[r + 15]! += ds * qr[qo + 15]!;
  }
  dq[qo] = g0;
  dq[qo + 1] = g1;
  dq[qo + 2] = g2;
  dq[qo + 3] = g3;
  dq[qo + 4] = g4;
  dq[qo + 5] = g5;
  dq[qo + 6] = g6;
  dq[qo + 7] = g7;
  dq[qo + 8] = g8;
  dq[qo + 9] = g9;
  dq[qo + 10] = g10;
  dq[qo + 11] = g11;
  dq[qo + 12] = g12;
  dq[qo + 13] = g13;
  dq[qo + 14] = g14;
  dq[qo + 15] = g15;
}

/** scoreRow of attentionCpu: the row's scaled scores in `s` (keys lo..t) and its lse. */
function scoreRow(hd: Heads, q: Float32Array, k: Float32Array, t: number, h: number, lo: number, s: Float64Array) {
  const { Hq, Hkv, D } = hd;
  const kvh = Math.floor(h / (Hq / Hkv));
  const nKeys = t + 1 - lo;
  const sc = 1 / Math.sqrt(D);
  const qo = (t * Hq + h) * D;
  for (let j = 0; j < nKeys; j++) {
    const ko = ((lo + j) * Hkv + kvh) * D;
    let dot = 0;
    for (let d = 0; d < D; d++) dot += q[qo + d]! * k[ko + d]!;
    s[j] = dot * sc;
  }
  let m = -Infinity;
  for (let j = 0; j < nKeys; j++) m = Math.max(m, s[j]!);
  let sum = 0;
  for (let j = 0; j < nKeys; j++) sum += Math.exp(s[j]! - m);
  return m + Math.log(sum);
}

/** Offsets of each (row, head)'s attention probabilities in a tape's `p` (keys lo..t of the row). */
export function probOffsets(T: number, Hq: number, segStart: Int32Array): Int32Array {
  const off = new Int32Array(T + 1);
  for (let t = 0; t < T; t++) off[t + 1] = off[t]! + (t + 1 - segStart[t]!) * Hq;
  return off;
}

/**
 * attentionCpu with segments (S = T): out = Σ exp(s − lse)·v; the probabilities exp(s − lse) kept
 * in `p` (attentionBackwardCpu computes the same values again from scoreRow: reading them is exact).
 */
export function segmentAttention(
  hd: Heads,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  out: Float32Array,
  T: number,
  segStart: Int32Array,
  pOff: Int32Array,
): Float64Array {
  const { Hq, Hkv, D } = hd;
  const s = new Float64Array(T);
  const acc = new Float64Array(D);
  const probs = new Float64Array(pOff[T]!);
  for (let t = 0; t < T; t++)
    for (let h = 0; h < Hq; h++) {
      const lo = segStart[t]!;
      const n = t + 1 - lo;
      if (D === 16) {
        const kvo = (lo * Hkv + Math.floor(h / (Hq / Hkv))) * D;
        attentionRow16(q, (t * Hq + h) * D, k, v, kvo, Hkv * D, n, s, probs, pOff[t]! + h * n, out);
        continue;
      }
      const lse = scoreRow(hd, q, k, t, h, lo, s);
      const kvh = Math.floor(h / (Hq / Hkv));
      const po = pOff[t]! + h * n;
      acc.fill(0);
      for (let j = 0; j < n; j++) {
        const p = Math.exp(s[j]! - lse);
        probs[po + j] = p;
        const vo = ((lo + j) * Hkv + kvh) * D;
        for (let d = 0; d < D; d++) acc[d]! += p * v[vo + d]!;
      }
      out.set(acc, (t * Hq + h) * D);
    }
  return probs;
}

/**
 * attentionBackwardCpu with segments (f64 accumulators): from dO (T, Hq·D), the rotated q and k, v
 * and segmentAttention's probabilities p, the gradients of q, k and v (before the rope backward).
 */
export function attentionBack(
  hd: Heads,
  dof: Float32Array,
  t: { qr: Float32Array; kr: Float32Array; v: Float32Array; p: Float64Array },
  segStart: Int32Array,
): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const { Hq, Hkv, D } = hd;
  const T = segStart.length;
  const dq = new Float64Array(T * Hq * D);
  const dk = new Float64Array(T * Hkv * D);
  const dv = new Float64Array(T * Hkv * D);
  const dp = new Float64Array(T);
  const pOff = probOffsets(T, Hq, segStart);
  const scale = 1 / Math.sqrt(D);
  for (let ti = 0; ti < T; ti++)
    for (let h = 0; h < Hq; h++) {
      const lo = segStart[ti]!;
      const kvh = Math.floor(h / (Hq / Hkv));
      const qRow = (ti * Hq + h) * D;
      const nKeys = ti + 1 - lo;
      const po = pOff[ti]! + h * nKeys;
      const p = t.p;
      if (D === 16) {
        const kvo = (lo * Hkv + kvh) * D;
        attentionBackRow16(dof, t.qr, qRow, t.kr, t.v, kvo, Hkv * D, nKeys, p, po, dp, dq, dk, dv);
        continue;
      }
      for (let j = 0; j < nKeys; j++) {
        let acc = 0;
        const vo = ((lo + j) * Hkv + kvh) * D;
        for (let d = 0; d < D; d++) acc += dof[qRow + d]! * t.v[vo + d]!;
        dp[j] = acc;
      }
      let pdp = 0;
      for (let j = 0; j < nKeys; j++) pdp += p[po + j]! * dp[j]!;
      for (let j = 0; j < nKeys; j++) {
        const pj = p[po + j]!;
        const dsj = pj * (dp[j]! - pdp);
        const kvRow = ((lo + j) * Hkv + kvh) * D;
        for (let d = 0; d < D; d++) {
          dv[kvRow + d]! += pj * dof[qRow + d]!;
          dq[qRow + d]! += dsj * scale * t.kr[kvRow + d]!;
          dk[kvRow + d]! += dsj * scale * t.qr[qRow + d]!;
        }
      }
    }
  return { dq, dk, dv };
}
