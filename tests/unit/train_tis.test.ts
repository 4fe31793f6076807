// Truncated importance sampling (TIS) in GRPO training, on the CPU references: π_old recomputed by
// the learner before a round's first step, the clipped ratio taken against it, each token weighted
// by c = min(exp(log π_old − log π_sampler), tisCap) — the loss, weights and gradients against
// hand-computed values, the truncation counters, tisCap 0 as the old behaviour, and the figures
// reaching `spade run --train`'s step log and the Training panel's per-update series.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attachTraining } from '../../src/cli/run_training.ts';
import { InProcessEngine } from '../../src/engine/engine.ts';
import { EngineChatModel, engineCapabilities } from '../../src/engine/engine_api.ts';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import type { CheckingRunner } from '../../src/core/spade/phases.ts';
import type { MetricsRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';
import { updateEvidence, type StepRecord } from '../../src/core/train/chart_series.ts';
import {
  mergeTisStats,
  roundLearnerLogprobs,
  tisRatio,
  tisRatios,
  tisStats,
  tisWeight,
  type TokenSample,
} from '../../src/core/train/grpo.ts';
import { grpoWeightsCpu } from '../../src/engine/kernels/grpo_weights.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { tinyModel } from '../../src/engine/tiny/tiny_model.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

async function model(ops = new CpuOps()) {
  const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, ops, l.weights);
  m.initLora(4, 8, ['q_proj', 'v_proj', 'up_proj', 'down_proj'], 3);
  m.lora!.w.forEach((x, k) => {
    // B ≠ 0: the adapter changes the policy, so its gradients are not degenerate
    if (k.endsWith('.B')) for (let i = 0; i < x.data.length; i++) x.data[i] = 0.05 * Math.sin(1 + i * 0.7 + k.length);
  });
  return m;
}

const PROMPT = [10, 20, 30, 40];
const IDS = [...PROMPT, 50, 60, 70];

/** log π of the completion tokens of IDS under the current adapter (T = 1, no mask), from the forward's logits. */
async function currentLogprobs(m: LlamaModel<CpuTensor>, ids = IDS): Promise<number[]> {
  return Array.from((await m.logprobs(ids)).subarray(PROMPT.length - 1));
}

const sumSq = (g: Map<string, CpuTensor>) =>
  [...g.values()].reduce((a, x) => a + x.data.reduce((s, v) => s + v * v, 0), 0);

