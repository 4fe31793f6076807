/**
 * One persistence interface for runs, memory and env sets. Backends:
 * MemoryStore (here; tests and fallbacks), IdbStore (browser, src/platform/browser/idb_store.ts)
 * and DirStore (Node run directory, src/platform/node/dir_store.ts).
 * Values are JSON-compatible; keys are strings scoped by a collection name.
 */
import { StorageError } from './errors.ts';

export const COLLECTIONS = ['runs', 'memory', 'envsets', 'settings', 'corpus'] as const;
export type Collection = (typeof COLLECTIONS)[number];

export interface Store {
  get<T = unknown>(collection: Collection, key: string): Promise<T | undefined>;
  put(collection: Collection, key: string, value: unknown): Promise<void>;
  delete(collection: Collection, key: string): Promise<void>;
  keys(collection: Collection): Promise<string[]>;
}

/** Keys are used as file names by DirStore, so keep them portable everywhere. */
export function checkKey(key: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(key) || key.includes('..')) {
    throw new StorageError(
      `invalid storage key ${JSON.stringify(key)}: use 1-128 letters, digits, ".", "_" or "-", starting with a letter or digit`,
      { key },
    );
  }
}

export function checkCollection(collection: string): asserts collection is Collection {
  if (!(COLLECTIONS as readonly string[]).includes(collection)) {
    throw new StorageError(`unknown collection "${collection}"; expected one of ${COLLECTIONS.join(', ')}`);
  }
}

/** Values are stored as JSON; reject what would not survive a round trip. */
export function toJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new StorageError(`value cannot be stored as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new StorageError('value cannot be stored as JSON (undefined or a function)');
  return text;
}

export class MemoryStore implements Store {
  private readonly data = new Map<string, string>();
  async get<T>(collection: Collection, key: string): Promise<T | undefined> {
    checkCollection(collection);
    checkKey(key);
    const v = this.data.get(`${collection}/${key}`);
    return v === undefined ? undefined : (JSON.parse(v) as T);
  }
  async put(collection: Collection, key: string, value: unknown): Promise<void> {
    checkCollection(collection);
    checkKey(key);
    this.data.set(`${collection}/${key}`, toJson(value));
  }
  async delete(collection: Collection, key: string): Promise<void> {
    checkCollection(collection);
    checkKey(key);
    this.data.delete(`${collection}/${key}`);
  }
  async keys(collection: Collection): Promise<string[]> {
    checkCollection(collection);
    const prefix = `${collection}/`;
    return [...this.data.keys()]
      .filter((k) => k.startsWith(prefix))
      .map((k) => k.slice(prefix.length))
      .sort();
  }
}
