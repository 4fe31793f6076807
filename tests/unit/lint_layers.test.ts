// The layering of docs/architecture.md and the cycle rule, as `npm run check` enforces them:
// dependency-cruiser with the project's own .dependency-cruiser.js runs once (its CLI, as the check
// runs it) over a temporary tree of probe files, one import each, and must flag exactly the upward
// imports — static, type-only, re-exported, side-effect and dynamic — each by the rule that names the
// layer; outside src/engine every engine module but the front door (engine_api.ts; engine/bench from
// the CLI); inside src/core and src/engine any folder (room) above the importing one; and every cycle.
// Every rule of the config must fire on some probe, so a rule dropped or broken fails here. ESLint
// (the project's config, through its Node API) refuses the computed `import()` that no resolver can
// follow, outside its allow-list, and an inline `eslint-disable` cannot switch that off.
//   npx vitest run --project unit tests/unit/lint_layers.test.ts
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const DEPCRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

// [the probe file, an import it must not make, the rule that refuses it, one it may make]
const CASES: [string, string, string, string][] = [
  // core: pure TypeScript, below everything
  ['src/core/probe.ts', '../platform/node/gpu.ts', 'core-is-pure', './rng.ts'],
  ['src/core/spade/probe.ts', '../../engine/model/model.ts', 'core-is-pure', '../llm/chat_model.ts'],
  ['src/core/llm/probe.ts', '../../platform/rpc.ts', 'core-is-pure', '../errors.ts'],
  ['src/core/probe.ts', '../state/app.svelte.ts', 'core-is-pure', './config.ts'],
  ['src/core/probe.ts', '../ui/App.svelte', 'core-is-pure', './errors.ts'],
  ['src/core/probe.ts', '../cli/spade.ts', 'core-is-pure', './store.ts'],
  ['src/core/probe.ts', '../../workers/engine.worker.ts', 'core-is-pure', './limiter.ts'],
  ['src/core/lab/probe.ts', '../../lab/roles.ts', 'core-is-pure', '../spade/loop.ts'],
  ['src/core/probe.ts', 'node:fs', 'core-no-node-builtins', './schema.ts'],
  ['src/core/env/probe.ts', 'webgpu', 'core-no-webgpu', '../rng.ts'],
  ['src/core/probe.ts', 'svelte', 'svelte-only-in-ui', './defaults.ts'],
  // core's folders: env → sandbox → llm → spade → train → lab, below them its top-level modules
  ['src/core/env/probe.ts', '../sandbox/host.ts', 'core-rooms-in-order-env', '../errors.ts'],
  ['src/core/sandbox/probe.ts', '../llm/chat_model.ts', 'core-rooms-in-order-sandbox', '../env/contract.ts'],
  ['src/core/llm/webllm/probe.ts', '../../spade/loop.ts', 'core-rooms-in-order-llm', '../../env/contract.ts'],
  ['src/core/spade/probe.ts', '../train/grpo.ts', 'core-rooms-in-order-spade', '../llm/token_trace.ts'],
  ['src/core/train/probe.ts', '../lab/lab.ts', 'core-rooms-in-order-train', '../spade/estimators.ts'],
  ['src/core/probe.ts', './env/checker.ts', 'core-top-level-below-folders', './config.ts'],
  ['src/core/probe.ts', './url_state.ts', 'core-top-level-below-folders', './rng.ts'],
  // the engine: below the app
  ['src/engine/probe.ts', '../platform/node/gpu.ts', 'engine-below-the-app', '../core/rng.ts'],
  ['src/engine/kernels/probe.ts', '../../platform/rpc.ts', 'engine-below-the-app', '../runtime/runtime.ts'],
  ['src/engine/probe.ts', '../state/gpu.svelte.ts', 'engine-below-the-app', './engine.ts'],
  ['src/engine/tiny/probe.ts', '../../lab/roles.ts', 'engine-below-the-app', '../model/model.ts'],
  ['src/engine/probe.ts', 'svelte', 'svelte-only-in-ui', './engine_chat_model.ts'],
  // the engine's rooms: io → runtime → kernels → ops → model → train → tiny → bench, and its
  // top-level modules (engine.ts, the front door) above them all
  ['src/engine/io/probe.ts', '../runtime/runtime.ts', 'engine-rooms-in-order-io', '../../core/rng.ts'],
  ['src/engine/runtime/probe.ts', '../kernels/matmul.ts', 'engine-rooms-in-order-runtime', '../io/float16.ts'],
  ['src/engine/kernels/probe.ts', '../model/model.ts', 'engine-rooms-in-order-kernels', '../runtime/device.ts'],
  ['src/engine/ops/probe.ts', '../model/model.ts', 'engine-rooms-in-order-ops', '../kernels/matmul.ts'],
  ['src/engine/model/probe.ts', '../train/train.ts', 'engine-rooms-in-order-model', '../ops/ops.ts'],
  ['src/engine/train/probe.ts', '../tiny/tiny_lm.ts', 'engine-rooms-in-order-train', '../model/model.ts'],
  ['src/engine/tiny/probe.ts', '../bench/model.ts', 'engine-rooms-in-order-tiny', '../train/train.ts'],
  // core's own train/ folder is not the engine's train room
  ['src/engine/runtime/probe.ts', '../engine.ts', 'engine-rooms-below-front-door', '../../core/train/grpo.ts'],
  ['src/engine/bench/probe.ts', '../engine_api.ts', 'engine-rooms-below-front-door', '../tiny/tiny_lm.ts'],
  // the Lab's app logic (src/lab/): on core and the engine's front door, below workers, state, ui, cli
  ['src/lab/probe.ts', '../engine/tiny/tiny_lm.ts', 'engine-front-door', '../engine/engine_api.ts'],
  ['src/lab/probe.ts', '../state/lab.svelte.ts', 'lab-below-the-app', '../core/lab/lab.ts'],
  // platform
  ['src/platform/node/probe.ts', '../../cli/spade.ts', 'platform-below-the-app', '../../engine/engine_api.ts'],
  ['src/platform/browser/probe.ts', '../../state/app.svelte.ts', 'platform-below-the-app', '../rpc.ts'],
  ['src/platform/browser/probe.ts', '../../../workers/engine.worker.ts', 'platform-below-the-app', '../rpc.ts'],
  ['src/platform/node/probe.ts', '../../engine/io/load.ts', 'engine-front-door', '../../core/errors.ts'],
  ['src/platform/browser/probe.ts', '../../engine/engine_chat_model.ts', 'engine-front-door', '../../core/rng.ts'],
  // workers
  ['workers/probe.ts', '../src/state/run.svelte.ts', 'workers-below-state', '../src/platform/browser/model_cache.ts'],
  ['workers/probe.ts', '../src/cli/spade.ts', 'workers-below-state', '../src/lab/roles.ts'],
  ['workers/probe.ts', '../src/engine/tiny/tiny_lm.ts', 'engine-front-door', '../src/engine/engine_api.ts'],
  ['workers/probe.ts', 'svelte', 'svelte-only-in-ui', '../src/core/rng.ts'],
  // state
  ['src/state/probe.svelte.ts', '../ui/App.svelte', 'state-below-ui', '../platform/browser/idb_store.ts'],
  ['src/state/probe.svelte.ts', '../cli/args.ts', 'state-below-ui', '../lab/roles.ts'],
  ['src/state/probe.svelte.ts', '../engine/bench/model.ts', 'engine-front-door', '../engine/engine_api.ts'],
  ['src/state/probe.svelte.ts', 'svelte', 'svelte-only-in-ui', '../core/config.ts'],
  // ui: core and state only
  ['src/ui/Probe.svelte', '../platform/browser/idb_store.ts', 'ui-on-core-and-state', '../state/app.svelte.ts'],
  ['src/ui/Probe.svelte', '../engine/engine_api.ts', 'ui-on-core-and-state', '../core/config.ts'],
  ['src/ui/Probe.svelte', '../lab/roles.ts', 'ui-on-core-and-state', 'svelte'],
  ['src/ui/probe.ts', '../../workers/lab.worker.ts', 'ui-on-core-and-state', './Glossary.svelte'],
  // cli: core, engine (front door and bench/), platform
  ['src/cli/probe.ts', '../state/run.svelte.ts', 'cli-beside-the-app', '../platform/node/gpu.ts'],
  ['src/cli/probe.ts', '../engine/model/batch.ts', 'engine-front-door-cli', '../engine/engine_api.ts'],
  ['src/cli/probe.ts', '../engine/engine.ts', 'engine-front-door-cli', '../engine/bench/model.ts'],
  // a name that only starts like the front door is not it
  ['src/cli/probe.ts', '../engine/engine_api.ts.bak', 'engine-front-door-cli', '../core/rng.ts'],
  ['src/cli/probe.ts', 'svelte', 'svelte-only-in-ui', '../core/config.ts'],
  // in src/cli only the dispatcher and the commands import a command module
  ['src/cli/probe.ts', './cmd_run.ts', 'cli-commands-from-the-dispatcher', './args.ts'],
  // scripts/ may use src/, never the reverse
  ['src/platform/node/probe.ts', '../../../scripts/build_corpus.js', 'no-scripts-in-the-product', '../dir_store.ts'],
  ['workers/probe.ts', '../scripts/mutants.js', 'no-scripts-in-the-product', '../src/platform/rpc.ts'],
  ['bin/probe.js', '../scripts/test.js', 'no-scripts-in-the-product', '../src/cli/spade.ts'],
];

