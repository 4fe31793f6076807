// Log-probs over a long sequence keep the LM head's logits bounded (model.ts headChunks): on a
// recording-only device with the Qwen2.5-0.5B layout (one layer, bf16) and 128 MiB bindings,
// logprobs over 1,024 tokens runs — the (1,023, 151,936) f32 logits would be 622 MB in one buffer —
// and the tensors live at once stay within the weights plus a few head chunks.
import { describe, expect, it } from 'vitest';
import { QWEN25_05B_CONFIG, zeroWeights } from '../../src/engine/bench/model.ts';
import { HEAD_CHUNK_BYTES, LlamaModel } from '../../src/engine/model/model.ts';
import { dryRunContext } from '../../src/engine/runtime/dry_run.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const MiB = 2 ** 20;

describe.skipIf(!ctx)(`log-probs in LM-head chunks ${reason}`, () => {
  it('1,024 tokens of the Qwen2.5-0.5B layout under 128 MiB bindings: no (T, V) logits at once', async () => {
    const limits = { ...ctx!.report.limits, maxStorageBufferBindingSize: 128 * MiB, maxBufferSize: 256 * MiB };
    const e = new Engine(dryRunContext({ ...ctx!.report, limits }));
    const cfg = { ...QWEN25_05B_CONFIG, numLayers: 1 };
    const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), zeroWeights(cfg), { weights: 'bf16' });
    e.flush();
    const weights = e.liveBytes;
    e.resetPeak();
    const T = 1024;
    const lp = await model.logprobs(Array.from({ length: T }, (_, i) => (i * 7919) % cfg.vocabSize));
    expect(lp).toHaveLength(T - 1);
    const full = (T - 1) * cfg.vocabSize * 4;
    const above = e.peakLiveBytes - weights;
    console.log(
      `logprobs over ${T} tokens: ${(above / MiB).toFixed(1)} MiB above the weights (full logits ${(full / MiB).toFixed(0)} MiB)`,
    );
    expect(above).toBeLessThan(3 * HEAD_CHUNK_BYTES);
    model.dispose();
  });
});
