// The built app shell in real Chromium: renders, detects the WebGPU adapter,
// runs the add-kernel self-check, keeps state in the URL, no console errors.
import { describe, expect, it } from 'vitest';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

describe('app shell in Chromium', () => {
  const app = appInBrowser();

  it('renders, shows the adapter and passes the kernel self-check', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1100, height: 720 } });
    const errors = watchErrors(page);
    await page.goto(app.url);
    expect(await page.locator('h1').textContent()).toMatch(/SPADE Playground/);
    const chip = page.getByTestId('gpu-chip');
    await chip.filter({ hasText: /WebGPU: (?!checking)/ }).waitFor({ timeout: 60_000 });
    expect(await chip.textContent()).toMatch(/WebGPU: swiftshader/i);
    await chip.click();
    await page.getByTestId('selfcheck').filter({ hasText: 'add kernel matches CPU' }).waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('f16').textContent()).toMatch(/^(yes|no)$/);
    await page.screenshot({ path: resultPath('shell.png') });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('navigates panels by keyboard, writes only changed fields to the URL, and restores them', async () => {
    const page = await app.browser.newPage({ viewport: { width: 360, height: 740 } });
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=settings&seed=7`);
    await expect.poll(() => page.getByRole('tab', { name: 'Settings' }).getAttribute('aria-selected')).toBe('true');
    await page.getByRole('tab', { name: 'Settings' }).waitFor();
    await expect.poll(() => page.locator('#cfg-seed').inputValue()).toBe('7');
    await page.getByRole('tab', { name: 'Settings' }).focus();
    await page.keyboard.press('Home');
    await expect.poll(() => page.getByRole('tab', { name: 'Run' }).getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => page.getByRole('tab', { name: 'Environments' }).getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#panel=environments&seed=7');
    // 360 px: no panel is wider than the viewport
    for (const tab of ['Run', 'Environments', 'Memory', 'Training', 'Models', 'Settings']) {
      await page.getByRole('tab', { name: tab }).click();
      await expect
        .poll(() => page.evaluate(() => document.documentElement.scrollWidth), { message: tab })
        .toBeLessThanOrEqual(360);
    }
    await page.getByRole('tab', { name: 'Environments' }).click();
    await page.screenshot({ path: resultPath('shell-360.png') });
    // a reload keeps the panel and the seed
    await page.reload();
    await expect.poll(() => page.getByRole('tab', { name: 'Environments' }).getAttribute('aria-selected')).toBe('true');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('follows a hash navigation even when the URL is rewritten before the hashchange event runs', async () => {
    const page = await app.browser.newPage();
    await page.goto(app.url);
    await expect.poll(() => page.getByRole('tab', { name: 'Run' }).getAttribute('aria-selected')).toBe('true');
    // the app rewrites the hash from its state with replaceState; if that lands between a
    // navigation and its hashchange event, the event's newURL still says where the user went
    await page.evaluate(() => {
      location.hash = '#panel=settings&seed=7';
      history.replaceState(history.state, '', location.pathname);
    });
    await expect.poll(() => page.locator('#cfg-seed').inputValue()).toBe('7');
    await page.close();
  });

  it('rejects a bad link value with a notice instead of failing', async () => {
    const page = await app.browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=nope&seed=-3`);
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toContain('panel must be one of run, environments, memory, training, lab, models, settings; got "nope"');
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toContain('seed must be between 0 and 4294967295; got -3');
    // a rejected value never replaces a saved one: seed 7 is saved, then a link says seed=abc
    await page.goto(`${app.url}#panel=settings&seed=7`);
    await expect.poll(() => page.locator('#cfg-seed').inputValue()).toBe('7');
    await page.goto(`${app.url}#panel=settings&seed=abc`);
    await expect.poll(() => page.getByRole('status').textContent()).toContain('seed must be a number; got "abc"');
    expect(await page.locator('#cfg-seed').inputValue()).toBe('7');
    await page.reload();
    await expect.poll(() => page.locator('#cfg-seed').inputValue()).toBe('7');
    expect(errors).toEqual([]);
    await page.close();
  });
});
