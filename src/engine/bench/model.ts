/**
 * Model-level benchmarks for `spade bench engine`, on a fixed small configuration with random
 * weights (no download): decode tokens/s with the KV cache, forward-only throughput, LoRA
 * training tokens/s (forward + backward + AdamW; for a minibatch, packed into one sequence and one
 * forward per sample), and GPU bytes per base and per trained parameter.
 */
import { createRng } from '../../core/rng.ts';
import { hfTensorSpecs, paramCount, type ModelConfig } from '../io/config.ts';
import type { TensorStore } from '../io/safetensors.ts';
import { weightBytes, type WeightFormat } from '../io/pack.ts';
import { generate } from '../model/generate.ts';
import { DecodeScheduler } from '../model/batch.ts';
import { LlamaModel } from '../model/model.ts';
import { GpuOps } from '../ops/ops.ts';
import { Engine, type Tensor } from '../runtime/runtime.ts';
import { LORA_MODULES, type LoraModule } from '../io/peft.ts';
import { dryRunContext } from '../runtime/dry_run.ts';
import { LoraTrainer } from '../train/train.ts';

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
  /** Share of a decode token's dispatches whose bind group came from the engine's cache (Engine.bindGroupHits), on the larger variant (a ratio: not scaled). */
  bindGroupHitRate: number;
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
  const perToken: { d: number; c: number; s: number; h: number }[] = [];
  for (const layers of measured) {
    const c = { ...cfg, numLayers: layers, vocabSize: vocab };
    const model = new LlamaModel<Tensor>(c, new GpuOps(e), randomWeights(c));
    const prompt = Array.from({ length: 8 }, (_, i) => (i * 37) % vocab);
    const o = { temperature: 0.6, topP: 0.95, seed: 1 };
    const count = async (maxNew: number) => {
      const d0 = e.dispatches;
      const c0 = e.copies;
      const s0 = e.submits;
      const h0 = e.bindGroupHits;
      // a fresh scheduler per count: its prefix cache must not skip the second count's prefill
      if (path === 'scheduler') await new DecodeScheduler(model).generate(prompt, { ...o, maxNew });
      else await generate(model, prompt, { ...o, maxNew });
      return { d: e.dispatches - d0, c: e.copies - c0, s: e.submits - s0, h: e.bindGroupHits - h0 };
    };
    const one = await count(1); // prefill + the first token
    const more = await count(1 + tokens);
    const per = (k: 'd' | 'c' | 's' | 'h') => (more[k] - one[k]) / tokens;
    perToken.push({ d: per('d'), c: per('c'), s: per('s'), h: per('h') });
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
    bindGroupHitRate: b.h / b.d,
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
  /**
   * LoRA training tokens/s on a minibatch of samples of different lengths (`trainMinibatch`), its
   * samples packed into one forward (TrainOptions.pack, the default) and one forward per sample,
   * timed alternately in the same process.
   */
  trainPackedTokensPerSec: number;
  trainPerSampleTokensPerSec: number;
  /** The lengths of that minibatch's samples (ids). */
  trainMinibatch: number[];
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

  // a minibatch of four samples of different lengths: packed vs one forward per sample, alternating
  const trainMinibatch = [seq / 2, seq, seq / 4, (3 * seq) / 4].map(Math.round);
  const minibatch = trainMinibatch.map((n, i) => ({
    ids: Array.from({ length: n }, () => rng.int(cfg.vocabSize)),
    promptLen: Math.round(n / 2),
    advantage: i % 2 ? -1 : 1,
  }));
  const modes = [
    { trainer: new LoraTrainer(model, { lr: 1e-4 }), ms: 0 },
    { trainer: new LoraTrainer(model, { lr: 1e-4, pack: false }), ms: 0 },
  ];
  for (const m of modes) await m.trainer.trainStep(minibatch); // warm-up
  const rounds = 3;
  for (let r = 0; r < rounds; r++) {
    for (const m of modes) {
      await sync();
      const t = performance.now();
      await m.trainer.trainStep(minibatch);
      await sync();
      m.ms += performance.now() - t;
    }
  }
  const minibatchTokens = rounds * trainMinibatch.reduce((a, n) => a + n - 1, 0);
  const [trainPackedTokensPerSec, trainPerSampleTokensPerSec] = modes.map((m) => minibatchTokens / (m.ms / 1000));
  for (const m of modes) m.trainer.dispose();
  e.trim();
  return {
    params,
    loraParams,
    decodeTokensPerSec,
    forwardTokensPerSec,
    trainTokensPerSec,
    trainPackedTokensPerSec: trainPackedTokensPerSec!,
    trainPerSampleTokensPerSec: trainPerSampleTokensPerSec!,
    trainMinibatch,
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

/** One configuration's peak of a LoRA training step, from the engine's allocator. */
interface TrainMemoryFigures {
  /** Device bytes the engine held at the step's peak (every pool buffer: base weights, adapter, optimiser, activations) at the full layout. */
  peakBytes: number;
  /** peakBytes / tokens. */
  peakBytesPerToken: number;
  /** The same peak less the base weights, per token (what grows with the sequence). */
  stepBytesPerToken: number;
  /** Peak of the tensors live at once (no pooled or released buffers) at the full layout. */
  peakLiveBytes: number;
  /** Whether the full-layout figures were measured (false: scaled from the reduced-layer variants). */
  fullLayoutMeasured: boolean;
  /** Per layer (the difference of the 1- and 2-layer variants) and the rest. */
  perLayerBytes: number;
  fixedBytes: number;
  /** Every variant run, unscaled. */
  measured: { layers: number; peakBytes: number; peakLiveBytes: number; baseWeightBytes: number }[];
}

export interface TrainMemoryBench {
  layout: string;
  layers: number;
  tokens: number;
  weights: WeightFormat;
  lora: { r: number; targets: string[] };
  /** 'replay': allocations replayed on a recording-only device (dry_run.ts); 'device': run on the adapter. */
  mode: 'replay' | 'device';
  /** Checkpointing on, LM head in chunks, temporaries recycled within the step (the trainer's defaults). */
  after: TrainMemoryFigures;
  /** The old path: full tape, one (T, V) LM-head chunk, released buffers reusable only after a flush. */
  before: TrainMemoryFigures;
  afterOverBefore: number;
  note: string;
}

/** A TensorStore stand-in of zeros (an allocation replay needs shapes only). */
export function zeroWeights(cfg: ModelConfig): TensorStore {
  const shapes = new Map(hfTensorSpecs(cfg).map((s) => [s.name, s.shape]));
  return {
    f32: (name: string) => new Float32Array(shapes.get(name)!.reduce((a, b) => a * b, 1)),
  } as unknown as TensorStore;
}

/**
 * Peak GPU bytes of one LoRA training step (forward, backward, AdamW; `tokens` tokens, all trained)
 * on `cfg`'s layout with a `weights` base, from the engine's allocator (Engine.peakDeviceBytes:
 * every pool buffer that exists, weights included), for the new path and the old one.
 * `replay` (default): on a recording-only device (dry_run.ts) with `e`'s adapter report, where the
 * allocator sees exactly what it sees on the adapter (no allocation depends on values), so the full
 * layout runs in seconds; with `replay: false` every variant runs on `e`'s device (a real GPU).
 * Variants: 1 and 2 layers (same widths and vocabulary; per layer = the difference, the rest =
 * what remains) and, when `full` (default: with replay), the full layout itself; without it the full
 * figures are the line through the two, labelled so (fullLayoutMeasured false).
 */
export async function benchTrainMemory(
  e: Engine,
  o: {
    cfg?: ModelConfig;
    tokens?: number;
    weights?: WeightFormat;
    r?: number;
    targets?: LoraModule[];
    replay?: boolean;
    full?: boolean;
  } = {},
): Promise<TrainMemoryBench> {
  const cfg = o.cfg ?? QWEN25_05B_CONFIG;
  const tokens = o.tokens ?? 1024;
  const weights = o.weights ?? 'bf16';
  const r = o.r ?? 8;
  const targets = o.targets ?? [...LORA_MODULES];
  const replay = o.replay ?? true;
  const full = (o.full ?? replay) && cfg.numLayers > 2;
  const rng = createRng(5);
  const ids = Array.from({ length: tokens + 1 }, () => rng.int(cfg.vocabSize));
  // every token trained, at a sampling temperature (the roles sample at T ≠ 1: one more chunk-sized tensor)
  const sample = [{ ids, promptLen: 1, advantage: 1, temperature: 0.7 }];
  const run = async (layers: number, newPath: boolean) => {
    const ctx = replay ? dryRunContext(e.ctx.report) : e.ctx;
    const eng = new Engine(ctx, { recycleInStep: newPath });
    const c = { ...cfg, numLayers: layers };
    const model = new LlamaModel<Tensor>(c, new GpuOps(eng), replay ? zeroWeights(c) : randomWeights(c), { weights });
    model.initLora(r, 2 * r, targets, 0);
    const trainer = new LoraTrainer(
      model,
      newPath ? { checkpoint: true } : { checkpoint: false, headChunkRows: Infinity },
    );
    eng.flush();
    await trainer.trainStep(sample);
    await eng.device.queue.onSubmittedWorkDone();
    const out = {
      layers,
      peakBytes: eng.peakDeviceBytes,
      peakLiveBytes: eng.peakLiveBytes,
      baseWeightBytes: model.weightBytes,
    };
    trainer.dispose();
    model.dispose();
    eng.flush();
    eng.trim();
    return out;
  };
  const figures = async (newPath: boolean): Promise<TrainMemoryFigures> => {
    const a = await run(1, newPath);
    const b = await run(2, newPath);
    const m = [a, b];
    const perLayerBytes = b.peakBytes - a.peakBytes;
    const fixedBytes = a.peakBytes - perLayerBytes;
    const line = (x: number, y: number) => x + (y - x) * (cfg.numLayers - 1);
    let top = {
      peakBytes: line(a.peakBytes, b.peakBytes),
      peakLiveBytes: line(a.peakLiveBytes, b.peakLiveBytes),
      baseWeightBytes: line(a.baseWeightBytes, b.baseWeightBytes),
    };
    if (full) {
      const f = await run(cfg.numLayers, newPath);
      m.push(f);
      top = f;
    }
    return {
      peakBytes: top.peakBytes,
      peakBytesPerToken: top.peakBytes / tokens,
      stepBytesPerToken: (top.peakBytes - top.baseWeightBytes) / tokens,
      peakLiveBytes: top.peakLiveBytes,
      fullLayoutMeasured: full,
      perLayerBytes,
      fixedBytes,
      measured: m,
    };
  };
  const after = await figures(true);
  const before = await figures(false);
  const how = replay
    ? 'allocations replayed on a recording-only device (dry_run.ts: the same tensor/release sequence as on the adapter, kernels not run)'
    : 'run on the adapter';
  const scope = full
    ? `the full ${cfg.numLayers}-layer layout (and 1- and 2-layer variants for the per-layer figure)`
    : `1- and 2-layer variants at the full widths and vocabulary, scaled linearly to ${cfg.numLayers} layers (per layer × ${cfg.numLayers} + the rest)`;
  return {
    layout: `${cfg.architecture} ${cfg.numLayers}×(hidden ${cfg.hiddenSize}, ${cfg.numHeads}/${cfg.numKvHeads} heads), vocabulary ${cfg.vocabSize}`,
    layers: cfg.numLayers,
    tokens,
    weights,
    lora: { r, targets: [...targets] },
    mode: replay ? 'replay' : 'device',
    after,
    before,
    afterOverBefore: after.peakBytes / before.peakBytes,
    note: `peak device bytes of one trainStep (engine allocator), ${how}; ${scope}; every token trained, temperature 0.7`,
  };
}

export interface MixedTrainMemory {
  /** Training steps run: one minibatch of four samples of mixed lengths, then single samples of other lengths. */
  steps: number;
  /** Sample lengths (tokens) per step. */
  lengths: number[][];
  /** Device bytes the engine holds at its peak over the whole run (size-classed pool). */
  peakBytes: number;
  /** Device bytes it holds after the last step (before any trim). */
  endBytes: number;
  /** The peak of one step of one `tokens`-token sample (the longest length of the run). */
  singlePeakBytes: number;
  /** peakBytes / singlePeakBytes */
  ratio: number;
  /** The same run with the pool by exact byte size and no evictions (the pool before size classes). */
  exactSizes: { peakBytes: number; endBytes: number; singlePeakBytes: number; ratio: number };
  note: string;
}

/**
 * Footprint of a long run of mixed lengths against one step (`trainMemory.mixed`): LoRA steps on
 * `cfg`'s layout (default Qwen2.5-0.5B, bf16 base) replayed on the recording-only device, one
 * minibatch of four samples of different lengths and then `steps − 1` single samples of other
 * lengths, all ≤ `tokens`; Engine.peakDeviceBytes over the run against one step of one
 * `tokens`-token sample, with the size-classed pool and with exact sizes.
 */
export async function benchTrainMemoryMixed(
  e: Engine,
  o: { cfg?: ModelConfig; tokens?: number; weights?: WeightFormat; steps?: number } = {},
): Promise<MixedTrainMemory> {
  const cfg = o.cfg ?? QWEN25_05B_CONFIG;
  const tokens = o.tokens ?? 1024;
  const weights = o.weights ?? 'bf16';
  const steps = Math.max(2, o.steps ?? 9);
  const rng = createRng(7);
  const len = () => Math.max(16, Math.round(tokens * (0.25 + 0.75 * rng.next())));
  const lengths = [[tokens, len(), len(), len()], ...Array.from({ length: steps - 1 }, () => [len()])];
  const sampleOf = (n: number) => ({
    ids: Array.from({ length: n + 1 }, () => rng.int(cfg.vocabSize)),
    promptLen: 1,
    advantage: 1,
    temperature: 0.7,
  });
  const run = async (plan: number[][], sizeClasses: boolean) => {
    const eng = new Engine(dryRunContext(e.ctx.report), { sizeClasses });
    const model = new LlamaModel<Tensor>(cfg, new GpuOps(eng), zeroWeights(cfg), { weights });
    model.initLora(8, 16, [...LORA_MODULES], 0);
    const trainer = new LoraTrainer(model);
    eng.flush();
    eng.resetPeak();
    for (const step of plan) await trainer.trainStep(step.map(sampleOf));
    eng.flush();
    const out = { peakBytes: eng.peakDeviceBytes, endBytes: eng.deviceBytes };
    trainer.dispose();
    model.dispose();
    eng.flush();
    eng.trim();
    return out;
  };
  const single = await run([[tokens]], true);
  const mixed = await run(lengths, true);
  const singleExact = await run([[tokens]], false);
  const mixedExact = await run(lengths, false);
  return {
    steps,
    lengths,
    peakBytes: mixed.peakBytes,
    endBytes: mixed.endBytes,
    singlePeakBytes: single.peakBytes,
    ratio: mixed.peakBytes / single.peakBytes,
    exactSizes: {
      peakBytes: mixedExact.peakBytes,
      endBytes: mixedExact.endBytes,
      singlePeakBytes: singleExact.peakBytes,
      ratio: mixedExact.peakBytes / singleExact.peakBytes,
    },
    note: `${cfg.architecture} ${cfg.numLayers} layers, ${weights} base, LoRA r 8 on every module; allocations replayed on a recording-only device (dry_run.ts); peaks include the weights`,
  };
}

/**
 * Small GPUs (`lowLimits`): the Qwen2.5-0.5B layout with a bf16 base loaded and decoding (prefill,
 * 4 tokens, two per read-back) on a recording-only device that reports `bindingMiB` MiB as
 * maxStorageBufferBindingSize (and WebGPU's default 256 MiB maxBufferSize), which refuses any
 * larger buffer or binding: ok when the load-time plan (the 272 MB embedding split by vocabulary
 * rows) fits, else the error.
 */
export async function benchLowLimits(
  e: Engine,
  bindingMiB = 128,
): Promise<{ bindingMiB: number; ok: boolean; error?: string }> {
  const limits = {
    ...e.ctx.report.limits,
    maxStorageBufferBindingSize: bindingMiB * 2 ** 20,
    maxBufferSize: 256 * 2 ** 20,
  };
  const eng = new Engine(dryRunContext({ ...e.ctx.report, limits }));
  try {
    const model = new LlamaModel<Tensor>(QWEN25_05B_CONFIG, new GpuOps(eng), zeroWeights(QWEN25_05B_CONFIG), {
      weights: 'bf16',
    });
    await generate(model, [1, 2, 3, 4, 5, 6, 7, 8], { maxNew: 4, temperature: 0.7, topP: 0.9, stepsPerReadback: 2 });
    model.dispose();
    return { bindingMiB, ok: true };
  } catch (err) {
    return { bindingMiB, ok: false, error: (err as Error).message };
  } finally {
    eng.flush();
    eng.trim();
  }
}
