/**
 * Model-level benchmarks for `spade bench engine`, on a fixed small configuration with random
 * weights (no download): decode tokens/s with the KV cache, forward-only throughput, LoRA
 * training tokens/s (forward + backward + AdamW), and GPU bytes per base and per trained parameter.
 */
import { createRng } from '../core/rng.ts';
import { hfTensorSpecs, paramCount, type ModelConfig } from './io/config.ts';
import type { TensorStore } from './io/safetensors.ts';
import { weightBytes, type WeightFormat } from './io/pack.ts';
import { generate } from './generate.ts';
import { DecodeScheduler } from './batch.ts';
import { LlamaModel } from './model.ts';
import { GpuOps } from './ops.ts';
import type { Engine, Tensor } from './runtime.ts';
import { LoraTrainer } from './train.ts';

/** ~60M parameters: a SmolLM2-135M-like layout, shrunk to 12 layers so it runs on a software GPU too. */
export const BENCH_CONFIG: ModelConfig = {
  architecture: 'llama',
  vocabSize: 49152,
  hiddenSize: 576,
  intermediateSize: 1536,
  numLayers: 12,
  numHeads: 9,
  numKvHeads: 3,
  headDim: 64,
  rmsNormEps: 1e-5,
  ropeTheta: 100000,
  ropeScaling: null,
  tieWordEmbeddings: true,
  qkvBias: false,
  oBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 8192,
  bosTokenId: 1,
  eosTokenIds: [2],
  dtype: 'float32',
};

/** Qwen2.5-0.5B's layout (its config.json): q/k/v biases, tied embeddings, 14 query / 2 KV heads. */
export const QWEN25_05B_CONFIG: ModelConfig = {
  architecture: 'qwen2',
  vocabSize: 151936,
  hiddenSize: 896,
  intermediateSize: 4864,
  numLayers: 24,
  numHeads: 14,
  numKvHeads: 2,
  headDim: 64,
  rmsNormEps: 1e-6,
  ropeTheta: 1000000,
  ropeScaling: null,
  tieWordEmbeddings: true,
  qkvBias: true,
  oBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 32768,
  bosTokenId: null,
  eosTokenIds: [151645, 151643],
  dtype: 'bfloat16',
};

export interface DispatchCount {
  layout: string;
  /** Layers of the full layout. */
  layers: number;
  /** Compute dispatches per generated token (decode step + sampling), scaled to `layers`. */
  perToken: number;
  perLayer: number;
  /** Per token outside the layers (embedding, final norm, LM head, sampling). */
  fixed: number;
  /** Buffer copies per token (KV-cache appends, row slices): each one ends a compute pass. */
  copiesPerToken: number;
  submitsPerToken: number;
  /** The two reduced-layer variants actually run. */
  measuredLayers: [number, number];
  vocab: number;
  note: string;
}

/**
 * Dispatches per generated token from the engine's own counter (Engine.dispatches), for `cfg`'s
 * layout. The full model may be too slow to build on a software adapter, so this runs two
 * reduced-layer variants (same widths), and scales: per layer = the difference, fixed = the rest.
 * Counts depend on the structure only (not on widths or the vocabulary), so `vocab` may be cut too.
 */
export async function countDecodeDispatches(
  e: Engine,
  cfg: ModelConfig = QWEN25_05B_CONFIG,
  vocab = cfg.vocabSize,
  measured: [number, number] = [1, 2],
  tokens = 4,
  path: 'scheduler' | 'generate' = 'scheduler',
): Promise<DispatchCount> {
  const perToken: { d: number; c: number; s: number }[] = [];
  for (const layers of measured) {
    const c = { ...cfg, numLayers: layers, vocabSize: vocab };
    const model = new LlamaModel<Tensor>(c, new GpuOps(e), randomWeights(c));
    const prompt = Array.from({ length: 8 }, (_, i) => (i * 37) % vocab);
    const o = { temperature: 0.6, topP: 0.95, seed: 1 };
    const count = async (maxNew: number) => {
      const d0 = e.dispatches;
      const c0 = e.copies;
      const s0 = e.submits;
      // a fresh scheduler per count: its prefix cache must not skip the second count's prefill
      if (path === 'scheduler') await new DecodeScheduler(model).generate(prompt, { ...o, maxNew });
      else await generate(model, prompt, { ...o, maxNew });
      return { d: e.dispatches - d0, c: e.copies - c0, s: e.submits - s0 };
    };
    const one = await count(1); // prefill + the first token
    const more = await count(1 + tokens);
    perToken.push({ d: (more.d - one.d) / tokens, c: (more.c - one.c) / tokens, s: (more.s - one.s) / tokens });
    model.dispose();
    e.flush();
    e.trim();
  }
  const [a, b] = perToken as [(typeof perToken)[0], (typeof perToken)[0]];
  const perLayer = (b.d - a.d) / (measured[1] - measured[0]);
  const fixed = a.d - perLayer * measured[0];
  const scale = (x: number, y: number) => x + ((y - x) / (measured[1] - measured[0])) * (cfg.numLayers - measured[0]);
  return {
    layout: `${cfg.architecture} ${cfg.numLayers}×(hidden ${cfg.hiddenSize}, ${cfg.numHeads}/${cfg.numKvHeads} heads)`,
    layers: cfg.numLayers,
    perToken: fixed + perLayer * cfg.numLayers,
    perLayer,
    fixed,
    copiesPerToken: scale(a.c, b.c),
    submitsPerToken: scale(a.s, b.s),
    measuredLayers: measured,
    vocab,
    note: `${path === 'scheduler' ? 'the batched decode step (DecodeScheduler, batch 1)' : 'the unbatched generate() path'}, measured on ${measured.join(' and ')}-layer variants (vocabulary ${vocab}), scaled linearly to ${cfg.numLayers} layers; temperature 0.6, top_p 0.95, sampled on the GPU`,
  };
}

