// A poisoned IndexedDB cannot brick the app: each damaged record (what an older version, another
// tab's bug or a hostile page on the same origin could leave) is seeded into a real Chromium profile;
// after a reload the app opens a share link, every tab still switches, the record is set aside with
// a notice, and no page error happens. See src/core/spade/app_records.ts and CheckedStore.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { encodeShareLink, makeEnvSet, recordFromCode } from '../../src/core/env/envset.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

/** One poisoned record: written as it is (a string is stored as that text; anything else as a structured clone). */
interface Poison {
  name: string;
  records: { store: string; key: IDBValidKey; value: unknown }[];
  /** Words the set-aside notice must contain ('' when the record is never listed, so no notice is due). */
  notice: string;
}

const cycleRecord = (over: Record<string, unknown>) => JSON.stringify({ archive: [], rollouts: [], ...over });

const POISONS: Poison[] = [
  {
    name: 'an activeRun whose id is not a key',
    records: [{ store: 'settings', key: 'activeRun', value: JSON.stringify({ runId: '../../etc', iterations: 3 }) }],
    notice: 'the run to resume',
  },
  {
    name: 'an activeRun that is not an object',
    records: [{ store: 'settings', key: 'activeRun', value: '"run-1"' }],
    notice: 'the run to resume',
  },
  {
    name: 'an old-format cycle record of the active run',
    records: [
      { store: 'settings', key: 'activeRun', value: JSON.stringify({ runId: 'run-old', iterations: 3 }) },
      { store: 'runs', key: 'run-old.c000000', value: cycleRecord({ archive: [{ cycle: 0 }], metrics: { cycle: 0 } }) },
      { store: 'runs', key: 'run-old.state', value: JSON.stringify({ version: 1, cycle: 1 }) },
    ],
    notice: "a run's finished cycle",
  },
  {
    name: 'memory/imported = {}',
    records: [{ store: 'memory', key: 'imported', value: '{}' }],
    notice: 'imported memory',
  },
  {
    name: 'memory/imported as a structured clone, not text',
    records: [{ store: 'memory', key: 'imported', value: { capacity: 5, records: 'x' } }],
    notice: 'not valid JSON',
  },
  {
    name: 'settings/models that is not JSON',
    records: [{ store: 'settings', key: 'models', value: '{roles:' }],
    notice: 'not valid JSON',
  },
  {
    name: 'settings/models with roles as a string',
    records: [{ store: 'settings', key: 'models', value: JSON.stringify({ roles: 'designer' }) }],
    notice: 'model choices',
  },
  { name: 'settings/config = 5', records: [{ store: 'settings', key: 'config', value: '5' }], notice: 'settings' },
  {
    name: 'a theme that is markup',
    records: [{ store: 'settings', key: 'theme', value: '"<b>x</b>"' }],
    notice: 'theme',
  },
  {
    name: 'corpus/user that is not a list',
    records: [{ store: 'corpus', key: 'user', value: '{"text":1}' }],
    notice: 'your documents',
  },
  {
    name: 'keys that are not strings, in two stores',
    records: [
      { store: 'envsets', key: 5, value: '{}' },
      { store: 'runs', key: ['a', 1], value: '{}' },
    ],
    notice: '',
  },
];

/** Open the app once (it creates its database), then write the poison straight into IndexedDB. */
async function poison(page: Page, records: Poison['records']): Promise<void> {
  // (the records go over as one JSON text: playwright's typing of an `unknown` argument recurses forever)
  const wire = JSON.stringify(records.map((r) => [r.store, r.key, r.value]));
  await page.evaluate(async (text: string) => {
    const recs = (JSON.parse(text) as [string, IDBValidKey, unknown][]).map(([store, key, value]) => ({
      store,
      key,
      value,
    }));
    const db = await new Promise<IDBDatabase>((ok, fail) => {
      const r = indexedDB.open('spade-playground');
      r.onsuccess = () => ok(r.result);
      r.onerror = () => fail(r.error);
    });
    for (const { store, key, value } of recs)
      await new Promise<void>((ok, fail) => {
        const tx = db.transaction(store, 'readwrite');
        tx.objectStore(store).put(value, key);
        tx.oncomplete = () => ok();
        tx.onerror = () => fail(tx.error);
      });
    db.close();
  }, wire);
}

/** The keys the app has saved in its settings store, of those it writes on every first load. */
async function savedSettings(page: Page): Promise<string[]> {
  return page.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((ok, fail) => {
      const r = indexedDB.open('spade-playground');
      r.onsuccess = () => ok(r.result);
      r.onerror = () => fail(r.error);
    });
    if (!db.objectStoreNames.contains('settings')) return (db.close(), []);
    const keys = await new Promise<IDBValidKey[]>((ok, fail) => {
      const q = db.transaction('settings').objectStore('settings').getAllKeys();
      q.onsuccess = () => ok(q.result);
      q.onerror = () => fail(q.error);
    });
    db.close();
    return keys.filter((k): k is string => ['config', 'models', 'theme'].includes(String(k))).sort();
  });
}

describe('a poisoned IndexedDB', () => {
  const app = appInBrowser();
  const shared = recordFromCode(
    [
      '// @title Link Lantern',
      "class LinkEnv { reset() { return ['dark', {}]; } step() { return ['lit', 1, true, false, {}]; } solution() { return ['\\\\boxed{light}']; } }",
    ].join('\n'),
  );
  const link = `#panel=environments&set=${encodeShareLink(makeEnvSet('Link set', [shared]))}`;

  it.each(POISONS)('starts with $name: the link opens, every tab works, the record is set aside', async (p) => {
    const context = await app.browser.newContext({ viewport: { width: 1100, height: 800 } });
    const first = await context.newPage();
    await first.goto(app.url);
    await first.getByRole('tab', { name: 'Run' }).waitFor();
    // the first visit's own saves are done (the app writes these once it has loaded, then only on a change)
    await expect.poll(() => savedSettings(first), { timeout: 60_000 }).toEqual(['config', 'models', 'theme']);
    await poison(first, p.records);
    await first.close(); // a new page loads from scratch: nothing of the first visit can rewrite the records
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}${link}`);

    // the share link is not ignored
    await expect
      .poll(() => page.getByTestId('env-message').textContent(), { timeout: 30_000 })
      .toContain('Opened "Link set" from the link');
    // every tab switches and shows its panel
    for (const tab of ['Run', 'Environments', 'Memory', 'Training', 'Lab', 'Models', 'Settings']) {
      await page.getByRole('tab', { name: tab }).click();
      await expect
        .poll(() => page.getByRole('tab', { name: tab }).getAttribute('aria-selected'), { message: tab })
        .toBe('true');
      await expect.poll(() => page.locator('#panel').textContent(), { message: tab }).not.toBe('');
    }
    if (p.notice) {
      await expect.poll(() => page.locator('.notices').textContent()).toContain(p.notice);
      await expect.poll(() => page.locator('.notices').textContent()).toContain('set aside');
    }
    await page.screenshot({ path: resultPath(`storage-${p.name.replace(/[^a-z0-9]+/gi, '-')}.png`) });
    // the record is gone from its place: a second reload starts clean, with no notice
    await page.reload();
    await page.getByRole('tab', { name: 'Run' }).waitFor();
    await page.waitForTimeout(500);
    if (p.notice) expect(await page.locator('.notices').filter({ hasText: 'set aside' }).count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  });
});
