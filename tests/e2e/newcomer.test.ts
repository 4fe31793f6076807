// What a newcomer sees in Chromium on a software adapter (SwiftShader): the Run panel names the same
// default model for every role as the Models panel (one table, core/llm/default_models.ts), before
// and after a reload and without opening Models first; the run form waits below one summary line
// until asked for; the no-GPU routes fill the server form and say what to run; the API key is
// forgotten on reload unless "remember" is ticked; Settings reads in words (no code names). Then
// screenshots of the first screen, Models and Settings at 1280 and 360 px in both themes, with no
// panel wider than a phone: test-results/newcomer-*.png.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const ROLES = ['designer', 'hint', 'agent'] as const;

async function gpuReady(page: Page) {
  await page
    .getByTestId('gpu-chip')
    .filter({ hasText: /WebGPU: (?!checking)/ })
    .waitFor({ timeout: 60_000 });
}

/** The Models panel's saved record in IndexedDB (the store keeps JSON text: idb_store.ts), or null. */
function savedModels(page: Page): Promise<Record<string, unknown> | null> {
  return page.evaluate(
    () =>
      new Promise<Record<string, unknown> | null>((resolve) => {
        const open = indexedDB.open('spade-playground');
        open.onsuccess = () => {
          const get = open.result.transaction('settings').objectStore('settings').get('models');
          get.onsuccess = () => {
            const text = get.result as string | undefined;
            open.result.close();
            resolve(text ? (JSON.parse(text) as Record<string, unknown>) : null);
          };
          get.onerror = () => resolve(null);
        };
        open.onerror = () => resolve(null);
      }),
  );
}

/** "designer = webllm:X, hint = webllm:Y, agent = webllm:Z" → {designer: 'webllm:X', ...}. */
function parseRunModels(text: string): Record<string, string> {
  return Object.fromEntries(text.split(', ').map((p) => p.split(' = ') as [string, string]));
}

