// The app's stored records read through their schemas (core/spade/app_records.ts) by CheckedStore
// (core/store.ts): a damaged record is set aside with a notice and read as absent, never thrown;
// good records come back decoded (older ones with their defaults), token traces kept when well formed.
import { describe, expect, it } from 'vitest';
import { DamagedRecordError, StorageError } from '../../src/core/errors.ts';
import { checkAppRecord } from '../../src/core/spade/app_records.ts';
import { StoreRunStore } from '../../src/core/spade/run_store.ts';
import { CheckedStore, MemoryStore, type SetAsideRecord, type Store } from '../../src/core/store.ts';
import { archiveRecord, metricsRecord, rolloutRecord } from '../helpers/run_records.ts';

function checked(inner = new MemoryStore()) {
  const notices: string[] = [];
  const aside: SetAsideRecord[] = [];
  const store = new CheckedStore(inner, checkAppRecord, (n, r) => {
    notices.push(n);
    aside.push(r);
  });
  return { inner, store, notices, aside };
}

const cycle = (c: number) => ({
  archive: [archiveRecord(c, 0)],
  rollouts: [rolloutRecord(c, 0, 0)],
  metrics: metricsRecord(c, 1),
});

describe('CheckedStore with the app records table', () => {
  it('sets aside a record that is not JSON: read as absent, moved to setaside with its text, a notice', async () => {
    const { inner, store, notices, aside } = checked();
    inner.putRaw('settings', 'models', '{roles:');
    expect(await store.get('settings', 'models')).toBeUndefined();
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(
      /settings\/models is not valid JSON.*set aside \(kept in storage as setaside\/settings\.models\.\d+\)/,
    );
    expect(await inner.keys('settings')).toEqual([]);
    const [key] = await inner.keys('setaside');
    expect(await inner.get('setaside', key!)).toMatchObject({
      collection: 'settings',
      key: 'models',
      value: '{roles:',
    });
    expect(aside[0]!.problem).toContain('not valid JSON');
    // a second read finds nothing and says nothing
    expect(await store.get('settings', 'models')).toBeUndefined();
    expect(notices).toHaveLength(1);
  });

  it.each([
    [
      'settings',
      'activeRun',
      { runId: '../../etc', iterations: 3 },
      /the run to resume .*record\.runId must be a run id/,
    ],
    ['settings', 'activeRun', 'run-1', /must be an object/],
    ['memory', 'imported', {}, /imported memory .*record\.capacity must be/],
    ['settings', 'theme', '<b>x</b>', /theme .*must be one of/],
    ['settings', 'config', 5, /must be an object of settings/],
    ['settings', 'config', { colour: 'red' }, /no setting this app knows/],
    ['settings', 'models', { roles: 'designer' }, /model choices .*record\.roles must be an object/],
    ['corpus', 'user', { text: 1 }, /your documents/],
    ['runs', 'run-1.spec', { config: {} }, /run's settings/],
    ['runs', 'run-1.state', { version: 1, cycle: 1 }, /resume state .*record\.memory must be an object/],
    ['runs', 'run-1.c000000', { archive: [{ cycle: 0 }], rollouts: [], metrics: {} }, /finished cycle .*archive\[0\]/],
    ['settings', 'training.fresh-1', { version: 2 }, /training progress/],
  ] as const)('sets aside %s/%s = %j with the field that is wrong', async (collection, key, value, why) => {
    const { inner, store, notices } = checked();
    await inner.put(collection, key, value);
    expect(await store.get(collection, key)).toBeUndefined();
    expect(notices[0]).toMatch(why);
    expect(notices[0]).toContain('set aside');
    expect(await inner.get(collection, key)).toBeUndefined();
  });

  it('returns good records; an older cycle record reads with its defaults', async () => {
    const { inner, store, notices } = checked();
    await inner.put('settings', 'activeRun', { runId: 'run-abc', iterations: 3 });
    expect(await store.get('settings', 'activeRun')).toEqual({ runId: 'run-abc', iterations: 3 });
    const old = cycle(0) as { metrics: Record<string, unknown> };
    delete old.metrics.errors; // written before the field existed
    await inner.put('runs', 'run-abc.c000000', old);
    const read = await store.get<{ metrics: { errors: number } }>('runs', 'run-abc.c000000');
    expect(read!.metrics.errors).toBe(0);
    // a settings record keeps a field a newer version added
    await inner.put('settings', 'models', { roles: { agent: 'openai' }, newer: 1 });
    expect(await store.get('settings', 'models')).toEqual({ roles: { agent: 'openai' }, newer: 1 });
    // unlisted records and the setaside collection are read as stored
    await inner.put('envsets', 'set-1', { anything: true });
    expect(await store.get('envsets', 'set-1')).toEqual({ anything: true });
    expect(notices).toEqual([]);
  });

  it('keeps a well-formed token trace on a stored rollout and drops a malformed one', async () => {
    const { inner, store } = checked();
    const c = cycle(1);
    const good = { ids: [1, 2, 3, 4], spans: [[2, 4]], logprobs: [-0.5, -1] };
    await inner.put('runs', 'r.c000001', { ...c, rollouts: [{ ...c.rollouts[0], trace: good }] });
    const read = await store.get<{ rollouts: { trace?: unknown }[] }>('runs', 'r.c000001');
    expect(read!.rollouts[0]!.trace).toEqual(good);
    for (const bad of [
      { ids: [1, 2], spans: [[1, 3]], logprobs: [-1, -1] }, // span past the ids
      { ids: [1, 2], spans: [[0, 2]], logprobs: [-1] }, // one log-prob short
      { ids: [1, -2], spans: [], logprobs: [] }, // a negative id
      { ids: [1, 2], spans: [[0, 1]], logprobs: [0.5] }, // a log-prob above 0
    ]) {
      await inner.put('runs', 'r.c000001', { ...c, rollouts: [{ ...c.rollouts[0], trace: bad }] });
      const r2 = await store.get<{ rollouts: { trace?: unknown }[] }>('runs', 'r.c000001');
      expect(r2!.rollouts[0]!.trace).toBeUndefined();
    }
  });

  it('lets a run store read the cycles that are good and skip the one set aside', async () => {
    const { inner, store, notices } = checked();
    await inner.put('runs', 'run-x.c000000', cycle(0));
    inner.putRaw('runs', 'run-x.c000001', 'torn{');
    await inner.put('runs', 'run-x.c000002', cycle(2));
    const rs = new StoreRunStore(store, 'run-x');
    expect((await rs.readArchive()).map((a) => a.cycle)).toEqual([0, 2]);
    expect((await rs.readMetrics()).map((m) => m.cycle)).toEqual([0, 2]);
    expect(notices).toHaveLength(1);
  });

  it('still throws what is not a damaged record (the database itself failing)', async () => {
    const failing: Store = {
      get: () => Promise.reject(new StorageError('IndexedDB is unavailable')),
      put: () => Promise.resolve(),
      delete: () => Promise.resolve(),
      keys: () => Promise.resolve([]),
    };
    const { store } = checked(failing as MemoryStore);
    await expect(store.get('settings', 'models')).rejects.toThrow('IndexedDB is unavailable');
  });

  it('MemoryStore reads text that is not JSON as a DamagedRecordError', async () => {
    const m = new MemoryStore();
    m.putRaw('runs', 'a', 'nope');
    await expect(m.get('runs', 'a')).rejects.toBeInstanceOf(DamagedRecordError);
  });
});
