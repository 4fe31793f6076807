/** Loading a grounding corpus in Node: the bundled default (built on demand) or a user's .jsonl/.txt/.md file. */
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../../core/errors.ts';
import { chunkText, parseCorpusJsonl, type CorpusDoc } from '../../core/spade/corpus.ts';
import { buildDefaultCorpus, DEFAULT_CORPUS } from './corpus_build.ts';
import { readUserFile } from './regular_file.ts';

export async function loadCorpus(spec: string): Promise<CorpusDoc[]> {
  if (spec === 'none') return [];
  if (spec === 'default') {
    if (!existsSync(DEFAULT_CORPUS)) buildDefaultCorpus();
    const path = fileURLToPath(DEFAULT_CORPUS);
    return parseCorpusJsonl(await readUserFile(path, 'the bundled corpus'), 'default');
  }
  const text = await readUserFile(spec, 'the corpus');
  try {
    return spec.endsWith('.jsonl') ? parseCorpusJsonl(text, basename(spec)) : chunkText(text, basename(spec), 400);
  } catch (err) {
    throw new UsageError(`${spec}: ${(err as Error).message}`);
  }
}