/** A TensorStore stand-in that makes small random weights on request. */
export function randomWeights(cfg: ModelConfig, seed = 0): TensorStore {
  const shapes = new Map(hfTensorSpecs(cfg).map((s) => [s.name, s.shape]));
  const rng = createRng(seed);
  return {
    f32(name: string): Float32Array {
      const shape = shapes.get(name);
      if (!shape) throw new Error(`no tensor ${name}`);
      const n = shape.reduce((a, b) => a * b, 1);
      const out = new Float32Array(n);
      if (shape.length === 1)
        out.fill(1); // norm weights
      else for (let i = 0; i < n; i++) out[i] = (rng.next() - 0.5) * 0.04;
      return out;
    },
  } as unknown as TensorStore;
}

export interface ModelBench {
  params: number;
  loraParams: number;
  decodeTokensPerSec: number;
  forwardTokensPerSec: number;
  trainTokensPerSec: number;
  trainOverForward: number;
  bytesPerBaseParam: number;
  bytesPerTrainedParam: number;
}

export async function benchModel(
  e: Engine,
  cfg: ModelConfig = BENCH_CONFIG,
  seq = 128,
  decodeTokens = 32,
): Promise<ModelBench> {
  const before = e.bytesAllocated;
  const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg));
  e.flush();
  const params = paramCount(cfg);
  const baseBytes = e.bytesAllocated - before;
  const rng = createRng(1);
  const ids = Array.from({ length: seq }, () => rng.int(cfg.vocabSize));
  const sync = async () => {
    e.flush();
    await e.device.queue.onSubmittedWorkDone();
  };

  // decode: prefill 16 tokens, then one token per step with the KV cache (greedy)
  await generate(model, ids.slice(0, 16), { maxNew: 4, temperature: 0 }); // warm-up
  let t0 = performance.now();
  await generate(model, ids.slice(0, 16), { maxNew: decodeTokens, temperature: 0 });
  const decodeTokensPerSec = decodeTokens / ((performance.now() - t0) / 1000);

  // forward-only throughput (teacher forcing over seq tokens)
  const fwd = () => {
    const { logits } = model.forward(ids);
    model.ops.free(logits);
  };
  fwd();
  await sync();
  t0 = performance.now();
  const reps = 3;
  for (let i = 0; i < reps; i++) fwd();
  await sync();
  const forwardTokensPerSec = (reps * seq) / ((performance.now() - t0) / 1000);

  // LoRA training: r = 8 on q, k, v, o (forward with tape, backward, AdamW)
  const beforeLora = e.bytesAllocated;
  model.initLora(8, 16, ['q_proj', 'k_proj', 'v_proj', 'o_proj'], 0);
  const trainer = new LoraTrainer(model, { lr: 1e-4 });
  const sample = [{ ids, promptLen: seq / 2, advantage: 1 }];
  await trainer.trainStep(sample); // warm-up (also allocates gradients and activations)
  await sync();
  const loraParams = [...model.lora!.w.values()].reduce((s, t) => s + t.size, 0);
  const trainedBytes = e.bytesAllocated - beforeLora;
  t0 = performance.now();
  for (let i = 0; i < 2; i++) await trainer.trainStep(sample);
  await sync();
  const trainTokensPerSec = (2 * (seq - 1)) / ((performance.now() - t0) / 1000);
  e.trim();
  return {
    params,
    loraParams,
    decodeTokensPerSec,
    forwardTokensPerSec,
    trainTokensPerSec,
    trainOverForward: trainTokensPerSec / forwardTokensPerSec,
    bytesPerBaseParam: baseBytes / params,
    bytesPerTrainedParam: trainedBytes / loraParams,
  };
}

export interface WeightFormatBench {
  format: WeightFormat;
  /** GPU bytes of the base weights (the model's buffers) per base parameter, measured. */
  bytesPerBaseParam: number;
  /** The same from config.json alone (weightBytes) for the Qwen2.5-0.5B layout. */
  qwen05bBytesPerBaseParam: number;
  /** Greedy decode tokens/s with the KV cache (prefill 16 tokens, then one token per step). */
  decodeTokensPerSec: number;
}

/** Per weight format (io/pack.ts): GPU bytes per base parameter and decode speed on `cfg`. */
export async function benchWeightFormats(
  e: Engine,
  cfg: ModelConfig = BENCH_CONFIG,
  decodeTokens = 32,
  formats: WeightFormat[] = ['f32', 'bf16', 'f16', 'q4'],
): Promise<WeightFormatBench[]> {
  const params = paramCount(cfg);
  const rng = createRng(2);
  const prompt = Array.from({ length: 16 }, () => rng.int(cfg.vocabSize));
  const out: WeightFormatBench[] = [];
  for (const format of formats) {
    const model = new LlamaModel<Tensor>(cfg, new GpuOps(e), randomWeights(cfg), { weights: format });
    await generate(model, prompt, { maxNew: 4, temperature: 0 }); // warm-up (pipelines)
    const t0 = performance.now();
    await generate(model, prompt, { maxNew: decodeTokens, temperature: 0 });
    const decodeTokensPerSec = decodeTokens / ((performance.now() - t0) / 1000);
    out.push({
      format,
      bytesPerBaseParam: model.weightBytes / params,
      qwen05bBytesPerBaseParam: weightBytes(QWEN25_05B_CONFIG, format) / paramCount(QWEN25_05B_CONFIG),
      decodeTokensPerSec,
    });
    model.dispose();
    e.flush();
    e.trim();
  }
  return out;
}
