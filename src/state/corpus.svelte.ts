/**
 * The grounding corpus in the browser: the bundled default (fetched on first use from
 * corpus/default.jsonl beside the page, at whatever path the app is served; kept offline by the
 * service worker) and the user's own documents (pasted text, uploaded .txt/.md/.jsonl files, or a
 * URL to a JSONL file), persisted in the store.
 */
import { chunkText, parseCorpusJsonl, type CorpusDoc } from '../core/spade/corpus.ts';
import { serializeError } from '../core/errors.ts';
import type { Store } from '../core/store.ts';

export const CORPUS_CHOICES = ['default', 'mine', 'both', 'none'] as const;
export type CorpusChoice = (typeof CORPUS_CHOICES)[number];

export class CorpusState {
  defaultDocs = $state<CorpusDoc[] | null>(null);
  userDocs = $state<CorpusDoc[]>([]);
  choice = $state<CorpusChoice>('default');
  loading = $state(false);
  message = $state<{ kind: 'ok' | 'error'; text: string } | null>(null);

  constructor(private readonly store: Store) {}

  async load(): Promise<void> {
    const saved = await this.store.get<CorpusDoc[]>('corpus', 'user').catch(() => undefined);
    if (Array.isArray(saved)) this.userDocs = saved;
    const choice = await this.store.get<CorpusChoice>('settings', 'corpusChoice').catch(() => undefined);
    if (choice && (CORPUS_CHOICES as readonly string[]).includes(choice)) this.choice = choice;
  }

  async ensureDefault(): Promise<CorpusDoc[]> {
    if (this.defaultDocs) return this.defaultDocs;
    this.loading = true;
    try {
      const res = await fetch(`${import.meta.env.BASE_URL}corpus/default.jsonl`);
      if (!res.ok) throw new Error(`the bundled corpus is missing (HTTP ${res.status}); rebuild with npm run build`);
      this.defaultDocs = parseCorpusJsonl(await res.text(), 'default');
      return this.defaultDocs;
    } finally {
      this.loading = false;
    }
  }

  /** The documents a run samples from, per the current choice. */
  async active(): Promise<CorpusDoc[]> {
    if (this.choice === 'none') return [];
    if (this.choice === 'mine') return $state.snapshot(this.userDocs);
    const def = await this.ensureDefault();
    return this.choice === 'both' ? [...def, ...$state.snapshot(this.userDocs)] : def;
  }

  private async addDocs(docs: CorpusDoc[], what: string): Promise<void> {
    if (!docs.length) throw new Error(`${what} holds no text`);
    this.userDocs = [...this.userDocs, ...docs];
    await this.store.put('corpus', 'user', $state.snapshot(this.userDocs));
    this.message = { kind: 'ok', text: `Added ${docs.length} passage(s) from ${what}.` };
  }

  async addText(text: string, source = 'pasted text'): Promise<void> {
    try {
      await this.addDocs(chunkText(text, source, 400), source);
    } catch (err) {
      this.message = { kind: 'error', text: serializeError(err).message };
    }
  }

  async addFile(file: File): Promise<void> {
    try {
      if (file.size > 20 * 2 ** 20) throw new Error(`${file.name} is larger than 20 MiB`);
      const text = await file.text();
      await this.addDocs(
        file.name.endsWith('.jsonl') ? parseCorpusJsonl(text, file.name) : chunkText(text, file.name, 400),
        file.name,
      );
    } catch (err) {
      this.message = { kind: 'error', text: `Could not add ${file.name}: ${serializeError(err).message}` };
    }
  }

  async addUrl(url: string): Promise<void> {
    try {
      if (!/^https?:\/\//.test(url)) throw new Error('the URL must start with http:// or https://');
      const res = await fetch(url);
      if (!res.ok) throw new Error(`the server answered ${res.status}`);
      await this.addDocs(parseCorpusJsonl(await res.text(), url), url);
    } catch (err) {
      this.message = {
        kind: 'error',
        text: `Could not load ${url}: ${serializeError(err).message} (the server must allow this page's origin)`,
      };
    }
  }

  async clearMine(): Promise<void> {
    this.userDocs = [];
    await this.store.put('corpus', 'user', []);
  }

  async setChoice(c: CorpusChoice): Promise<void> {
    this.choice = c;
    await this.store.put('settings', 'corpusChoice', c);
  }
}
