// Pure parts of the engine's kernels that need no GPU: the WGSL preprocessor and the matmul
// variants it makes, the dispatch-grid helpers, and the CPU backend's KV-cache append.
import { describe, expect, it } from 'vitest';
import { GpuError } from '../../src/core/errors.ts';
import { grid1d, gridChecked, MAX_GROUPS_PER_DIM } from '../../src/engine/kernels/dispatch_grid.ts';
import { matmulVariantCode } from '../../src/engine/kernels/matmul.ts';
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
