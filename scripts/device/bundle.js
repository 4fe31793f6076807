#!/usr/bin/env node
// Packs what `spade engine` and `spade bench engine` need to run on a GPU machine that has no
// Node.js or npm: one bundled ESM file (WGSL inlined), the `webgpu` package's Linux addon, and a
// compressed copy of this machine's node binary, into .dev/ (git-ignored). See docs/benchmarks.md.
//   node scripts/device/bundle.js
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = `${root}.dev`;
mkdirSync(`${out}/node_modules/webgpu/dist/linux-x64`, { recursive: true });

const raw = {
  name: 'raw',
  setup(b) {
    b.onResolve({ filter: /\?raw$/ }, (a) => ({
      path: `${dirname(a.importer)}/${a.path.slice(0, -4)}`,
      namespace: 'raw',
    }));
    b.onLoad({ filter: /.*/, namespace: 'raw' }, (a) => ({ contents: readFileSync(a.path, 'utf8'), loader: 'text' }));
  },
};
await build({
  entryPoints: [`${root}scripts/device/entry.ts`],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outfile: `${out}/spade_engine.mjs`,
  external: ['webgpu'],
  plugins: [raw],
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  logLevel: 'warning',
});
const wg = `${root}node_modules/webgpu`;
for (const f of ['package.json', 'index.js', 'dist/linux-x64/dawn.node'])
  copyFileSync(`${wg}/${f}`, `${out}/node_modules/webgpu/${f}`);
writeFileSync(`${out}/node.xz`, execFileSync('xz', ['-9', '-c', process.execPath], { maxBuffer: 1 << 30 }));
console.log('packed .dev/: spade_engine.mjs, node_modules/webgpu (linux-x64), node.xz');
