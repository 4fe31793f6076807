// Grounding documents from a corpus: chunkText cuts a paragraph far longer than a chunk into word
// windows (no document runs past `words`), and excerpt shows a document of exactly `words` words
// whole, marking only a longer one as cut.
import { describe, expect, it } from 'vitest';
import { chunkText, excerpt } from '../../src/core/spade/corpus.ts';

const words = (n: number, w = 'w') => Array.from({ length: n }, (_, i) => `${w}${i}`).join(' ');

describe('grounding documents', () => {
  it('cuts a very long paragraph into windows of `words` words', () => {
    const docs = chunkText(`${words(10, 'a')}\n\n${words(1000, 'b')}\n\n${words(10, 'c')}`, 'book', 400);
    expect(docs.map((d) => d.text.split(/\s+/).length)).toEqual([10, 400, 400, 200, 10]);
    expect(docs.map((d) => d.source)).toEqual(['book §1', 'book §2', 'book §3', 'book §4', 'book §5']);
  });

  it('keeps short paragraphs together up to `words` words', () => {
    const docs = chunkText([words(150), words(150), words(150)].join('\n\n'), 's', 400);
    expect(docs.map((d) => d.text.split(/\s+/).length)).toEqual([300, 150]);
  });

  it('shows a document of exactly `words` words whole and cuts a longer one', () => {
    expect(excerpt({ text: words(5), source: 's' }, 5)).toBe(words(5));
    expect(excerpt({ text: words(6), source: 's' }, 5)).toBe(`${words(5)} …`);
  });
});
