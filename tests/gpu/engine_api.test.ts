// The engine worker's API in-process on the software adapter: load a checkpoint with its
// tokenizer, chat (streaming), start an adapter, take GRPO steps on chat samples, export PEFT.
import { describe, expect, it } from 'vitest';
import { createEngineApi } from '../../src/engine/engine_api.ts';
import { importPeft } from '../../src/engine/io/peft.ts';
import { nodeGpu } from '../../src/platform/node/gpu.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`engine API on WebGPU ${reason}`, () => {
  it('loads, chats, trains an adapter on chat samples and exports it', async () => {
    const api = createEngineApi({ gpu: await nodeGpu() });
    const progress: number[] = [];
    const s = await api.load({ kind: 'memory', files: tinyCheckpointFiles('llama', 'f32', 5).files }, (p) =>
      progress.push(p.loaded),
    );
    expect(s).toMatchObject({ architecture: 'llama', layers: 2, adapter: null });
    expect(progress.at(-1)).toBe(s.bytes);
    const pieces: string[] = [];
    const r = await api.chat([{ role: 'user', content: 'hi' }], { max_tokens: 5, temperature: 0 }, (d) =>
      pieces.push(d),
    );
    expect(r.usage.completionTokens).toBeGreaterThan(0);
    expect(pieces.join('')).toBe(r.text);
    await expect(api.trainStep([])).rejects.toThrow('Start an adapter');
    api.initLora(4, 8, ['q_proj', 'v_proj'], 1);
    const sample = {
      role: 'agent' as const,
      prompt: [{ role: 'user' as const, content: 'play' }],
      completion: '\\boxed{7}',
      advantage: 1,
    };
    const steps = [];
    for (let i = 0; i < 2; i++)
      steps.push(await api.trainStep([sample, { ...sample, completion: '\\boxed{1}', advantage: -1 }], { lr: 1e-2 }));
    expect(steps[0]!.samples).toBe(2);
    expect(steps[0]!.gradNorm).toBeGreaterThan(0);
    // on-policy GRPO: L = −mean A at ratio 1 whatever the adapter, so the gradient shows the move
    expect(steps[1]!.gradNorm).not.toBe(steps[0]!.gradNorm); // the adapter moved
    const { configJson, weights } = await api.exportAdapter();
    const adapter = importPeft(JSON.parse(configJson), weights);
    expect(adapter.config).toMatchObject({ r: 4, alpha: 8, targets: ['q_proj', 'v_proj'] });
    expect([...adapter.tensors.values()].some((t) => t.data.some((x) => x !== 0))).toBe(true);
  });
});
