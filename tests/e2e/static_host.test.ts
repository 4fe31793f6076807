// The built app put at a URL by anyone (#40 item 6): dist/ served by a plain static file server (node's
// http, serveStatic: no rewrites, no fallback page) under a sub-path, /spade/ as GitHub Pages hosts a
// project, and under a site's root. There the first screen renders with nothing asked for outside the
// path, the one-click Lucky Digit demo finishes, the self-play start runs the Lab (its worker and sandbox
// loaded from under the path), and a share link made there opens there. After that one
// visit, with the network cut (Playwright offline), a second load still opens the app and plays a seed
// environment to the win, and the default corpus still loads. A new build deployed to the same folder
// is offered as "A new version is available — Reload", and Reload (from the keyboard) switches to it.
// Screenshots: test-results/static-host-*.png.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';
import { launchChromium, noDownloadStart, resultPath, serveStatic, watchErrors } from './browser.ts';

const game = SEED_ENVS.find((e) => e.setting === 'games')!;

/** The reference solution for `code` at `seed`, computed in Node's own sandbox. */
async function solutionFor(code: string, seed: number): Promise<string[]> {
  const host = await SandboxHost.create();
  const env = await host.load(code, 12);
  host.reset(env.id, seed);
  const sol = host.solution(env.id);
  host.dispose(env.id);
  return sol;
}

async function selectGame(page: Page) {
  await page
    .getByRole('button', { name: new RegExp(`^${game.title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) })
    .first()
    .click();
  await expect.poll(() => page.getByTestId('env-title').textContent(), { timeout: 30_000 }).toBe(game.title);
}

/** Play the seed game at seed 0 to the win in the Environments panel. */
async function playToWin(page: Page) {
  await selectGame(page);
  await expect.poll(() => page.getByTestId('transcript').textContent(), { timeout: 30_000 }).not.toBe('');
  for (const a of await solutionFor(game.code, 0)) {
    await page.getByTestId('action').fill(a);
    await page.getByTestId('action').press('Enter');
    await expect.poll(() => page.getByTestId('action').inputValue()).toBe('');
    await expect
      .poll(
        async () =>
          (await page.getByTestId('action').isDisabled()) ||
          (await page.getByRole('button', { name: 'Send' }).isEnabled()),
        { timeout: 30_000 },
      )
      .toBe(true);
  }
  await expect.poll(() => page.getByTestId('outcome').textContent(), { timeout: 30_000 }).toBe('Solved!');
}

/**
 * Waits until the page's service worker is active (it activates once every built file is in its
 * cache). Polled, so a page that never registers one fails here: the bound is 90 s, over 20× the
 * 2–4 s it took idle on the 2-core build machine to cache dist/ (19 MB without source maps).
 */
const offlineReady = (page: Page) =>
  expect
    .poll(() => page.evaluate(async () => (await navigator.serviceWorker.getRegistration())?.active?.state ?? null), {
      timeout: 90_000,
    })
    .toMatch(/^activat/);

/** The names of this origin's offline caches, and how many entries the newest holds. */
const offlineCaches = (page: Page) =>
  page.evaluate(async () => {
    const names = (await caches.keys()).filter((k) => k.startsWith('spade-offline '));
    const sizes = await Promise.all(names.map(async (n) => (await (await caches.open(n)).keys()).length));
    return { names, sizes };
  });

for (const prefix of ['/spade/', '/']) {
  const where = prefix === '/' ? 'root' : 'subpath';
  describe(`the built app on a plain static server at ${prefix}`, () => {
    let server: Awaited<ReturnType<typeof serveStatic>>;
    let browser: Browser;
    beforeAll(async () => {
      server = await serveStatic('dist', prefix);
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
      await server?.close();
    });

    it(
      'renders the first screen, finishes the Lucky Digit demo, and its share link opens there',
      { timeout: 600_000 },
      async () => {
        const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
        await context.grantPermissions(['clipboard-read', 'clipboard-write']);
        const page = await context.newPage();
        const errors = watchErrors(page);
        const asked: string[] = [];
        page.on('request', (r) => {
          const u = new URL(r.url());
          if (u.protocol === 'http:') asked.push(u.pathname); // not data: or blob: (made in the page)
        });
        await page.goto(server.url);
        await page.getByTestId('intro').waitFor({ timeout: 30_000 });
        // every file the page and its workers asked for lies under the path: none 404'd, none at the root
        expect(server.missing).toEqual([]);
        expect(asked.filter((p) => !p.startsWith(prefix))).toEqual([]);
        expect(asked.some((p) => p.startsWith(`${prefix}assets/`))).toBe(true);
        await page.screenshot({ path: resultPath(`static-host-start-${where}.png`) });

        const { statusTexts } = await noDownloadStart(page);
        expect(statusTexts.some((s) => /update \d of 8/.test(s))).toBe(true);
        expect(await page.getByTestId('verdict').textContent()).toMatch(/winning digit 7/);

        // the primary start, self-play: the Lab's worker and its sandbox load from under the path too
        await page.getByTestId('intro-selfplay').click();
        await expect.poll(() => page.getByTestId('lab-levels-1').count(), { timeout: 240_000 }).toBe(1);
        await page.getByTestId('lab-pause').click();
        await expect
          .poll(() => page.getByTestId('lab-status').textContent(), { timeout: 240_000 })
          .toMatch(/paused|done/);
        expect(asked.filter((p) => !p.startsWith(prefix))).toEqual([]);
        expect(server.missing).toEqual([]);

        // a share link made here carries this path, and opens here in a fresh browser
        await page.getByRole('tab', { name: 'Environments' }).click();
        await selectGame(page);
        await page.getByRole('button', { name: 'Share link' }).click();
        const link = await page.getByTestId('share-link').inputValue();
        expect(link.startsWith(`${server.url}#panel=environments&set=1.`)).toBe(true);
        expect(server.missing).toEqual([]);
        expect(errors).toEqual([]);
        await context.close();

        const fresh = await browser.newContext();
        const p2 = await fresh.newPage();
        const errors2 = watchErrors(p2);
        await p2.goto(link);
        await expect
          .poll(() => p2.getByTestId('env-message').textContent(), { timeout: 30_000 })
          .toContain(`Opened "${game.title}" from the link`);
        expect(new URL(p2.url()).pathname).toBe(prefix);
        expect(errors2).toEqual([]);
        await fresh.close();
        expect(server.missing).toEqual([]);
      },
    );

    it('after one visit, a second load with the network cut opens the app and plays a seed environment', async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const errors = watchErrors(page);
      await page.goto(`${server.url}#panel=environments`);
      await page.getByTestId('tabstrip').waitFor();
      await offlineReady(page);
      const { names, sizes } = await offlineCaches(page);
      expect(names).toHaveLength(1);
      expect(names[0]).toContain(server.url); // one cache per scope: this folder
      expect(sizes[0]).toBeGreaterThan(10);

      await context.setOffline(true);
      // the network is really cut: a file the worker does not keep cannot be fetched
      expect(
        await page.evaluate(() =>
          fetch('nothing-here.txt').then(
            () => 'fetched',
            () => 'failed',
          ),
        ),
      ).toBe('failed');
      errors.length = 0; // that refused fetch's console line
      await page.reload();
      await page.getByTestId('tabstrip').waitFor({ timeout: 30_000 });
      expect(await page.evaluate(() => !!navigator.serviceWorker.controller)).toBe(true);
      await playToWin(page);
      await page.screenshot({ path: resultPath(`static-host-offline-${where}.png`), fullPage: true });
      // the default corpus, from the page's own folder
      const corpus = await page.evaluate(async () => {
        const res = await fetch('corpus/default.jsonl');
        return { ok: res.ok, lines: (await res.text()).split('\n').filter(Boolean).length };
      });
      expect(corpus.ok).toBe(true);
      expect(corpus.lines).toBeGreaterThan(100);

      // a new tab, offline, opens the app at its address and its first screen
      const second = await context.newPage();
      await second.goto(server.url);
      await second.getByTestId('intro').waitFor({ timeout: 30_000 });
      await second.close();
      expect(errors).toEqual([]);
      await context.close();
    });
  });
}

