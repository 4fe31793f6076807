/**
 * A checkpoint's files, wherever they are, behind one interface (loading them is load.ts's):
 *
 *   ModelFiles { list(), read(name, onProgress) }
 *     UrlModelFiles     any base URL; `huggingFaceFiles(repo, revision)` for
 *                       https://huggingface.co/{repo}/resolve/{revision}/{file}; optional cache
 *                       (the browser's Cache API: src/platform/browser/model_cache.ts)
 *     BlobModelFiles    File/Blob objects (a directory picker, <input multiple>, drag-and-drop)
 *     MemoryModelFiles  files in memory (tests, fresh checkpoints, exports)
 *     DirModelFiles     a Node directory (src/platform/node/model_files.ts)
 *
 * Names are checked (checkFileName: relative, no '..'); a missing file throws ModelLoadError with
 * data.code 'not-found' (and data.status for HTTP).
 */
import { abortError, ModelLoadError } from '../../core/errors.ts';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE } from './peft.ts';
import { INDEX_FILE, parseSafetensorsIndex, shardFiles, SINGLE_FILE } from './safetensors.ts';

export interface ModelFileInfo {
  /** Path relative to the checkpoint root, '/'-separated. */
  name: string;
  /** Bytes, or null when the source cannot tell before reading. */
  size: number | null;
}

/** Per-file progress: bytes read so far and the file's size (null when unknown). */
export type FileProgressFn = (loaded: number, total: number | null) => void;

export interface ModelFiles {
  /** Where the files come from, for messages ("https://…/", "/path/to/dir", "3 dropped files"). */
  readonly label: string;
  list(): Promise<ModelFileInfo[]>;
  read(name: string, onProgress?: FileProgressFn, signal?: AbortSignal): Promise<Uint8Array>;
}

/** A store for downloaded files, keyed by URL (the browser's Cache API in ModelCache). */
export interface ModelFileCache {
  get(url: string): Promise<Uint8Array | undefined>;
  put(url: string, bytes: Uint8Array): Promise<void>;
}

export const CONFIG_FILE = 'config.json';
export const TOKENIZER_FILE = 'tokenizer.json';
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';
export const CHAT_TEMPLATE_FILE = 'chat_template.jinja';

/** The files a checkpoint may have at its root, probed when a source cannot list itself. */
const STANDARD_FILES = [
  CONFIG_FILE,
  'generation_config.json',
  TOKENIZER_FILE,
  TOKENIZER_CONFIG_FILE,
  CHAT_TEMPLATE_FILE,
  'special_tokens_map.json',
  SINGLE_FILE,
  INDEX_FILE,
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
];

export function notFound(name: string, where: string, extra: Record<string, unknown> = {}): ModelLoadError {
  return new ModelLoadError(`${name} was not found in ${where}`, { code: 'not-found', file: name, ...extra });
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ModelLoadError && err.data.code === 'not-found';
}

/** Checks a relative file name: no absolute paths, no '..', no empty segments, no backslashes. */
export function checkFileName(name: string): string {
  if (
    !name ||
    name.startsWith('/') ||
    name.includes('\\') ||
    name.includes('\0') ||
    name.split('/').some((s) => s === '' || s === '.' || s === '..')
  )
    throw new ModelLoadError(`"${name}" is not a valid file name inside a checkpoint`, {
      code: 'bad-name',
      file: name,
    });
  return name;
}

/**
 * Read a byte stream to the end with progress; `total` preallocates when known. Throws when the
 * stream ends short of a known total.
 */
export async function readStream(
  stream: ReadableStream<Uint8Array>,
  total: number | null,
  name: string,
  onProgress?: FileProgressFn,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const reader = stream.getReader();
  let buf = new Uint8Array(total ?? 1 << 16);
  let loaded = 0;
  onProgress?.(0, total);
  try {
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      const { done, value } = await reader.read();
      if (done) break;
      if (loaded + value.length > buf.length) {
        const bigger = new Uint8Array(Math.max(buf.length * 2, loaded + value.length));
        bigger.set(buf.subarray(0, loaded));
        buf = bigger;
      }
      buf.set(value, loaded);
      loaded += value.length;
      onProgress?.(loaded, total);
    }
  } finally {
    if (signal?.aborted) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  if (total !== null && loaded !== total)
    throw new ModelLoadError(`${name}: the transfer ended after ${loaded} of ${total} bytes; try again`, {
      code: 'truncated',
      file: name,
      loaded,
      total,
    });
  return loaded === buf.length ? buf : buf.slice(0, loaded);
}

