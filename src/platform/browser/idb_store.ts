/**
 * Store backend for the browser: IndexedDB through `idb`, one object store per
 * collection. Values are kept as JSON text so every backend stores the same thing.
 * A value that is not JSON text reads as a DamagedRecordError (CheckedStore sets it aside); keys
 * that are not portable strings (another version's or a hostile page's) are never listed.
 */
import { openDB, type IDBPDatabase } from 'idb';
import { StorageError } from '../../core/errors.ts';
import {
  checkCollection,
  checkKey,
  COLLECTIONS,
  parseStored,
  toJson,
  type Collection,
  type Store,
} from '../../core/store.ts';

/** 2: the `setaside` collection. An upgrade only adds the object stores that are missing. */
const DB_VERSION = 2;

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
    const stored: unknown = await (await this.db()).get(collection, key);
    return stored === undefined ? undefined : parseStored<T>(collection, key, stored);
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
    const keys = await (await this.db()).getAllKeys(collection);
    return keys.filter((k): k is string => typeof k === 'string' && portable(k)).sort();
  }
}

function portable(key: string): boolean {
  try {
    checkKey(key);
    return true;
  } catch {
    return false;
  }
}
