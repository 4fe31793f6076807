// The pure choices behind split-K and double-buffered matmul tiles (kernels/matmul.ts): how many
// slices the automatic rule makes, how K is cut into slab-aligned slices, the compute-unit guess
// per adapter, where double buffering is on, and the shader variant it selects.
import { describe, expect, it } from 'vitest';
import {
  autoSplitK,
  doubleBufferFor,
  likelyComputeUnits,
  matmulVariantCode,
  MAX_AUTO_SPLIT_K,
  MIN_SLICE_K,
  pickTile,
  splitKPlan,
  variantKey,
} from '../../src/engine/kernels/matmul.ts';
import type { GpuReport } from '../../src/engine/runtime/device.ts';

const report = (vendor: string, over: Partial<GpuReport> = {}): GpuReport => ({
  vendor,
  architecture: '',
  description: '',
  isFallback: false,
  features: { shaderF16: false, subgroups: false, timestampQuery: false },
  limits: {
    maxStorageBufferBindingSize: 2 ** 30,
    maxBufferSize: 2 ** 30,
    maxComputeWorkgroupSizeX: 256,
    maxComputeInvocationsPerWorkgroup: 256,
    maxComputeWorkgroupStorageSize: 32768,
  },
  ...over,
});

describe('autoSplitK', () => {
  it('splits the LM-head backward (14 tiles, K = 151,936) to about 2× the compute units of workgroups', () => {
    // 55 × 896 outputs in 64 × 64 tiles: 1 × 14 workgroups
    expect(autoSplitK(14, 151936, 64)).toBe(10); // 140 workgroups ≥ 128
    expect(autoSplitK(14, 151936, 16)).toBe(3); // 42 ≥ 32
    expect(14 * autoSplitK(14, 151936, 132)).toBeGreaterThanOrEqual(2 * 132);
  });

  it('does not split outputs that fill the adapter, short K, or past the cap', () => {
    expect(autoSplitK(128, 151936, 64)).toBe(1);
    expect(autoSplitK(500, 151936, 64)).toBe(1);
    // each slice keeps at least MIN_SLICE_K of K
    expect(autoSplitK(1, 3 * MIN_SLICE_K + 10, 64)).toBe(3);
    expect(autoSplitK(1, MIN_SLICE_K * 2 - 1, 64)).toBe(1);
    expect(autoSplitK(1, 64, 64)).toBe(1);
    expect(autoSplitK(1, 10 ** 7, 1000)).toBe(MAX_AUTO_SPLIT_K);
    expect(autoSplitK(0, 10 ** 6, 8)).toBe(16);
  });
});

describe('splitKPlan', () => {
  it('cuts K into slab-aligned slices that cover it, dropping empty ones', () => {
    for (const k of [1, 15, 16, 17, 1000, 1001, 151936])
      for (let s = 1; s <= 8; s++) {
        const p = splitKPlan(k, s, 16);
        expect(p.kSlice % 16).toBe(0);
        expect(p.slices).toBeLessThanOrEqual(s);
        expect(p.slices * p.kSlice).toBeGreaterThanOrEqual(k); // the slices cover K
        expect((p.slices - 1) * p.kSlice).toBeLessThan(k); // and none is empty
      }
    expect(splitKPlan(1001, 3, 16)).toEqual({ slices: 3, kSlice: 336 });
    expect(splitKPlan(20, 8, 16)).toEqual({ slices: 2, kSlice: 16 });
    expect(splitKPlan(151936, 1, 16)).toEqual({ slices: 1, kSlice: 151936 });
    expect(splitKPlan(0, 4, 8)).toEqual({ slices: 1, kSlice: 8 });
  });

  it('rejects a count that is not a positive integer, naming the option', () => {
    expect(() => splitKPlan(100, 0, 16)).toThrow(/splitK must be a positive integer or 'auto'/);
    expect(() => splitKPlan(100, 2.5, 16)).toThrow(/splitK/);
  });
});

describe('adapter choices', () => {
  it('guesses compute units from the vendor, CPU threads for software adapters', () => {
    expect(likelyComputeUnits(report('nvidia'))).toBe(64);
    expect(likelyComputeUnits(report('amd'))).toBe(64);
    expect(likelyComputeUnits(report('intel'))).toBe(16);
    expect(likelyComputeUnits(report('apple'))).toBe(16);
    expect(likelyComputeUnits(report('qualcomm'))).toBe(8);
    expect(likelyComputeUnits(report('google', { architecture: 'swiftshader' }), 2)).toBe(2);
    expect(likelyComputeUnits(report('nvidia', { isFallback: true }), 12)).toBe(12);
  });

  it('double-buffers on hardware adapters where the tile fits twice, never on software ones', () => {
    const big = pickTile(512, 512);
    const small = pickTile(55, 896);
    expect(doubleBufferFor(report('nvidia'), big)).toBe(true); // 24.8 KiB ≤ 32 KiB
    expect(doubleBufferFor(report('nvidia'), small)).toBe(true);
    const low = report('intel', { limits: { ...report('intel').limits, maxComputeWorkgroupStorageSize: 16384 } });
    expect(doubleBufferFor(low, small)).toBe(false); // 2 × 8.3 KiB > 16 KiB
    expect(doubleBufferFor(report('google', { architecture: 'swiftshader' }), pickTile(55, 896, true))).toBe(false);
  });

  it('the double-buffered variant stages into two buffers and has its own pipeline key', () => {
    const flags = { TM8: false, VEC4_A: false, VEC4_B: false };
    const single = matmulVariantCode('f32', 'f32', flags);
    const double = matmulVariantCode('f32', 'f32', { ...flags, DOUBLE_BUF: true });
    expect(single).toMatch(/override NBUF: u32 = 1u;/);
    expect(double).toMatch(/override NBUF: u32 = 2u;/);
    expect(double).toMatch(/stage_a\(z, m0, k0 \+ BK, tid, \(1u - buf\) \* BK \* SA\)/);
    // one barrier in the slab loop, plus the one after the first slab's staging
    expect(double.split('workgroupBarrier()').length - 1).toBe(2);
    expect(single.split('workgroupBarrier()').length - 1).toBe(2);
    expect(variantKey({ ...flags, DOUBLE_BUF: true })).not.toBe(variantKey(flags));
  });
});