// --- URLs ----------------------------------------------------------------------------------

export interface UrlModelFilesOptions {
  /** fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** The file names, when known up front (list() then returns them without asking the server). */
  files?: string[];
  /** A Hugging Face-style tree listing URL: JSON [{type: 'file', path, size, lfs?: {size}}]. */
  listUrl?: string;
  /** Cache downloaded files here (keyed by full URL). */
  cache?: ModelFileCache;
  /** Extra request headers (e.g. Authorization for gated repos). */
  headers?: Record<string, string>;
}

function httpError(name: string, url: string, status: number, statusText: string): ModelLoadError {
  const data = { code: status === 404 ? 'not-found' : 'http', status, file: name, url };
  if (status === 404)
    return new ModelLoadError(
      `${name} was not found at ${url} (HTTP 404). Check the repository name, the revision and that the model has this file.`,
      data,
    );
  if (status === 401 || status === 403)
    return new ModelLoadError(
      `${name} at ${url} needs access (HTTP ${status}): the repository is private or gated. Accept its license on the Hub, or load the files from disk.`,
      data,
    );
  return new ModelLoadError(
    `Downloading ${name} from ${url} failed: HTTP ${status}${statusText ? ` ${statusText}` : ''}. Try again later.`,
    data,
  );
}

export class UrlModelFiles implements ModelFiles {
  readonly label: string;
  readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;
  private listing: Promise<ModelFileInfo[]> | null = null;

