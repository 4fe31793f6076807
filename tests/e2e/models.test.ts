// The Models panel on SwiftShader (no shader-f16, a software adapter): the default WebLLM choice is
// a build this adapter can run (a q4f32_1 twin within the VRAM budget), and choosing an f16 build
// turns Load off with the reason shown. Nothing is downloaded: the test never presses Load.
//   npx vite build && npx vitest run --project e2e tests/e2e/models.test.ts
import { describe, expect, it } from 'vitest';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

describe('Models panel on an adapter without shader-f16', () => {
  const app = appInBrowser();

  it('defaults to a runnable q4f32 build and disables Load, with the reason, for an f16 build', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1100, height: 900 } });
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=models`);
    const chip = page.getByTestId('gpu-chip');
    await chip.filter({ hasText: /WebGPU: (?!checking)/ }).waitFor({ timeout: 60_000 });
    expect(await chip.textContent()).toMatch(/WebGPU: swiftshader/i);
    await page.getByTestId('catalog').waitFor();

    // the adapter lacks shader-f16, so the default follows it to an f32 build the table says fits
    const chosen = page.locator('input[name="webllm"]:checked');
    await expect.poll(() => chosen.getAttribute('value'), { timeout: 30_000 }).toMatch(/q4f32_1-MLC$/);
    const id = (await chosen.getAttribute('value'))!;
    expect(await page.getByTestId(`fit-${id}`).textContent()).toMatch(/^\s*yes/);
    const load = page.getByTestId('webllm-load');
    expect(await load.textContent()).toContain(id);
    expect(await load.isEnabled()).toBe(true);
    expect(await page.getByTestId('webllm-load-block').count()).toBe(0);

    // an f16 build: Load is off and says why, naming the twin that would run
    const f16 = 'Qwen2.5-1.5B-Instruct-q4f16_1-MLC';
    await page.locator(`input[name="webllm"][value="${f16}"]`).check();
    await expect.poll(() => load.textContent()).toContain(f16);
    expect(await load.isDisabled()).toBe(true);
    const reason = page.getByTestId('webllm-load-block');
    await reason.waitFor();
    expect(await reason.textContent()).toMatch(/shader-f16.*Qwen2\.5-1\.5B-Instruct-q4f32_1-MLC/);
    expect(await load.getAttribute('aria-describedby')).toBe('webllm-load-block');

    // a user's choice sticks: once saved, a reload keeps the f16 pick (and its disabled Load)
    const saved = () =>
      page.evaluate(
        () =>
          new Promise<unknown>((resolve) => {
            const open = indexedDB.open('spade-playground');
            open.onsuccess = () => {
              const get = open.result.transaction('settings').objectStore('settings').get('models');
              get.onsuccess = () => {
                // the store keeps JSON text (idb_store.ts)
                const text = get.result as string | undefined;
                const v = text ? (JSON.parse(text) as { webllmId?: string; webllmChosen?: boolean }) : undefined;
                open.result.close();
                resolve(v ? [v.webllmId, v.webllmChosen] : null);
              };
              get.onerror = () => resolve(null);
            };
            open.onerror = () => resolve(null);
          }),
      );
    await expect.poll(saved, { timeout: 30_000 }).toEqual([f16, true]);
    await page.reload();
    await page.getByTestId('catalog').waitFor();
    await expect.poll(() => page.locator('input[name="webllm"]:checked').getAttribute('value')).toBe(f16);
    await expect.poll(() => page.getByTestId('webllm-load').isDisabled(), { timeout: 60_000 }).toBe(true);
    await page.screenshot({ path: resultPath('models-no-f16.png'), fullPage: true });
    expect(errors).toEqual([]);
    await page.close();
  });
});
