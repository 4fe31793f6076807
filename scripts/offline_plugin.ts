// A Vite plugin (build only) that makes the built app work offline after one visit: once the bundle
// and public/ are written, it lists every file in the output folder but source maps (the precache
// list), hashes their contents (the version) and compiles workers/service.worker.ts with both
// defined into `sw.js` beside index.html. The app registers it (src/platform/browser/service_worker.ts);
// a new build whose files differ is a new sw.js, which the browser installs and the app offers as
// "A new version is available — Reload". Dev mode (`npm start`) never runs it.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { transform } from 'esbuild';
import type { Plugin } from 'vite';

/** The service worker's file name at the root of the output folder. */
export const SW_FILE = 'sw.js';

/** Every file under `dir`, as '/'-separated paths relative to it, sorted. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

/**
 * What the service worker precaches, from the output folder's files: all but source maps and the
 * worker itself, with index.html named as the folder ('./', the address a visitor opens), and a
 * version that changes when any of those files' names or bytes do.
 */
export function precacheManifest(
  files: readonly string[],
  read: (file: string) => Uint8Array,
): {
  files: string[];
  version: string;
} {
  const kept = files.filter((f) => !f.endsWith('.map') && f !== SW_FILE).sort();
  const hash = createHash('sha256');
  for (const f of kept) hash.update(f).update('\0').update(read(f)).update('\0');
  return { files: kept.map((f) => (f === 'index.html' ? './' : f)), version: hash.digest('hex').slice(0, 16) };
}

/** The service worker's source (TypeScript) compiled to one classic script with the manifest in it. */
export async function compileServiceWorker(
  source: string,
  manifest: { files: string[]; version: string },
): Promise<string> {
  const { code } = await transform(source, {
    loader: 'ts',
    format: 'iife',
    target: 'es2022',
    define: {
      __SPADE_PRECACHE__: JSON.stringify(manifest.files),
      __SPADE_VERSION__: JSON.stringify(manifest.version),
    },
  });
  return `// SPADE Playground offline service worker, version ${manifest.version} (scripts/offline_plugin.ts)\n${code}`;
}

export function offlinePlugin(opts: { worker: string }): Plugin {
  let outDir = '';
  return {
    name: 'spade-offline',
    apply: 'build',
    configResolved(config) {
      outDir = resolve(config.root, config.build.outDir);
    },
    async writeBundle() {
      const manifest = precacheManifest(filesUnder(outDir), (f) => readFileSync(join(outDir, f)));
      if (!manifest.files.includes('./')) throw new Error(`offline plugin: no index.html in ${outDir}`);
      writeFileSync(join(outDir, SW_FILE), await compileServiceWorker(readFileSync(opts.worker, 'utf8'), manifest));
    },
  };
}
