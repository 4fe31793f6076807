// Small GPUs: the load-time plan against the adapter's limits (model.ts). The embedding table / LM
// head is split by vocabulary rows into shards that fit maxStorageBufferBindingSize, with the same
// logits and tokens as one table (on the software adapter, shards forced small); the Qwen2.5-0.5B
// layout in bf16 loads and decodes on a recording-only device that reports 128 MiB bindings and
// refuses anything larger; a tensor that cannot be split is a ModelLoadError naming the limit.
import { describe, expect, it } from 'vitest';
import { ModelLoadError } from '../../src/core/errors.ts';
import { benchLowLimits, QWEN25_05B_CONFIG, zeroWeights } from '../../src/engine/bench/model.ts';
import { dryRunContext } from '../../src/engine/runtime/dry_run.ts';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const MiB = 2 ** 20;

describe.skipIf(!ctx)(`small GPUs: limits at load ${reason}`, () => {
  it('an embedding / LM head split by vocabulary rows gives the logits and tokens of one table (f32, bf16)', async () => {
    const e = new Engine(ctx!);
    const ck = tinyCheckpointFiles('qwen2', 'f32', 4, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const V = loaded.config.vocabSize;
    for (const weights of ['f32', 'bf16'] as const) {
      const one = new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights, { weights });
      const rowBytes = loaded.config.hiddenSize * (weights === 'f32' ? 4 : 2);
      const split = new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights, {
        weights,
        maxShardBytes: Math.ceil(V / 3) * rowBytes + 256, // three shards
      });
      const ids = [3, 1, V - 1, 7, 100];
      const a = await e.read(one.forward(ids).logits);
      const b = await e.read(split.forward(ids).logits);
      expect(b.length).toBe(ids.length * V);
      let worst = 0;
      for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
      expect(worst, weights).toBeLessThan(1e-5);
      const o = { maxNew: 6, temperature: 1.2, seed: 2 };
      const want = await generate(one, ids, o);
      expect(await generate(split, ids, o)).toEqual(want);
      expect(await generate(split, ids, { ...o, stepsPerReadback: 3 })).toEqual(want); // ids on the device, per shard
      one.dispose();
      split.dispose();
    }
  });

  it('loads and decodes the Qwen2.5-0.5B layout in bf16 under 128 MiB bindings (recording-only device)', async () => {
    expect(await benchLowLimits(new Engine(ctx!), 128)).toEqual({ bindingMiB: 128, ok: true });
    // the check is real: one 272 MB table does not fit, so the same device refuses a model made
    // with a shard limit above the binding limit
    const limits = { ...ctx!.report.limits, maxStorageBufferBindingSize: 128 * MiB, maxBufferSize: 512 * MiB };
    const eng = new Engine(dryRunContext({ ...ctx!.report, limits }));
    const ops = new GpuOps(eng);
    Object.defineProperty(ops, 'maxTensorBytes', { value: 512 * MiB }); // a plan that believes 512 MiB fits
    const model = new LlamaModel<Tensor>(QWEN25_05B_CONFIG, ops, zeroWeights(QWEN25_05B_CONFIG), { weights: 'bf16' });
    expect(() => model.forward([1, 2, 3], { lastOnly: true })).toThrow(/maxStorageBufferBindingSize/);
  });

  it('a weight that cannot be split is a ModelLoadError naming the limit and the tensor', () => {
    const limits = { ...ctx!.report.limits, maxStorageBufferBindingSize: 4 * MiB, maxBufferSize: 4 * MiB };
    const eng = new Engine(dryRunContext({ ...ctx!.report, limits }));
    let err: unknown;
    try {
      new LlamaModel<Tensor>(QWEN25_05B_CONFIG, new GpuOps(eng), zeroWeights(QWEN25_05B_CONFIG), { weights: 'f32' });
    } catch (x) {
      err = x;
    }
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as ModelLoadError).message).toMatch(/maxStorageBufferBindingSize.*4 MiB/);
    expect((err as ModelLoadError).data).toMatchObject({
      code: 'tensor-too-large',
      limit: 'maxStorageBufferBindingSize',
    });
    expect((err as ModelLoadError).data.tensor).toMatch(/^model\.layers\.0\./);
  });
});