/** The same forbidden import, written every way an import can be written (each in its own probe). */
const FORMS: [string, (path: string) => string][] = [
  ['static', (p) => `import { x } from '${p}';\nexport const y = x;\n`],
  ['type-only', (p) => `import type { X } from '${p}';\nexport type Y = X;\n`],
  ['inline type', (p) => `import { type X } from '${p}';\nexport type Y = X;\n`],
  ['re-export', (p) => `export { x } from '${p}';\n`],
  ['re-export all', (p) => `export * from '${p}';\n`],
  ['side effect', (p) => `import '${p}';\n`],
  ['dynamic', (p) => `export const m = () => import('${p}');\n`],
  ['template literal', (p) => `export const m = () => import(\`${p}\`);\n`],
];
const FORM_CASES: [string, string, string][] = [
  ['src/cli/form.ts', '../engine/model/batch.ts', 'engine-front-door-cli'],
  ['src/core/form.ts', '../platform/node/gpu.ts', 'core-is-pure'],
  ['workers/form.ts', '../src/engine/tiny/tiny_lm.ts', 'engine-front-door'],
  ['src/engine/runtime/form.ts', '../kernels/matmul.ts', 'engine-rooms-in-order-runtime'],
];

/** Import cycles, and a tree with none, under scripts/cycles/ (no layer rule applies there). */
const CYCLES: Record<string, string> = {
  // closed by a type-only import
  'x/a.ts': "import type { B } from './b.ts';\nexport type A = 1;\n",
  'x/b.ts': "import {\n  type A,\n} from './a.ts';\nexport type B = A;\n",
  // closed by a dynamic import, through a re-export
  'y/main.ts': "export const load = () => import('./cmd.ts');\n",
  'y/cmd.ts': "import { helper } from '../z/helpers.ts';\nexport const c = helper;\n",
  'z/helpers.ts': "export { load as helper } from '../y/main.ts';\n",
  'z/free.ts': "import type { B } from '../x/b.ts';\nexport type F = B;\n",
  // through a component's <script>
  'Panel.svelte': '<script lang="ts">\n  import { s } from \'./panel_state.svelte.ts\';\n</script>\n<p>{s}</p>\n',
  'panel_state.svelte.ts': "import Panel from './Panel.svelte';\nexport const s = Panel;\n",
  // none: a package, a ?raw asset, an import quoted in a comment
  'ok/a.ts': "import { b } from './b.ts';\nimport 'webgpu';\nimport w from './k.wgsl?raw';\nexport const a = [b, w];\n",
  'ok/b.ts': "// import('./a.ts') is how a.ts would be loaded lazily\nexport const b = 1;\n",
  'ok/k.wgsl': '',
};

