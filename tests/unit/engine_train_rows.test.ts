// The LoRA trainer runs the LM head, the NLL and the GRPO weights on the trained positions only
// (train.ts: trainedRows / gatherRows / scatterRows): the head sees Σ trained rows, not Σ sample
// lengths, and the gradients are still those of the objective (central finite differences, with a
// mask of two separate runs, the KL to the base and old log-probs on). CPU references.
import { describe, expect, it, vi } from 'vitest';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

async function model() {
  const ck = tinyCheckpointFiles('llama', 'f32', 1, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights);
  m.initLora(4, 8, ['q_proj', 'o_proj', 'gate_proj', 'down_proj'], 2);
  m.lora!.w.forEach((x, k) => {
    if (k.endsWith('.B')) for (let i = 0; i < x.data.length; i++) x.data[i] = 0.05 * Math.cos(2 + i * 0.3 + k.length);
  });
  return m;
}

const IDS = [11, 22, 33, 44, 55, 66, 77, 88, 99, 12];
// trained targets: ids[2..4) and ids[6..9) — two runs, 5 of 9 positions
const MASK: (0 | 1)[] = [0, 0, 1, 1, 0, 0, 1, 1, 1, 0];

describe('LoRA trainer: LM head on trained positions only', () => {
  it('runs the head on Σ trained rows and keeps the gradients of the objective (finite differences)', async () => {
    const m = await model();
    const t = new LoraTrainer(m, { klCoef: 0.3 });
    const samples: GrpoSample[] = [
      { ids: IDS, mask: MASK, advantage: 0.7, temperature: 0.8 },
      { ids: [5, 6, 7, 8], promptLen: 2, advantage: -0.5 },
    ];
    // old log-probs around the learner's (the loss of an on-policy sample is constant: no FD check)
    const learner = await t.learnerLogprobs(samples);
    expect(learner.map((l) => l.length)).toEqual([5, 2]);
    samples[0]!.oldLogprobs = learner[0]!.map((x, i) => x + [0.3, -0.4, 0.02, 0.1, -0.05][i]!);
    samples[1]!.oldLogprobs = learner[1]!.map((x, i) => x + [0.05, -0.1][i]!);
    const head = vi.spyOn(m, 'headLogits');
    const g = await t.gradients(samples);
    const rows = head.mock.calls.reduce((a, [x]) => a + x.shape[0]!, 0);
    expect(rows).toBe(2 * (5 + 2)); // policy and base (KL), trained rows only — not 2·(9 + 3)
    head.mockRestore();
    expect(g.trainedTokens).toBe(7);
    expect(g.tokens).toBe(12);
    const loss = async () => (await t.gradients(samples)).loss;
    let checked = 0;
    for (const key of ['0.q_proj.A', '1.down_proj.B', '0.gate_proj.B']) {
      const p = m.lora!.w.get(key)!;
      const gk = g.grads.get(key)!.data;
      const order = Array.from(gk.keys()).sort((a, b) => Math.abs(gk[b]!) - Math.abs(gk[a]!));
      for (const i of order.slice(0, 2)) {
        const h = 1e-2;
        const x0 = p.data[i]!;
        p.data[i] = x0 + h;
        const up = await loss();
        p.data[i] = x0 - h;
        const down = await loss();
        p.data[i] = x0;
        expect(Math.abs((up - down) / (2 * h) - gk[i]!)).toBeLessThan(0.03 * Math.abs(gk[i]!) + 1e-5);
        checked++;
      }
    }
    expect(checked).toBe(6);
  });
});
