// LoRA training with the policy-gradient step: positive advantages make a completion more likely,
// negative ones less; GRPO samples come out of the loop's records with group-normalised advantages.
import { describe, expect, it } from 'vitest';
import { agentSamples, normaliseRole } from '../../src/core/train/grpo.ts';
import type { RolloutRecord } from '../../src/core/spade/run_store.ts';
import { loadCheckpoint, MemoryModelFiles } from '../../src/engine/io/load.ts';
import { LlamaModel } from '../../src/engine/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops.ts';
import { LoraTrainer } from '../../src/engine/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

async function model() {
  const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights);
  m.initLora(4, 8, ['q_proj', 'v_proj', 'up_proj', 'down_proj'], 3);
  return m;
}

const PROMPT = [10, 20, 30, 40];
const GOOD = [50, 60, 70];

async function completionLogprob(m: LlamaModel<CpuTensor>): Promise<number> {
  const lp = await m.logprobs([...PROMPT, ...GOOD]);
  return lp.slice(PROMPT.length - 1).reduce((a, b) => a + b, 0);
}

describe('LoRA policy-gradient training', () => {
  it.each([
    [1, 'raises'],
    [-1, 'lowers'],
  ])('advantage %d %s the completion log-probability', async (advantage) => {
    const m = await model();
    const before = await completionLogprob(m);
    const trainer = new LoraTrainer(m, { lr: 1e-2 });
    let last;
    for (let i = 0; i < 5; i++)
      last = await trainer.trainStep([{ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage }]);
    const after = await completionLogprob(m);
    expect(Math.sign(after - before)).toBe(advantage);
    expect(Math.abs(after - before)).toBeGreaterThan(0.05);
    expect(last!.tokens).toBe(PROMPT.length + GOOD.length - 1);
    expect(last!.gradNorm).toBeGreaterThan(0);
  });

  it('clips the global gradient norm', async () => {
    const batch = [{ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage: 1 }];
    // The raw gradients and their global norm, from an identical model (gradients() does not update).
    const { grads } = await new LoraTrainer(await model()).gradients(batch);
    const g = new Map([...grads].map(([k, t]) => [k, Float32Array.from(t.data)]));
    let sumSq = 0;
    let count = 0;
    for (const x of g.values()) {
      for (const v of x) sumSq += v * v;
      count += x.length;
    }
    const norm = Math.sqrt(sumSq);
    expect(norm).toBeGreaterThan(1e-3);
    const lr = 1e-3;
    const eps = 1e-8; // AdamW's default
    /** Parameter change of one step at this limit, against step 1 of AdamW on g · min(1, limit / norm). */
    async function check(maxGradNorm: number) {
      const m = await model();
      const before = new Map([...m.lora!.w].map(([k, t]) => [k, Float32Array.from(t.data)]));
      const r = await new LoraTrainer(m, { lr, maxGradNorm }).trainStep(batch);
      expect(r.gradNorm / norm).toBeCloseTo(1, 5); // reported before clipping
      const scale = Math.min(1, maxGradNorm / norm);
      let worst = 0;
      let moved = 0;
      for (const [k, p] of m.lora!.w) {
        const p0 = before.get(k)!;
        const gk = g.get(k)!;
        for (let i = 0; i < p0.length; i++) {
          // step 1, no weight decay: m̂ = g', v̂ = g'², so Δp = −lr · g' / (|g'| + eps)
          const gs = gk[i]! * scale;
          const want = (-lr * gs) / (Math.abs(gs) + eps);
          const got = p.data[i]! - p0[i]!;
          worst = Math.max(worst, Math.abs(got - want));
          moved += Math.abs(got);
        }
      }
      expect(worst).toBeLessThan(lr * 1e-3);
      return moved;
    }
    // Clipped so that an average element of the clipped gradient is AdamW's eps: the step then shows
    // the gradient's scale (far from the limit, AdamW's step is ≈ lr·sign(g) whatever the scale).
    const clippedMove = await check(eps * Math.sqrt(count));
    const freeMove = await check(norm * 2); // under the limit: no scaling
    expect(clippedMove).toBeLessThan(0.8 * freeMove);
  });
});

describe('GRPO samples', () => {
  const ep = (cycle: number, index: number, play: number, hinted: boolean, ret: number): RolloutRecord => ({
    cycle,
    index,
    play,
    hinted,
    skill: 's',
    envId: 'e',
    seed: play,
    return: ret,
    end: 'terminated',
    tokens: 3,
    firstObservation: 'Guess with \\boxed{n}.',
    turns: [
      {
        action: '\\boxed{1}',
        observation: 'Higher.',
        reward: 0,
        terminated: false,
        truncated: false,
        formatError: false,
      },
      { action: '\\boxed{2}', observation: 'Yes', reward: ret, terminated: true, truncated: false, formatError: false },
    ],
  });

  it('uses unhinted plays, one sample per turn, advantages normalised within each environment', () => {
    const s = agentSamples([
      ep(0, 0, 0, false, 1),
      ep(0, 0, 1, false, 0),
      ep(0, 0, 0, true, 1),
      ep(0, 1, 0, false, 1),
      ep(0, 1, 1, false, 1),
    ]);
    // env (0,1) has no variance: no signal, no samples; env (0,0): two plays × two turns
    expect(s).toHaveLength(4);
    expect(s.map((x) => Math.round(x.advantage * 1000) / 1000)).toEqual([1, 1, -1, -1]);
    expect(s[1]!.prompt.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(s[1]!.completion).toBe('\\boxed{2}');
  });

  it('normalises a role by its std', () => {
    const out = normaliseRole([
      { role: 'designer', prompt: [], completion: 'a', advantage: 0.3 },
      { role: 'designer', prompt: [], completion: 'b', advantage: -0.3 },
    ]);
    expect(out.map((x) => x.advantage)).toEqual([1, -1]);
  });
});
