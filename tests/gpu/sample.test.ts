// GPU sampling (kernels/sample*.wgsl) against the CPU reference (sample.ts) on the software
// adapter: random logits for each filter combination, ties, a 151,936-wide row (Qwen2.5's
// vocabulary), rows whose candidates overflow the sorted path and the candidate buffer, NaN and
// ±Infinity rows (NonFiniteLogitsError), generation on the GPU against generation on the CPU,
// and the GPU KV-cache append.
import { describe, expect, it } from 'vitest';
import { NonFiniteLogitsError } from '../../src/core/errors.ts';
import { createRng } from '../../src/core/rng.ts';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { readIds, sample, sampleCpu } from '../../src/engine/kernels/sample.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, GpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import type { SampleOptions } from '../../src/engine/kernels/sample_cpu.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/** Sums of three uniforms (bell-shaped) times `spread`, with some exact duplicates (ties). */
function randomLogits(n: number, seed: number, spread: number): Float32Array {
  const rng = createRng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (rng.next() + rng.next() + rng.next() - 1.5) * spread;
  for (let i = 0; i < n / 50; i++) out[rng.int(n)] = out[rng.int(n)]!;
  return out;
}

/** Uniforms as the GPU sees them (f32), so the CPU reference gets the same values. */
const f32Uniforms = (n: number, seed: number) => {
  const rng = createRng(seed);
  return Array.from({ length: n }, (_, i) => (i === 0 ? 0 : Math.fround(rng.next())));
};

const COMBOS: SampleOptions[] = [
  { temperature: 0 },
  { temperature: 1 },
  { temperature: 0.7, topP: 0.9 },
  { temperature: 1, topK: 7 },
  { temperature: 1.2, topK: 30, topP: 0.8 },
  { temperature: 1, minP: 0.1 },
  { temperature: 0.6, topK: 50, topP: 0.95, minP: 0.05 },
  { temperature: 1, topK: 1 },
  { temperature: 1, topP: 0 },
];

