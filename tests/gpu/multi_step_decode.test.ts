// GPU-resident multi-step decode (generate.ts, stepsPerReadback): K decode steps recorded before
// one read-back, each step's sampled id read by the next step's embedding on the device. The
// tokens must equal the one-step-per-read-back path for every K — greedy and sampled, f32 and a
// packed (bf16) embedding table, a stop id mid-block (ids past it discarded) and maxNew not a
// multiple of K — and `spade engine generate --steps-per-readback K` prints the same tokens for every K.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { generate, type GenerateOptions } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { tinyCheckpointFiles, writeTinyCheckpoint } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`multi-step decode on WebGPU ${reason}`, () => {
  const e = new Engine(ctx!);

  async function gpuModel(weights: 'f32' | 'bf16') {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 1, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    return new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights, { weights });
  }

  it('gives the tokens of one step per read-back for every K (greedy, sampled; f32 and bf16 tables)', async () => {
    for (const weights of ['f32', 'bf16'] as const) {
      const model = await gpuModel(weights);
      for (const o of [
        { maxNew: 11, temperature: 0 },
        { maxNew: 11, temperature: 1.3, topK: 60, topP: 0.95, seed: 3 },
        { maxNew: 11, temperature: 1.1, seed: 8 },
      ] as GenerateOptions[]) {
        const want = await generate(model, [5, 17, 99, 3], o);
        expect(want).toHaveLength(11);
        if (o.temperature > 0) expect(new Set(want).size).toBeGreaterThan(3);
        for (const k of [3, 16]) {
          const reads = vi.spyOn(e, 'read');
          const got = await generate(model, [5, 17, 99, 3], { ...o, stepsPerReadback: k });
          expect(got, `${weights} K=${k}`).toEqual(want);
          expect(reads, 'one read-back per K steps').toHaveBeenCalledTimes(Math.ceil(11 / k));
          reads.mockRestore();
        }
      }
      model.dispose();
    }
  });

  it('stops at a stop id inside a block: later ids are discarded and never streamed', async () => {
    const model = await gpuModel('f32');
    const o: GenerateOptions = { maxNew: 12, temperature: 1.3, seed: 5 };
    const free = await generate(model, [9, 8, 7], o);
    const stopIds = [free[5]!]; // the first occurrence is at or before index 5
    const want = await generate(model, [9, 8, 7], { ...o, stopIds });
    expect(want.length).toBeLessThanOrEqual(6);
    for (const k of [4, 8]) {
      const streamed: number[] = [];
      const got = await generate(model, [9, 8, 7], {
        ...o,
        stopIds,
        stepsPerReadback: k,
        onToken: (id) => streamed.push(id),
      });
      expect(got, `K=${k}`).toEqual(want);
      expect(streamed).toEqual(want);
    }
    model.dispose();
  });

  it('`spade engine generate --steps-per-readback K` prints the same tokens for K = 1, 3 and the default', async () => {
    const d = join(await mkdtemp(join(tmpdir(), 'spade-multistep-')), 'tiny');
    await writeTinyCheckpoint(d, 'qwen2', 'f32', 2);
    const run = async (...extra: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const args = ['engine', 'generate', '--model', d, '--tokens', '3,1,4', '--max-new', '9'];
      const code = await main([...args, '--temperature', '1.2', '--seed', '4', ...extra, '--json'], {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
      });
      expect(code, err.join('\n')).toBe(0);
      return JSON.parse(out[out.length - 1]!).tokens as number[];
    };
    const one = await run('--steps-per-readback', '1');
    expect(one).toHaveLength(9);
    expect(await run('--steps-per-readback', '3')).toEqual(one);
    expect(await run()).toEqual(one);
  });

  it('several prompts (the scheduler) print the same tokens for every --steps-per-readback K', async () => {
    const d = join(await mkdtemp(join(tmpdir(), 'spade-multistep-')), 'tiny');
    await writeTinyCheckpoint(d, 'qwen2', 'f32', 2);
    const run = async (...extra: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const prompts = ['--tokens', '3,1,4', '--tokens', '1,5', '--tokens', '9,2,6,5'];
      const args = ['engine', 'generate', '--model', d, ...prompts, '--max-new', '6', '--max-batch', '2'];
      const code = await main([...args, '--temperature', '1.1', '--seed', '2', ...extra, '--json'], {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
      });
      expect(code, err.join('\n')).toBe(0);
      return (JSON.parse(out[out.length - 1]!).batch as { tokens: number[] }[]).map((b) => b.tokens);
    };
    const one = await run('--steps-per-readback', '1');
    expect(one.map((t) => t.length)).toEqual([6, 6, 6]);
    expect(await run('--steps-per-readback', '4')).toEqual(one);
    expect(await run()).toEqual(one);
  });
});
