// GRPO on the WebGPU kernels against the CPU references: the sampler's log π_old under a vocabulary
// mask and a temperature (generate.ts), and the trainer's loss, statistics and adapter gradients
// with the clip, the mask, a temperature and the KL to the base all active (train.ts).
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { allowedTokenBias } from '../../src/engine/model/policy.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { LoraTrainer, type GrpoSample } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const PROMPT = [5, 17, 99, 3, 250, 42];
const ALLOWED = [48, 49, 50, 51, 52, 53, 54, 55, 56, 57];

async function pair() {
  const ck = tinyCheckpointFiles('qwen3', 'f32', 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const cpu = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
  const gpu = new LlamaModel<Tensor>(loaded.config, new GpuOps(new Engine(ctx!)), loaded.weights);
  cpu.initLora(2, 4, ['q_proj', 'v_proj', 'o_proj', 'down_proj'], 1);
  const rng = createRng(4);
  for (const [key, t] of cpu.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  gpu.setLora((await cpu.getLora())!);
  return { cpu, gpu };
}

describe.skipIf(!ctx)(`GRPO on WebGPU vs CPU references ${reason}`, () => {
  it('samples only allowed ids and reports the same log π_old as the CPU', async () => {
    const { cpu, gpu } = await pair();
    const o = { maxNew: 5, temperature: 0.7, seed: 3, logitBias: allowedTokenBias(cpu.cfg.vocabSize, ALLOWED) };
    const lc: number[] = [];
    const lg: number[] = [];
    const idsCpu = await generate(cpu, PROMPT, { ...o, logprobs: lc });
    const idsGpu = await generate(gpu, PROMPT, { ...o, logprobs: lg });
    expect(idsGpu).toEqual(idsCpu);
    expect(idsGpu.every((id) => ALLOWED.includes(id))).toBe(true);
    expect(lg).toHaveLength(5);
    lg.forEach((x, i) => expect(x).toBeCloseTo(lc[i]!, 4));
  });

  it('computes the same loss, statistics and gradients as the CPU', async () => {
    const { cpu, gpu } = await pair();
    const ids = [...PROMPT, 50, 51, 57, 48];
    const samples: GrpoSample[] = [
      { ids, promptLen: PROMPT.length, oldLogprobs: [-2.1, -2.6, -1.9, -2.4], advantage: 0.9, temperature: 0.7 },
      { ids: [...PROMPT, 55], promptLen: PROMPT.length, oldLogprobs: [-2.3], advantage: -0.5, temperature: 0.7 },
    ];
    const opts = { klCoef: 0.2, allowedTokens: ALLOWED };
    const c = await new LoraTrainer(cpu, opts).gradients(samples);
    const g = await new LoraTrainer(gpu, opts).gradients(samples);
    expect(g.loss).toBeCloseTo(c.loss, 4);
    expect(g.clipFraction).toBe(c.clipFraction);
    expect(g.approxKl).toBeCloseTo(c.approxKl, 4);
    expect(g.klToBase!).toBeCloseTo(c.klToBase!, 4);
    for (const [key, t] of c.grads)
      expect(relError(await gpu.ops.read(g.grads.get(key)!), t.data, 1e-3)).toBeLessThan(1e-3);
  });
});