describe.skipIf(!ctx)(`sample on WebGPU ${reason}`, () => {
  const e = new Engine(ctx!);
  const run = async (logits: Float32Array, v: number, o: SampleOptions, u: number[]) => {
    const t = e.tensor([logits.length / v, v], logits);
    const ids = await readIds(e, sample(e, t, o, u));
    e.release(t);
    e.flush();
    return ids;
  };

  it('equals the CPU reference when a logit bias pushes half the row to -1e9 (the histogram grid stays in range)', async () => {
    const v = 259;
    const rng = createRng(5);
    const row = new Float32Array(v);
    for (let i = 0; i < v; i++) row[i] = (rng.next() - 0.5) * 4 + (i % 2 === 0 ? -1e9 : 0);
    const bad: string[] = [];
    // one filtered call first: its buffers, back in the pool, held what a wrong count read before
    for (const o of [
      { temperature: 0.7, topP: 0.9 },
      { temperature: 1, topP: 0.5 },
      { temperature: 0.7, minP: 0.05 },
    ])
      for (let k = 0; k < 12; k++) {
        const u = (k + 0.5) / 12;
        const [g] = await run(row, v, o, [u]);
        const [c] = sampleCpu(row, v, o, [u]);
        if (g !== c || g! % 2 === 0) bad.push(`${JSON.stringify(o)} u ${u}: GPU ${g}, CPU ${c}`);
      }
    expect(bad).toEqual([]);
  });

  it('equals the CPU reference for every filter combination (B = 8 rows, V = 1000)', async () => {
    const v = 1000;
    const b = 8;
    const logits = randomLogits(b * v, 1, 10);
    const seen = new Set<number>();
    for (const [n, o] of COMBOS.entries()) {
      const u = f32Uniforms(b, 10 + n);
      const want = sampleCpu(logits, v, o, u);
      expect(await run(logits, v, o, u), JSON.stringify(o)).toEqual(want);
      for (const id of want) seen.add(id);
    }
    expect(seen.size).toBeGreaterThan(20); // the rows and draws really differ
  });

  it('resolves equal logits to the lowest id, like the CPU', async () => {
    const logits = Float32Array.from([0, 3, 1, 3, 3, 1, -2, 3]);
    for (const o of [{ temperature: 0 }, { temperature: 1, topK: 2 }, { temperature: 1, topP: 0.5 }])
      for (const u of [0, 0.3, 0.7, 0.999]) {
        expect(await run(logits, 8, o, [u]), `${JSON.stringify(o)} u=${u}`).toEqual(sampleCpu(logits, 8, o, [u]));
      }
    expect(await run(logits, 8, { temperature: 0 }, [0])).toEqual([1]);
  });

  it("a 151,936-wide row (Qwen2.5's vocabulary): top-p, top-k + min-p, no filter, greedy", async () => {
    const v = 151_936;
    const logits = randomLogits(2 * v, 3, 14);
    for (const o of [
      { temperature: 0.6, topP: 0.95 },
      { temperature: 1, topK: 40, minP: 0.05 },
      { temperature: 1 },
      { temperature: 0 },
    ]) {
      const u = f32Uniforms(2, 7);
      u[0] = Math.fround(0.61803);
      expect(await run(logits, v, o, u), JSON.stringify(o)).toEqual(sampleCpu(logits, v, o, u));
    }
  });

  it('flat rows: more candidates than the sorted path holds (searched) and than the buffer holds (whole row)', async () => {
    // spread 0.5: nearly uniform p, so top-p 0.9 keeps ~90% of the row
    for (const [v, o] of [
      [6000, { temperature: 1, topP: 0.9 }],
      [6000, { temperature: 1, topK: 3000, topP: 0.95 }],
      [40_000, { temperature: 1, topP: 0.9, minP: 0.5 }],
      [40_000, { temperature: 1, topP: 0.99 }],
    ] as [number, SampleOptions][]) {
      const logits = randomLogits(2 * v, 5, 0.5);
      const u = f32Uniforms(2, 9);
      u[0] = Math.fround(0.4142);
      expect(await run(logits, v, o, u), `V=${v} ${JSON.stringify(o)}`).toEqual(sampleCpu(logits, v, o, u));
    }
  });

  it('a row holding NaN or ±Infinity is a NonFiniteLogitsError naming the row, on every path', async () => {
    const v = 5000;
    for (const bad of [NaN, Infinity, -Infinity])
      for (const o of [
        { temperature: 0 },
        { temperature: 1 },
        { temperature: 0.7, topP: 0.9 },
        { temperature: 1, topK: 5 },
      ]) {
        const logits = randomLogits(3 * v, 2, 10);
        logits[v + 1234] = bad; // row 1
        const err = await run(logits, v, o, [0.5, 0.5, 0.5]).catch((x: unknown) => x);
        expect(err, `${bad} ${JSON.stringify(o)}`).toBeInstanceOf(NonFiniteLogitsError);
        expect((err as NonFiniteLogitsError).data).toMatchObject({ row: 1 });
      }
    // the engine goes on sampling finite rows afterwards
    const ok = randomLogits(v, 3, 10);
    expect(await run(ok, v, { temperature: 0 }, [0])).toEqual(sampleCpu(ok, v, { temperature: 0 }, [0]));
  });

  it('generation sampled on the GPU equals generation sampled on the CPU (temperature, top-k, top-p)', async () => {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const cpu = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    const gpu = new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights);
    const o = { maxNew: 8, temperature: 1.5, topK: 100, topP: 0.95, seed: 4 };
    const want = await generate(cpu, [5, 17, 99, 3], o);
    expect(new Set(want).size).toBeGreaterThan(3); // really sampled, not a repeated argmax
    expect(await generate(gpu, [5, 17, 99, 3], o)).toEqual(want);
  });

  it('GpuOps.appendRows keeps earlier rows when the cache grows past its first allocation', async () => {
    const ops = new GpuOps(e);
    const rows = (n: number, start: number) =>
      ops.upload(
        [n, 2, 3],
        Float32Array.from({ length: n * 6 }, (_, i) => start * 6 + i),
      );
    let store = ops.appendRows(undefined, 0, rows(40, 0));
    store = ops.appendRows(store, 40, rows(30, 40)); // 70 rows > 64: grows
    store = ops.appendRows(store, 70, rows(1, 70));
    const got = await ops.read(ops.view(store, [71, 2, 3]));
    expect(Array.from(got)).toEqual(Array.from({ length: 71 * 6 }, (_, i) => i));
  });
});
