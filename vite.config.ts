// Vite config for the app. Workers are ES modules (the sandbox worker uses
// top-level await), and the QuickJS .wasm ships as an asset. The build also writes sw.js (offline).
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vite';
import { offlinePlugin } from './scripts/offline_plugin.ts';

export default defineConfig({
  // relative base: the built app works at any path (a site's root, /spade/ on GitHub Pages, a school
  // server's folder); every asset, worker and .wasm is requested relative to the page or the chunk
  base: './',
  // offlinePlugin: dist/sw.js, the service worker that keeps the built app usable offline
  plugins: [svelte(), offlinePlugin({ worker: 'workers/service.worker.ts' })],
  worker: { format: 'es' },
  build: { target: 'es2022', sourcemap: true, chunkSizeWarningLimit: 2048 },
  server: { host: '127.0.0.1' },
  optimizeDeps: { exclude: ['@jitl/quickjs-wasmfile-release-sync'] },
});
