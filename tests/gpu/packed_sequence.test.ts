// A minibatch packed as one sequence on the software adapter: attention (forward, dq, dk/dv) and
// RoPE with segment bounds against the CPU references run on each segment alone (one segment of a
// single token, one longer than a workgroup), and the trainer's packed minibatch against one
// forward per sample on the GPU and against the CPU backend (tests/unit/packed_sequence.test.ts).
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import {
  attention,
  attentionBackward,
  attentionBackwardCpu,
  attentionCpu,
} from '../../src/engine/kernels/attention.ts';
import { rope, ropeBackward, ropeBackwardCpu, ropeCpu, ropeFrequencies } from '../../src/engine/kernels/rope.ts';
import { segmentBounds } from '../../src/engine/kernels/segments.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';
import { perSegment, rowsOf } from '../helpers/segments.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`packed sequences on WebGPU ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it('attention with segments equals attention on each segment alone: out, lse, dq, dk, dv', async () => {
    const lengths = [3, 1, 70, 2]; // one token alone; one segment longer than a workgroup (64)
    const T = lengths.reduce((a, n) => a + n, 0);
    const [Hq, Hkv, D] = [4, 2, 8];
    const rng = createRng(11);
    const q = randomArray(T * Hq * D, rng, -2, 2);
    const k = randomArray(T * Hkv * D, rng);
    const v = randomArray(T * Hkv * D, rng);
    const dout = randomArray(T * Hq * D, rng);
    const alone = (s: number, n: number) =>
      [
        rowsOf(q, Hq * D, s, n),
        rowsOf(k, Hkv * D, s, n),
        rowsOf(v, Hkv * D, s, n),
        { T: n, S: n, Hq, Hkv, D },
      ] as const;
    const want = perSegment(lengths, (s, n) => attentionCpu(...alone(s, n)).out);
    const wantLse = new Float32Array(Hq * T);
    let start = 0;
    for (const n of lengths) {
      const l = attentionCpu(...alone(start, n)).lse;
      for (let h = 0; h < Hq; h++) for (let t = 0; t < n; t++) wantLse[h * T + start + t] = l[h * n + t]!;
      start += n;
    }
    const grad = (name: 'dq' | 'dk' | 'dv') =>
      perSegment(lengths, (s, n) => {
        const [qs, ks, vs, dims] = alone(s, n);
        return attentionBackwardCpu(qs, ks, vs, rowsOf(dout, Hq * D, s, n), dims)[name];
      });

    const e = new Engine(gpu);
    const seg = e.tensor([T, 2], segmentBounds(lengths));
    const [qt, kt, vt] = [e.tensor([T, Hq, D], q), e.tensor([T, Hkv, D], k), e.tensor([T, Hkv, D], v)];
    const { out, lse } = attention(e, qt, kt, vt, seg);
    const g = attentionBackward(e, qt, kt, vt, out, lse, e.tensor([T, Hq, D], dout), seg);
    expect(relError(await e.read(out), want)).toBeLessThan(1e-4);
    expect(relError(await e.read(lse), wantLse)).toBeLessThan(1e-4);
    expect(relError(await e.read(g.dq), grad('dq'))).toBeLessThan(1e-4);
    expect(relError(await e.read(g.dk), grad('dk'))).toBeLessThan(1e-4);
    expect(relError(await e.read(g.dv), grad('dv'))).toBeLessThan(1e-4);
    // the unsegmented kernels on the same inputs still give the one-sequence result
    const plain = attention(e, qt, kt, vt);
    expect(relError(await e.read(plain.out), attentionCpu(q, k, v, { T, S: T, Hq, Hkv, D }).out)).toBeLessThan(1e-4);
    expect(() => attention(e, qt, kt, vt, e.tensor([T - 1, 2]))).toThrow(/expected 2·T/);
  });

  it('rope with segments restarts the positions in each segment, forward and backward', async () => {
    const lengths = [5, 1, 9];
    const T = lengths.reduce((a, n) => a + n, 0);
    const [H, D] = [3, 16];
    const freqs = ropeFrequencies({ headDim: D, theta: 10000 });
    const x = randomArray(T * H * D, createRng(12));
    const e = new Engine(gpu);
    const seg = e.tensor([T, 2], segmentBounds(lengths));
    const [xt, ft] = [e.tensor([T, H, D], x), e.tensor([D / 2], freqs)];
    for (const [f, cpu] of [
      [rope, ropeCpu],
      [ropeBackward, ropeBackwardCpu],
    ] as const) {
      const want = perSegment(lengths, (s, n) => cpu(rowsOf(x, H * D, s, n), [n, H, D], freqs, 0));
      expect(relError(await e.read(f(e, xt, ft, 0, seg)), want)).toBeLessThan(1e-5);
    }
  });

  it('the trainer: a packed minibatch of 3 samples gives the per-sample loss, statistics and gradients', async () => {
    const ck = tinyCheckpointFiles('qwen3', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const cpu = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    const gm = new LlamaModel<Tensor>(loaded.config, new GpuOps(new Engine(gpu)), loaded.weights);
    cpu.initLora(2, 4, ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'down_proj'], 1);
    const rng = createRng(4);
    for (const [key, t] of cpu.lora!.w)
      if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
    gm.setLora((await cpu.getLora())!);
    const samples: GrpoSample[] = [
      { ids: [5, 17, 99, 3, 250, 42, 50, 51], promptLen: 5, oldLogprobs: [-5.1, -5.6, -4.9], advantage: 0.9 },
      { ids: [8, 9], promptLen: 1, oldLogprobs: [-5.3], advantage: -0.5, temperature: 0.7 },
      { ids: [30, 31, 32, 33, 34], mask: [0, 1, 0, 1, 1], oldLogprobs: [-5.5, -5.2, -5.8], advantage: 0.4 },
    ];
    const packed = await new LoraTrainer(gm, { klCoef: 0.1 }).gradients(samples);
    const single = await new LoraTrainer(gm, { klCoef: 0.1, pack: false }).gradients(samples);
    const onCpu = await new LoraTrainer(cpu, { klCoef: 0.1 }).gradients(samples);
    expect([packed.forwards, single.forwards, onCpu.forwards]).toEqual([1, 3, 1]);
    const ops = gm.ops;
    let scale = 0;
    let diff = 0;
    let diffCpu = 0;
    for (const [key, g] of single.grads) {
      const a = await ops.read(g);
      const b = await ops.read(packed.grads.get(key)!);
      const c = onCpu.grads.get(key)!.data;
      for (let i = 0; i < a.length; i++) {
        scale = Math.max(scale, Math.abs(a[i]!));
        diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
        diffCpu = Math.max(diffCpu, Math.abs(c[i]! - b[i]!));
      }
    }
    expect(scale).toBeGreaterThan(1e-4);
    expect(diff / scale).toBeLessThan(1e-5);
    expect(diffCpu / scale).toBeLessThan(1e-3); // GPU vs CPU kernels: f32 sums in another order
    expect(packed.loss).toBeCloseTo(single.loss, 5);
    expect(packed.approxKl).toBeCloseTo(single.approxKl, 5);
    expect(packed.klToBase!).toBeCloseTo(single.klToBase!, 5);
    expect(packed.clipFraction).toBe(single.clipFraction);
    expect(packed.loss).toBeCloseTo(onCpu.loss, 4);
  });
});