describe('a newcomer on a software adapter', () => {
  const app = appInBrowser();

  it("the Run panel's default models are the Models panel's, before and after a reload", async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=run`);
    await gpuReady(page);
    const runModels = async () => parseRunModels((await page.getByTestId('run-models').textContent()) ?? '');
    // the software adapter's default, without the Models tab ever opened
    await expect
      .poll(async () => (await runModels()).designer, { timeout: 30_000 })
      .toBe('webllm:SmolLM2-360M-Instruct-q4f32_1-MLC');
    const onRun = await runModels();
    expect(Object.keys(onRun)).toEqual([...ROLES]);
    await page.getByRole('tab', { name: 'Models' }).click();
    for (const r of ROLES) expect(await page.getByTestId(`role-model-${r}`).textContent()).toBe(onRun[r]);
    await page.reload();
    await gpuReady(page);
    await page.getByRole('tab', { name: 'Run' }).click();
    await expect.poll(async () => await runModels(), { timeout: 30_000 }).toEqual(onRun);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('the run form waits below one line until asked for', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${app.url}#panel=run&seed=7`);
    const form = page.getByRole('form', { name: 'Run configuration' });
    await page.getByTestId('run-form-summary').waitFor();
    expect(await form.isVisible()).toBe(false);
    const summary = (await page.getByTestId('run-form-summary').textContent())?.replace(/\s+/g, ' ');
    expect(summary).toMatch(/This run: laptop preset, games, medium, 4 plays per environment, seed 7, all skills/);
    expect(await page.getByTestId('iterations').isVisible()).toBe(true); // cycles stay beside Start
    await page.getByTestId('run-form-open').click();
    expect(await form.isVisible()).toBe(true);
    expect(await page.getByTestId('run-form-summary').count()).toBe(0);
    await context.close();
  });

  it('the no-GPU routes fill the server form; the key is forgotten on reload unless remembered', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${app.url}#panel=models`);
    await page.getByTestId('preset-Ollama').click();
    expect(await page.getByTestId('openai-url').inputValue()).toBe('http://127.0.0.1:11434/v1');
    expect(await page.getByTestId('openai-model').inputValue()).toBe('qwen2.5:1.5b');
    expect(await page.getByTestId('openai-context').inputValue()).toBe('8192');
    const note = (await page.getByTestId('preset-note').textContent()) ?? '';
    expect(note).toContain(`OLLAMA_ORIGINS=${new URL(app.url).origin}`);
    expect(note).toContain('ollama pull qwen2.5:1.5b');
    expect(note).toMatch(/estimate/);
    await page.getByTestId('preset-OpenAI').click();
    expect(await page.getByTestId('openai-url').inputValue()).toBe('https://api.openai.com/v1');
    expect(await page.getByTestId('provider-note').textContent()).toMatch(/provider sees every prompt and reply/);
    await page.getByTestId('server-all-roles').click();
    for (const r of ROLES) expect(await page.getByTestId(`source-${r}`).inputValue()).toBe('openai');
    // not remembered: gone after a reload (the rest of the form stays)
    await page.getByTestId('openai-key').fill('sk-e2e-forget');
    await expect
      .poll(() => savedModels(page), { timeout: 30_000 })
      .toMatchObject({
        openai: { baseURL: 'https://api.openai.com/v1', apiKey: '' },
      });
    await page.reload();
    await expect.poll(() => page.getByTestId('openai-url').inputValue()).toBe('https://api.openai.com/v1');
    expect(await page.getByTestId('openai-key').inputValue()).toBe('');
    // remembered: back after a reload
    await page.getByTestId('openai-key').fill('sk-e2e-keep');
    await page.getByTestId('remember-key').check();
    await expect
      .poll(() => savedModels(page), { timeout: 30_000 })
      .toMatchObject({ rememberKey: true, openai: { apiKey: 'sk-e2e-keep' } });
    await page.reload();
    await expect.poll(() => page.getByTestId('openai-key').inputValue()).toBe('sk-e2e-keep');
    expect(await page.getByTestId('remember-key').isChecked()).toBe(true);
    await context.close();
  });

  it('Settings reads in words: labels without code names, no references to the source', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${app.url}#panel=settings`);
    // the panel renders after the app's first load: wait for it rather than read an empty page
    await expect.poll(() => page.locator('form.settings label').count(), { timeout: 60_000 }).toBeGreaterThan(40);
    const labels = await page.locator('form.settings label').allTextContents();
    for (const l of labels) {
      expect(l, l).toMatch(/^[A-Z][^()]* ?(\([^()]+\))?$/); // a label, then its unit in brackets
      expect(l.replace(/ ?\(.*\)$/, ''), l).not.toMatch(/[a-z][A-Z]|_/); // no camelCase or snake_case names
    }
    const text =
      (await page
        .locator('section')
        .filter({ has: page.locator('form.settings') })
        .textContent()) ?? '';
    expect(text).not.toMatch(/PRESETS below|schema/i);
    expect(await page.getByLabel('Plays per environment').inputValue()).toBe('4');
    await context.close();
  });

  for (const width of [1280, 360])
    for (const theme of ['light', 'dark'] as const)
      it(`screenshots at ${width} px, ${theme}: first screen, Models, Settings; nothing wider than the viewport`, async () => {
        const context = await app.browser.newContext({ viewport: { width, height: width > 600 ? 900 : 760 } });
        const page = await context.newPage();
        const errors = watchErrors(page);
        for (const panel of ['run', 'models', 'settings']) {
          await page.goto(`${app.url}#panel=${panel}&theme=${theme}`);
          await page.locator('h2').first().waitFor();
          if (panel !== 'settings') await gpuReady(page);
          expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe(theme);
          const wide = await page.evaluate(() => document.documentElement.scrollWidth);
          expect(wide, `${panel} at ${width} px`).toBeLessThanOrEqual(width);
          await page.screenshot({
            path: resultPath(`newcomer-${panel}-${width}-${theme}.png`),
            fullPage: panel === 'run',
          });
        }
        expect(errors).toEqual([]);
        await context.close();
      });
});
