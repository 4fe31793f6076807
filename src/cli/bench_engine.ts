/** `spade bench engine`: kept apart from the other benchmarks so it loads only the engine. */
import type { Engine } from '../engine/bench/kernels.ts';
import type { Args, Io } from './args.ts';

/**
 * `spade bench engine [--json] [--quick]` — on the adapter Node sees: matmul GFLOP/s at 1024² and
 * 4096×1024·1024 against the adapter's pure-FMA peak and against TensorFlow.js's WebGPU backend;
 * decode and LoRA-training tokens/s on BENCH_CONFIG; GPU bytes per base and trained parameter;
 * top-p sampling ms per token at a 151,936 vocabulary (CPU full sort, CPU, GPU); compute dispatches
 * per generated token for the Qwen2.5-0.5B layout (engine counter, reduced-layer variants scaled);
 * per base-weight format (f32, bf16, f16, q4): GPU bytes per base parameter and decode tokens/s;
 * aggregate decode tokens/s of the batching scheduler at batch 1, 8 and 16 and the speed-up over 1;
 * host ms per decoded token with one read-back per step against K = 8 steps per read-back
 * (`multiStepDecode`, same run); host ms to record and submit a 196-dispatch step (a Qwen2.5-0.5B
 * decode step's count) with the engine's bind-group cache off and on, and the scheduler's host ms
 * per decode step at batch 1 and 16 off and on, alternating (`stepTemplate`);
 * the decode KV cache's bytes
 * for the Qwen2.5-0.5B layout at 16 × 2,048 tokens in f32 and f16, and scheduler decode tokens/s
 * with f32 and f16 KV stores, alternating (`kvFormat`); the LM-head backward's product (55 rows,
 * hidden 896, the full vocabulary or 8,192 with --quick) without and with split-K, alternating
 * (`headBackwardSplitK`); LoRA train tokens/s of a mixed-length minibatch packed into one forward
 * against one forward per sample (`model.trainPackedTokensPerSec`, `model.trainPerSampleTokensPerSec`);
 * peak GPU bytes of one LoRA training step (Qwen2.5-0.5B layout, 1,024 tokens, bf16 base), now and
 * with the old path (no checkpointing, no chunked head, no recycling), and over a run of mixed
 * lengths against one step (`trainMemory.mixed`); whether the Qwen2.5-0.5B layout loads and
 * decodes under 128 MiB bindings (`lowLimits`, on a recording-only device).
 * --quick uses smaller sizes (for software adapters).
 */
export async function benchEngine(io: Io, a: Args): Promise<number> {
  const { acquireNodeGpu } = await import('../platform/node/gpu.ts');
  const { Engine } = await import('../engine/bench/kernels.ts');
  const { BENCH_CONFIG } = await import('../engine/bench/model.ts');
  const quick = a.flags.has('quick');
  const ctx = await acquireNodeGpu();
  const e = new Engine(ctx);
  try {
    const kernels = await benchKernels(e, quick);
    const { model, sampling } = await benchModelAndSampling(e, quick);
    const decode = await benchDecode(e, quick);
    const training = await benchTraining(e, quick);
    const result = {
      ok: true,
      adapter: ctx.report,
      ...kernels,
      model,
      sampling: {
        ...sampling,
        cpuFullSortMs: +sampling.cpuFullSortMs.toFixed(2),
        cpuMs: +sampling.cpuMs.toFixed(2),
        gpuMs: +sampling.gpuMs.toFixed(2),
      },
      ...decode,
      ...training,
    };
    if (a.flags.has('json')) io.out(JSON.stringify(result));
    else printEngine(io, result, BENCH_CONFIG.architecture);
    return 0;
  } finally {
    ctx.destroy();
  }
}

