/**
 * One persistence interface for runs, memory and env sets. Backends:
 * MemoryStore (here; tests and fallbacks), IdbStore (browser, src/platform/browser/idb_store.ts)
 * and DirStore (Node run directory, src/platform/node/dir_store.ts).
 * Values are JSON-compatible; keys are strings scoped by a collection name.
 * CheckedStore (here) wraps any of them so that every read goes through a check (the app's table is
 * core/spade/app_records.ts) and a damaged record is set aside, with a notice, instead of thrown.
 */
import { DamagedRecordError, serializeError, StorageError } from './errors.ts';

/** `setaside` holds damaged records moved out of the way (CheckedStore), for inspection. */
export const COLLECTIONS = ['runs', 'memory', 'envsets', 'settings', 'corpus', 'setaside'] as const;
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

/** The longest stored text kept when a record that is not JSON is set aside. */
const SET_ASIDE_CHARS = 65_536;

/**
 * A backend's stored text as JSON; text that is not JSON (or a value that is not text) is a
 * DamagedRecordError carrying the start of it. `where` names it in the message (a file's path).
 */
export function parseStored<T>(
  collection: Collection,
  key: string,
  stored: unknown,
  where = `${collection}/${key}`,
): T {
  if (typeof stored === 'string') {
    try {
      return JSON.parse(stored) as T;
    } catch {
      // fall through
    }
  }
  const raw = typeof stored === 'string' ? stored.slice(0, SET_ASIDE_CHARS) : `(a stored ${typeof stored}, not text)`;
  throw new DamagedRecordError(`${where} is not valid JSON; delete or fix it`, { collection, key, raw });
}

/** A record moved to `setaside`: where it was, why, when, and what it held. */
export interface SetAsideRecord {
  collection: Collection;
  key: string;
  problem: string;
  at: string;
  /** The value as read, or the start of its text when it was not JSON. */
  value: unknown;
}

/** A check of a record read from a store: returns the value to use, or throws why it is damaged. */
export type RecordCheck = (collection: Collection, key: string, value: unknown) => unknown;

/**
 * A Store whose reads are checked. A record that is not JSON or fails `check` is moved to the
 * `setaside` collection (key: collection, key and time), deleted from its place, reported through
 * `onSetAside` in words, and read as absent: the caller sees a fresh start for that record and never
 * an exception. Other failures (the database is unavailable) are thrown as before. Keys a backend
 * lists are always strings (IdbStore skips others).
 */
export class CheckedStore implements Store {
  constructor(
    private readonly inner: Store,
    private readonly check: RecordCheck,
    private readonly onSetAside: (notice: string, record: SetAsideRecord) => void,
  ) {}

  async get<T>(collection: Collection, key: string): Promise<T | undefined> {
    let value: unknown;
    try {
      value = await this.inner.get(collection, key);
    } catch (err) {
      if (!(err instanceof DamagedRecordError)) throw err;
      await this.setAside(collection, key, err.data.raw, err.message);
      return undefined;
    }
    if (value === undefined || collection === 'setaside') return value as T | undefined;
    try {
      return this.check(collection, key, value) as T;
    } catch (err) {
      await this.setAside(collection, key, value, serializeError(err).message);
      return undefined;
    }
  }

  private async setAside(collection: Collection, key: string, value: unknown, problem: string): Promise<void> {
    const at = new Date().toISOString();
    const record: SetAsideRecord = { collection, key, problem, at, value };
    const stamp = at.replace(/[^0-9]/g, '').slice(0, 17);
    const asideKey = `${collection}.${key}`.slice(0, 110) + `.${stamp}`;
    let kept = true;
    try {
      await this.inner.put('setaside', asideKey, record);
    } catch {
      kept = false; // e.g. a value that cannot be stored again: it is still taken out of the way
    }
    await this.inner.delete(collection, key).catch(() => undefined);
    const where = kept ? `kept in storage as setaside/${asideKey}` : 'removed';
    this.onSetAside(`${problem} It was set aside (${where}) and the app goes on without it.`, record);
  }

  put(collection: Collection, key: string, value: unknown): Promise<void> {
    return this.inner.put(collection, key, value);
  }
  delete(collection: Collection, key: string): Promise<void> {
    return this.inner.delete(collection, key);
  }
  keys(collection: Collection): Promise<string[]> {
    return this.inner.keys(collection);
  }
}

export class MemoryStore implements Store {
  private readonly data = new Map<string, string>();
  async get<T>(collection: Collection, key: string): Promise<T | undefined> {
    checkCollection(collection);
    checkKey(key);
    const v = this.data.get(`${collection}/${key}`);
    return v === undefined ? undefined : parseStored<T>(collection, key, v);
  }
  async put(collection: Collection, key: string, value: unknown): Promise<void> {
    checkCollection(collection);
    checkKey(key);
    this.data.set(`${collection}/${key}`, toJson(value));
  }
  /** Tests: store text as it is (not JSON-encoded), as a damaged or older record would be. */
  putRaw(collection: Collection, key: string, text: string): void {
    this.data.set(`${collection}/${key}`, text);
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
