// Vite config for the app. Workers are ES modules (the sandbox worker uses
// top-level await), and the QuickJS .wasm ships as an asset.
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [svelte()],
  worker: { format: 'es' },
  build: { target: 'es2022', sourcemap: true, chunkSizeWarningLimit: 2048 },
  server: { host: '127.0.0.1' },
  optimizeDeps: { exclude: ['@jitl/quickjs-wasmfile-release-sync'] },
});