/** The benchmark model: BENCH_CONFIG, or with --quick two layers and a 4,096 vocabulary (a new object each call). */
async function benchConfig(quick: boolean) {
  const { BENCH_CONFIG } = await import('../engine/bench/model.ts');
  return quick ? { ...BENCH_CONFIG, numLayers: 2, vocabSize: 4096 } : BENCH_CONFIG;
}

/** The FMA peak and the matmuls, each against the peak and TensorFlow.js's WebGPU backend. */
async function benchKernels(e: Engine, quick: boolean) {
  const { nodeGpu } = await import('../platform/node/gpu.ts');
  const { benchFmaPeak, benchMatmul } = await import('../engine/bench/kernels.ts');
  const sizes: [number, number, number][] = quick
    ? [
        [256, 256, 256],
        [1024, 256, 256],
      ]
    : [
        [1024, 1024, 1024],
        [4096, 1024, 1024],
      ];
  const peak = await benchFmaPeak(e);
  const matmuls = [];
  for (const [m, n, k] of sizes) {
    const ours = await benchMatmul(e, m, n, k, quick ? 2 : 20);
    let peer: { gflops: number; library: string } | { error: string };
    try {
      const { benchPeerMatmul } = await import('../engine/bench/peer.ts');
      peer = await benchPeerMatmul(await nodeGpu(), m, n, k, quick ? 2 : 20);
    } catch (err) {
      peer = { error: (err as Error).message };
    }
    matmuls.push({
      m,
      n,
      k,
      gflops: +ours.toFixed(1),
      ofPeak: +(ours / peak).toFixed(3),
      peer:
        'gflops' in peer
          ? { ...peer, gflops: +peer.gflops.toFixed(1), oursOverPeer: +(ours / peer.gflops).toFixed(2) }
          : peer,
    });
  }
  return { fmaPeakGflops: +peak.toFixed(1), matmuls };
}

/** Decode, forward and LoRA-training throughput and memory on the benchmark model; top-p sampling. */
async function benchModelAndSampling(e: Engine, quick: boolean) {
  const { benchModel } = await import('../engine/bench/model.ts');
  const model = await benchModel(e, await benchConfig(quick), quick ? 32 : 128, quick ? 4 : 32);
  const { benchSampling } = await import('../engine/bench/sampling.ts');
  const sampling = await benchSampling(e, quick ? 3 : 20);
  return { model, sampling };
}

/**
 * Decoding: dispatches per token (batched and generate()), the scheduler's batches, multi-step
 * read-backs, the step template (bind-group cache) and the KV cache's formats.
 */
async function benchDecode(e: Engine, quick: boolean) {
  const { countDecodeDispatches } = await import('../engine/bench/model.ts');
  // --quick: a 4,096 vocabulary (dispatch counts do not depend on it)
  const dispatches = await countDecodeDispatches(e, undefined, quick ? 4096 : undefined);
  const dispatchesUnbatched = await countDecodeDispatches(
    e,
    undefined,
    quick ? 4096 : undefined,
    undefined,
    4,
    'generate',
  );
  const { benchBatchDecode } = await import('../engine/bench/batch.ts');
  const batchDecode = (
    await benchBatchDecode(e, await benchConfig(quick), {
      tokens: quick ? 8 : 16, // 4 steps were too few to time on a software adapter (2.2–2.7× vs 3.1× at 8)
    })
  ).map((r) => ({ ...r, tokensPerSec: +r.tokensPerSec.toFixed(1), speedup: +r.speedup.toFixed(2) }));
  const { benchMultiStepDecode } = await import('../engine/bench/multistep.ts');
  const ms = await benchMultiStepDecode(e, await benchConfig(quick), { k: 8, tokens: 16 });
  const multiStepDecode = {
    ...ms,
    hostMsPerTokenK1: +ms.hostMsPerTokenK1.toFixed(2),
    hostMsPerTokenK: +ms.hostMsPerTokenK.toFixed(2),
    ratio: +ms.ratio.toFixed(2),
    wallMsPerTokenK1: +ms.wallMsPerTokenK1.toFixed(1),
    wallMsPerTokenK: +ms.wallMsPerTokenK.toFixed(1),
  };
  const stepTemplate = await benchStepTemplates(e, quick);
  const { benchKvFormat } = await import('../engine/bench/kv_format.ts');
  const kv = await benchKvFormat(e, await benchConfig(quick), { tokens: 8 });
  const kvFormat = {
    ...kv,
    decode: {
      f32TokensPerSec: +kv.decode.f32TokensPerSec.toFixed(2),
      f16TokensPerSec: +kv.decode.f16TokensPerSec.toFixed(2),
      f16OverF32: +kv.decode.f16OverF32.toFixed(2),
    },
  };
  return { dispatches, dispatchesUnbatched, batchDecode, multiStepDecode, stepTemplate, kvFormat };
}