describe('a new build deployed to the same folder', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof serveStatic>>;
  let browser: Browser;
  beforeAll(async () => {
    // a copy of dist/ (no source maps), so the test can deploy "a new build" over it
    dir = mkdtempSync(join(tmpdir(), 'spade-site-'));
    cpSync('dist', dir, { recursive: true, filter: (src) => !src.endsWith('.map') });
    server = await serveStatic(dir, '/spade/');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is offered as "A new version is available — Reload", and Reload switches to it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(server.url);
    await page.getByTestId('intro').waitFor({ timeout: 30_000 });
    await offlineReady(page);
    await page.reload();
    await page.getByTestId('intro').waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => !!navigator.serviceWorker.controller)).toBe(true);
    expect(await page.getByTestId('update-reload').count()).toBe(0);
    const before = (await offlineCaches(page)).names;
    expect(before).toHaveLength(1);

    // deploy: a changed page, and the service worker a build writes for it (a new version)
    const sw = readFileSync(join(dir, 'sw.js'), 'utf8');
    const version = /version ([0-9a-f]{16})/.exec(sw)![1]!;
    writeFileSync(join(dir, 'sw.js'), sw.replaceAll(version, 'e2e0000000000002'));
    const html = readFileSync(join(dir, 'index.html'), 'utf8');
    writeFileSync(join(dir, 'index.html'), html.replace('<head>', '<head>\n    <meta name="e2e-build" content="2" />'));

    // a load of the page looks for a new build; the old one still serves this page meanwhile
    await page.reload();
    await page.getByTestId('intro').waitFor({ timeout: 30_000 });
    expect(await page.locator('meta[name=e2e-build]').count()).toBe(0);
    const reload = page.getByTestId('update-reload');
    await reload.waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('update-banner').textContent()).toMatch(/A new version is available\s*—\s*Reload/);
    await page.screenshot({ path: resultPath('static-host-update.png') });

    // from the keyboard: focus the button, press Enter; the page reloads into the new build
    await reload.focus();
    await Promise.all([page.waitForEvent('load', { timeout: 60_000 }), page.keyboard.press('Enter')]);
    await page.getByTestId('intro').waitFor({ timeout: 30_000 });
    expect(await page.locator('meta[name=e2e-build]').count()).toBe(1);
    expect(await page.getByTestId('update-reload').count()).toBe(0);
    await expect
      .poll(async () => (await offlineCaches(page)).names)
      .toEqual([before[0]!.replace(version, 'e2e0000000000002')]);
    expect(errors).toEqual([]);
    await context.close();
  });
});
