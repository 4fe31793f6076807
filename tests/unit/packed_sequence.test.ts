// A minibatch packed as one sequence (kernels/segments.ts): attention that never crosses a segment
// and RoPE positions that restart in each (CPU references and the CPU backend), the model's packed
// tape, and the trainer's packed minibatch against one forward per sample (loss, statistics and
// gradients); the GPU kernels and trainer are checked in tests/gpu/packed_sequence.test.ts.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { attentionBackwardCpu, attentionCpu, type AttentionDims } from '../../src/engine/kernels/attention.ts';
import { ropeBackwardCpu, ropeCpu, ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import { segmentBounds } from '../../src/engine/kernels/segments.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles, type TinyVariant } from '../helpers/tiny_checkpoint.ts';
import { perSegment, rowsOf } from '../helpers/segments.ts';

const LENGTHS = [4, 1, 6];

function random(n: number, seed: number): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
}

/** lse (Hq, T) of a packed call from per-segment (Hq, n) blocks. */
function lseOfSegments(lengths: number[], Hq: number, block: (start: number, n: number) => Float32Array) {
  const T = lengths.reduce((a, n) => a + n, 0);
  const out = new Float32Array(Hq * T);
  let start = 0;
  for (const n of lengths) {
    const b = block(start, n);
    for (let h = 0; h < Hq; h++) for (let t = 0; t < n; t++) out[h * T + start + t] = b[h * n + t]!;
    start += n;
  }
  return out;
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

describe('segment bounds', () => {
  it('give each row the [start, end) of its segment', () => {
    expect(Array.from(segmentBounds([2, 1, 3]))).toEqual([0, 2, 0, 2, 2, 3, 3, 6, 3, 6, 3, 6]);
  });

  it('reject empty or fractional segments', () => {
    expect(() => segmentBounds([])).toThrow(/at least one segment/);
    expect(() => segmentBounds([2, 0])).toThrow(/whole number ≥ 1, got 0/);
    expect(() => segmentBounds([1.5])).toThrow(/got 1.5/);
  });
});

describe('packed attention (CPU reference)', () => {
  const Hq = 4;
  const Hkv = 2;
  const D = 5;
  const T = LENGTHS.reduce((a, n) => a + n, 0);
  const dims: AttentionDims = { T, S: T, Hq, Hkv, D };
  const q = random(T * Hq * D, 1);
  const k = random(T * Hkv * D, 2);
  const v = random(T * Hkv * D, 3);
  const dout = random(T * Hq * D, 4);
  const seg = segmentBounds(LENGTHS);
  const alone = (start: number, n: number) => ({
    q: rowsOf(q, Hq * D, start, n),
    k: rowsOf(k, Hkv * D, start, n),
    v: rowsOf(v, Hkv * D, start, n),
    dout: rowsOf(dout, Hq * D, start, n),
    dims: { T: n, S: n, Hq, Hkv, D },
  });

  it('equals attention run on each segment alone (a segment of one token included): out and lse', () => {
    const got = attentionCpu(q, k, v, dims, seg);
    const want = perSegment(LENGTHS, (s, n) => {
      const a = alone(s, n);
      return attentionCpu(a.q, a.k, a.v, a.dims).out;
    });
    const wantLse = lseOfSegments(LENGTHS, Hq, (s, n) => {
      const a = alone(s, n);
      return attentionCpu(a.q, a.k, a.v, a.dims).lse;
    });
    expect(maxAbsDiff(got.out, want)).toBeLessThan(1e-6);
    expect(maxAbsDiff(got.lse, wantLse)).toBeLessThan(1e-6);
    // and differs from one unsegmented sequence (the later segments would see earlier ones)
    expect(maxAbsDiff(attentionCpu(q, k, v, dims).out, want)).toBeGreaterThan(1e-3);
  });

  it('has the gradients of each segment alone: dq, dk, dv', () => {
    const got = attentionBackwardCpu(q, k, v, dout, dims, seg);
    for (const [name, width] of [
      ['dq', Hq * D],
      ['dk', Hkv * D],
      ['dv', Hkv * D],
    ] as const) {
      const want = perSegment(LENGTHS, (s, n) => {
        const a = alone(s, n);
        return attentionBackwardCpu(a.q, a.k, a.v, a.dout, a.dims)[name];
      });
      expect(want.length).toBe(T * width);
      expect(maxAbsDiff(got[name], want)).toBeLessThan(1e-6);
    }
  });

  it('rejects bounds of another length and a KV-cache prefix', () => {
    expect(() => attentionCpu(q, k, v, dims, seg.subarray(2))).toThrow(
      /segment bounds have 20 values, expected 2·T = 22/,
    );
    const withCache = { ...dims, T: T - 1 };
    expect(() => attentionCpu(q.subarray(Hq * D), k, v, withCache, segmentBounds([10]))).toThrow(
      /takes no KV-cache prefix/,
    );
  });
});

describe('packed rope (CPU reference)', () => {
  it('restarts positions in each segment: forward and backward equal rope per segment', () => {
    const H = 3;
    const D = 8;
    const T = LENGTHS.reduce((a, n) => a + n, 0);
    const freqs = ropeFrequencies({ headDim: D, theta: 10000 });
    const x = random(T * H * D, 5);
    const seg = segmentBounds(LENGTHS);
    for (const f of [ropeCpu, ropeBackwardCpu]) {
      const got = f(x, [T, H, D], freqs, 0, seg);
      const want = perSegment(LENGTHS, (s, n) => f(rowsOf(x, H * D, s, n).slice(), [n, H, D], freqs, 0));
      expect(maxAbsDiff(got, want)).toBe(0);
      expect(maxAbsDiff(f(x, [T, H, D], freqs, 0), want)).toBeGreaterThan(1e-3);
    }
  });
});

async function model(variant: TinyVariant) {
  const ck = tinyCheckpointFiles(variant, 'f32', 2, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights);
  m.initLora(4, 8, ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'], 5);
  const rng = createRng(9);
  for (const [key, t] of m.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  return m;
}

/** Three samples of different lengths, masks, advantages, temperatures and old log-probs (TIS on). */
function samples(): GrpoSample[] {
  return [
    {
      ids: [5, 17, 99, 3, 250, 42, 50, 51, 57, 48],
      promptLen: 6,
      oldLogprobs: [-5.1, -5.6, -4.9, -5.4],
      learnerLogprobs: [-5.0, -5.7, -5.0, -5.2],
      advantage: 0.9,
      temperature: 0.7,
    },
    { ids: [8, 9], promptLen: 1, oldLogprobs: [-5.3], advantage: -0.5 },
    {
      ids: [30, 31, 32, 33, 34, 35, 36],
      mask: [0, 0, 1, 1, 0, 1, 1],
      oldLogprobs: [-5.5, -5.2, -5.8, -5.0],
      advantage: 0.4,
      temperature: 1.3,
    },
  ];
}

/** max |a − b| over every gradient, relative to the largest |b|. */
async function gradError(a: Map<string, CpuTensor>, b: Map<string, CpuTensor>) {
  let diff = 0;
  let scale = 0;
  for (const [key, x] of b) {
    const y = a.get(key)!;
    for (let i = 0; i < x.data.length; i++) {
      diff = Math.max(diff, Math.abs(y.data[i]! - x.data[i]!));
      scale = Math.max(scale, Math.abs(x.data[i]!));
    }
  }
  return { rel: diff / scale, scale };
}

describe('packed training minibatch (CPU backend)', () => {
  it.each(['qwen2', 'qwen3'] as const)(
    '%s: one packed forward gives the loss, statistics and gradients of one forward per sample',
    async (variant) => {
      const m = await model(variant);
      const opts = { klCoef: 0.1, tisCap: 2 };
      const packed = await new LoraTrainer(m, opts).gradients(samples());
      const single = await new LoraTrainer(m, { ...opts, pack: false }).gradients(samples());
      expect(packed.forwards).toBe(1);
      expect(single.forwards).toBe(3);
      const { rel, scale } = await gradError(packed.grads, single.grads);
      expect(scale).toBeGreaterThan(1e-4);
      expect(rel).toBeLessThan(1e-5);
      expect(packed.loss).toBeCloseTo(single.loss, 6);
      expect(packed.approxKl).toBeCloseTo(single.approxKl, 6);
      expect(packed.klToBase!).toBeCloseTo(single.klToBase!, 6);
      expect(packed.clipFraction).toBe(single.clipFraction);
      expect(packed.tisMean).toBe(single.tisMean);
      expect(packed.tokens).toBe(single.tokens);
      expect(packed.trainedTokens).toBe(single.trainedTokens);
    },
  );

  it('also with every layer checkpointed (the packed tape recomputed with its segments)', async () => {
    const m = await model('llama');
    const packed = await new LoraTrainer(m, { checkpoint: true }).gradients(samples());
    const single = await new LoraTrainer(m, { checkpoint: false, pack: false }).gradients(samples());
    expect(packed.checkpointed).toBe(3);
    expect(packed.forwards).toBe(1);
    expect((await gradError(packed.grads, single.grads)).rel).toBeLessThan(1e-5);
    expect(packed.loss).toBeCloseTo(single.loss, 6);
  });

  it('packs only while the packed length fits the activation budget', async () => {
    const m = await model('llama');
    const lens = samples().map((s) => s.ids.length - 1); // 9, 1, 6
    const budget = m.activationBytes(lens[0]! + lens[1]!).full; // the first two fit, not the third
    const t = new LoraTrainer(m, { activationBudgetBytes: budget });
    const g = await t.gradients(samples());
    expect(g.forwards).toBe(2);
    expect(g.checkpointed).toBe(0);
    expect(g.activationBytes).toBe(budget);
    const single = await new LoraTrainer(m, { pack: false }).gradients(samples());
    expect((await gradError(g.grads, single.grads)).rel).toBeLessThan(1e-5);
  });

  it('the learner log-probs (no gradient) come from one packed forward and equal one forward per sample', async () => {
    const m = await model('qwen2');
    let forwards = 0;
    const hidden = m.hiddenStates.bind(m);
    m.hiddenStates = (ids, segments) => (forwards++, hidden(ids, segments));
    const packed = await new LoraTrainer(m).learnerLogprobs(samples());
    expect(forwards).toBe(1);
    const single = await new LoraTrainer(m, { pack: false }).learnerLogprobs(samples());
    expect(forwards).toBe(4);
    expect(packed.map((r) => r.length)).toEqual([4, 1, 4]);
    expect(maxAbsDiff(packed.flat(), single.flat())).toBeLessThan(1e-5);
    expect(() => m.hiddenStates([1, 2, 3], [2, 2])).toThrow(/add up to 4, not the 3 ids/);
  });

  it('packs at most packTokens tokens into one forward (a longer sample alone)', async () => {
    const m = await model('llama');
    const single = await new LoraTrainer(m, { pack: false }).gradients(samples());
    // lengths 9, 1, 6: 9 + 1 fit 10, then 6
    const g = await new LoraTrainer(m, { packTokens: 10 }).gradients(samples());
    expect(g.forwards).toBe(2);
    expect((await gradError(g.grads, single.grads)).rel).toBeLessThan(1e-5);
    expect((await new LoraTrainer(m, { packTokens: 5 }).gradients(samples())).forwards).toBe(3);
  });

  it('rejects segment lengths that do not add up to the ids', async () => {
    const m = await model('llama');
    expect(() => m.forwardHidden([1, 2, 3], { segments: [1, 1] })).toThrow(/add up to 2, not the 3 ids/);
  });
});
