// The engine's front door on the CPU references (EngineApi, in-process, as `spade run --backend local
// --device cpu` and `spade engine` use it): a checkpoint directory through the platform's reader, a
// refused directory where there is none, typed errors before a model or an adapter, logits equal to
// the model's own forward, token-id decoding (a batch equal to each prompt alone), a PEFT adapter in
// from a directory and out again, the optimiser state's null / step-0 / step-n, and the `local`
// ChatModel over the engine (EngineChatModel) whose replies carry the engine's token ids.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EngineStateError, ModelLoadError } from '../../src/core/errors.ts';
import { createEngineApi, EngineChatModel, engineCapabilities } from '../../src/engine/engine_api.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps } from '../../src/engine/ops/ops.ts';
import { decodeTrainerState } from '../../src/engine/train/train.ts';
import { nodeEngine } from '../../src/platform/node/engine.ts';
import { writeModelFiles } from '../../src/platform/node/model_files.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

const files = () => tinyCheckpointFiles('qwen2', 'f32', 3).files;

describe('EngineApi in-process on the CPU', () => {
  it('refuses calls before a model or an adapter with EngineStateError, and a directory with no reader', async () => {
    const api = createEngineApi({ device: 'cpu' });
    expect(await api.summary()).toBeNull();
    await expect(api.chat([{ role: 'user', content: 'hi' }])).rejects.toBeInstanceOf(EngineStateError);
    await expect(api.decode([[1, 2]], { maxNew: 2, temperature: 0 })).rejects.toBeInstanceOf(EngineStateError);
    await expect(api.load({ kind: 'dir', path: '/nowhere' })).rejects.toBeInstanceOf(ModelLoadError);
    await api.load({ kind: 'memory', files: files() });
    await expect(api.trainGrpo([])).rejects.toThrow(/Start an adapter/);
    await expect(api.exportAdapter()).rejects.toBeInstanceOf(EngineStateError);
    expect(await api.exportState()).toBeNull(); // no adapter, no optimiser
    expect(await api.selfCheck()).toEqual({ device: 'cpu', report: null, ok: true, maxAbsError: 0 });
  });

  it('loads a directory, gives the model’s logits and decodes a batch equal to each prompt alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-engine-api-'));
    await writeModelFiles(join(dir, 'tiny'), files());
    const api = await nodeEngine('cpu');
    const s = await api.load({ kind: 'dir', path: join(dir, 'tiny') }, undefined, { tokenizer: false });
    expect(s).toMatchObject({ name: 'tiny', architecture: 'qwen2', layers: 2, chat: false, adapter: null });
    await expect(api.countTokens([{ role: 'user', content: 'x' }])).rejects.toThrow(/without its tokenizer/);

    // the same numbers as the model built by hand from the same files
    const ck = await loadCheckpoint(new MemoryModelFiles(files()), { tokenizer: false });
    const ref = new LlamaModel(ck.config, new CpuOps(), ck.weights);
    const ids = [5, 17, 99, 3];
    const want = await ref.ops.read(ref.forward(ids, { lastOnly: false }).logits);
    const rows = await api.logits(ids, { all: true });
    expect(rows).toHaveLength(ids.length);
    expect(Array.from(rows[3]!)).toEqual(Array.from(want.subarray(3 * s.vocab, 4 * s.vocab)));
    expect(Array.from((await api.logits(ids))[0]!)).toEqual(Array.from(rows[3]!));
    await expect(api.logits([s.vocab])).rejects.toThrow(RangeError);

    const prompts = [
      [1, 2, 3],
      [40, 41],
      [7, 8, 9, 10],
    ];
    const o = { maxNew: 5, temperature: 1, seed: 11, stopIds: [] };
    const together = await api.decode(prompts, o);
    // prompt i samples with seed + i, as when it is decoded alone
    const alone = [];
    for (const [i, p] of prompts.entries()) alone.push((await api.decode([p], { ...o, seed: 11 + i }))[0]);
    expect(together).toEqual(alone);
    expect(together.every((t) => t.length === 5)).toBe(true);
    await api.unload();
    expect(await api.summary()).toBeNull();
  });

  it('takes a PEFT adapter in from a directory and out again, and counts optimiser steps', async () => {
    const api = await nodeEngine('cpu');
    await api.load({ kind: 'memory', files: files() });
    await api.initLora(4, 8, ['q_proj', 'v_proj'], 2);
    expect(decodeTrainerState((await api.exportState())!).step).toBe(0); // an adapter, no step yet
    const chat = new EngineChatModel(api, 'tiny', engineCapabilities((await api.summary())!));
    const r = await chat.chat([{ role: 'user', content: 'hi' }], { max_tokens: 4, temperature: 1, seed: 1 });
    const t = r.tokens!;
    expect(await chat.countTokens([{ role: 'user', content: 'hi' }])).toBe(t.prompt.length);
    const sample = {
      ids: [...t.prompt, ...t.completion],
      spans: [[t.prompt.length, t.prompt.length + t.completion.length]] as [number, number][],
      oldLogprobs: t.logprobs,
      advantage: 1,
      temperature: 1,
    };
    await api.trainGrpo([sample], { lr: 1e-2 });
    expect(decodeTrainerState((await api.exportState())!).step).toBe(1);

    const out = await api.exportAdapter();
    const dir = await mkdtemp(join(tmpdir(), 'spade-engine-adapter-'));
    await writeModelFiles(
      dir,
      new Map<string, Uint8Array | string>([
        ['adapter_config.json', out.configJson],
        ['adapter_model.safetensors', out.weights],
      ]),
    );
    const other = await nodeEngine('cpu');
    await other.load({ kind: 'memory', files: files() });
    expect(await other.logits(sample.ids)).not.toEqual(await api.logits(sample.ids)); // the base alone
    expect((await other.loadAdapter({ kind: 'dir', path: dir })).adapter).toEqual({
      r: 4,
      alpha: 8,
      targets: ['q_proj', 'v_proj'],
    });
    // the trained adapter came across: both engines give the same logits
    expect(await other.logits(sample.ids)).toEqual(await api.logits(sample.ids));
  });
});