/** Recording a 196-dispatch step, and the scheduler's decode step at batch 1 and 16, with the bind-group cache off and on. */
async function benchStepTemplates(e: Engine, quick: boolean) {
  const { benchStepRecording, benchStepTemplate } = await import('../engine/bench/batch.ts');
  const rec = await benchStepRecording(e);
  const stepTemplate = {
    dispatches: rec.dispatches,
    hostMsPerStepOff: +rec.hostMsPerStepOff.toFixed(2),
    hostMsPerStepOn: +rec.hostMsPerStepOn.toFixed(2),
    ratio: +rec.ratio.toFixed(2),
    decode: [] as Awaited<ReturnType<typeof benchStepTemplate>>[],
  };
  for (const batch of [1, 16]) {
    const st = await benchStepTemplate(e, await benchConfig(quick), { batch, tokens: 8 });
    stepTemplate.decode.push({
      ...st,
      hostMsPerStepOff: +st.hostMsPerStepOff.toFixed(2),
      hostMsPerStepOn: +st.hostMsPerStepOn.toFixed(2),
      ratio: +st.ratio.toFixed(2),
      hitRate: +st.hitRate.toFixed(3),
    });
  }
  return stepTemplate;
}

/** The LM-head backward's split-K, the base-weight formats, a LoRA step's peak memory and the 128 MiB bindings. */
async function benchTraining(e: Engine, quick: boolean) {
  // the LM-head backward's product, no split vs the automatic split-K (--quick: an 8,192 vocabulary)
  const { benchHeadBackwardSplitK } = await import('../engine/bench/kernels.ts');
  const hb = await benchHeadBackwardSplitK(e, 55, quick ? 8192 : 151936, 896, quick ? 2 : 3);
  const headBackwardSplitK = {
    rows: 55,
    vocab: quick ? 8192 : 151936,
    hidden: 896,
    slices: hb.slices,
    msNoSplit: +hb.msNoSplit.toFixed(1),
    msAuto: +hb.msAuto.toFixed(1),
    ratio: +(hb.msNoSplit / hb.msAuto).toFixed(2),
  };
  const { benchWeightFormats } = await import('../engine/bench/model.ts');
  const weightFormats = (await benchWeightFormats(e, await benchConfig(quick), quick ? 4 : 32)).map((w) => ({
    ...w,
    bytesPerBaseParam: +w.bytesPerBaseParam.toFixed(4),
    qwen05bBytesPerBaseParam: +w.qwen05bBytesPerBaseParam.toFixed(4),
    decodeTokensPerSec: +w.decodeTokensPerSec.toFixed(1),
  }));
  // peak GPU bytes of one LoRA step on the Qwen2.5-0.5B layout, 1,024 tokens, bf16 base (a replay of the
  // allocations on a recording-only device: the real layout does not run on a software adapter)
  const { benchTrainMemory, benchTrainMemoryMixed } = await import('../engine/bench/model.ts');
  const mixed = await benchTrainMemoryMixed(e, { steps: quick ? 5 : 9 });
  const trainMemory = {
    ...(await benchTrainMemory(e, {})),
    mixed: {
      ...mixed,
      ratio: +mixed.ratio.toFixed(3),
      exactSizes: { ...mixed.exactSizes, ratio: +mixed.exactSizes.ratio.toFixed(3) },
    },
  };
  const { benchLowLimits } = await import('../engine/bench/model.ts');
  const lowLimits = await benchLowLimits(e, 128);
  return { headBackwardSplitK, weightFormats, trainMemory, lowLimits };
}

