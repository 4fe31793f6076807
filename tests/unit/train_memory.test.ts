// Training memory on the CPU references: the GRPO weights kernel's reference against the
// objective's terms, per-layer activation checkpointing (the same gradients as the full tape), the
// LM head in chunks (the same loss, statistics and gradients as one chunk), and a step over several
// samples that reads the backend once (no read-back per sample). The GPU side, with the allocator's
// peak bytes: tests/gpu/train_memory.test.ts.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { LoraModule } from '../../src/engine/io/peft.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { grpoWeightsCpu } from '../../src/engine/kernels/grpo_weights.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { LoraTrainer, type GrpoSample, type TrainOptions } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles, type TinyVariant } from '../helpers/tiny_checkpoint.ts';

const ALL: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
const IDS = [5, 17, 99, 3, 250, 42, 7, 1, 64, 12, 200];

/** A tiny model with a rank-2 adapter on every projection, B ≠ 0 (so A's gradients are not zero). */
async function tinyModel(variant: TinyVariant, ops: CpuOps = new CpuOps()) {
  const ck = tinyCheckpointFiles(variant, 'f32', 0, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, ops, l.weights);
  m.initLora(2, 4, ALL, 1);
  const rng = createRng(5);
  for (const [key, t] of m.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  return m;
}

const copyGrads = (g: Map<string, CpuTensor>) => new Map([...g].map(([k, t]) => [k, Float32Array.from(t.data)]));

/** Largest |a − b| / max|b| over every gradient tensor. */
function worstRel(a: Map<string, Float32Array>, b: Map<string, Float32Array>): number {
  let worst = 0;
  for (const [k, want] of b) {
    const got = a.get(k)!;
    const scale = Math.max(...want.map(Math.abs), 1e-30);
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / scale);
  }
  return worst;
}

/** log π of ids[1..] under softmax((logits + bias) / T), in f64 from the forward's logits. */
function policyLogprobs(m: LlamaModel<CpuTensor>, ids: number[], t: number, allowed?: number[]): number[] {
  const { logits } = m.forward(ids.slice(0, -1));
  const V = m.cfg.vocabSize;
  return ids.slice(1).map((target, i) => {
    const z = Array.from(logits.data.subarray(i * V, (i + 1) * V), (x, j) =>
      allowed && !allowed.includes(j) ? -Infinity : x / t,
    );
    const mx = Math.max(...z);
    return z[target]! - mx - Math.log(z.reduce((a, x) => a + Math.exp(x - mx), 0));
  });
}

const ALLOWED = [...IDS, 30, 31];

/** Three samples (spans, a mask, promptLen; one on-policy) whose old log-probs put some ratios outside the clip. */
function samples(m: LlamaModel<CpuTensor>): GrpoSample[] {
  const lp = policyLogprobs(m, IDS, 0.7, ALLOWED);
  const lp3 = policyLogprobs(m, IDS.slice(2), 1, ALLOWED);
  const shift = [0.05, -0.5, 0.4, -0.02, 0.6, 0.1, -0.3];
  return [
    {
      ids: IDS,
      promptLen: 4,
      oldLogprobs: lp.slice(3).map((x, i) => x + shift[i]!),
      advantage: 0.9,
      temperature: 0.7,
    },
    { ids: IDS.slice(0, 7), spans: [[3, 5]], advantage: -0.6, temperature: 0.7 },
    {
      ids: IDS.slice(2),
      mask: [0, 0, 1, 0, 1, 1, 0, 1, 1],
      oldLogprobs: [1, 3, 4, 6, 7].map((t, i) => lp3[t]! - shift[i]!),
      advantage: 0.4,
    },
  ];
}

