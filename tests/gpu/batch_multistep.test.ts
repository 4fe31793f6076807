// Multi-step decode in the DecodeScheduler on the WebGPU kernels (batch.ts, stepsPerReadback): a
// batch of mixed-length requests with different stop conditions (a stop id inside a block, maxNew
// not a multiple of K, an onToken that aborts as a stop string does), per-request sampling options,
// a logit bias and log-probs gives the same ids and log-probs for K = 1, 4 and 8, each step's
// sampled ids read by the next step's embedding on the device, with one read-back per block.
// Tiny: 2 layers, hidden 32, vocab 272 (SwiftShader is slow).
import { describe, expect, it, vi } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { generate, type GenerateOptions } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const ids = (n: number, seed: number) => {
  const rng = createRng(seed);
  return Array.from({ length: n }, () => rng.int(256));
};

describe.skipIf(!ctx)(`multi-step batched decoding on WebGPU ${reason}`, () => {
  it('gives the ids and log-probs of one step per read-back for K = 4 and 8, with fewer read-backs', async () => {
    const e = new Engine(ctx!);
    const ck = tinyCheckpointFiles('llama', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const m = new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights);
    const V = m.cfg.vocabSize;
    const bias = new Float32Array(V);
    for (let i = 0; i < V; i += 2) bias[i] = -1e9; // odd ids only
    const free = await generate(m, ids(9, 2), { maxNew: 20, temperature: 1, seed: 1 });
    const make = () => {
      const stopping = new AbortController();
      let seen = 0;
      return [
        { prompt: ids(5, 1), o: { maxNew: 11, temperature: 0, logprobs: [] } },
        { prompt: ids(9, 2), o: { maxNew: 20, temperature: 1, seed: 1, stopIds: [free[5]!] } },
        { prompt: ids(14, 3), o: { maxNew: 13, temperature: 0.7, seed: 2, logitBias: bias, logprobs: [] } },
        { prompt: ids(2, 4), o: { maxNew: 6, temperature: 1.3, topK: 20, topP: 0.9, seed: 3 } },
        {
          prompt: ids(20, 5),
          o: {
            maxNew: 20,
            temperature: 0.9,
            seed: 4,
            signal: stopping.signal,
            onToken: () => void (++seen === 7 && stopping.abort()),
          },
        },
      ] as { prompt: number[]; o: GenerateOptions }[];
    };
    const runs: { tokens: number[][]; logprobs: number[][]; reads: number }[] = [];
    for (const k of [1, 4, 8]) {
      const s = new DecodeScheduler(m, { stepsPerReadback: k });
      const reads = vi.spyOn(e, 'read');
      const reqs = make();
      const tokens = await Promise.all(reqs.map((r) => s.generate(r.prompt, r.o)));
      runs.push({ tokens, logprobs: reqs.map((r) => r.o.logprobs ?? []), reads: reads.mock.calls.length });
      reads.mockRestore();
      s.dispose();
    }
    const [one, ...more] = runs;
    expect(one!.tokens[0]).toHaveLength(11);
    expect(one!.tokens[1]!.length).toBeLessThanOrEqual(6);
    expect(one!.tokens[2]!.every((id) => id % 2 === 1)).toBe(true);
    expect(one!.tokens[4]).toHaveLength(7);
    expect(new Set(one!.tokens[2]).size).toBeGreaterThan(3);
    more.forEach((r, i) => {
      expect(r.tokens, `K=${[4, 8][i]}`).toEqual(one!.tokens);
      expect(r.logprobs, `K=${[4, 8][i]} log-probs`).toEqual(one!.logprobs);
      expect(r.reads, `K=${[4, 8][i]} read-backs`).toBeLessThan(one!.reads / 2);
    });
    m.dispose();
  });
});
