/**
 * Downloaded model files kept in the browser's Cache API (one cache, keyed by file URL), so a
 * checkpoint downloads once. Plug it into UrlModelFiles / huggingFaceFiles as `cache`; list and
 * delete per model for the UI.
 *
 * A model is a URL prefix: for Hugging Face `https://huggingface.co/{repo}/resolve/{rev}/`, shown
 * as "{repo}@{rev}". Files cached from a branch (main) are not re-checked against newer commits;
 * delete the model to fetch it again, or load a pinned commit.
 */
import type { ModelFileCache } from '../../engine/engine_api.ts';

const MODEL_CACHE_NAME = 'spade-models-v1';

export interface CachedModelFile {
  url: string;
  /** The model's base URL (everything up to the file name). */
  model: string;
  file: string;
  bytes: number;
  cachedAt: string | null;
}

export interface CachedModel {
  /** Base URL; pass to delete(). */
  model: string;
  /** "owner/name@rev" for Hugging Face URLs, else the base URL. */
  label: string;
  files: CachedModelFile[];
  bytes: number;
}

/** Split a file URL into model base URL and file name (HF resolve URLs keep sub-folders in the file). */
export function splitModelUrl(url: string): { model: string; file: string; label: string } {
  const hf = /^(https?:\/\/[^/]+\/(?:[^/]+\/)?[^/]+\/resolve\/[^/]+\/)(.+)$/.exec(url);
  if (hf) {
    const m = /^https?:\/\/[^/]+\/(.+)\/resolve\/([^/]+)\/$/.exec(hf[1]!)!;
    return { model: hf[1]!, file: decodeURIComponent(hf[2]!), label: `${m[1]}@${decodeURIComponent(m[2]!)}` };
  }
  const cut = url.lastIndexOf('/') + 1;
  return { model: url.slice(0, cut), file: decodeURIComponent(url.slice(cut)), label: url.slice(0, cut) };
}

export class ModelCache implements ModelFileCache {
  constructor(
    private readonly storage: CacheStorage | undefined = globalThis.caches,
    readonly name = MODEL_CACHE_NAME,
  ) {}

  /** Whether the Cache API exists here (not in insecure contexts or some private modes). */
  get available(): boolean {
    return this.storage !== undefined;
  }

  private open(): Promise<Cache> {
    if (!this.storage)
      throw new Error('The Cache API is not available (it needs a secure context: https or localhost)');
    return this.storage.open(this.name);
  }

  async get(url: string): Promise<Uint8Array | undefined> {
    if (!this.storage) return undefined;
    const res = await (await this.open()).match(url);
    if (!res) return undefined;
    return new Uint8Array(await res.arrayBuffer());
  }

  async put(url: string, bytes: Uint8Array): Promise<void> {
    if (!this.storage) return;
    const body = new Uint8Array(bytes); // a copy on a plain ArrayBuffer
    await (
      await this.open()
    ).put(
      url,
      new Response(body.buffer, {
        headers: {
          'content-type': 'application/octet-stream',
          'content-length': String(bytes.byteLength),
          'x-spade-cached-at': new Date().toISOString(),
        },
      }),
    );
  }

  async has(url: string): Promise<boolean> {
    if (!this.storage) return false;
    return (await (await this.open()).match(url)) !== undefined;
  }

  /** Every cached file (sizes from headers; bodies are not read). */
  async listFiles(): Promise<CachedModelFile[]> {
    if (!this.storage) return [];
    const cache = await this.open();
    const out: CachedModelFile[] = [];
    for (const req of await cache.keys()) {
      const res = await cache.match(req);
      if (!res) continue;
      const { model, file } = splitModelUrl(req.url);
      let bytes = Number(res.headers.get('content-length') ?? NaN);
      if (!Number.isFinite(bytes)) bytes = (await res.arrayBuffer()).byteLength;
      out.push({ url: req.url, model, file, bytes, cachedAt: res.headers.get('x-spade-cached-at') });
    }
    return out;
  }

  /** Cached files grouped by model, largest first. */
  async list(): Promise<CachedModel[]> {
    const byModel = new Map<string, CachedModel>();
    for (const f of await this.listFiles()) {
      let m = byModel.get(f.model);
      if (!m) {
        m = { model: f.model, label: splitModelUrl(f.url).label, files: [], bytes: 0 };
        byModel.set(f.model, m);
      }
      m.files.push(f);
      m.bytes += f.bytes;
    }
    return [...byModel.values()].sort((a, b) => b.bytes - a.bytes);
  }

  /** Delete one file (a full URL) or every file of a model (its base URL, ending in '/'). Returns the count. */
  async delete(urlOrModel: string): Promise<number> {
    if (!this.storage) return 0;
    const cache = await this.open();
    let n = 0;
    for (const req of await cache.keys()) {
      const hit = urlOrModel.endsWith('/') ? req.url.startsWith(urlOrModel) : req.url === urlOrModel;
      if (hit && (await cache.delete(req))) n++;
    }
    return n;
  }

  /** Drop the whole cache. */
  async clear(): Promise<void> {
    if (this.storage) await this.storage.delete(this.name);
  }
}