interface Violation {
  from: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

let root: string;
let violations: Violation[];
let ruleNames: string[];

const rulesFrom = (file: string) => violations.filter((v) => v.from === file).map((v) => v.rule.name);

/** `name.ext` → `name_tag.ext`, keeping a `.svelte.ts` or `.svelte` suffix whole. */
const tagged = (file: string, tag: string) => file.replace(/((\.svelte)?\.[a-z]+)$/, `_${tag}$1`);

const wrap = (file: string, body: string) =>
  file.endsWith('.svelte') ? `<script lang="ts">\n${body}</script>\n` : body;

function write(path: string, text: string) {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

/** A probe with one import; the file it names is written too (empty), so that it resolves. */
function probe(file: string, code: string, target: string) {
  write(file, wrap(file, code));
  if (!target.startsWith('.')) return;
  const to = relative(root, resolve(dirname(join(root, file)), target.split('?')[0]!));
  if (!existsSync(join(root, to))) write(to, to.endsWith('.svelte') ? '<p></p>\n' : 'export {};\n');
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'spade-layers-'));
  // two packages the rules name, each any subpath (a compiled component imports svelte/internal/...)
  for (const name of ['svelte', 'webgpu']) {
    const exports = { '.': './index.js', './*': './index.js' };
    write(`node_modules/${name}/package.json`, JSON.stringify({ name, type: 'module', exports }));
    write(`node_modules/${name}/index.js`, 'export {};\n');
  }
  CASES.forEach(([file, bad, , allowed], i) => {
    probe(tagged(file, `${i}_bad`), `import '${bad}';\n`, bad);
    probe(tagged(file, `${i}_ok`), `import '${allowed}';\n`, allowed);
  });
  FORM_CASES.forEach(([file, path], i) =>
    FORMS.forEach(([, form], j) => probe(tagged(file, `${i}_${j}`), form(path), path)),
  );
  // url_state.ts alone, above core's folders, reads them; scripts/ may import src/
  probe('src/core/url_state.ts', "import './lab/settings.ts';\nimport './env/envset.ts';\n", './lab/settings.ts');
  probe('src/core/env/envset.ts', 'export {};\n', './envset.ts');
  probe('scripts/probe_ok.js', "import '../src/core/rng.ts';\n", '../src/core/rng.ts');
  // an import that resolves to no file cannot be checked: it fails; `.js` for a `.ts` file is resolved
  write('src/core/unresolved.ts', "import './missing.ts';\n");
  write('src/cli/dot_js.ts', "import '../engine/model/batch.js';\n");
  for (const [path, text] of Object.entries(CYCLES)) write(`scripts/cycles/${path}`, text);