  constructor(
    baseUrl: string,
    private readonly opts: UrlModelFilesOptions = {},
  ) {
    this.baseUrl = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
    this.label = this.baseUrl;
    this.fetchFn = opts.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  /** The full URL of a file. */
  url(name: string): string {
    checkFileName(name);
    return this.baseUrl + name.split('/').map(encodeURIComponent).join('/');
  }

  private async get(url: string, name: string, init: RequestInit = {}): Promise<Response> {
    let res: Response;
    try {
      res = await this.fetchFn(url, { ...init, headers: { ...this.opts.headers, ...init.headers } });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new ModelLoadError(
        `Could not download ${name} from ${url}: ${(err as Error).message}. Check the network connection and the URL.`,
        { code: 'network', file: name, url },
      );
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw httpError(name, url, res.status, res.statusText);
    }
    return res;
  }

  async read(name: string, onProgress?: FileProgressFn, signal?: AbortSignal): Promise<Uint8Array> {
    const url = this.url(name);
    const cache = this.opts.cache;
    if (cache) {
      const hit = await cache.get(url).catch(() => undefined);
      if (hit) {
        onProgress?.(hit.length, hit.length);
        return hit;
      }
    }
    const res = await this.get(url, name, { signal });
    const len = res.headers.get('content-length');
    // A compressed transfer's content-length is the compressed size: do not use it as the total.
    const total = len !== null && !res.headers.get('content-encoding') && /^\d+$/.test(len) ? Number(len) : null;
    const bytes = res.body
      ? await readStream(res.body, total, name, onProgress, signal)
      : new Uint8Array(await res.arrayBuffer());
    if (!res.body) onProgress?.(bytes.length, bytes.length);
    if (cache) await cache.put(url, bytes).catch(() => undefined); // a full cache must not fail the load
    return bytes;
  }

  list(): Promise<ModelFileInfo[]> {
    this.listing ??= this.fetchListing().catch((err) => {
      this.listing = null;
      throw err;
    });
    return this.listing;
  }

  private async fetchListing(): Promise<ModelFileInfo[]> {
    if (this.opts.files) return this.opts.files.map((name) => ({ name: checkFileName(name), size: null }));
    if (this.opts.listUrl) {
      const res = await this.get(this.opts.listUrl, 'the file listing');
      const json = (await res.json()) as unknown;
      if (!Array.isArray(json))
        throw new ModelLoadError(`The file listing at ${this.opts.listUrl} is not a JSON array`, {
          code: 'bad-listing',
        });
      return json
        .filter((e): e is { type: string; path: string; size?: number; lfs?: { size?: number } } => {
          return typeof e === 'object' && e !== null && e.type === 'file' && typeof e.path === 'string';
        })
        .map((e) => ({ name: e.path, size: e.lfs?.size ?? e.size ?? null }));
    }
    // No listing available: probe the standard names with HEAD, then the index's shards.
    const probe = async (name: string): Promise<ModelFileInfo | null> => {
      try {
        const res = await this.get(this.url(name), name, { method: 'HEAD' });
        const len = res.headers.get('content-length');
        return { name, size: len !== null && /^\d+$/.test(len) ? Number(len) : null };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    };
    const found = (await Promise.all(STANDARD_FILES.map(probe))).filter((f): f is ModelFileInfo => f !== null);
    if (found.some((f) => f.name === INDEX_FILE)) {
      const index = parseSafetensorsIndex(new TextDecoder().decode(await this.read(INDEX_FILE)));
      const shards = await Promise.all(shardFiles(index).map(probe));
      for (const s of shards) if (s) found.push(s);
    }
    return found;
  }
}

const REPO = /^[\w.-]+(\/[\w.-]+)?$/;

const HF_BASE = 'https://huggingface.co';

/** Files of a Hugging Face Hub repository at a revision (branch, tag or commit). */
export function huggingFaceFiles(
  repo: string,
  revision = 'main',
  opts: Omit<UrlModelFilesOptions, 'listUrl'> & { endpoint?: string } = {},
): UrlModelFiles {
  if (!REPO.test(repo) || repo.includes('..'))
    throw new ModelLoadError(`"${repo}" is not a Hugging Face repository id (owner/name)`, { code: 'bad-name' });
  const endpoint = (opts.endpoint ?? HF_BASE).replace(/\/+$/, '');
  const rev = encodeURIComponent(revision);
  return new UrlModelFiles(`${endpoint}/${repo}/resolve/${rev}/`, {
    ...opts,
    listUrl: opts.files ? undefined : `${endpoint}/api/models/${repo}/tree/${rev}?recursive=true`,
  });
}

// --- File / Blob objects --------------------------------------------------------------------

/** The parts of a DOM File that are used (a Node Blob/File fits too). */
export interface BlobFile {
  name: string;
  size: number;
  /** Set by <input webkitdirectory> and directory drops: "folder/sub/file.json". */
  webkitRelativePath?: string;
  stream?(): ReadableStream<Uint8Array>;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/**
 * Files the user picked or dropped. Names are their relative paths with the common top folder
 * removed (picking "SmolLM2/" gives "config.json", not "SmolLM2/config.json").
 */
export class BlobModelFiles implements ModelFiles {
  readonly label: string;
  private readonly byName = new Map<string, BlobFile>();

  constructor(files: Iterable<BlobFile>) {
    const list = [...files];
    const paths = list.map((f) => (f.webkitRelativePath || f.name).replace(/^\/+/, ''));
    const firstDirs = paths.map((p) => (p.includes('/') ? p.slice(0, p.indexOf('/') + 1) : ''));
    const common = firstDirs.length > 0 && firstDirs.every((d) => d && d === firstDirs[0]) ? firstDirs[0]!.length : 0;
    list.forEach((f, i) => {
      const name = paths[i]!.slice(common);
      this.byName.set(checkFileName(name), f);
    });
    this.label = `${list.length} selected file${list.length === 1 ? '' : 's'}`;
  }

  async list(): Promise<ModelFileInfo[]> {
    return [...this.byName].map(([name, f]) => ({ name, size: f.size }));
  }

  async read(name: string, onProgress?: FileProgressFn, signal?: AbortSignal): Promise<Uint8Array> {
    const f = this.byName.get(name);
    if (!f) throw notFound(name, this.label);
    if (f.stream) return readStream(f.stream(), f.size, name, onProgress, signal);
    const bytes = new Uint8Array(await f.arrayBuffer());
    onProgress?.(bytes.length, bytes.length);
    return bytes;
  }
}

/** In-memory files (tests, generated checkpoints, exports). */
export class MemoryModelFiles implements ModelFiles {
  readonly label = 'memory';
  constructor(private readonly files: Map<string, Uint8Array>) {}
  async list(): Promise<ModelFileInfo[]> {
    return [...this.files].map(([name, b]) => ({ name, size: b.length }));
  }
  async read(name: string, onProgress?: FileProgressFn): Promise<Uint8Array> {
    const b = this.files.get(name);
    if (!b) throw notFound(name, this.label);
    onProgress?.(b.length, b.length);
    return b;
  }
}
