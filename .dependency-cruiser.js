// The layering of docs/architecture.md and no import cycles, kept by dependency-cruiser (pinned in
// package.json). `npm run check` runs it over the product and the scripts:
//   npx depcruise src workers bin scripts --config .dependency-cruiser.js --output-type err-long
// It reads every import — static, `import type`, `export … from`, side-effect, and dynamic `import('…')`
// — in .ts, .js and .svelte files (a component's <script>), resolves each to a file, and matches the
// rules below on resolved paths from the repository root, whatever the import path looked like.
// A computed `import()` (a variable, `as string`, a template literal) names no file it could resolve,
// so ESLint refuses those outside an allow-list (eslint.config.js, COMPUTED_IMPORT); an import it
// cannot resolve fails here (`not-to-unresolvable`), so no path is left unchecked.
// tests/unit/lint_layers.test.ts runs this config on a tree of probe files, one per rule.

/** src/core's folders, bottom to top: a folder imports only the folders before it. */
const CORE_ROOMS = ['env', 'sandbox', 'llm', 'spade', 'train', 'lab'];
/**
 * src/engine's rooms, bottom to top: a room imports only the rooms before it. tiny/ is the tiny model
 * the Lab runs on (the Lab's app logic is in src/lab/ and src/core/lab/).
 */
const ENGINE_ROOMS = ['io', 'runtime', 'kernels', 'ops', 'model', 'train', 'tiny', 'bench'];

/** A path under one of `dirs` (from the repository root). */
const under = (...dirs) => `^(${dirs.join('|')})/`;

const CORE_WHY =
  'src/core is pure TypeScript: no DOM, Svelte, WebGPU or Node built-ins; pass a backend in from platform/ instead';

/**
 * One rule per layer: what it must not import. Bottom to top: core → engine → src/lab (the Lab's app
 * layer, on the engine's front door) → workers → state → ui, with platform (backends for core and engine) and
 * cli (core, engine, platform/node) beside them. Tests (not cruised) reach anywhere.
 */
const LAYERS = [
  {
    name: 'core-is-pure',
    from: 'src/core',
    above: ['src/engine', 'src/lab', 'src/platform', 'workers', 'src/state', 'src/ui', 'src/cli'],
    why: CORE_WHY,
  },
  {
    name: 'engine-below-the-app',
    from: 'src/engine',
    above: ['src/lab', 'src/platform', 'workers', 'src/state', 'src/ui', 'src/cli'],
    why: 'src/engine sits below workers, state, ui and cli and beside platform; take what it needs as a parameter',
  },
  {
    name: 'lab-below-the-app',
    from: 'src/lab',
    above: ['workers', 'src/state', 'src/ui', 'src/cli'],
    why: "src/lab (the Lab's app logic) runs on core and the engine's front door; workers, state, ui and cli use it, never the reverse",
  },
  {
    name: 'platform-below-the-app',
    from: 'src/platform',
    above: ['workers', 'src/state', 'src/ui', 'src/cli'],
    why: 'src/platform holds backends for core and engine; it must not reach up into workers, state, ui or cli (start a worker by URL instead)',
  },
  {
    name: 'workers-below-state',
    from: 'workers',
    above: ['src/state', 'src/ui', 'src/cli'],
    why: 'workers/ run core, engine and platform code off the main thread; they must not reach up into state, ui or cli',
  },
  {
    name: 'state-below-ui',
    from: 'src/state',
    above: ['src/ui', 'src/cli'],
    why: 'src/state is read by the ui; it must not import components or the CLI',
  },
  {
    name: 'ui-on-core-and-state',
    from: 'src/ui',
    above: ['src/engine', 'src/lab', 'src/platform', 'workers', 'src/cli'],
    why: 'src/ui talks to core and state only; put work on engines, backends and workers in a state class',
  },
  {
    name: 'cli-beside-the-app',
    from: 'src/cli',
    above: ['workers', 'src/state', 'src/ui'],
    why: 'src/cli uses core, engine and platform/node; state, ui and workers/ are the browser app',
  },
];

