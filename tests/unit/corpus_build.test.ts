// The bundled grounding corpus (platform/node/corpus_build.ts): built from the @stdlib datasets into
// JSONL passages that the loader reads back — Moby-Dick's chapters in order, then State of the Union
// addresses — and written wherever it is asked to, creating the folder.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseCorpusJsonl } from '../../src/core/spade/corpus.ts';
import { buildDefaultCorpus, defaultCorpusDocs } from '../../src/platform/node/corpus_build.ts';

describe('the bundled corpus', () => {
  it('is Moby-Dick in chapter order, then the addresses, and round-trips through the JSONL loader', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-corpus-'));
    try {
      const out = pathToFileURL(join(dir, 'nested', 'default.jsonl'));
      const { passages, bytes } = buildDefaultCorpus(out);
      const docs = parseCorpusJsonl(await readFile(out, 'utf8'), 'default');
      expect(docs).toHaveLength(passages);
      expect(passages).toBeGreaterThan(1000);
      expect(bytes).toBeGreaterThan(2 ** 20);
      expect(docs[0]!.source).toMatch(/^Moby-Dick, ch\. 1 /);
      expect(docs.at(-1)!.source).toMatch(/^State of the Union \d{4}, /);
      expect(docs).toEqual(defaultCorpusDocs());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
