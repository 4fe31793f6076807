#!/usr/bin/env node
// Builds the bundled grounding corpus, public/corpus/default.jsonl (src/platform/node/corpus_build.ts
// says from what). Runs before `npm start` and `npm run build`; skips when the file is newer than
// this script and the module that builds it, unless --force.
import { existsSync, statSync } from 'node:fs';

const out = new URL('../public/corpus/default.jsonl', import.meta.url);
const sources = [new URL(import.meta.url), new URL('../src/platform/node/corpus_build.ts', import.meta.url)];
if (
  existsSync(out) &&
  sources.every((s) => statSync(out).mtimeMs > statSync(s).mtimeMs) &&
  !process.argv.includes('--force')
) {
  process.exit(0);
}

await import('../bin/ts_loader.js'); // the entry point's TypeScript loader
const { buildDefaultCorpus } = await import('../src/platform/node/corpus_build.ts');
const { passages, bytes } = buildDefaultCorpus();
console.log(`corpus: ${passages} passages, ${(bytes / 2 ** 20).toFixed(1)} MiB → public/corpus/default.jsonl`);
