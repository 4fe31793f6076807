// The engine submits on its own every maxDispatchesPerSubmit dispatches (no submission runs long on a
// small GPU's watchdog): the submissions are counted, and results — a kernel chain and a LoRA step's
// gradients — are the same bits as with one submission.
import { describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, MAX_DISPATCHES_PER_SUBMIT, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { LoraTrainer } from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`submissions split by dispatch count ${reason}`, () => {
  it('a chain of 10 dispatches with a limit of 4 is 3 submissions, with the result of one', async () => {
    const chain = async (e: Engine) => {
      const ops = new GpuOps(e);
      let x = ops.upload(
        [64],
        Float32Array.from({ length: 64 }, (_, i) => i / 7),
      );
      const s0 = e.submits;
      for (let i = 0; i < 10; i++) {
        const y = ops.scale(x, 1.25);
        ops.free(x);
        x = y;
      }
      const auto = e.submits - s0;
      const out = await ops.read(x);
      return { auto, total: e.submits - s0, out };
    };
    const split = await chain(new Engine(ctx!, { maxDispatchesPerSubmit: 4 }));
    const one = await chain(new Engine(ctx!, { maxDispatchesPerSubmit: Infinity }));
    expect(split.auto).toBe(2); // after the 4th and the 8th dispatch
    expect(split.total).toBe(3); // and the read's flush
    expect(one.auto).toBe(0);
    expect(Array.from(split.out)).toEqual(Array.from(one.out));
    expect(new Engine(ctx!).maxDispatchesPerSubmit).toBe(MAX_DISPATCHES_PER_SUBMIT);
    expect(() => new Engine(ctx!, { maxDispatchesPerSubmit: 0 })).toThrow(/≥ 1/);
  });

  it('a LoRA step split every 16 dispatches gives the gradients of one submission', async () => {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 1, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const step = async (limit: number) => {
      const e = new Engine(ctx!, { maxDispatchesPerSubmit: limit });
      const m = new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights);
      m.initLora(4, 8, ['q_proj', 'v_proj', 'down_proj'], 3);
      const s0 = e.submits;
      const g = await new LoraTrainer(m).gradients([
        { ids: [5, 9, 2, 7, 1, 3, 8], promptLen: 3, advantage: 0.7 },
        { ids: [4, 4, 6, 2], promptLen: 1, advantage: -0.3 },
      ]);
      const grads = new Map<string, number[]>();
      for (const [k, x] of g.grads) grads.set(k, Array.from(await m.ops.read(x)));
      const submits = e.submits - s0;
      m.dispose();
      return { loss: g.loss, grads, submits };
    };
    const split = await step(16);
    const one = await step(Infinity);
    expect(split.submits).toBeGreaterThan(one.submits + 5);
    expect(split.loss).toBe(one.loss);
    expect(split.grads).toEqual(one.grads);
  });
});
