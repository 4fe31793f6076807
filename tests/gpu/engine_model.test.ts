// The model on the WebGPU kernels against the same model on the CPU references: logits, greedy
// generation with the KV cache, and LoRA gradients — every architecture variant, f32 and bf16.
import { describe, expect, it } from 'vitest';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { LoraTrainer } from '../../src/engine/train/train.ts';
import { TINY_VARIANTS, tinyCheckpointFiles, type TinyDType, type TinyVariant } from '../helpers/tiny_checkpoint.ts';
import { relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';
import { ALL_TARGETS, loraGradients } from './lora_gradients.ts';

const { ctx, reason } = await tryGpu();
const IDS = [5, 17, 99, 3, 250, 42, 7, 1, 64];

async function pair(variant: TinyVariant, dtype: TinyDType = 'f32') {
  const ck = tinyCheckpointFiles(variant, dtype, 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const cpu = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
  const gpu = new LlamaModel<Tensor>(loaded.config, new GpuOps(new Engine(ctx!)), loaded.weights);
  return { cpu, gpu };
}

/** max|a − b| / max|b|: floor 1 makes relError relative to the largest expected value. */
const maxRel = (a: Float32Array, b: Float32Array) => relError(a, b, 1);

describe.skipIf(!ctx)(`model on WebGPU vs CPU references ${reason}`, () => {
  it.each(TINY_VARIANTS.flatMap((v) => (['f32', 'bf16'] as const).map((d) => [v, d] as const)))(
    '%s (%s): logits agree to 1e-4',
    async (variant, dtype) => {
      const { cpu, gpu } = await pair(variant, dtype);
      const want = cpu.forward(IDS).logits.data;
      const got = await gpu.ops.read(gpu.forward(IDS).logits);
      expect(got.length).toBe(want.length);
      expect(maxRel(got, want)).toBeLessThan(1e-4);
    },
  );

  it.each(TINY_VARIANTS)(
    '%s: greedy generation with the KV cache equals the CPU and full recomputation',
    async (variant) => {
      const { cpu, gpu } = await pair(variant);
      const g = await generate(gpu, IDS, { maxNew: 6, temperature: 0 });
      expect(g).toEqual(await generate(gpu, IDS, { maxNew: 6, temperature: 0, noCache: true }));
      expect(g).toEqual(await generate(cpu, IDS, { maxNew: 6, temperature: 0 }));
    },
  );

  it.each(['llama3', 'qwen3'] as const)('%s: LoRA gradients agree with the CPU backward', async (variant) => {
    const { cpu, gpu } = await pair(variant);
    const { want, got } = await loraGradients(cpu, gpu, IDS);
    expect(want.size).toBe(2 * 2 * ALL_TARGETS.length);
    for (const [k, g] of want) expect(maxRel(got.get(k)!, g), k).toBeLessThan(1e-3);
  });

  it('reuses GPU memory: repeated generation and training steps allocate nothing new', async () => {
    const { gpu } = await pair('qwen2');
    const e = (gpu.ops as GpuOps).e;
    gpu.initLora(2, 4, ['q_proj', 'down_proj'], 0);
    const trainer = new LoraTrainer(gpu, { lr: 1e-3 });
    const sample = [{ ids: IDS, promptLen: 4, advantage: 1 }];
    for (let i = 0; i < 2; i++) {
      await generate(gpu, IDS, { maxNew: 4, temperature: 0 });
      await trainer.trainStep(sample);
    }
    const before = e.bytesAllocated;
    for (let i = 0; i < 3; i++) {
      await generate(gpu, IDS, { maxNew: 4, temperature: 0 });
      await trainer.trainStep(sample);
    }
    expect(e.bytesAllocated).toBe(before);
  });
});
