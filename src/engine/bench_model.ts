/**
 * Model-level benchmarks for `spade bench engine`, on a fixed small configuration with random
 * weights (no download): decode tokens/s with the KV cache, forward-only throughput, LoRA
 * training tokens/s (forward + backward + AdamW), and GPU bytes per base and per trained parameter.
 */
import { createRng } from '../core/rng.ts';
import { hfTensorSpecs, paramCount, type ModelConfig } from './io/config.ts';
import type { TensorStore } from './io/safetensors.ts';
import { generate } from './generate.ts';
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

/** A TensorStore stand-in that makes small random weights on request. */
export function randomWeights(cfg: ModelConfig, seed = 0): TensorStore {
  const shapes = new Map(hfTensorSpecs(cfg).map((s) => [s.name, s.shape]));
  const rng = createRng(seed);
  return {
    f32(name: string): Float32Array {
      const shape = shapes.get(name);
      if (!shape) throw new Error(`no tensor ${name}`);
      const n = shape.reduce((a, b) => a * b, 1);
      const isNorm = shape.length === 1;
      return Float32Array.from({ length: n }, () => (isNorm ? 1 : (rng.next() - 0.5) * 0.04));
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
