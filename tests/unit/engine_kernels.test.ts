// Pure parts of the engine's kernels that need no GPU: the WGSL preprocessor and the matmul
// variants it makes, the dispatch-grid helpers, and the CPU backend's KV-cache append.
import { describe, expect, it } from 'vitest';
import { GpuError } from '../../src/core/errors.ts';
import { grid1d, gridChecked, MAX_GROUPS_PER_DIM } from '../../src/engine/kernels/dispatch_grid.ts';
import { createRng } from '../../src/core/rng.ts';
import { attentionBackwardCpu, attentionCpu } from '../../src/engine/kernels/attention.ts';
import { attentionPagedCpu } from '../../src/engine/kernels/attention_paged.ts';
import { matmulCpu, matmulVariantCode } from '../../src/engine/kernels/matmul.ts';
import { preprocessWgsl } from '../../src/engine/kernels/wgsl_preprocess.ts';
import { CpuOps } from '../../src/engine/ops/ops.ts';

const SRC = ['a;', '// #if X', 'x-on;', '// #else', 'x-off;', '// #endif', 'b;'].join('\n');

describe('WGSL preprocessor', () => {
  it('keeps the chosen branch and blanks directives and the other branch (line numbers kept)', () => {
    expect(preprocessWgsl(SRC, { X: true }).split('\n')).toEqual(['a;', '', 'x-on;', '', '', '', 'b;']);
    expect(preprocessWgsl(SRC, { X: false }).split('\n')).toEqual(['a;', '', '', '', 'x-off;', '', 'b;']);
  });

  it('nests: an inner block inside a dropped branch stays dropped', () => {
    const src = ['// #if A', '// #if B', 'ab;', '// #else', 'a-not-b;', '// #endif', '// #endif'].join('\n');
    expect(preprocessWgsl(src, { A: false, B: false }).trim()).toBe('');
    expect(preprocessWgsl(src, { A: true, B: false }).trim()).toBe('a-not-b;');
    expect(preprocessWgsl(src, { A: true, B: true }).trim()).toBe('ab;');
  });

  it('throws when a flag has no marker, a marker has no flag, or blocks are unbalanced', () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(GpuError);
        return (err as GpuError).data.code;
      }
      return 'no error';
    };
    // the case string replacement missed silently: the marker was renamed
    expect(code(() => preprocessWgsl(SRC.replace('#if X', '#if Y'), { X: true }))).toBe('wgsl-preprocess');
    expect(code(() => preprocessWgsl(SRC, {}))).toBe('wgsl-preprocess');
    expect(code(() => preprocessWgsl(SRC, { X: true, Z: true }))).toBe('wgsl-preprocess');
    expect(code(() => preprocessWgsl('// #if X\na;', { X: true }))).toBe('wgsl-preprocess');
    expect(code(() => preprocessWgsl('a;\n// #endif', {}))).toBe('wgsl-preprocess');
    expect(code(() => preprocessWgsl('// #if X\n// #else\n// #else\n// #endif', { X: true }))).toBe('wgsl-preprocess');
  });
});

