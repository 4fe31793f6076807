// `npm run check` (a tier of `npm test`): eslint (TypeScript + Svelte) and prettier. Also enforces the
// layering of docs/architecture.md: nothing below imports from above.
import js from '@eslint/js';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';
import ts from 'typescript-eslint';

/**
 * The engine's front door: outside src/engine, code imports src/engine/engine_api.ts only (`door`
 * names what else a layer may reach: the CLI's `spade bench engine` takes engine/bench). A regex on
 * the import path, for static imports ('/' as is) and dynamic ones (an esquery regex: '/' escaped).
 */
const engineDoor = (also = []) => `(^|/)engine/(?!${['engine_api\\.ts$', ...also].join('|')})`;
const doorWhy = (layer, also = '') =>
  `${layer} reaches the engine only through its front door, src/engine/engine_api.ts${also}: re-export what you need there`;

/**
 * A dynamic import whose path is computed — `import(x)`, `import(p as string)`, a template literal —
 * gets past every layer rule (they read the path as written), the engine's front door included, so in
 * the layers it is an error. The few that load what is not this tree's module by name (a package
 * named in a variable so Vite leaves it alone; another commit's tree for `bench sandbox --compare`)
 * say so on the line, with `eslint-disable-next-line no-restricted-syntax -- why`.
 */
const COMPUTED_IMPORT_WHY =
  "import() takes a string literal here: a computed path (a variable, `as string`, a template literal) gets past the layer rules and the engine's front door";

/**
 * One `no-restricted-imports` block per layer: `above` are the src/ (or top-level) folders it must not
 * import from, matched as a path segment; `also` more forbidden module patterns; `door` the engine's
 * front door rule (engineDoor) with its message `doorWhy`; Svelte is allowed only in ui (and state's
 * runes need no import). Static and dynamic imports alike.
 */
function layers(specs) {
  return specs.map(
    ({ files, ignores, above, also = [], rooms = [], roomsFrom = '..', door, doorWhy, svelte = false, why }) => ({
      files,
      ...(ignores ? { ignores } : {}),
      rules: {
        // no-restricted-imports does not see import('...'): the same folders, for dynamic imports
        'no-restricted-syntax': [
          'error',
          // these rules read a path as written: a computed one would walk around every one of them
          { selector: "ImportExpression[source.type!='Literal']", message: COMPUTED_IMPORT_WHY },
          { selector: `ImportExpression > Literal[value=/(^|\\/)(${above.join('|')})\\//]`, message: why },
          ...(rooms.length
            ? [
                {
                  selector: `ImportExpression > Literal[value=/${roomRegex(roomsFrom, rooms).replaceAll('/', '\\/')}/]`,
                  message: why,
                },
              ]
            : []),
          ...(door
            ? [{ selector: `ImportExpression > Literal[value=/${door.replaceAll('/', '\\/')}/]`, message: doorWhy }]
            : []),
        ],
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              { regex: `(^|/)(${above.join('|')})/`, message: why },
              ...(door ? [{ regex: door, message: doorWhy }] : []),
              // a sibling room is one level up ('../model/model.ts'; '../../spade/x.ts' from a nested folder)
              ...(rooms.length ? [{ regex: roomRegex(roomsFrom, rooms), message: why }] : []),
              ...(also.length || !svelte
                ? [{ group: [...also, ...(svelte ? [] : ['svelte', 'svelte/*'])], message: why }]
                : []),
            ],
          },
        ],
      },
    }),
  );
}

/**
 * An import of one of `rooms` as seen from a file: `from` '..' for a file inside a sibling room (any
 * number of '../' before the room's name), '.' for a file beside the rooms ('./spade/x.ts').
 */
const roomRegex = (from, rooms) => `${from === '.' ? '^\\./' : '^(\\.\\./)+'}(${rooms.join('|')})/`;

/**
 * src/core's folders, bottom to top: each may import the folders before it and core's top-level
 * modules (errors, rng, bytes, config, schema, store, limiter, ...), never a folder after it; the
 * top-level modules import no folder, except url_state.ts (the app's link reads every folder's
 * settings), which sits above them all.
 */
const CORE_ROOMS = ['env', 'sandbox', 'llm', 'spade', 'train', 'lab'];
const CORE_ABOVE = ['engine', 'platform', 'workers', 'state', 'ui', 'cli'];
const CORE_WHY =
  'src/core is pure TypeScript: no DOM, Svelte, WebGPU or Node built-ins; pass a backend in from platform/ instead';
const coreRooms = () => [
  {
    files: ['src/core/*.ts'],
    ignores: ['src/core/url_state.ts'],
    above: CORE_ABOVE,
    also: ['node:*', 'webgpu'],
    rooms: CORE_ROOMS,
    roomsFrom: '.',
    why: `src/core's top-level modules sit below its folders (${CORE_ROOMS.join(' → ')}); only url_state.ts reads them. ${CORE_WHY}`,
  },
  ...CORE_ROOMS.map((room, i) => ({
    files: [`src/core/${room}/**/*.ts`],
    above: CORE_ABOVE,
    also: ['node:*', 'webgpu'],
    rooms: CORE_ROOMS.slice(i + 1),
    why:
      `src/core/${room} sits below ${CORE_ROOMS.slice(i + 1).join(', ') || 'no other folder'} (core's folders: ${CORE_ROOMS.join(' → ')}); ` +
      `move what both need to the lower folder. And ${CORE_WHY}`,
  })),
];

