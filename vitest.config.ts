// Test tiers (all run by `npm test` through scripts/test.js):
//   unit — the pure core and Node backends, in Node;
//   gpu  — kernels on the `webgpu` package over a software Vulkan driver, in Node;
//   e2e  — Playwright driving Debian's Chromium against the built app.
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  plugins: [svelte()],
  test: {
    // worker threads the code under test starts (platform/node/workers.ts) run TypeScript through the
    // loader the `spade` entry point registers; vitest is the entry point here
    env: { SPADE_TS_LOADER: new URL('./bin/ts_loader.js', import.meta.url).href },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['tests/unit/**/*.test.ts'],
          environment: 'node',
          testTimeout: 30_000,
          // a hook that starts a child process (`spade serve` in serve_hostile.test.ts: ~2 s idle) ran past
          // vitest's default 10 s on a loaded machine; 60 s is over 20× its idle time
          hookTimeout: 60_000,
          // two files at once (vitest's default on 2 cores is one): the tier's CPU is about the same
          // (510 vs 527 CPU-s), its wall time not (docs/testing.md, "How long it takes")
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
      {
        extends: true,
        test: {
          name: 'gpu',
          include: ['tests/gpu/**/*.test.ts'],
          environment: 'node',
          pool: 'forks',
          // the files a worker runs share its process, so they share one device and its compiled
          // pipelines (tests/gpu/gpu_setup.ts): compiling was most of the tier's CPU, the same kernels
          // again in every file
          isolate: false,
          // two files at once: one file keeps a software adapter at ~1.1 cores; two ran the tier in 295 s
          // instead of 532 s on the 2-core build machine (docs/testing.md)
          fileParallelism: true,
          maxWorkers: 2,
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['tests/e2e/**/*.test.ts'],
          environment: 'node',
          // two files at once: one file keeps Chromium's processes at about 0.9 of a core, so one at a
          // time left the second core mostly idle (docs/testing.md, "How long it takes")
          fileParallelism: true,
          maxWorkers: 2,
          // a page that is busy beside another file's Chromium takes longer to reach a state: a poll
          // fails when the state never comes, not when it comes late (vitest's default is 1 s)
          expect: { poll: { timeout: 30_000, interval: 100 } },
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