describe('TIS weights and figures (pure)', () => {
  it('weights a token by min(π_old / π_sampler, cap); cap 0 is off', () => {
    expect(tisRatio(-1, -1.5)).toBeCloseTo(1.648721, 6); // e^0.5
    expect(tisWeight(tisRatio(-1, -1.5), 2)).toBeCloseTo(1.648721, 6);
    expect(tisWeight(tisRatio(-1, -3), 2)).toBe(2); // e^2 = 7.39, truncated
    expect(tisWeight(tisRatio(-1.3, -1), 2)).toBeCloseTo(0.740818, 6); // e^-0.3: below 1 is kept
    expect(tisWeight(7.39, 0)).toBe(1);
    expect(Number.isFinite(tisRatio(0, -500))).toBe(true); // the log gap is clamped
  });

  it('counts the ratios: mean, max, share truncated at the cap', () => {
    const s = tisStats(
      [
        [0.5, 1, 2],
        [3, 6],
      ],
      2,
    )!;
    expect(s.tisMean).toBeCloseTo(12.5 / 5, 12);
    expect(s.tisMax).toBe(6);
    expect(s.tisTruncated).toBeCloseTo(2 / 5, 12); // 3 and 6; a ratio equal to the cap keeps its weight
    expect(s.tisTokens).toBe(5);
    expect(tisStats([[], []], 2)).toBeNull();
    // merged figures weigh each set by its tokens
    const m = mergeTisStats([s, null, tisStats([[1]], 2)])!;
    expect(m).toMatchObject({ tisMax: 6, tisTokens: 6 });
    expect(m.tisMean).toBeCloseTo(13.5 / 6, 12);
    expect(m.tisTruncated).toBeCloseTo(2 / 6, 12);
    expect(tisRatios([-1, -2], [-1, -2.5])).toEqual([1, Math.exp(0.5)]);
  });

  it("computes a round's learner log-probs once for all its samples, and not at all with TIS off", async () => {
    const sample = (logprobs: number[]): TokenSample => ({
      role: 'agent',
      ids: [1, 2, 3, 4],
      spans: [[4 - logprobs.length, 4]],
      logprobs,
      advantage: 1,
      key: 'k',
    });
    const a = sample([-1, -2]);
    const b = sample([-3]);
    const calls: number[] = [];
    const compute = async (ss: TokenSample[]) => {
      calls.push(ss.length);
      return ss.map((s) => s.logprobs.map((x) => x + 1)); // the learner: every token e times likelier
    };
    const r = await roundLearnerLogprobs([a, b], 2, compute);
    expect(calls).toEqual([2]);
    expect(r.learner.get(a)).toEqual([0, -1]);
    expect(r.learner.get(b)).toEqual([-2]);
    expect(r.tis).toMatchObject({ tisMax: Math.E, tisTruncated: 1, tisTokens: 3 });
    const off = await roundLearnerLogprobs([a, b], 0, compute);
    expect(calls).toEqual([2]);
    expect(off).toEqual({ learner: new Map(), tis: null });
  });

  it('gives per-update TIS series from the steps (null where TIS was off)', () => {
    const step = (update: number, tis?: [number, number, number, number]): StepRecord => ({
      cycle: 0,
      update,
      role: 'agent',
      loss: 0,
      clipFraction: 0,
      approxKl: 0,
      gradNorm: 1,
      tokens: 10,
      ms: 1,
      ...(tis ? { tisMean: tis[0], tisMax: tis[1], tisTruncated: tis[2], tisTokens: tis[3] } : {}),
    });
    const u = updateEvidence([step(1, [1.2, 3, 0.25, 4]), step(1, [0.9, 1.5, 0, 12]), step(2)]);
    expect(u[0]!.tisMean).toBeCloseTo((1.2 * 4 + 0.9 * 12) / 16, 12);
    expect(u[0]!.tisMax).toBe(3);
    expect(u[0]!.tisTruncated).toBeCloseTo(1 / 16, 12);
    expect(u[1]).toMatchObject({ tisMean: null, tisMax: null, tisTruncated: null });
  });
});

describe('grpo weights with a TIS weight (CPU reference, hand-computed)', () => {
  it('multiplies the clipped policy term and its gradient weight by c', () => {
    // A = 1, N = 2; row 0: r = e^0.1, c = 1.5 → w = 1.5·1.105171/2, ℓ = −1.5·1.105171;
    // row 1: r = e (clipped, A > 0), c = 2 → w = 0, ℓ = −2·1.28
    const logp = Float32Array.from([-1, -1]);
    const info = Float32Array.from([1, -1.1, 1.5, 1, -2, 2]);
    const o = { advantage: 1, invN: 0.5, clipLow: 0.2, clipHigh: 0.28, beta: 0, onPolicy: false, maxLogRatio: 20 };
    const { w, stats } = grpoWeightsCpu(logp, info, undefined, o);
    expect(w[0]).toBeCloseTo(0.828878, 6);
    expect(w[1]).toBe(0);
    expect(stats[0]).toBeCloseTo(-1.657756, 6);
    expect(stats[4]).toBeCloseTo(-2.56, 6);
    expect(stats[5]).toBe(1);
  });
});