/**
 * The engine's rooms, bottom to top: each may import the rooms before it, never one after it.
 * engine_api.ts, the engine worker's facade, sits at src/engine/ above them all.
 */
const ENGINE_ROOMS = ['io', 'runtime', 'kernels', 'ops', 'model', 'train', 'lab', 'bench'];
const engineRooms = () =>
  ENGINE_ROOMS.map((room, i) => ({
    files: [`src/engine/${room}/**/*.ts`],
    above: ['platform', 'workers', 'state', 'ui', 'cli'],
    rooms: ENGINE_ROOMS.slice(i + 1),
    why:
      `src/engine/${room} sits below ${ENGINE_ROOMS.slice(i + 1).join(', ') || 'no other room'} (rooms: ${ENGINE_ROOMS.join(' → ')}) ` +
      'and the engine below workers, state, ui and cli; take what it needs as a parameter',
  }));

export default ts.config(
  { ignores: ['dist/', 'node_modules/', 'test-results/', 'runs/', '.dev/', '.gl/', 'public/corpus/'] },
  js.configs.recommended,
  ...ts.configs.recommended,
  ...svelte.configs.recommended,
  {
    languageOptions: { globals: { ...globals.browser, ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // TypeScript checks names itself (DOM and WebGPU types included)
      'no-undef': 'off',
      // local Maps and Dates in state classes are not meant to be reactive
      'svelte/prefer-svelte-reactivity': 'off',
    },
  },
  {
    files: ['**/*.svelte', '**/*.svelte.ts'],
    languageOptions: { parserOptions: { parser: ts.parser, extraFileExtensions: ['.svelte'] } },
  },
  {
    // Guest code for the QuickJS sandbox: scripts that see the prelude's globals.
    files: ['src/core/env/seeds/*.js', 'src/core/sandbox/prelude.guest.js'],
    languageOptions: { sourceType: 'script', globals: { extractBoxed: 'readonly', ToolUseEnv: 'readonly' } },
    rules: { 'no-unused-vars': 'off', '@typescript-eslint/no-unused-vars': 'off' },
  },
  // Layering (docs/architecture.md), bottom to top: core → engine → workers → state → ui, with
  // platform (backends: may use core and engine; its rpc.ts is the comlink wiring workers share) and cli (may use core, engine,
  // platform) beside them. Each block lists the folders a layer must not import from; a relative
  // import names the folder as a path segment ('../../platform/node/gpu.ts').
  ...layers([
    {
      files: ['src/core/**/*.ts'],
      above: CORE_ABOVE,
      also: ['node:*', 'webgpu'],
      why: CORE_WHY,
    },
    ...coreRooms(),
    {
      files: ['src/engine/*.ts'],
      above: ['platform', 'workers', 'state', 'ui', 'cli'],
      why: 'src/engine sits below workers, state, ui and cli and beside platform; take what it needs as a parameter',
    },
    ...engineRooms(),
    {
      files: ['src/platform/**/*.ts'],
      above: ['workers', 'state', 'ui', 'cli'],
      door: engineDoor(),
      doorWhy: doorWhy('src/platform'),
      why: 'src/platform holds backends for core and engine; it must not reach up into workers, state, ui or cli (start a worker by URL instead)',
    },
    {
      files: ['workers/**/*.ts'],
      above: ['state', 'ui', 'cli'],
      door: engineDoor(),
      doorWhy: doorWhy('workers/'),
      why: 'workers/ run core, engine and platform code off the main thread; they must not reach up into state, ui or cli',
    },
    {
      files: ['src/state/**/*.ts'],
      above: ['ui', 'cli'],
      door: engineDoor(),
      doorWhy: doorWhy('src/state'),
      why: 'src/state is read by the ui; it must not import components or the CLI',
    },
    {
      files: ['src/ui/**/*.svelte', 'src/ui/**/*.ts'],
      above: ['engine', 'platform', 'workers', 'cli'],
      svelte: true,
      why: 'src/ui talks to core and state only; put work on engines, backends and workers in a state class',
    },
    {
      files: ['src/cli/**/*.ts'],
      above: ['workers', 'state', 'ui'],
      door: engineDoor(['bench/']),
      doorWhy: doorWhy('src/cli', ' (and engine/bench, for `spade bench engine`)'),
      why: 'src/cli uses core, engine and platform/node; state, ui and workers/ are the browser app',
    },
  ]),
  {
    // Size: no function over 120 lines (blank and comment lines not counted: a comment never forces a
    // split) and no file over 1,000 lines. A generated file or a kernel unrolled on purpose that needs
    // more is exempted by its own file-scoped block below, with the reason; none does today.
    files: ['src/**/*.{ts,js,svelte}', 'workers/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 120, skipBlankLines: true, skipComments: true }],
      'max-lines': ['error', { max: 1000 }],
    },
  },
  {
    // The pure core must not reach for the DOM either.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', 'window', 'document', 'navigator', 'localStorage', 'indexedDB'],
    },
  },
);
