// `npm run check`: eslint (TypeScript + Svelte) and prettier. Not part of `npm test`.
import js from '@eslint/js';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';
import ts from 'typescript-eslint';

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
    // The pure core must not reach for the DOM, Svelte or WebGPU.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: ['svelte', 'svelte/*', '**/engine/*', '**/ui/*', '**/state/*', 'node:*', 'webgpu'] },
      ],
      'no-restricted-globals': ['error', 'window', 'document', 'navigator', 'localStorage', 'indexedDB'],
    },
  },
);