describe('GRPO trainer with TIS', () => {
  it('takes the ratio against the learner and weighs each token by the truncated sampler/learner ratio', async () => {
    const m = await model();
    const lp = await currentLogprobs(m);
    // per token: log π_old (learner) = lp − d, log π_sampler = learner − g
    //   t0: d = 0.1,  g = 0.5  → r = e^0.1 = 1.105171, c = e^0.5 = 1.648721
    //   t1: d = −0.2, g = 2    → r = e^−0.2 = 0.818731, c = min(e^2 = 7.389056, 2) = 2
    //   t2: d = 0.5,  g = −0.3 → r = e^0.5 = 1.648721 > 1.28: clipped (A = 1), c = e^−0.3 = 0.740818
    const learner = [lp[0]! - 0.1, lp[1]! + 0.2, lp[2]! - 0.5];
    const sampler = [learner[0]! - 0.5, learner[1]! - 2, learner[2]! + 0.3];
    const sample: GrpoSample = {
      ids: IDS,
      promptLen: PROMPT.length,
      oldLogprobs: sampler,
      learnerLogprobs: learner,
      advantage: 1,
    };
    const g = await new LoraTrainer(m, { tisCap: 2 }).gradients([sample]);
    // L = −(1/3)·(1.648721·1.105171 + 2·0.818731 + 0.740818·1.28) = −(1.822119 + 1.637462 + 0.948247)/3
    expect(g.loss).toBeCloseTo(-1.469276, 4);
    expect(g.clipFraction).toBeCloseTo(1 / 3, 6);
    expect(g.approxKl).toBeCloseTo((-0.1 + 0.2 - 0.5) / 3, 5); // mean log π_old − log π, against the learner
    expect(g.tisMean).toBeCloseTo((1.648721 + 7.389056 + 0.740818) / 3, 4);
    expect(g.tisMax).toBeCloseTo(7.389056, 4);
    expect(g.tisTruncated).toBeCloseTo(1 / 3, 6);
    expect(g.tisTokens).toBe(3);

    // tisCap 0: the old objective, the ratio against the sampler (t0: r = e^0.6 = 1.822, clipped;
    // t1: r = e^1.8 = 6.05, clipped; t2: r = e^0.2 = 1.221) → L = −(1.28 + 1.28 + 1.221403)/3
    const off = await new LoraTrainer(m, { tisCap: 0 }).gradients([sample]);
    expect(off.loss).toBeCloseTo(-1.260468, 4);
    expect(off.clipFraction).toBeCloseTo(2 / 3, 6);
    expect(off.tisMean).toBeUndefined();
  });

  it("scales a token's gradient by c: c times the untruncated objective's against the learner", async () => {
    const m = await model();
    const lp = await currentLogprobs(m);
    const learner = [lp[1]! + 0.2]; // r = e^−0.2, inside the clip
    const one = (o: Partial<GrpoSample>): GrpoSample => ({ ids: IDS.slice(0, 6), promptLen: 5, advantage: -0.7, ...o });
    const plain = await new LoraTrainer(m, { tisCap: 0 }).gradients([one({ oldLogprobs: learner })]);
    expect(sumSq(plain.grads)).toBeGreaterThan(0);
    for (const [gap, c] of [
      [0.25, Math.exp(0.25)], // below the cap: c = e^0.25
      [3, 2], // e^3 truncated at 2
      [-1, Math.exp(-1)],
    ]) {
      const tis = await new LoraTrainer(m, { tisCap: 2 }).gradients([
        one({ oldLogprobs: [learner[0]! - gap!], learnerLogprobs: learner }),
      ]);
      expect(tis.loss).toBeCloseTo(c! * plain.loss, 5);
      for (const [k, x] of plain.grads) {
        const y = tis.grads.get(k)!.data;
        x.data.forEach((v, i) => expect(y[i]).toBeCloseTo(c! * v, 6));
      }
    }
  });

  it('trains a stale sample: π_old recomputed before the first step, where the recorded one gave no gradient', async () => {
    const m = await model();
    const lp = await currentLogprobs(m);
    const stale: GrpoSample = {
      ids: IDS,
      promptLen: PROMPT.length,
      oldLogprobs: lp.map((x) => x - 1), // the policy moved e times towards these tokens since sampling
      advantage: 1,
    };
    // TIS off: the ratio e > 1 + 0.28 binds the clip on every token, no gradient
    const off = await new LoraTrainer(await model(), { tisCap: 0, lr: 1e-3 }).train([stale]);
    expect(off[0]).toMatchObject({ clipFraction: 1, gradNorm: 0 });
    // TIS on (the default, cap 2): ratio 1 against the learner's π_old, each token weighted by min(e, 2) = 2
    const t = new LoraTrainer(m, { lr: 1e-3 });
    const on = await t.train([stale]);
    expect(on[0]!.clipFraction).toBe(0);
    expect(on[0]!.approxKl).toBeCloseTo(0, 6);
    expect(on[0]!.loss).toBeCloseTo(-2, 5); // −c·r·A
    expect(on[0]!.gradNorm).toBeGreaterThan(0);
    expect(on[0]).toMatchObject({ tisTruncated: 1, tisTokens: 3 });
    expect(on[0]!.tisMean).toBeCloseTo(Math.E, 4);
  });

  it("recomputes the learner's log-probs of the trained tokens, one read for the batch", async () => {
    class CountingOps extends CpuOps {
      reads = 0;
      override read(x: CpuTensor) {
        this.reads++;
        return super.read(x);
      }
    }
    const ops = new CountingOps();
    const m = await model(ops);
    const all = await m.logprobs(IDS);
    const before = ops.reads;
    const got = await new LoraTrainer(m).learnerLogprobs([
      { ids: IDS, promptLen: PROMPT.length, advantage: 1 },
      { ids: IDS, spans: [[2, 3]], advantage: 1 },
      { ids: IDS.slice(0, 5), mask: [0, 1, 0, 0, 1], advantage: 1 },
      { ids: IDS, spans: [], advantage: 1 },
    ]);
    expect(ops.reads - before).toBe(1);
    const at = (xs: number[]) => xs.map((t) => all[t]!);
    got[0]!.forEach((x, i) => expect(x).toBeCloseTo(at([3, 4, 5])[i]!, 5));
    expect(got[1]![0]).toBeCloseTo(all[1]!, 5);
    got[2]!.forEach((x, i) => expect(x).toBeCloseTo(at([0, 3])[i]!, 5));
    expect(got[3]).toEqual([]);
  });
});

