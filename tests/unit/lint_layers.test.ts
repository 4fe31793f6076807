// The layering of docs/architecture.md, as eslint.config.js enforces it: a probe file placed in each
// layer imports from every other one, and ESLint (the project's own config, through its Node API)
// must flag exactly the upward imports — static, type-only, re-exported and dynamic.
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

const LAYER_RULES = new Set(['no-restricted-imports', 'no-restricted-syntax']);

let eslint: ESLint;
beforeAll(() => {
  eslint = new ESLint({ cwd: new URL('../..', import.meta.url).pathname });
});

/** Layer-rule messages for `code` linted as if it were the file at `filePath`. */
async function layerErrors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result!.messages.filter((m) => m.ruleId && LAYER_RULES.has(m.ruleId)).map((m) => m.message);
}

// [the probe file, an import it must not make, one it may make]
const CASES: [string, string, string][] = [
  ['src/core/probe.ts', '../platform/node/gpu.ts', './rng.ts'],
  ['src/core/spade/probe.ts', '../../engine/model.ts', '../llm/chat_model.ts'],
  ['src/core/llm/probe.ts', '../../platform/rpc.ts', '../errors.ts'],
  ['src/core/probe.ts', '../state/app.svelte.ts', './config.ts'],
  ['src/core/probe.ts', '../ui/App.svelte', './errors.ts'],
  ['src/core/probe.ts', '../cli/spade.ts', './store.ts'],
  ['src/engine/probe.ts', '../platform/node/gpu.ts', '../core/rng.ts'],
  ['src/engine/kernels/probe.ts', '../../platform/rpc.ts', '../runtime/runtime.ts'],
  ['src/engine/probe.ts', '../state/gpu.svelte.ts', './device.ts'],
  // the engine's rooms: io → runtime → kernels → ops → model → train → lab → bench
  ['src/engine/kernels/probe.ts', '../model/model.ts', '../runtime/runtime.ts'],
  ['src/engine/io/probe.ts', '../runtime/runtime.ts', '../../core/rng.ts'],
  ['src/engine/model/probe.ts', '../train/train.ts', '../ops/ops.ts'],
  ['src/engine/train/probe.ts', '../bench/model.ts', '../model/model.ts'],
  ['src/platform/node/probe.ts', '../../cli/spade.ts', '../../engine/device.ts'],
  ['src/platform/browser/probe.ts', '../../state/app.svelte.ts', '../rpc.ts'],
  ['src/platform/browser/probe.ts', '../../../workers/engine.worker.ts', '../rpc.ts'],
  ['workers/probe.ts', '../src/state/run.svelte.ts', '../src/platform/browser/model_cache.ts'],
  ['src/state/probe.svelte.ts', '../ui/App.svelte', '../platform/browser/idb_store.ts'],
  ['src/ui/Probe.svelte', '../platform/browser/idb_store.ts', '../state/app.svelte.ts'],
  ['src/ui/Probe.svelte', '../engine/device.ts', '../core/config.ts'],
  ['src/cli/probe.ts', '../state/run.svelte.ts', '../platform/node/gpu.ts'],
];

const wrap = (file: string, body: string) =>
  file.endsWith('.svelte') ? `<script lang="ts">\n${body}\n</script>\n` : body;

describe('eslint enforces the layering', () => {
  it.each(CASES)('%s must not import %s (may import %s)', async (file, upward, allowed) => {
    const bad = await layerErrors(file, wrap(file, `import '${upward}';\n`));
    expect(bad, `${file} importing ${upward}`).toHaveLength(1);
    const layer = file.startsWith('workers/') ? 'workers/' : file.split('/').slice(0, 2).join('/');
    expect(bad[0]).toContain(layer); // the message names the layer and says what to do
    expect(await layerErrors(file, wrap(file, `import '${allowed}';\n`))).toEqual([]);
  });

  it('catches type-only imports, re-exports and dynamic imports from the core', async () => {
    const file = 'src/core/probe.ts';
    expect(
      await layerErrors(file, `import type { Engine } from '../engine/runtime.ts';\nexport type E = Engine;\n`),
    ).toHaveLength(1);
    expect(await layerErrors(file, `export { acquireNodeGpu } from '../platform/node/gpu.ts';\n`)).toHaveLength(1);
    expect(await layerErrors(file, `export const gpu = () => import('../platform/node/gpu.ts');\n`)).toHaveLength(1);
    expect(await layerErrors(file, `export const rng = () => import('./rng.ts');\n`)).toEqual([]);
  });

  it('catches a dynamic import from an engine room into a room above it', async () => {
    const file = 'src/engine/runtime/probe.ts';
    expect(await layerErrors(file, `export const k = () => import('../kernels/matmul.ts');\n`)).toHaveLength(1);
    expect(await layerErrors(file, `export const f = () => import('../io/float16.ts');\n`)).toEqual([]);
    // core's own train/ folder is not the engine's train room
    expect(await layerErrors(file, `export const g = () => import('../../core/train/grpo.ts');\n`)).toEqual([]);
  });

  it('keeps Node built-ins, WebGPU and Svelte out of the core', async () => {
    for (const mod of ['node:fs', 'webgpu', 'svelte'])
      expect(await layerErrors('src/core/probe.ts', `import '${mod}';\n`), mod).toHaveLength(1);
    expect(
      await layerErrors(
        'src/ui/Probe.svelte',
        wrap('x.svelte', `import { untrack } from 'svelte';\nuntrack(() => 0);\n`),
      ),
    ).toEqual([]);
  });
});
