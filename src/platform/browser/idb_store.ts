/**
 * Store backend for the browser: IndexedDB through `idb`, one object store per
 * collection. Values are kept as JSON text so every backend stores the same thing.
 */
import { openDB, type IDBPDatabase } from 'idb';
import { StorageError } from '../../core/errors.ts';
import { checkCollection, checkKey, COLLECTIONS, toJson, type Collection, type Store } from '../../core/store.ts';

const DB_VERSION = 1;

export class IdbStore implements Store {
  private dbPromise: Promise<IDBPDatabase> | null = null;
  constructor(readonly name = 'spade-playground') {}

  private db(): Promise<IDBPDatabase> {
    this.dbPromise ??= openDB(this.name, DB_VERSION, {
      upgrade(db) {
        for (const c of COLLECTIONS) if (!db.objectStoreNames.contains(c)) db.createObjectStore(c);
      },
    }).catch((err: unknown) => {
      this.dbPromise = null;
      throw new StorageError(
        `IndexedDB is unavailable (${(err as Error).message}); private browsing or blocked storage keeps work from being saved`,
      );
    });
    return this.dbPromise;
  }

  async get<T>(collection: Collection, key: string): Promise<T | undefined> {
    checkCollection(collection);
    checkKey(key);
    const text = (await (await this.db()).get(collection, key)) as string | undefined;
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }
  async put(collection: Collection, key: string, value: unknown): Promise<void> {
    checkCollection(collection);
    checkKey(key);
    await (await this.db()).put(collection, toJson(value), key);
  }
  async delete(collection: Collection, key: string): Promise<void> {
    checkCollection(collection);
    checkKey(key);
    await (await this.db()).delete(collection, key);
  }
  async keys(collection: Collection): Promise<string[]> {
    checkCollection(collection);
    return ((await (await this.db()).getAllKeys(collection)) as string[]).sort();
  }
}
