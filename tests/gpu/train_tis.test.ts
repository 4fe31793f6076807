// GRPO with truncated importance sampling on the WebGPU kernels against the CPU references: the
// learner's π_old recomputed for a batch (one read), then the loss, statistics, TIS figures and
// adapter gradients with the ratio against it and each token weighted by min(π_old / π_sampler, 2).
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const PROMPT = [5, 17, 99, 3, 250, 42];

async function pair() {
  const ck = tinyCheckpointFiles('qwen3', 'f32', 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const cpu = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
  const gpu = new LlamaModel<Tensor>(loaded.config, new GpuOps(new Engine(ctx!)), loaded.weights);
  cpu.initLora(2, 4, ['q_proj', 'v_proj'], 1);
  const rng = createRng(5);
  for (const [key, t] of cpu.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  gpu.setLora((await cpu.getLora())!);
  return { cpu, gpu };
}

describe.skipIf(!ctx)(`GRPO with TIS on WebGPU vs CPU references ${reason}`, () => {
  it("recomputes the learner's π_old and gives the same TIS-weighted loss, figures and gradients", async () => {
    const { cpu, gpu } = await pair();
    const samples: GrpoSample[] = [
      { ids: [...PROMPT, 50, 51, 57], promptLen: PROMPT.length, advantage: 0.9, temperature: 0.7 },
      { ids: [...PROMPT, 55, 60], spans: [[7, 8]], advantage: -0.5, temperature: 0.7 },
    ];
    const opts = { tisCap: 2 };
    const lc = await new LoraTrainer(cpu, opts).learnerLogprobs(samples);
    const lg = await new LoraTrainer(gpu, opts).learnerLogprobs(samples);
    lg.flat().forEach((x, i) => expect(x).toBeCloseTo(lc.flat()[i]!, 4));
    // sampler log-probs off the learner's by ±: ratios e^0.4, e^-0.5, e^1.2 (truncated), e^0.3
    const gaps = [[0.4, -0.5, 1.2], [0.3]];
    const withTis = samples.map((s, i) => ({
      ...s,
      learnerLogprobs: lc[i]!,
      oldLogprobs: lc[i]!.map((x, j) => x - gaps[i]![j]!),
    }));
    const c = await new LoraTrainer(cpu, opts).gradients(withTis);
    const g = await new LoraTrainer(gpu, opts).gradients(withTis);
    expect(c.tisTruncated).toBeCloseTo(1 / 4, 6);
    expect(g.loss).toBeCloseTo(c.loss, 4);
    expect(g.clipFraction).toBe(c.clipFraction);
    expect(g.approxKl).toBeCloseTo(c.approxKl, 4);
    expect(g.tisMean).toBeCloseTo(c.tisMean!, 5);
    for (const [key, t] of c.grads)
      expect(relError(await gpu.ops.read(g.grads.get(key)!), t.data, 1e-3)).toBeLessThan(1e-3);
  });
});