/** What `spade bench engine` measured. */
type EngineBench = { adapter: { vendor: string; architecture: string; description: string } } & Awaited<
  ReturnType<typeof benchKernels>
> &
  Awaited<ReturnType<typeof benchModelAndSampling>> &
  Awaited<ReturnType<typeof benchDecode>> &
  Awaited<ReturnType<typeof benchTraining>>;

/** The human-readable report; `arch`: the benchmark model's architecture. */
function printEngine(io: Io, bench: EngineBench, arch: string) {
  const { matmuls, model, sampling, dispatches, dispatchesUnbatched, batchDecode, multiStepDecode } = bench;
  const { stepTemplate, kvFormat, headBackwardSplitK, weightFormats, trainMemory, lowLimits } = bench;
  const mixed = trainMemory.mixed;
  io.out(`adapter: ${bench.adapter.vendor} / ${bench.adapter.architecture} ${bench.adapter.description}`);
  io.out(`FMA peak: ${bench.fmaPeakGflops.toFixed(1)} GFLOP/s`);
  for (const r of matmuls) {
    const p =
      'gflops' in r.peer
        ? `${r.peer.library} ${r.peer.gflops} GFLOP/s → ours ${r.peer.oursOverPeer}×`
        : `peer: ${r.peer.error}`;
    io.out(`matmul ${r.m}×${r.k}·${r.k}×${r.n}: ${r.gflops} GFLOP/s = ${(r.ofPeak * 100).toFixed(1)}% of peak; ${p}`);
  }
  io.out(
    `model (${(model.params / 1e6).toFixed(1)}M params): decode ${model.decodeTokensPerSec.toFixed(1)} tok/s · forward ${model.forwardTokensPerSec.toFixed(1)} tok/s · LoRA train ${model.trainTokensPerSec.toFixed(1)} tok/s (${model.trainOverForward.toFixed(2)}× forward)`,
  );
  io.out(
    `LoRA train, minibatch of ${model.trainMinibatch.join('+')} tokens: packed ${model.trainPackedTokensPerSec.toFixed(2)} tok/s · one forward per sample ${model.trainPerSampleTokensPerSec.toFixed(2)} tok/s (${(model.trainPackedTokensPerSec / model.trainPerSampleTokensPerSec).toFixed(2)}×)`,
  );
  io.out(
    `LM-head backward ${headBackwardSplitK.rows}×${headBackwardSplitK.vocab}·${headBackwardSplitK.vocab}×${headBackwardSplitK.hidden}: ${headBackwardSplitK.msNoSplit} ms unsplit · ${headBackwardSplitK.msAuto} ms with split-K auto (S = ${headBackwardSplitK.slices}; ${headBackwardSplitK.ratio}×)`,
  );
  io.out(
    `memory: ${model.bytesPerBaseParam.toFixed(2)} B per base parameter, ${model.bytesPerTrainedParam.toFixed(1)} B per trained parameter (${model.loraParams} LoRA params)`,
  );
  io.out(
    `top-p sampling at V=${sampling.vocab}: CPU full sort ${sampling.cpuFullSortMs.toFixed(2)} ms · CPU ${sampling.cpuMs.toFixed(2)} ms · GPU ${sampling.gpuMs.toFixed(2)} ms per token`,
  );
  io.out(
    `dispatches per generated token (${dispatches.layout}): ${dispatches.perToken} (${dispatches.fixed} + ${dispatches.perLayer} per layer), ${dispatches.copiesPerToken} copies, ${dispatches.submitsPerToken} submits, ${(dispatches.bindGroupHitRate * 100).toFixed(0)}% of bind groups from the cache — ${dispatches.note}`,
  );
  io.out(
    `  (the unbatched generate() path: ${dispatchesUnbatched.perToken} per token, ${dispatchesUnbatched.perLayer} per layer)`,
  );
  io.out(
    `batched decode (${arch}, scheduler): ${batchDecode.map((r) => `batch ${r.batch} ${r.tokensPerSec} tok/s (${r.speedup}×)`).join(' · ')}`,
  );
  io.out(
    `multi-step decode: host ${multiStepDecode.hostMsPerTokenK1} ms per token at 1 step per read-back → ${multiStepDecode.hostMsPerTokenK} ms at ${multiStepDecode.k} (${multiStepDecode.ratio}×; wall ${multiStepDecode.wallMsPerTokenK1} → ${multiStepDecode.wallMsPerTokenK} ms; same tokens: ${multiStepDecode.sameTokens})`,
  );
  io.out(
    `step template (bind-group cache): recording a ${stepTemplate.dispatches}-dispatch step ${stepTemplate.hostMsPerStepOff} ms with the cache off → ${stepTemplate.hostMsPerStepOn} ms on (${stepTemplate.ratio}×)`,
  );
  for (const st of stepTemplate.decode)
    io.out(
      `  scheduler decode, batch ${st.batch}: host ${st.hostMsPerStepOff} ms per step off → ${st.hostMsPerStepOn} ms on (${st.ratio}×; ${(st.hitRate * 100).toFixed(0)}% of bind groups from the cache; same tokens: ${st.sameTokens})`,
    );
  const gb = (b: number) => (b / 1e9).toFixed(2);
  io.out(
    `KV cache (Qwen2.5-0.5B layout, ${kvFormat.qwen05b.sequences} × ${kvFormat.qwen05b.tokens} tokens): f32 ${gb(kvFormat.qwen05b.f32Bytes)} GB · f16 ${gb(kvFormat.qwen05b.f16Bytes)} GB; decode (scheduler, batch ${kvFormat.batch}) f32 KV ${kvFormat.decode.f32TokensPerSec} tok/s · f16 KV ${kvFormat.decode.f16TokensPerSec} tok/s (${kvFormat.decode.f16OverF32}×)`,
  );
  io.out(
    `LoRA step memory (${trainMemory.layout}, ${trainMemory.tokens} tokens, ${trainMemory.weights} base, ${trainMemory.mode}): peak ${gb(trainMemory.after.peakBytes)} GB (${(trainMemory.after.peakBytesPerToken / 1e6).toFixed(2)} MB per token) · before ${gb(trainMemory.before.peakBytes)} GB → ${trainMemory.afterOverBefore.toFixed(3)}×`,
  );
  io.out(
    `LoRA memory over ${mixed.steps} steps of mixed lengths (≤ ${trainMemory.tokens} tokens): peak ${gb(mixed.peakBytes)} GB vs one step ${gb(mixed.singlePeakBytes)} GB → ${trainMemory.mixed.ratio}× (pool by exact sizes: ${gb(mixed.exactSizes.peakBytes)} GB, ${trainMemory.mixed.exactSizes.ratio}×)`,
  );
  io.out(
    `small GPUs: Qwen2.5-0.5B layout (bf16) under ${lowLimits.bindingMiB} MiB bindings: ${lowLimits.ok ? 'loads and decodes' : `fails: ${lowLimits.error}`}`,
  );
  for (const w of weightFormats)
    io.out(
      `weights ${w.format}: ${w.bytesPerBaseParam} B per base parameter (Qwen2.5-0.5B layout: ${w.qwen05bBytesPerBaseParam}) · decode ${w.decodeTokensPerSec} tok/s`,
    );
}
