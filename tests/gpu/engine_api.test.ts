// The engine worker's API in-process on the software adapter: load a checkpoint with its tokenizer
// (or a fresh tiny model built in memory), chat (streaming; replies carry their token ids and
// log π_old), count prompt tokens exactly, start an adapter, take token-exact GRPO steps on what
// was sampled, carry the optimiser state across an export/import, export PEFT.
import { describe, expect, it } from 'vitest';
import { createEngineApi, freshModelName } from '../../src/engine/engine_api.ts';
import { importPeft } from '../../src/engine/io/peft.ts';
import { decodeTrainerState } from '../../src/engine/train/train.ts';
import { nodeGpu, sharedNodeGpu } from '../../src/platform/node/gpu.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`engine API on WebGPU ${reason}`, () => {
  it('loads, chats token-exactly, trains an adapter on the sampled ids and exports it', async () => {
    const api = createEngineApi({ sharedDevice: sharedNodeGpu }); // the worker's device (gpu_setup.ts)
    const progress: number[] = [];
    const s = await api.load({ kind: 'memory', files: tinyCheckpointFiles('llama', 'f32', 5).files }, (p) =>
      progress.push(p.loaded),
    );
    expect(s).toMatchObject({ architecture: 'llama', layers: 2, adapter: null });
    expect(progress.at(-1)).toBe(s.bytes);
    const pieces: string[] = [];
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const r = await api.chat(messages, { max_tokens: 5, temperature: 1, seed: 3 }, (d) => pieces.push(d));
    expect(r.usage.completionTokens).toBeGreaterThan(0);
    expect(pieces.join('')).toBe(r.text);
    expect(await api.countTokens(messages)).toBe(r.tokens!.prompt.length);
    const t = r.tokens!;
    expect(t.completion).toHaveLength(r.usage.completionTokens);
    expect(t.logprobs).toHaveLength(t.completion.length);

    await expect(api.trainGrpo([])).rejects.toThrow('Start an adapter');
    expect(await api.exportState()).toBeNull(); // no adapter, no optimiser
    await api.initLora(4, 8, ['q_proj', 'v_proj'], 1);
    const start = t.prompt.length;
    const sample = {
      ids: [...t.prompt, ...t.completion],
      spans: [[start, start + t.completion.length]] as [number, number][],
      oldLogprobs: t.logprobs,
      advantage: 1,
      temperature: 1,
    };
    const first = await api.trainGrpo([sample], { lr: 1e-2 });
    // π_old is the sampling policy: before any update the ratio is 1 on the sampled ids
    expect(Math.abs(first.approxKl)).toBeLessThan(1e-4);
    expect(first.clipFraction).toBe(0);
    expect(first.trainedTokens).toBe(t.completion.length);
    expect(first.gradNorm).toBeGreaterThan(0);
    const second = await api.trainGrpo([sample], { lr: 1e-2 });
    expect(second.approxKl).not.toBe(first.approxKl); // the adapter moved

    const state = await api.exportState();
    expect(decodeTrainerState(state!).step).toBe(2);
    const { configJson, weights } = await api.exportAdapter();
    const adapter = importPeft(JSON.parse(configJson), weights);
    expect(adapter.config).toMatchObject({ r: 4, alpha: 8, targets: ['q_proj', 'v_proj'] });
    expect([...adapter.tensors.values()].some((x) => x.data.some((v) => v !== 0))).toBe(true);
    // a reload: adapter, then optimiser state, and the step count goes on
    await api.importAdapter(configJson, weights);
    await api.importState(state!);
    await api.trainGrpo([sample], { lr: 1e-2 });
    expect(decodeTrainerState((await api.exportState())!).step).toBe(3);
  });

  it('builds a tiny fresh model in memory and chats with it', async () => {
    const api = createEngineApi({ gpu: await nodeGpu() }); // a device of its own, destroyed on unload
    const fresh = { arch: 'qwen2' as const, layers: 1, hidden: 32, seed: 1 };
    const s = await api.load({ kind: 'fresh', ...fresh });
    expect(s).toMatchObject({ name: freshModelName(fresh), architecture: 'qwen2', layers: 1, hidden: 32, vocab: 259 });
    const r = await api.chat([{ role: 'user', content: 'hi' }], { max_tokens: 3, temperature: 1, seed: 1 });
    expect(r.tokens!.completion.length).toBeGreaterThan(0);
    await api.unload();
  });

  it('an engine on the shared device leaves it alive when it unloads; one on a device of its own does not touch it', async () => {
    const onShared = createEngineApi({ sharedDevice: sharedNodeGpu });
    await onShared.load({ kind: 'fresh', arch: 'qwen2', layers: 1, hidden: 32, seed: 3 });
    await onShared.unload();
    const shared = await sharedNodeGpu();
    expect(shared).toBe(ctx); // the same device as before: not destroyed, so not replaced
    let destroyed = false;
    void shared.device.lost.then(() => (destroyed = true));
    await shared.device.queue.onSubmittedWorkDone();
    expect(destroyed).toBe(false);
    const own = createEngineApi({ gpu: await nodeGpu() });
    const check = await own.selfCheck();
    expect(check.device).toBe('gpu');
    await own.unload();
    expect(await sharedNodeGpu()).toBe(ctx); // another engine's own device is not the shared one
  });

  it('serves concurrent chats together (equal to each alone); abort(id) stops one, abort() every one in flight', async () => {
    const api = createEngineApi({ sharedDevice: sharedNodeGpu }); // the worker's device (gpu_setup.ts)
    await api.load({ kind: 'fresh', arch: 'qwen2', layers: 1, hidden: 32, seed: 2 });
    const ask = (content: string, seed: number, max = 4, onToken?: (d: string) => void, id?: number) =>
      api.chat([{ role: 'user', content }], { max_tokens: max, temperature: 1, seed }, onToken, 'off', id);
    const alone = [await ask('one', 1), await ask('two', 2)];
    const together = await Promise.all([ask('one', 1), ask('two', 2)]);
    expect(together.map((r) => r.tokens!.completion)).toEqual(alone.map((r) => r.tokens!.completion));
    /** Two long replies in flight; once both have streamed, `stop` runs once. */
    const race = async (stop: () => void) => {
      const streamed = new Set<number>();
      let stopped = false;
      const on = (i: number) => () => {
        streamed.add(i);
        if (streamed.size === 2 && !stopped) {
          stopped = true;
          stop();
        }
      };
      const outcome = (p: Promise<{ usage: { completionTokens: number } }>) =>
        p.then(
          () => 'done',
          (e: Error) => e.name,
        );
      return Promise.all([outcome(ask('three', 3, 400, on(0), 11)), outcome(ask('four', 4, 400, on(1), 12))]);
    };
    expect(await race(() => api.abort(12))).toEqual(['done', 'AbortError']); // one call, by its id
    expect(await race(() => api.abort())).toEqual(['AbortError', 'AbortError']); // every call in flight
  });

  it('decodes as many chats in one step as the run asks (setDecodeBatch), before and after a load', async () => {
    const api = createEngineApi({ sharedDevice: sharedNodeGpu }); // the worker's device (gpu_setup.ts)
    await expect(api.setDecodeBatch(0)).rejects.toThrow(RangeError);
    await api.setDecodeBatch(1); // before any model: kept for the next load
    await api.load({ kind: 'fresh', arch: 'llama', layers: 1, hidden: 16, seed: 4 });
    const ask = (content: string, seed: number) =>
      api.chat([{ role: 'user', content }], { max_tokens: 3, temperature: 1, seed });
    // three 3-token replies: one sequence a step takes three times the steps of all three together
    await Promise.all([ask('one', 1), ask('two', 2), ask('three', 3)]);
    const one = await api.decodeStats();
    expect(one.maxBatch).toBe(1);
    expect(one.steps).toBeGreaterThanOrEqual(9);
    await api.setDecodeBatch(3);
    await Promise.all([ask('one', 1), ask('two', 2), ask('three', 3)]);
    const three = await api.decodeStats();
    expect(three.maxBatch).toBe(3);
    expect(three.steps - one.steps).toBeLessThanOrEqual(one.steps / 3 + 1);
  });
});
