/**
 * Store backend for Node: one JSON file per key under DIR/<collection>/<key>.json.
 * Writes go to a temp file then rename, so a crash mid-write never leaves a
 * half-written record behind.
 */
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StorageError } from '../../core/errors.ts';
import { checkCollection, checkKey, parseStored, toJson, type Collection, type Store } from '../../core/store.ts';
import { readRegularText } from './regular_file.ts';

export class DirStore implements Store {
  constructor(readonly dir: string) {}

  private path(collection: Collection, key: string): string {
    checkCollection(collection);
    checkKey(key);
    return join(this.dir, collection, `${key}.json`);
  }

  async get<T>(collection: Collection, key: string): Promise<T | undefined> {
    const p = this.path(collection, key);
    // a regular file only (a FIFO or a device in its place is a SpecialFileError, unread)
    const text = await readRegularText(p);
    if (text === null) return undefined;
    return parseStored<T>(collection, key, text, p);
  }

  async put(collection: Collection, key: string, value: unknown): Promise<void> {
    const p = this.path(collection, key);
    const text = toJson(value);
    await mkdir(join(this.dir, collection), { recursive: true });
    const tmp = `${p}.${process.pid}.tmp`;
    await writeFile(tmp, text, 'utf8');
    await rename(tmp, p);
  }

  async delete(collection: Collection, key: string): Promise<void> {
    await rm(this.path(collection, key), { force: true });
  }

  async keys(collection: Collection): Promise<string[]> {
    checkCollection(collection);
    try {
      const names = await readdir(join(this.dir, collection));
      return names
        .filter((n) => n.endsWith('.json'))
        .map((n) => n.slice(0, -5))
        .sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new StorageError(`cannot list ${join(this.dir, collection)}: ${(err as Error).message}`);
    }
  }
}
