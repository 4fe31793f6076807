/**
 * Env sets saved in a Store (collection "envsets"): each set is read back with its store key, and
 * removed by that key, so a damaged entry skipped on reading can never shift which set a Remove
 * deletes. Pure: the store is the browser's IndexedDB in the app and a MemoryStore in tests.
 */
import { serializeError } from '../errors.ts';
import type { Store } from '../store.ts';
import { parseEnvSet, type EnvSet } from './envset.ts';

export interface SavedSet {
  /** The key the set is stored under; its identity in the library. */
  key: string;
  set: EnvSet;
}

export interface SavedSets {
  sets: SavedSet[];
  /** Entries that are no longer valid sets: left in storage for inspection, listed here with why. */
  damaged: { key: string; problem: string }[];
}

/** Every saved set, in key order (which is save order: keys start with the save time). */
export async function loadSavedSets(store: Store): Promise<SavedSets> {
  const out: SavedSets = { sets: [], damaged: [] };
  for (const key of await store.keys('envsets')) {
    try {
      out.sets.push({ key, set: parseEnvSet(await store.get<unknown>('envsets', key)) });
    } catch (err) {
      out.damaged.push({ key, problem: serializeError(err).message });
    }
  }
  return out;
}

let counter = 0;
/** Save a set under a new key ("set-<time>-<n>": sorts by save time, unique within a page). */
export async function saveSet(store: Store, set: EnvSet, now = Date.now()): Promise<SavedSet> {
  const key = `set-${now.toString(36).padStart(9, '0')}-${(counter++).toString(36)}`;
  await store.put('envsets', key, set);
  return { key, set };
}

/** Delete the saved set stored under `key` (and nothing else). */
export async function removeSavedSet(store: Store, key: string): Promise<void> {
  await store.delete('envsets', key);
}
