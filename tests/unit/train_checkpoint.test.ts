// Activation checkpointing by budget (CPU references): model.activationBytes against the bytes a
// tape really holds, the trainer's per-sequence decision flipping at the budget (reported in the
// step stats), and the same gradients whether a sequence was checkpointed or kept its activations.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import type { LoraModule } from '../../src/engine/io/peft.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { ACTIVATION_BUDGET_BYTES, LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles, type TinyVariant } from '../helpers/tiny_checkpoint.ts';

const ALL: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
const IDS = [5, 17, 99, 3, 250, 42, 7, 1, 64, 12, 200];

/** A tiny model with a rank-2 adapter on `targets`, B ≠ 0 (so A's gradients are not zero). */
async function tinyModel(variant: TinyVariant, targets = ALL) {
  const ck = tinyCheckpointFiles(variant, 'f32', 0, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights);
  m.initLora(2, 4, targets, 1);
  const rng = createRng(5);
  for (const [key, t] of m.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  return m;
}

/** Bytes of the distinct tensors a tape holds (views share their data). */
function tapeBytes(tape: object): number {
  const seen = new Set<Float32Array>();
  const walk = (x: unknown): void => {
    if (!x || typeof x !== 'object') return;
    if ('data' in x && (x as CpuTensor).data instanceof Float32Array) seen.add((x as CpuTensor).data);
    else for (const v of Object.values(x)) walk(v);
  };
  walk(tape);
  return [...seen].reduce((a, d) => a + d.byteLength, 0);
}

const batch = (): GrpoSample[] => [
  { ids: IDS, promptLen: 4, advantage: 0.9, temperature: 0.7 },
  { ids: IDS.slice(0, 6), spans: [[2, 6]], advantage: -0.6 },
];

describe('activation checkpointing by budget', () => {
  it.each([
    ['llama3', ALL],
    ['qwen2', ['q_proj', 'v_proj'] as LoraModule[]],
    ['qwen3', ALL],
  ] as const)('%s: activationBytes is what a full tape holds', async (variant, targets) => {
    const m = await tinyModel(variant, [...targets]);
    const T = IDS.length;
    const full = m.forwardHidden(IDS);
    expect(m.activationBytes(T).full).toBe(tapeBytes(full));
    const ck = m.forwardHidden(IDS, { checkpoint: true });
    // the checkpoints, plus one layer recomputed in the backward: a full tape's layer minus its input
    const layer = tapeBytes(full.layers[0]!) - 4 * T * m.cfg.hiddenSize;
    expect(m.activationBytes(T).checkpointed).toBe(tapeBytes(ck) + layer);
  });

  it('checkpoints a sequence only when its activations exceed the budget, and says so in the step stats', async () => {
    const m = await tinyModel('qwen2');
    const long = m.activationBytes(IDS.length - 1).full; // the first sample's input: ids[..-1]
    const short = m.activationBytes(5).full;
    const decide = (budget: number) => new LoraTrainer(m, { activationBudgetBytes: budget });
    expect(decide(long).checkpointFor(IDS.length - 1)).toBe(false); // at the budget: fits
    expect(() => decide(NaN)).toThrow(/activationBudgetBytes must be a number of bytes ≥ 0/);
    expect(() => decide(-1)).toThrow(/activationBudgetBytes/);
    expect(decide(long - 1).checkpointFor(IDS.length - 1)).toBe(true);
    const at = await decide(long).gradients(batch());
    expect([at.checkpointed, at.activationBytes, at.activationBudgetBytes]).toEqual([0, long, long]);
    // between the two lengths: only the long sequence recomputes
    expect((await decide(long - 1).gradients(batch())).checkpointed).toBe(1);
    expect((await decide(short - 1).gradients(batch())).checkpointed).toBe(2);
    // forced either way whatever the budget
    expect((await new LoraTrainer(m, { checkpoint: true }).gradients(batch())).checkpointed).toBe(2);
    expect(
      (await new LoraTrainer(m, { checkpoint: false, activationBudgetBytes: 1 }).gradients(batch())).checkpointed,
    ).toBe(0);
    // default: the 256 MiB budget (the CPU's largest tensor is larger), so a tiny model keeps everything
    const d = new LoraTrainer(m);
    expect(d.activationBudget()).toBe(ACTIVATION_BUDGET_BYTES);
    const st = await d.trainStep(batch());
    expect(st.checkpointed).toBe(0);
    expect(st.samples).toBe(2);
  });

  it('a device with small buffers gets a smaller default budget', async () => {
    class SmallOps extends CpuOps {
      override readonly maxTensorBytes = 128 * 2 ** 20;
    }
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const m = new LlamaModel<CpuTensor>(l.config, new SmallOps(), l.weights);
    m.initLora(2, 4, ALL, 1);
    expect(new LoraTrainer(m).activationBudget()).toBe(128 * 2 ** 20);
  });

  it.each(['llama3', 'qwen2', 'qwen3'] as const)(
    '%s: the same loss and gradients with and without checkpointing',
    async (variant) => {
      const m = await tinyModel(variant);
      // one forward per sample either way (an infinite budget would pack both into one: other rounding)
      const o = { headChunkRows: 3, pack: false };
      const kept = await new LoraTrainer(m, { ...o, activationBudgetBytes: Infinity }).gradients(batch());
      const recomputed = await new LoraTrainer(m, { ...o, activationBudgetBytes: 0 }).gradients(batch());
      expect([kept.checkpointed, recomputed.checkpointed]).toEqual([0, 2]);
      expect(recomputed.loss).toBe(kept.loss);
      for (const [k, g] of kept.grads) expect([...recomputed.grads.get(k)!.data]).toEqual([...g.data]);
      expect([...kept.grads.values()].some((g) => g.data.some((x) => x !== 0))).toBe(true);
    },
  );
});