describe('spade run --train with TIS', () => {
  it("logs each step's TIS figures and the round's, from π_old recomputed before the round", async () => {
    const { chat, llm } = await tinyModel('0123456789', { seed: 1, layers: 1, hidden: 16 });
    const out = await mkdtemp(join(tmpdir(), 'spade-tis-'));
    const cfg: Config = { ...DEFAULTS, probeEvery: 0, designerLag: 0, trainEpochs: 1 };
    // the learner's log-probs of two plays of one environment, before any update (the expected π_old)
    const ids = [1, 2, 3, 40, 41];
    const trace = (d: number) => ({ ids, spans: [[3, 5]] as [number, number][], logprobs: [] as number[], d });
    const plays = [trace(0.5), trace(-1)];
    const learner = await new LoraTrainer(llm).learnerLogprobs(
      plays.map((p) => ({ ...p, advantage: 1, temperature: cfg.agentTemperature })),
    );
    plays.forEach((p, i) => (p.logprobs = learner[i]!.map((x) => x - p.d))); // sampler = learner − d
    const rollouts = plays.map(({ d: _d, ...t }, play): RolloutRecord => ({
      cycle: 0,
      index: 0,
      skill: 's',
      envId: 'e',
      play,
      seed: play,
      hinted: false,
      firstObservation: '',
      turns: [],
      return: play === 0 ? 1 : 0,
      end: 'terminated',
      tokens: 2,
      trace: t,
    }));
    const err: string[] = [];
    // the toy model in an in-process engine, reached as `spade run --train` reaches it: EngineChatModel
    const engine = new InProcessEngine().adopt(chat);
    const model = new EngineChatModel(engine, chat.model, engineCapabilities((await engine.summary())!));
    const training = await attachTraining({
      model,
      cfg,
      out,
      runner: {} as CheckingRunner,
      io: { out: () => {}, err: (l) => err.push(l) },
    });
    await training.afterCycle({ cycle: 0, archive: [], rollouts, metrics: {} as MetricsRecord });
    const lines = (await readFile(join(out, 'train', 'updates.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    // ratios e^0.5 (twice) and e^-1 (twice); none above the cap 2
    expect(lines[0]).toMatchObject({ role: 'agent', clipFraction: 0, tisTruncated: 0, tisTokens: 4 });
    expect(lines[0].approxKl).toBeCloseTo(0, 5); // the ratio is against the recomputed π_old
    expect(lines[0].tisMean).toBeCloseTo((Math.exp(0.5) + Math.exp(-1)) / 2, 4);
    expect(lines[0].tisMax).toBeCloseTo(Math.exp(0.5), 4);
    expect(err.join('\n')).toMatch(/TIS ratio mean 1\.008 max 1\.649, 0\.0% truncated at 2/);
  }, 60_000);
});