describe('matmul storage variants', () => {
  const decls = (code: string) =>
    code
      .split('\n')
      .filter((l) => /^(enable|alias)\b/.test(l))
      .join(' | ');

  it('f32 has no f16 at all; f16 variants enable f16 and retype only their operand', () => {
    expect(decls(matmulVariantCode('f32', 'f32'))).toBe('alias TA = f32; | alias TB = f32;');
    expect(decls(matmulVariantCode('f32', 'f16'))).toBe('enable f16; | alias TA = f32; | alias TB = f16;');
    expect(decls(matmulVariantCode('f16', 'f32'))).toBe('enable f16; | alias TA = f16; | alias TB = f32;');
    expect(decls(matmulVariantCode('f16', 'f16'))).toBe('enable f16; | alias TA = f16; | alias TB = f16;');
    expect(matmulVariantCode('f32', 'f16')).not.toBe(matmulVariantCode('f32', 'f32'));
    expect(matmulVariantCode('f32', 'f32')).not.toMatch(/#if|#else|#endif/);
  });

  it('enable f16 comes before every declaration (WGSL requires directives first)', () => {
    const lines = matmulVariantCode('f16', 'f16')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('//'));
    expect(lines[0]).toBe('enable f16;');
  });

  it('tile flags: 8 rows per thread and vec4 staging make their own variants, vec4 for f32 only', () => {
    const plain = matmulVariantCode('f32', 'f32');
    const tm8 = matmulVariantCode('f32', 'f32', { TM8: true, VEC4_A: false, VEC4_B: false });
    expect(plain).not.toMatch(/acc7/);
    expect(tm8).toMatch(/acc7 \+= /);
    expect(tm8).toMatch(/override TM: u32 = 8u;/);
    const va = matmulVariantCode('f32', 'f32', { TM8: false, VEC4_A: true, VEC4_B: false });
    expect(va).toMatch(/var<storage, read> a: array<vec4<f32>>/);
    expect(va).toMatch(/var<storage, read> b: array<TB>/);
    expect(va).toMatch(/load_a4\(z, gm, gk\)/);
    expect(va).not.toMatch(/#include|#if/);
    expect(() => matmulVariantCode('f16', 'f32', { TM8: false, VEC4_A: true, VEC4_B: false })).toThrow(/f32 operands/);
  });
});

describe('dispatch grids', () => {
  it('grid1d covers the range with both dimensions under the cap', () => {
    for (const g of [1, 7, MAX_GROUPS_PER_DIM, MAX_GROUPS_PER_DIM + 1, 151_936 * 4, 1e8]) {
      const [x, y] = grid1d(g);
      expect(x).toBeLessThanOrEqual(MAX_GROUPS_PER_DIM);
      expect(y).toBeLessThanOrEqual(MAX_GROUPS_PER_DIM);
      expect(x * y).toBeGreaterThanOrEqual(g);
      expect(x * (y - 1)).toBeLessThan(g); // no whole spare row of workgroups
    }
    expect(grid1d(0)).toEqual([1, 1]);
    expect(() => grid1d(MAX_GROUPS_PER_DIM ** 2 + 1)).toThrow(RangeError);
  });

  it('gridChecked names the kernel when a dimension is over the cap', () => {
    expect(gridChecked('rope', 4, 9)).toEqual([4, 9, 1]);
    expect(() => gridChecked('attention', 2, MAX_GROUPS_PER_DIM + 1)).toThrow(/attention: .*65535/);
  });
});

describe('CpuOps.appendRows (the KV cache on the CPU backend)', () => {
  it('appends after the first len rows and returns exactly len + T rows', () => {
    const ops = new CpuOps();
    const a = ops.appendRows(undefined, 0, ops.upload([2, 1, 2], Float32Array.from([1, 2, 3, 4])));
    expect(a.shape).toEqual([2, 1, 2]);
    const b = ops.appendRows(a, 2, ops.upload([1, 1, 2], Float32Array.from([5, 6])));
    expect(b.shape).toEqual([3, 1, 2]);
    expect(Array.from(b.data)).toEqual([1, 2, 3, 4, 5, 6]);
    // len shorter than the store: rows past len are overwritten (a rolled-back cache)
    const c = ops.appendRows(b, 1, ops.upload([1, 1, 2], Float32Array.from([7, 8])));
    expect(Array.from(c.data)).toEqual([1, 2, 7, 8]);
  });
});

// The CPU references run their loops in a cache-friendly order; each output is still the same f64 sum
// in the same order as the textbook definition, so the two agree bit for bit.
describe('the CPU references equal their textbook definitions bit for bit', () => {
  const rand = (n: number, seed: number) => {
    const r = createRng(seed);
    return Float32Array.from({ length: n }, () => r.next() * 2 - 1);
  };
  const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

  /** out[z, i, j] = alpha · Σ_p op(A)[i, p] · op(B)[p, j] + C, the sum in f64 over p in order. */
  function textbookMatmul(
    a: Float32Array,
    b: Float32Array,
    d: { batch: number; m: number; n: number; k: number },
    o: { transA: boolean; transB: boolean; alpha: number; batchA: number; batchB: number; acc?: Float32Array },
  ) {
    const out = new Float32Array(d.batch * d.m * d.n);
    for (let z = 0; z < d.batch; z++)
      for (let i = 0; i < d.m; i++)
        for (let j = 0; j < d.n; j++) {
          const oa = o.batchA > 1 ? z * d.m * d.k : 0;
          const ob = o.batchB > 1 ? z * d.k * d.n : 0;
          let s = 0;
          for (let p = 0; p < d.k; p++)
            s +=
              (o.transA ? a[oa + p * d.m + i]! : a[oa + i * d.k + p]!) *
              (o.transB ? b[ob + j * d.k + p]! : b[ob + p * d.n + j]!);
          const idx = (z * d.m + i) * d.n + j;
          out[idx] = o.alpha * s + (o.acc ? o.acc[idx]! : 0);
        }
    return out;
  }

  it('matmulCpu: every transpose, a broadcast batch, alpha and an accumulated C', () => {
    let seed = 1;
    for (const [m, n, k] of [
      [1, 1, 1],
      [3, 5, 7],
      [17, 9, 33],
      [8, 40, 0],
    ] as const)
      for (const transA of [false, true])
        for (const transB of [false, true])
          for (const [batchA, batchB] of [
            [1, 1],
            [3, 1],
            [1, 3],
            [3, 3],
          ] as const) {
            const batch = Math.max(batchA, batchB);
            const nd = batchA > 1 || batchB > 1;
            const aShape = [...(nd ? [batchA] : []), ...(transA ? [k, m] : [m, k])];
            const bShape = [...(nd ? [batchB] : []), ...(transB ? [n, k] : [k, n])];
            const a = rand(batchA * m * k, seed++);
            const b = rand(batchB * k * n, seed++);
            for (const withC of [false, true])
              for (const alpha of [1, 0.37]) {
                const acc = withC ? rand(batch * m * n, seed++) : undefined;
                const got = matmulCpu(a, aShape, b, bShape, { transA, transB, alpha, accumulate: acc });
                const want = textbookMatmul(a, b, { batch, m, n, k }, { transA, transB, alpha, batchA, batchB, acc });
                expect(bits(got), JSON.stringify({ aShape, bShape, transA, transB, withC, alpha })).toEqual(bits(want));
              }
          }
  });

  /**
   * Causal softmax(q·kᵀ/√D)·v of one (t, h), every sum in f64 in key order; `lo` the segment's first
   * key. `bySum`: weights exp(s − max) with the weighted sum divided by their sum (the paged kernel's
   * form) instead of exp(s − log-sum-exp).
   */
  function textbookAttention(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    dims: { T: number; S: number; Hq: number; Hkv: number; D: number },
    lo: (t: number) => number,
    bySum = false,
  ) {
    const { T, S, Hq, Hkv, D } = dims;
    const out = new Float32Array(T * Hq * D);
    const lse = new Float32Array(Hq * T);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < Hq; h++) {
        const kvh = Math.floor(h / (Hq / Hkv));
        const keys = Array.from({ length: S - T + t + 1 - lo(t) }, (_, j) => lo(t) + j);
        const s = keys.map((key) => {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[(t * Hq + h) * D + d]! * k[(key * Hkv + kvh) * D + d]!;
          return dot * (1 / Math.sqrt(D));
        });
        const m = Math.max(...s);
        let sum = 0;
        for (const x of s) sum += Math.exp(x - m);
        const l = m + Math.log(sum);
        lse[h * T + t] = l;
        for (let d = 0; d < D; d++) {
          let acc = 0;
          keys.forEach((key, j) => (acc += Math.exp(s[j]! - (bySum ? m : l)) * v[(key * Hkv + kvh) * D + d]!));
          out[(t * Hq + h) * D + d] = bySum ? acc / sum : acc;
        }
      }
    return { out, lse };
  }

  /**
   * The gradients of that attention (no segments): p = softmax(s), dp_j = dout·v_j,
   * ds_j = p_j (dp_j − Σ_i p_i dp_i); dv_j += p_j dout, dq += ds_j/√D · k_j, dk_j += ds_j/√D · q; f64 sums.
   */
  function textbookAttentionBackward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    dout: Float32Array,
    dims: { T: number; S: number; Hq: number; Hkv: number; D: number },
  ) {
    const { T, S, Hq, Hkv, D } = dims;
    const [dq, dk, dv] = [q, k, v].map((x) => new Float64Array(x.length)) as [Float64Array, Float64Array, Float64Array];
    const scale = 1 / Math.sqrt(D);
    for (let t = 0; t < T; t++)
      for (let h = 0; h < Hq; h++) {
        const kvh = Math.floor(h / (Hq / Hkv));
        const qi = (t * Hq + h) * D;
        const keys = Array.from({ length: S - T + t + 1 }, (_, j) => (j * Hkv + kvh) * D);
        const s = keys.map((kj) => {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qi + d]! * k[kj + d]!;
          return dot * scale;
        });
        const m = Math.max(...s);
        let sum = 0;
        for (const x of s) sum += Math.exp(x - m);
        const p = s.map((x) => Math.exp(x - (m + Math.log(sum))));
        const dp = keys.map((vj) => {
          let dot = 0;
          for (let d = 0; d < D; d++) dot += dout[qi + d]! * v[vj + d]!;
          return dot;
        });
        let pdp = 0;
        p.forEach((pj, j) => (pdp += pj * dp[j]!));
        keys.forEach((kj, j) => {
          const ds = p[j]! * (dp[j]! - pdp);
          for (let d = 0; d < D; d++) {
            dv[kj + d]! += p[j]! * dout[qi + d]!;
            dq[qi + d]! += ds * scale * k[kj + d]!;
            dk[kj + d]! += ds * scale * q[qi + d]!;
          }
        });
      }
    return { dq: Float32Array.from(dq), dk: Float32Array.from(dk), dv: Float32Array.from(dv) };
  }

  /** Grouped heads, a KV prefix, one head dimension, odd ones (every tail of the dot product). */
  const DIMS = [
    { T: 1, S: 1, Hq: 1, Hkv: 1, D: 1 },
    { T: 5, S: 9, Hq: 4, Hkv: 2, D: 8 },
    { T: 7, S: 7, Hq: 3, Hkv: 1, D: 13 },
  ];
  /** Random q, k, v and an upstream gradient dout of `d`'s shapes. */
  const tensors = (d: (typeof DIMS)[number], seed: number) => ({
    q: rand(d.T * d.Hq * d.D, seed),
    k: rand(d.S * d.Hkv * d.D, seed + 1),
    v: rand(d.S * d.Hkv * d.D, seed + 2),
    dout: rand(d.T * d.Hq * d.D, seed + 3),
  });

  it('attentionCpu: grouped heads, a KV prefix, and a packed sequence of two segments', () => {
    for (const [i, dims] of DIMS.entries()) {
      const { q, k, v } = tensors(dims, 100 + 4 * i);
      const got = attentionCpu(q, k, v, dims);
      const want = textbookAttention(q, k, v, dims, () => 0);
      expect(bits(got.out)).toEqual(bits(want.out));
      expect(bits(got.lse)).toEqual(bits(want.lse));
      if (dims.S === dims.T) {
        const cut = 3; // rows 0..2 one sequence, 3.. another
        const seg = Array.from({ length: dims.T }, (_, t) => (t < cut ? [0, cut] : [cut, dims.T])).flat();
        const packed = attentionCpu(q, k, v, dims, seg);
        const wantPacked = textbookAttention(q, k, v, dims, (t) => (t < cut ? 0 : cut));
        expect(bits(packed.out)).toEqual(bits(wantPacked.out));
      }
    }
  });

  it('attentionPagedCpu: each row over its own sequence’s pages, as one contiguous attention', () => {
    const [Hq, Hkv, D, pageSize] = [4, 2, 6, 3];
    const pos = [7, 2, 4]; // rows of sequences 1, 0, 1
    const seq = [1, 0, 1];
    const pages = [5, 2, 0, /* seq 1: */ 1, 4, 3];
    const rows = 6 * pageSize;
    const kStore = rand(rows * Hkv * D, 7);
    const vStore = rand(rows * Hkv * D, 8);
    const q = rand(pos.length * Hq * D, 9);
    const got = attentionPagedCpu(
      q,
      kStore,
      vStore,
      {
        pageSize,
        maxPages: 3,
        pos: Uint32Array.from(pos),
        dest: new Uint32Array(3),
        seq: Uint32Array.from(seq),
        pages: Uint32Array.from(pages),
      },
      { N: 3, Hq, Hkv, D },
    );
    pos.forEach((p, n) => {
      // the row's keys gathered in order, then attention of its one query over them (the last row of T = S = p + 1)
      const gather = (store: Float32Array) => {
        const out = new Float32Array((p + 1) * Hkv * D);
        for (let j = 0; j <= p; j++) {
          const row = pages[seq[n]! * 3 + Math.floor(j / pageSize)]! * pageSize + (j % pageSize);
          out.set(store.subarray(row * Hkv * D, (row + 1) * Hkv * D), j * Hkv * D);
        }
        return out;
      };
      const qRow = q.subarray(n * Hq * D, (n + 1) * Hq * D);
      const want = textbookAttention(
        qRow,
        gather(kStore),
        gather(vStore),
        { T: 1, S: p + 1, Hq, Hkv, D },
        () => 0,
        true,
      );
      expect(bits(got.subarray(n * Hq * D, (n + 1) * Hq * D))).toEqual(bits(want.out));
    });
  });

  it('attentionBackwardCpu: grouped heads and a KV prefix', () => {
    for (const [i, dims] of DIMS.entries()) {
      const { q, k, v, dout } = tensors(dims, 200 + 4 * i);
      const got = attentionBackwardCpu(q, k, v, dout, dims);
      const want = textbookAttentionBackward(q, k, v, dout, dims);
      for (const g of ['dq', 'dk', 'dv'] as const) expect(bits(got[g]), g).toEqual(bits(want[g]));
    }
  });
});
