// `npm run check` (a tier of `npm test`): eslint (TypeScript + Svelte), dependency-cruiser (the layering
// of docs/architecture.md and import cycles: .dependency-cruiser.js), prettier and knip. Here: no
// computed import() (which dependency-cruiser cannot resolve), function and file size, no DOM in core.
import js from '@eslint/js';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';
import ts from 'typescript-eslint';

/**
 * The layer and cycle rules live in .dependency-cruiser.js (dependency-cruiser, in `npm run check`):
 * it resolves every literal import path to a file. A dynamic import whose path is computed —
 * `import(x)`, `import(p as string)`, a template literal — names no file it could resolve, so it would
 * walk around every one of them, the engine's front door included: here it is an error in src/,
 * workers/ and bin/, except for the shapes allowed below, each with its reason. Inline
 * `eslint-disable` comments are off in those folders (`noInlineConfig`), so an exemption can only be
 * made here, where it is seen.
 */
const COMPUTED_IMPORT_WHY =
  "import() takes a string literal here: a computed path (a variable, `as string`, a template literal) gets past the layer rules and the engine's front door";
const computedImport = (allowed = '') => ({
  selector: `ImportExpression[source.type!='Literal']${allowed && `:not(${allowed})`}`,
  message: COMPUTED_IMPORT_WHY,
});
const COMPUTED_IMPORT_ALLOWED = [
  {
    // `spade bench sandbox --compare`: this tree's or another commit's modules by their file URL under a
    // chosen root (`import(pathToFileURL(join(root, p)).href)`); its one helper holds `p` to src/core and
    // src/platform/node at run time, never the engine past its front door
    files: ['src/cli/bench_sandbox.ts'],
    shape: "[source.type='MemberExpression'][source.property.name='href'][source.object.callee.name='pathToFileURL']",
  },
  {
    // the `webgpu` package by name (`import(spec)`), kept out of Vite's graph: Node only, no module of ours
    files: ['src/engine/bench/peer.ts'],
    shape: "[source.type='Identifier'][source.name='spec']",
  },
];

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
  {
    // Layering is dependency-cruiser's (.dependency-cruiser.js); what it cannot see is a computed import()
    files: ['src/**/*.{ts,js,svelte}', 'workers/**/*.ts', 'bin/**/*.js'],
    linterOptions: { noInlineConfig: true },
    rules: { 'no-restricted-syntax': ['error', computedImport()] },
  },
  ...COMPUTED_IMPORT_ALLOWED.map(({ files, shape }) => ({
    files,
    rules: { 'no-restricted-syntax': ['error', computedImport(shape)] },
  })),
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
