// The layering of docs/architecture.md, as eslint.config.js enforces it: a probe file placed in each
// layer imports from every other one, and ESLint (the project's own config, through its Node API)
// must flag exactly the upward imports — static, type-only, re-exported and dynamic — and, outside
// src/engine, every engine module but the front door (engine_api.ts; engine/bench from the CLI), and
// inside src/core and src/engine, any folder (room) above the importing one.
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
  ['src/platform/node/probe.ts', '../../cli/spade.ts', '../../engine/engine_api.ts'],
  ['src/platform/browser/probe.ts', '../../state/app.svelte.ts', '../rpc.ts'],
  ['src/platform/browser/probe.ts', '../../../workers/engine.worker.ts', '../rpc.ts'],
  ['workers/probe.ts', '../src/state/run.svelte.ts', '../src/platform/browser/model_cache.ts'],
  ['src/state/probe.svelte.ts', '../ui/App.svelte', '../platform/browser/idb_store.ts'],
  ['src/ui/Probe.svelte', '../platform/browser/idb_store.ts', '../state/app.svelte.ts'],
  ['src/ui/Probe.svelte', '../engine/device.ts', '../core/config.ts'],
  ['src/cli/probe.ts', '../state/run.svelte.ts', '../platform/node/gpu.ts'],
  // core's folders: env → sandbox → llm → spade → train → lab, below them its top-level modules
  ['src/core/env/probe.ts', '../sandbox/host.ts', '../errors.ts'],
  ['src/core/spade/probe.ts', '../train/grpo.ts', '../llm/token_trace.ts'],
  ['src/core/llm/webllm/probe.ts', '../../spade/loop.ts', '../../env/contract.ts'],
  ['src/core/train/probe.ts', '../lab/lab.ts', '../spade/estimators.ts'],
  ['src/core/probe.ts', './env/checker.ts', './config.ts'],
  // the engine's front door: outside src/engine only engine_api.ts (and engine/bench from the CLI)
  ['src/cli/probe.ts', '../engine/model/batch.ts', '../engine/engine_api.ts'],
  ['src/cli/probe.ts', '../engine/engine.ts', '../engine/bench/model.ts'],
  ['src/platform/node/probe.ts', '../../engine/io/load.ts', '../../engine/engine_api.ts'],
  ['src/platform/browser/probe.ts', '../../engine/engine_chat_model.ts', '../../engine/engine_api.ts'],
  ['src/state/probe.svelte.ts', '../engine/bench/model.ts', '../engine/engine_api.ts'],
  ['workers/probe.ts', '../src/engine/lab/roles.ts', '../src/engine/engine_api.ts'],
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

  it("orders core's folders for dynamic imports too; url_state.ts alone sits above them", async () => {
    expect(
      await layerErrors('src/core/sandbox/probe.ts', `export const l = () => import('../spade/loop.ts');\n`),
    ).toHaveLength(1);
    expect(await layerErrors('src/core/lab/probe.ts', `export const l = () => import('../spade/loop.ts');\n`)).toEqual(
      [],
    );
    expect(
      await layerErrors('src/core/url_state.ts', `import './lab/settings.ts';\nimport './env/envset.ts';\n`),
    ).toEqual([]);
    expect(await layerErrors('src/core/config.ts', `import './lab/settings.ts';\n`)).toHaveLength(1);
  });

  it('lets code outside the engine reach it only through the front door, statically or dynamically', async () => {
    const file = 'src/cli/probe.ts';
    expect(await layerErrors(file, `export const m = () => import('../engine/model/local_model.ts');\n`)).toHaveLength(
      1,
    );
    expect(await layerErrors(file, `export type { Ops } from '../engine/ops/ops.ts';\n`)).toHaveLength(1);
    expect(await layerErrors(file, `export const d = () => import('../engine/engine_api.ts');\n`)).toEqual([]);
    expect(await layerErrors(file, `export const b = () => import('../engine/bench/kernels.ts');\n`)).toEqual([]);
    // bench is the CLI's alone; a name that only starts like the front door is not it
    expect(
      await layerErrors('src/state/probe.ts', `export const b = () => import('../engine/bench/kernels.ts');\n`),
    ).toHaveLength(1);
    expect(await layerErrors(file, `import '../engine/engine_api.ts.bak';\n`)).toHaveLength(1);
    // tests reach inside freely (no layer rule covers them)
    expect(await layerErrors('tests/unit/probe.test.ts', `import '../../src/engine/model/model.ts';\n`)).toEqual([]);
  });

  it('refuses a computed dynamic import in every layer: a variable, `as string`, a template literal', async () => {
    // the rules read a path as written, so a computed one would walk around them (#42 item 5)
    const computed = (path: string) => [
      `const p = '${path}';\nexport const a = () => import(p);\n`,
      `export const b = () => import('${path}' as string);\n`,
      `const room = '${path.split('/').at(-2)}';\nexport const c = () => import(\`${path.replace(/[^/]+\/([^/]+)$/, '${room}/$1')}\`);\n`,
      `export const d = () => import(\`${path}\`);\n`,
    ];
    for (const [file, path] of [
      ['src/cli/probe.ts', '../engine/model/batch.ts'],
      ['src/platform/node/probe.ts', '../../engine/io/load.ts'],
      ['src/state/probe.svelte.ts', '../engine/model/batch.ts'],
      ['workers/probe.ts', '../src/engine/lab/roles.ts'],
      ['src/core/probe.ts', '../platform/node/gpu.ts'],
      ['src/engine/io/probe.ts', '../runtime/runtime.ts'],
    ] as const) {
      for (const code of computed(path)) {
        const bad = await layerErrors(file, code);
        expect(bad, `${file}: ${code}`).toHaveLength(1);
        expect(bad[0], code).toMatch(/^import\(\) takes a string literal here/);
      }
      // the same path as a literal is read by the layer rules, which refuse it too
      expect(await layerErrors(file, `export const e = () => import('${path}');\n`), file).toHaveLength(1);
    }
    // a literal the rules allow is still allowed
    expect(
      await layerErrors('src/cli/probe.ts', `export const d = () => import('../engine/engine_api.ts');\n`),
    ).toEqual([]);
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
