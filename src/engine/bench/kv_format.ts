/**
 * The decode KV cache's format (kv_pages.ts) for the engine benchmarks: the bytes of Qwen2.5-0.5B's
 * cache at 16 sequences × 2048 tokens in f32 and f16 (kvBytesPerToken), and the scheduler's decode
 * tokens/s on one model with f32 and with f16 stores, the two measured in alternating rounds of one
 * run, in the order f32 f16, f16 f32, … (a drift of the adapter's speed falls on both alike). Decode steps only, as benchBatchDecode:
 * each round decodes 2 and then 2 + tokens tokens per sequence from the same prompts (their prefixes
 * reused) and times the difference.
 */
import { createRng } from '../../core/rng.ts';
import type { ModelConfig } from '../io/config.ts';
import { DecodeScheduler } from '../model/batch.ts';
import { kvBytesPerToken, type KvFormat } from '../model/kv_pages.ts';
import { LlamaModel } from '../model/model.ts';
import { GpuOps } from '../ops/ops.ts';
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { QWEN25_05B_CONFIG, randomWeights } from './model.ts';

/** Bytes of k and v over every layer of `cfg` for `sequences` × `tokens` tokens in `format`. */
function kvCacheBytes(cfg: ModelConfig, sequences: number, tokens: number, format: KvFormat): number {
  const dims = { layers: cfg.numLayers, Hkv: cfg.numKvHeads, D: cfg.headDim };
  return sequences * tokens * kvBytesPerToken(dims, format);
}

export interface KvFormatBench {
  /** Qwen2.5-0.5B's cache at 16 sequences × 2048 tokens. */
  qwen05b: { sequences: number; tokens: number; f32Bytes: number; f16Bytes: number };
  /** Scheduler decode tokens/s (all sequences) of `cfg` with each store format. */
  decode: { f32TokensPerSec: number; f16TokensPerSec: number; f16OverF32: number };
  batch: number;
  promptLen: number;
  rounds: number;
}

export async function benchKvFormat(
  e: Engine,
  cfg: ModelConfig,
  opts: { batch?: number; tokens?: number; promptLen?: number; rounds?: number } = {},
): Promise<KvFormatBench> {
  const batch = opts.batch ?? 1;
  const tokens = opts.tokens ?? 8;
  const promptLen = opts.promptLen ?? 16;
  const rounds = opts.rounds ?? 3;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg));
  const rng = createRng(5);
  const prompts = Array.from({ length: batch }, () => Array.from({ length: promptLen }, () => rng.int(cfg.vocabSize)));
  const formats = (['f32', 'f16'] as const).map((kvFormat) => ({
    kvFormat,
    scheduler: new DecodeScheduler(model, { maxBatch: batch, kvFormat }),
    ms: 0,
  }));
  try {
    const run = async (s: DecodeScheduler<Tensor>, maxNew: number) => {
      const t0 = performance.now();
      // sampled like the loop's roles (temperature 0.6, top_p 0.95), no stop ids: every row decodes maxNew
      await Promise.all(prompts.map((p, i) => s.generate(p, { maxNew, temperature: 0.6, topP: 0.95, seed: i })));
      return performance.now() - t0;
    };
    for (const f of formats) await run(f.scheduler, 2); // warm-up: pipelines, pools, the prompts' prefill
    for (let r = 0; r < rounds; r++)
      for (const f of r % 2 ? [...formats].reverse() : formats) {
        const short = await run(f.scheduler, 2);
        const long = await run(f.scheduler, 2 + tokens);
        f.ms += Math.max(1e-3, long - short);
      }
  } finally {
    for (const f of formats) f.scheduler.dispose();
    model.dispose();
    e.flush();
    e.trim();
  }
  const [f32, f16] = formats.map((f) => (rounds * batch * tokens) / (f.ms / 1000)) as [number, number];
  const sequences = 16;
  const ctx = 2048;
  return {
    qwen05b: {
      sequences,
      tokens: ctx,
      f32Bytes: kvCacheBytes(QWEN25_05B_CONFIG, sequences, ctx, 'f32'),
      f16Bytes: kvCacheBytes(QWEN25_05B_CONFIG, sequences, ctx, 'f16'),
    },
    decode: { f32TokensPerSec: f32, f16TokensPerSec: f16, f16OverF32: f16 / f32 },
    batch,
    promptLen,
    rounds,
  };
}
