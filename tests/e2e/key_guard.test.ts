// The API key after a reload (#41): a key lives in the tab's memory unless "Remember the key" is
// ticked, so after a reload the roles still read openai:… while the tab holds no key. The Run panel
// says so before Start (which is off for a hosted API that answers nothing without one), and its
// button goes back to the Models panel with the cursor in the key field: one click, then typing the
// key clears the guard. Also: "Remember the key" sits beside its label, and a base URL with a user
// name and password is flagged and saved without them (#38 item 5). Nothing is sent to any server.
//   npx vite build && npx vitest run --project e2e tests/e2e/key_guard.test.ts
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

/** The Models panel's saved settings (IndexedDB, JSON text: idb_store.ts). */
function savedModels(page: Page) {
  return page.evaluate(
    () =>
      new Promise<{ roles?: Record<string, string>; openai?: { baseURL: string; apiKey: string } } | null>(
        (resolve) => {
          const open = indexedDB.open('spade-playground');
          open.onsuccess = () => {
            const get = open.result.transaction('settings').objectStore('settings').get('models');
            get.onsuccess = () => {
              const text = get.result as string | undefined;
              open.result.close();
              resolve(text ? JSON.parse(text) : null);
            };
            get.onerror = () => resolve(null);
          };
          open.onerror = () => resolve(null);
        },
      ),
  );
}

describe('a role that needs a key the tab no longer holds', () => {
  const app = appInBrowser();

  it('guards Start after a reload without "Remember", and one click goes back to the key', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1100, height: 900 } });
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=models`);
    await page.getByTestId('server-section').waitFor();

    // "Remember the key" sits beside its label, on one line, not above it
    const remember = page.getByTestId('remember-key');
    const layout = await remember.evaluate((input) => {
      const label = input.closest('label')!;
      const text = Array.from(label.childNodes).find((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.trim())!;
      const range = document.createRange();
      range.selectNodeContents(text);
      const t = range.getBoundingClientRect();
      const b = input.getBoundingClientRect();
      return {
        direction: getComputedStyle(label).flexDirection,
        inputRight: b.right,
        textLeft: t.left,
        overlap: Math.min(b.bottom, t.bottom) - Math.max(b.top, t.top),
      };
    });
    expect(layout.direction).toBe('row');
    expect(layout.inputRight).toBeLessThanOrEqual(layout.textLeft);
    expect(layout.overlap).toBeGreaterThan(0);

    // a user name and password in the base URL: flagged (shown as ***) and never saved
    await page.getByTestId('openai-url').fill('http://user:hunter2SECRET@127.0.0.1:9/v1');
    const flag = page.getByTestId('url-credentials');
    await flag.waitFor();
    expect(await flag.textContent()).toContain('http://***@127.0.0.1:9/v1');
    await expect.poll(async () => (await savedModels(page))?.openai?.baseURL).toBe('http://127.0.0.1:9/v1');
    expect(JSON.stringify(await savedModels(page))).not.toContain('hunter2SECRET');

    // OpenAI for every role, with a key, not remembered
    await page.getByTestId('preset-OpenAI').click();
    await page.getByTestId('openai-key').fill('sk-test-not-remembered');
    await page.getByTestId('server-all-roles').click();
    await expect
      .poll(async () => (await savedModels(page))?.roles)
      .toEqual({ designer: 'openai', hint: 'openai', agent: 'openai' });
    expect((await savedModels(page))?.openai?.apiKey).toBe('');

    // with the key in the tab, Start is free
    await page.locator('#tab-run').click();
    await page.getByTestId('start').waitFor();
    expect(await page.getByTestId('key-guard').count()).toBe(0);
    expect(await page.getByTestId('start').isEnabled()).toBe(true);

    // a reload forgets the key: the guard says so before Start, and Start is off
    await page.reload();
    const guard = page.getByTestId('key-guard');
    await guard.waitFor();
    const text = (await guard.textContent())!;
    expect(text).toMatch(/Every role uses api\.openai\.com, which answers nothing without an API key/);
    expect(text).toMatch(/Remember the key/);
    expect(await page.getByTestId('start').isDisabled()).toBe(true);
    await page.screenshot({ path: resultPath('key-guard.png'), fullPage: true });

    // one click: the Models panel, the cursor in the key field
    await page.getByTestId('key-guard-enter').click();
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid')))
      .toBe('openai-key');
    expect(page.url()).toContain('panel=models');
    await page.keyboard.type('sk-test-again');
    await page.locator('#tab-run').click();
    await page.getByTestId('start').waitFor();
    // the key typed back is in this tab: no guard, Start is on
    expect(await page.getByTestId('key-guard').count()).toBe(0);
    expect(await page.getByTestId('start').isEnabled()).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });
});
