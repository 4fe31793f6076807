// The CPU backend's multi-step decode operations (ops.ts): idTensor, sampleInto, embeddingAt and
// readIdTensor agree with sample() and embedding() on host ids; generate() on the CPU decodes one
// step per read-back whatever stepsPerReadback says (nothing to read back), with the same tokens.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { generate } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

describe('CpuOps multi-step decode operations', () => {
  it('sampleInto writes the id sample() returns; embeddingAt gathers the rows embedding() does', async () => {
    const ops = new CpuOps();
    const rng = createRng(1);
    const v = 300;
    const logits = ops.upload(
      [1, v],
      Float32Array.from({ length: v }, () => (rng.next() - 0.5) * 12),
    );
    const us = [0.1, 0.5, 0.93].map(Math.fround);
    const rand = ops.upload([3], Float32Array.from(us));
    const ids = ops.idTensor(3);
    const o = { temperature: 0.8, topK: 40, topP: 0.9 };
    for (let j = 0; j < 3; j++) ops.sampleInto(logits, o, rand, j, ids, j);
    const got = await ops.readIdTensor(ids);
    const want = await Promise.all(us.map(async (u) => (await ops.sample(logits, o, [u]))[0]!));
    expect(got).toEqual(want);
    expect(new Set(got).size).toBeGreaterThan(1);
    const table = ops.upload(
      [v, 4],
      Float32Array.from({ length: v * 4 }, (_, i) => i),
    );
    expect(ops.embeddingAt(table, ids, 1, 2).data).toEqual(ops.embedding(table, got.slice(1, 3)).data);
  });

  it('generate() on the CPU gives the same tokens for any stepsPerReadback', async () => {
    const ck = tinyCheckpointFiles('llama', 'f32', 2, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const model = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    const o = { maxNew: 7, temperature: 1.2, seed: 3 };
    const want = await generate(model, [4, 5, 6], o);
    expect(await generate(model, [4, 5, 6], { ...o, stepsPerReadback: 3 })).toEqual(want);
  });
});