describe('GRPO weights (CPU reference)', () => {
  const o = { advantage: 1, invN: 0.5, clipLow: 0.2, clipHigh: 0.28, beta: 0, onPolicy: false, maxLogRatio: 20 };

  it('gives w = A·r/N inside the clip, 0 where the clipped term is the minimum, and the loss terms', () => {
    const logp = Float32Array.from([-1, -1, -2, -3]);
    // rows: r = e^0.1 (inside), r = e (clipped for A > 0), untrained, r = e^-1
    const info = Float32Array.from([1, -1.1, 1, 1, -2, 1, 0, -9, 1, 1, -2, 1]); // (trained, old, TIS weight 1)
    const { w, stats } = grpoWeightsCpu(logp, info, undefined, o);
    const r0 = Math.exp(0.1);
    expect(w[0]).toBeCloseTo((r0 * 1) / 2, 6);
    expect(w[1]).toBe(0);
    expect(w[2]).toBe(0);
    expect(w[3]).toBeCloseTo(Math.exp(-1) / 2, 6); // A > 0 and r < 1 − ε: min is r·A, not clipped
    expect([...stats.subarray(0, 4)].map((x) => +x.toFixed(5))).toEqual([+(-r0).toFixed(5), 0, -0.1, 0]);
    expect([...stats.subarray(4, 8)].map((x) => +x.toFixed(5))).toEqual([-1.28, 1, -1, 0]);
    expect([...stats.subarray(8, 12)]).toEqual([0, 0, 0, 0]);
    // A < 0 with r < 1 − ε: clipped
    const neg = grpoWeightsCpu(logp, info, undefined, { ...o, advantage: -1 });
    expect(neg.w[3]).toBe(0);
    expect(neg.stats[13]).toBe(1);
  });

  it('is on-policy without old log-probs (ratio 1) and adds the k3 KL to the base', () => {
    const logp = Float32Array.from([-1.5]);
    const info = Float32Array.from([1, 123, 1]); // the old value is ignored on-policy
    const base = Float32Array.from([-1.2]);
    const { w, stats } = grpoWeightsCpu(logp, info, base, { ...o, onPolicy: true, beta: 0.5, advantage: 0.8 });
    const d = -1.2 - -1.5;
    expect(w[0]).toBeCloseTo((0.8 - 0.5 * (1 - Math.exp(d))) * 0.5, 6);
    expect(stats[0]).toBeCloseTo(-0.8 + 0.5 * (Math.exp(d) - d - 1), 6);
    expect(stats[2]).toBe(0);
    expect(stats[3]).toBeCloseTo(Math.exp(d) - d - 1, 6);
  });
});

describe('training memory on the CPU references', () => {
  it.each(['llama3', 'qwen2', 'qwen3'] as const)(
    "%s: a checkpointed backward gives the full tape's gradients (within 1e-6 relative; the same values)",
    async (variant) => {
      const m = await tinyModel(variant);
      const input = IDS.slice(0, -1);
      const tg = IDS.slice(1);
      const w = Float32Array.from(tg, (_, i) => (i % 3 ? 0.5 : -1));
      const run = (checkpoint: boolean) => {
        const { logits, tape } = m.forward(input, { tape: true, checkpoint });
        const r = m.ops.nll(logits, tg, w);
        const g = copyGrads(m.backward(tape!, m.ops.nllBackward(logits, tg, w, r.lse)));
        // a checkpointed tape holds each layer's input only
        return { g, kept: tape!.layers.map((t) => Object.keys(t).length) };
      };
      const full = run(false);
      const ckpt = run(true);
      expect(ckpt.kept).toEqual(full.kept.map(() => 1));
      expect(full.kept.every((n) => n > 10)).toBe(true);
      expect(worstRel(ckpt.g, full.g)).toBeLessThanOrEqual(1e-6);
    },
  );

  it('runs the LM head in chunks with the same loss, statistics and gradients as one chunk', async () => {
    const m = await tinyModel('qwen3');
    const opts: TrainOptions = { klCoef: 0.3, allowedTokens: ALLOWED };
    const batch = samples(m);
    const one = await new LoraTrainer(m, { ...opts, headChunkRows: Infinity, checkpoint: false }).gradients(batch);
    for (const headChunkRows of [1, 3]) {
      const c = await new LoraTrainer(m, { ...opts, headChunkRows }).gradients(batch);
      expect(c.loss).toBeCloseTo(one.loss, 6);
      expect(c.clipFraction).toBe(one.clipFraction);
      expect(c.approxKl).toBeCloseTo(one.approxKl, 6);
      expect(c.klToBase!).toBeCloseTo(one.klToBase!, 6);
      expect(c.tokens).toBe(one.tokens);
      expect(worstRel(copyGrads(c.grads), copyGrads(one.grads))).toBeLessThanOrEqual(1e-6);
    }
    expect(one.clipFraction).toBeGreaterThan(0); // the clip is exercised
    expect(one.clipFraction).toBeLessThan(1);
  });

  it('reads the backend once per step however many samples (no read-back per sample)', async () => {
    class CountingOps extends CpuOps {
      reads = 0;
      override read(x: CpuTensor) {
        this.reads++;
        return super.read(x);
      }
    }
    const ops = new CountingOps();
    const m = await tinyModel('qwen2', ops);
    const t = new LoraTrainer(m, { klCoef: 0.2, headChunkRows: 2 });
    await t.gradients(samples(m));
    expect(ops.reads).toBe(1); // the minibatch's statistics
    ops.reads = 0;
    await t.trainStep(samples(m));
    expect(ops.reads).toBe(1); // (the CPU's sumSquares for the gradient clip reads nothing)
  });
});
