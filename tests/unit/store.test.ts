// The persistence interface: the same behaviour from MemoryStore and DirStore.
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StorageError } from '../../src/core/errors.ts';
import { MemoryStore, type Store } from '../../src/core/store.ts';
import { DirStore } from '../../src/platform/node/dir_store.ts';

const backends: [string, () => Promise<Store>][] = [
  ['MemoryStore', async () => new MemoryStore()],
  ['DirStore', async () => new DirStore(await mkdtemp(join(tmpdir(), 'spade-store-')))],
];

describe.each(backends)('%s', (_name, make) => {
  it('puts, gets, lists and deletes JSON values per collection', async () => {
    const s = await make();
    expect(await s.get('runs', 'a')).toBeUndefined();
    await s.put('runs', 'b', { x: [1, 2], y: 'z' });
    await s.put('runs', 'a', 3);
    await s.put('memory', 'a', 'other');
    expect(await s.get('runs', 'b')).toEqual({ x: [1, 2], y: 'z' });
    expect(await s.keys('runs')).toEqual(['a', 'b']);
    await s.delete('runs', 'a');
    expect(await s.keys('runs')).toEqual(['b']);
    expect(await s.get('memory', 'a')).toBe('other');
  });
  it('rejects unsafe keys, unknown collections and unstorable values with StorageError', async () => {
    const s = await make();
    await expect(s.put('runs', '../escape', 1)).rejects.toThrow(StorageError);
    await expect(s.put('runs', '', 1)).rejects.toThrow(/invalid storage key ""/);
    await expect(s.get('nope' as never, 'a')).rejects.toThrow(
      'unknown collection "nope"; expected one of runs, memory, envsets, settings, corpus',
    );
    await expect(s.put('runs', 'f', () => 1)).rejects.toThrow(
      'value cannot be stored as JSON (undefined or a function)',
    );
  });
});

describe('DirStore on disk', () => {
  it('writes atomically (no temp files left) and reports corrupt files clearly', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-store-'));
    const s = new DirStore(dir);
    await s.put('runs', 'r1', { ok: true });
    expect(await readdir(join(dir, 'runs'))).toEqual(['r1.json']);
    await writeFile(join(dir, 'runs', 'bad.json'), '{oops');
    await expect(s.get('runs', 'bad')).rejects.toThrow(/bad\.json is not valid JSON; delete or fix that file/);
  });
});