  const r = depcruise(['src', 'workers', 'bin', 'scripts'], 'json');
  expect(r.stderr).toBe('');
  const result = JSON.parse(r.stdout) as {
    summary: { violations: Violation[]; ruleSetUsed: { forbidden: { name: string }[] } };
  };
  violations = result.summary.violations;
  ruleNames = result.summary.ruleSetUsed.forbidden.map((f) => f.name);
}, 60_000);

/** The CLI as `npm run check` runs it, with the project's config, in the probe tree. */
function depcruise(dirs: string[], outputType: string) {
  const config = join(ROOT, '.dependency-cruiser.js');
  return spawnSync(process.execPath, [DEPCRUISE, ...dirs, '--config', config, '--output-type', outputType], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
}

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('dependency-cruiser enforces the layering', () => {
  it.each(CASES.map((c, i) => [...c, i] as const))(
    '%s must not import %s (%s); may import %s',
    (file, bad, rule, allowed, i) => {
      expect(rulesFrom(tagged(file, `${i}_bad`)), `${file} importing ${bad}`).toEqual([rule]);
      expect(rulesFrom(tagged(file, `${i}_ok`)), `${file} importing ${allowed}`).toEqual([]);
    },
  );

  it.each(FORM_CASES.map((c, i) => [...c, i] as const))(
    '%s → %s is refused however it is written',
    (file, _path, rule, i) => {
      FORMS.forEach(([form], j) => expect(rulesFrom(tagged(file, `${i}_${j}`)), form).toEqual([rule]));
    },
  );

  it("lets url_state.ts alone read core's folders, and scripts/ use src/", () => {
    expect(rulesFrom('src/core/url_state.ts')).toEqual([]);
    expect(rulesFrom('scripts/probe_ok.js')).toEqual([]);
  });

  it('fails an import it cannot resolve (which it could not check), and resolves `.js` to `.ts` as TypeScript does', () => {
    expect(rulesFrom('src/core/unresolved.ts')).toEqual(['not-to-unresolvable']);
    expect(rulesFrom('src/cli/dot_js.ts')).toEqual(['engine-front-door-cli']);
  });

  it('finds cycles closed by a type-only import, a dynamic import and a component, and no others', () => {
    // each cycle is reported once, from one of its members, with the path back to it
    const cycles = violations
      .filter((v) => v.rule.name === 'no-circular')
      .map((v) => [v.from, ...v.cycle!.map((c) => c.name)].map((f) => f.replace('scripts/cycles/', '')).sort());
    expect(cycles.map((c) => [...new Set(c)]).sort()).toEqual([
      ['Panel.svelte', 'panel_state.svelte.ts'],
      ['x/a.ts', 'x/b.ts'],
      ['y/cmd.ts', 'y/main.ts', 'z/helpers.ts'],
    ]);
  });

  it('fails the check as npm run check runs it, naming the rule and what to do', () => {
    const r = depcruise(['src/cli'], 'err-long');
    expect(r.status).not.toBe(0);
    expect(r.stdout).toContain('error engine-front-door-cli: src/cli/form_0_0.ts → src/engine/model/batch.ts');
    expect(r.stdout).toMatch(/re-export what\s+you need there|re-export what you need\s+there/);
  });

  it('has no rule that no probe breaks: each fails on a violating file', () => {
    const fired = new Set(violations.map((v) => v.rule.name));
    expect(ruleNames.length).toBeGreaterThan(20);
    expect(ruleNames.filter((n) => !fired.has(n))).toEqual([]);
  });
});

describe('eslint refuses what dependency-cruiser cannot resolve: a computed import()', () => {
  let eslint: ESLint;
  beforeAll(() => {
    eslint = new ESLint({ cwd: ROOT });
  });

  /** The computed-import errors for `code` linted as if it were the file at `filePath`. */
  async function computedErrors(filePath: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath });
    return result!.messages.filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => m.message);
  }

  const computed = (path: string) => [
    `const p = '${path}';\nexport const a = () => import(p);\n`,
    `export const b = () => import('${path}' as string);\n`,
    `const room = '${path.split('/').at(-2)}';\nexport const c = () => import(\`${path.replace(/[^/]+\/([^/]+)$/, '${room}/$1')}\`);\n`,
    `export const d = () => import(\`${path}\`);\n`,
    `export const e = (base) => import(new URL('${path}', base).href);\n`,
  ];

  it('refuses a variable, `as string`, a template literal, a URL — in every folder of the product', async () => {
    for (const [file, path] of [
      ['src/cli/probe.ts', '../engine/model/batch.ts'],
      ['src/platform/node/probe.ts', '../../engine/io/load.ts'],
      ['src/state/probe.svelte.ts', '../engine/model/batch.ts'],
      ['workers/probe.ts', '../src/engine/tiny/tiny_lm.ts'],
      ['src/lab/probe.ts', '../engine/tiny/tiny_lm.ts'],
      ['src/core/probe.ts', '../platform/node/gpu.ts'],
      ['src/engine/io/probe.ts', '../runtime/runtime.ts'],
      ['src/main.ts', './engine/engine.ts'],
      ['bin/probe.js', '../src/engine/engine.ts'],
    ] as const) {
      for (const code of computed(path)) {
        if (file.endsWith('.js') && code.includes(' as string')) continue;
        const bad = await computedErrors(file, code);
        expect(bad, `${file}: ${code}`).toHaveLength(1);
        expect(bad[0], code).toMatch(/^import\(\) takes a string literal here/);
      }
      // a literal path is dependency-cruiser's to judge
      expect(await computedErrors(file, `export const f = () => import('${path}');\n`), file).toEqual([]);
    }
    const ui = `<script lang="ts">\n  const p = '../engine/engine.ts';\n  import(p);\n</script>\n`;
    expect(await computedErrors('src/ui/Probe.svelte', ui)).toHaveLength(1);
  });

  it('allows only the listed shape in each allow-listed file', async () => {
    const sandbox = 'src/cli/bench_sandbox.ts';
    expect(await computedErrors(sandbox, 'export const a = (r: string) => import(pathToFileURL(r).href);\n')).toEqual(
      [],
    );
    expect(await computedErrors(sandbox, 'export const b = (p: string) => import(p);\n')).toHaveLength(1);
    expect(
      await computedErrors(sandbox, "export const c = () => import('../engine/model/batch.ts' as string);\n"),
    ).toHaveLength(1);
    const peer = 'src/engine/bench/peer.ts';
    expect(await computedErrors(peer, "const spec = 'webgpu';\nexport const a = () => import(spec);\n")).toEqual([]);
    expect(
      await computedErrors(peer, "const s = '../model/model.ts';\nexport const b = () => import(s);\n"),
    ).toHaveLength(1);
  });

  it('cannot be switched off by an inline comment in the product', async () => {
    const code =
      "const p = '../engine/model/batch.ts';\n// eslint-disable-next-line no-restricted-syntax -- just this once\nexport const a = () => import(p);\n";
    expect(await computedErrors('src/cli/probe.ts', code)).toHaveLength(1);
  });

  it('leaves tests free to reach anywhere', async () => {
    expect(
      await computedErrors('tests/unit/probe.test.ts', "const p = '../../src/engine/model/model.ts';\nimport(p);\n"),
    ).toEqual([]);
  });

  it('keeps the DOM out of the core', async () => {
    const [result] = await eslint.lintText('export const w = window.innerWidth;\n', { filePath: 'src/core/probe.ts' });
    expect(result!.messages.map((m) => m.ruleId)).toContain('no-restricted-globals');
  });
});
