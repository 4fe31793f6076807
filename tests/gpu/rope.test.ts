// rope on the software adapter: frequency tables, GPU vs CPU reference, backward vs finite differences.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import {
  rope,
  ropeBackward,
  ropeBackwardCpu,
  ropeConfigFromHf,
  ropeCpu,
  ropeFrequencies,
  type RopeConfig,
} from '../../src/engine/kernels/rope.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { finiteDiff, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const LLAMA32: RopeConfig = {
  headDim: 64,
  theta: 500000,
  scaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
};

describe('ropeFrequencies', () => {
  it('is theta^(-2i/D) without scaling', () => {
    const f = ropeFrequencies({ headDim: 8, theta: 10000 });
    expect(f.length).toBe(4);
    [1, 0.1, 0.01, 0.001].forEach((v, i) => expect(f[i]).toBeCloseTo(v, 7));
  });

  it('applies Llama-3 scaling: short wavelengths kept, long ones / factor, a blend between', () => {
    const f = ropeFrequencies(LLAMA32);
    // Values worked out independently (wavelength 2pi/f against 8192/1 and 8192/4).
    const want: [number, number][] = [
      [0, 1],
      [14, 0.0032114459947525913], // wavelength 1955 < 2048: unchanged
      [15, 0.001290547928209264],
      [16, 0.00042955679655936815],
      [17, 9.70828780262767e-5],
      [31, 9.418306725434909e-8], // wavelength 2.1e6 > 8192: divided by 32
    ];
    for (const [i, v] of want) expect(Math.abs(f[i]! - v) / v).toBeLessThan(1e-6);
    const plain = ropeFrequencies({ headDim: 64, theta: 500000 });
    for (let i = 1; i < 32; i++) {
      const ratio = f[i]! / plain[i]!;
      expect(ratio).toBeLessThanOrEqual(f[i - 1]! / plain[i - 1]! + 1e-6);
      expect(ratio).toBeGreaterThanOrEqual(1 / 32 - 1e-6);
    }
  });

  it('applies linear scaling', () => {
    const f = ropeFrequencies({ headDim: 4, theta: 100, scaling: { type: 'linear', factor: 4 } });
    expect(Array.from(f)).toEqual([0.25, 0.025].map(Math.fround));
  });

  it('reads Hugging Face configs', () => {
    expect(
      ropeConfigFromHf({
        hidden_size: 2048,
        num_attention_heads: 32,
        rope_theta: 500000,
        rope_scaling: {
          factor: 32,
          low_freq_factor: 1,
          high_freq_factor: 4,
          original_max_position_embeddings: 8192,
          rope_type: 'llama3',
        },
      }),
    ).toEqual(LLAMA32);
    expect(ropeConfigFromHf({ head_dim: 128, hidden_size: 1024, num_attention_heads: 16, rope_theta: 1e6 })).toEqual({
      headDim: 128,
      theta: 1e6,
      scaling: null,
    });
    expect(
      ropeConfigFromHf({ head_dim: 64, rope_parameters: { rope_type: 'linear', rope_theta: 1e4, factor: 2 } }),
    ).toEqual({ headDim: 64, theta: 1e4, scaling: { type: 'linear', factor: 2 } });
    expect(() => ropeConfigFromHf({ head_dim: 64, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/yarn/);
  });
});

describe('rope CPU reference', () => {
  it('is the identity at position 0 and rotates the pair (i, i + D/2)', () => {
    const f = ropeFrequencies({ headDim: 4, theta: 10000 });
    const x = new Float32Array([1, 2, 3, 4]);
    expect(Array.from(ropeCpu(x, [1, 1, 4], f, 0))).toEqual([1, 2, 3, 4]);
    const y = ropeCpu(x, [1, 1, 4], f, 1);
    const [c, s] = [Math.cos(1), Math.sin(1)];
    expect(y[0]).toBeCloseTo(1 * c - 3 * s, 6);
    expect(y[2]).toBeCloseTo(3 * c + 1 * s, 6);
  });

  it('with an offset equals the tail of the full sequence (KV-cache positions)', () => {
    const rng = createRng(3);
    const f = ropeFrequencies({ headDim: 6, theta: 10000 });
    const x = randomArray(5 * 2 * 6, rng);
    const full = ropeCpu(x, [5, 2, 6], f, 0);
    expect(ropeCpu(x.slice(3 * 12), [2, 2, 6], f, 3)).toEqual(full.slice(3 * 12));
  });

  it('backward matches finite differences of the forward', () => {
    const rng = createRng(5);
    const f = ropeFrequencies({ headDim: 6, theta: 100 });
    const x = randomArray(3 * 2 * 6, rng);
    const r = randomArray(x.length, rng);
    const want = finiteDiff((xx) => ropeCpu(xx, [3, 2, 6], f, 4), x, r);
    expect(relError(ropeBackwardCpu(r, [3, 2, 6], f, 4), want)).toBeLessThan(1e-3);
  });
});

describe.skipIf(!ctx)(`rope on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it.each([
    { t: 1, h: 1, d: 2, pos0: 0, cfg: { headDim: 2, theta: 10000 } },
    { t: 5, h: 3, d: 10, pos0: 0, cfg: { headDim: 10, theta: 10000 } },
    { t: 3, h: 2, d: 6, pos0: 17, cfg: { headDim: 6, theta: 1e6 } },
    { t: 1, h: 4, d: 64, pos0: 1000, cfg: LLAMA32 }, // decode at a late position
    { t: 2, h: 2, d: 130, pos0: 100000, cfg: { headDim: 130, theta: 10000 } }, // D/2 > WG, angles ~1e5
  ])('forward and backward match the CPU reference: T=$t H=$h D=$d pos0=$pos0', async ({ t, h, d, pos0, cfg }) => {
    const rng = createRng(t * 1000 + h * 100 + d + pos0);
    const f = ropeFrequencies(cfg);
    const x = randomArray(t * h * d, rng);
    const dy = randomArray(t * h * d, rng);
    const e = new Engine(gpu);
    const ft = e.tensor([d / 2], f);
    const y = rope(e, e.tensor([t, h, d], x), ft, pos0);
    const dx = ropeBackward(e, e.tensor([t, h, d], dy), ft, pos0);
    expect(y.shape).toEqual([t, h, d]);
    expect(relError(await e.read(y), ropeCpu(x, [t, h, d], f, pos0))).toBeLessThan(1e-4);
    expect(relError(await e.read(dx), ropeBackwardCpu(dy, [t, h, d], f, pos0))).toBeLessThan(1e-4);
  });

  it('rejects a frequency table of the wrong length', () => {
    const e = new Engine(gpu);
    expect(() => rope(e, e.tensor([1, 1, 8]), e.tensor([3]), 0)).toThrow(/D\/2 frequencies/);
  });
});
