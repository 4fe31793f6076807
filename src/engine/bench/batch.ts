/**
 * Batched decoding for `spade bench engine`: aggregate decode tokens/s of the
 * DecodeScheduler (batch.ts) at several batch sizes on one model, and the speed-up over batch 1,
 * all measured in one run. Prefill is taken out by difference: each batch size decodes n₁ and then
 * n₂ tokens per sequence from the same prompts, and only the extra n₂ − n₁ steps are timed.
 */
import { createRng } from '../../core/rng.ts';
import type { ModelConfig } from '../io/config.ts';
import type { WeightFormat } from '../io/pack.ts';
import { DecodeScheduler } from '../model/batch.ts';
import { LlamaModel } from '../model/model.ts';
import { GpuOps } from '../ops/ops.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { randomWeights } from './model.ts';

export interface BatchDecodeRow {
  batch: number;
  /** Generated tokens per second over all sequences of the batch (decode steps only). */
  tokensPerSec: number;
  /** tokensPerSec ÷ the batch-1 figure of the same run. */
  speedup: number;
}

export async function benchBatchDecode(
  e: Engine,
  cfg: ModelConfig,
  opts: { batches?: number[]; tokens?: number; weights?: WeightFormat; promptLen?: number } = {},
): Promise<BatchDecodeRow[]> {
  const batches = opts.batches ?? [1, 8, 16];
  const tokens = opts.tokens ?? 16;
  const promptLen = opts.promptLen ?? 16;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg), { weights: opts.weights ?? 'f32' });
  const rng = createRng(3);
  const prompts = Array.from({ length: Math.max(...batches) }, () =>
    Array.from({ length: promptLen }, () => rng.int(cfg.vocabSize)),
  );
  const rows: BatchDecodeRow[] = [];
  try {
    for (const batch of batches) {
      const scheduler = new DecodeScheduler(model, { maxBatch: batch });
      // sampled like the loop's roles (temperature 0.6, top_p 0.95), no stop ids: every row decodes `maxNew`
      const run = async (maxNew: number) => {
        const t0 = performance.now();
        await Promise.all(
          prompts
            .slice(0, batch)
            .map((p, i) => scheduler.generate(p, { maxNew, temperature: 0.6, topP: 0.95, seed: i })),
        );
        return performance.now() - t0;
      };
      await run(2); // warm-up: pipelines, pools
      const short = await run(2);
      const long = await run(2 + tokens);
      const tokensPerSec = (batch * tokens) / (Math.max(1e-3, long - short) / 1000);
      rows.push({ batch, tokensPerSec, speedup: 0 });
    }
  } finally {
    model.dispose();
    e.flush();
    e.trim();
  }
  const base = rows.find((r) => r.batch === 1)?.tokensPerSec ?? rows[0]!.tokensPerSec;
  for (const r of rows) r.speedup = r.tokensPerSec / base;
  return rows;
}