/** Each room of `rooms` under `base` may import only the rooms before it. */
const roomRules = (layer, base, rooms, why) =>
  rooms.slice(0, -1).map((room, i) => ({
    name: `${layer}-rooms-in-order-${room}`,
    comment: `${base}/${room} sits below ${rooms.slice(i + 1).join(', ')} (${layer}'s rooms: ${rooms.join(' → ')}); ${why}`,
    severity: 'error',
    from: { path: `^${base}/${room}/` },
    to: { path: under(...rooms.slice(i + 1).map((r) => `${base}/${r}`)) },
  }));

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    ...LAYERS.map(({ name, from, above, why }) => ({
      name,
      comment: why,
      severity: 'error',
      from: { path: under(from) },
      to: { path: under(...above) },
    })),
    {
      name: 'core-no-webgpu',
      comment: CORE_WHY,
      severity: 'error',
      from: { path: under('src/core') },
      to: { path: under('node_modules/webgpu') },
    },
    {
      name: 'core-no-node-builtins',
      comment: CORE_WHY,
      severity: 'error',
      from: { path: under('src/core') },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'svelte-only-in-ui',
      comment: "Svelte is imported by the ui's components alone (state's runes need no import)",
      severity: 'error',
      from: { path: under('src/core', 'src/engine', 'src/lab', 'src/platform', 'workers', 'src/state', 'src/cli') },
      to: { path: under('node_modules/svelte') },
    },
    {
      name: 'engine-front-door',
      comment:
        'outside src/engine, code reaches the engine only through its front door, src/engine/engine_api.ts: re-export what you need there',
      severity: 'error',
      from: { path: under('src/platform', 'src/lab', 'src/state', 'workers', 'bin') },
      to: { path: under('src/engine'), pathNot: '^src/engine/engine_api\\.ts$' },
    },
    {
      name: 'engine-front-door-cli',
      comment:
        'src/cli reaches the engine only through its front door, src/engine/engine_api.ts (and engine/bench, for `spade bench engine`): re-export what you need there',
      severity: 'error',
      from: { path: under('src/cli') },
      to: { path: under('src/engine'), pathNot: '^src/engine/(engine_api\\.ts|bench/.*)$' },
    },
    {
      name: 'core-top-level-below-folders',
      comment: `src/core's top-level modules (errors, rng, schema, config, ...) sit below its folders (${CORE_ROOMS.join(' → ')}); only url_state.ts, above them all, reads them. ${CORE_WHY}`,
      severity: 'error',
      from: { path: '^src/core/[^/]+$', pathNot: '^src/core/url_state\\.ts$' },
      to: { path: '^src/core/([^/]+/|url_state\\.ts$)' },
    },
    ...roomRules('core', 'src/core', CORE_ROOMS, 'move what both need to the lower folder'),
    {
      name: 'engine-rooms-below-front-door',
      comment: `src/engine's rooms (${ENGINE_ROOMS.join(' → ')}) sit below its top-level modules (engine.ts, engine_chat_model.ts and the front door, engine_api.ts); take what a room needs as a parameter`,
      severity: 'error',
      from: { path: `^src/engine/(${ENGINE_ROOMS.join('|')})/` },
      to: { path: '^src/engine/[^/]+$' },
    },
    ...roomRules('engine', 'src/engine', ENGINE_ROOMS, 'take what it needs as a parameter'),
    {
      name: 'no-scripts-in-the-product',
      comment:
        'scripts/ may use src/, never the reverse: the product (src/, workers/, bin/) imports nothing from scripts/',
      severity: 'error',
      from: { path: under('src', 'workers', 'bin') },
      to: { path: under('scripts') },
    },
    {
      name: 'cli-commands-from-the-dispatcher',
      comment:
        'in src/cli only the dispatcher (spade.ts) and the commands (cmd_*.ts) import a command module; a shared helper lives in a helper module (args.ts, model_flags.ts) or in platform/',
      severity: 'error',
      from: { path: '^src/cli/', pathNot: '^src/cli/(cmd_[^/]+|spade)\\.ts$' },
      to: { path: '^src/cli/cmd_[^/]+\\.ts$' },
    },
    {
      name: 'no-circular',
      comment:
        "no import cycles (static, type-only or dynamic): move what two modules both need into a module of its own (the CLI's args.ts)",
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      comment:
        'an import that cannot be resolved to a file cannot be checked against the layers: fix the path (write the extension: ./x.ts)',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // `import type` ties two modules as much as a value import does
    tsPreCompilationDeps: true,
    // resolve as Vite and tsx do: explicit extensions, packages by their `exports`
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'module', 'node', 'default', 'types'],
    },
  },
};
