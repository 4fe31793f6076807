// Our engine in Chromium: a checkpoint picked as local files loads into the engine worker on the
// software GPU, chats through the Models panel as the "local" backend, gets a LoRA adapter and
// exports it in PEFT format. Closed-loop training: a tiny fresh model started in the Training panel
// (no download) serves every role; with "train after every cycle" on, the Run panel refuses while a
// trained role samples elsewhere (naming it, with a link to Models); a cycle then trains, records
// its round, probe and charts, and keeps them in IndexedDB across a reload.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { importPeft } from '../../src/engine/io/peft.ts';
import { writeTinyCheckpoint } from '../helpers/tiny_checkpoint.ts';
import type { Page } from 'playwright-core';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

/** A small cycle: one skill, two designs, short replies and episodes (a random model writes bytes). */
const SMALL: Record<string, string> = {
  skillsPerCycle: '1',
  envsPerSkill: '2',
  playsPerEnv: '2',
  maxTurns: '1',
  repairTurns: '0',
  designerMaxTokens: '500',
  agentTokenBudget: '100',
  designerLag: '0',
  probeEvery: '1',
};

async function setConfig(page: Page, values: Record<string, string>) {
  await page.getByRole('tab', { name: 'Settings' }).click();
  for (const [k, v] of Object.entries(values)) {
    await page.locator(`#cfg-${k}`).fill(v);
    await page.locator(`#cfg-${k}`).dispatchEvent('change');
  }
}

async function useLocal(page: Page, roles: string[]) {
  await page.getByRole('tab', { name: 'Models' }).click();
  for (const r of roles) await page.getByTestId(`source-${r}`).selectOption('local');
}

describe('on-device engine in Chromium', () => {
  const app = appInBrowser();
  let files: string[];
  beforeAll(async () => {
    const dir = resultPath('tiny-qwen2');
    const ck = await writeTinyCheckpoint(dir, 'qwen2', 'f32', 3);
    files = [...ck.files.keys()].map((n) => `${dir}/${n}`);
  });

  it('loads local files, chats as the local backend, makes and exports a PEFT adapter', async () => {
    const page = await app.browser.newPage({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=training`);
    await page.getByTestId('model-files').setInputFiles(files);
    await expect
      .poll(() => page.getByTestId('model-summary').textContent(), { timeout: 120_000 })
      .toMatch(/qwen2 · 0\.\d+M parameters · 2 layers/);

    await page.getByRole('tab', { name: 'Models' }).click();
    await page.getByTestId('source-agent').selectOption('local');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect
      .poll(() => page.getByTestId('try-speed').textContent(), { timeout: 120_000 })
      .toMatch(/tokens in .* s · .* tokens\/s/);

    await page.getByRole('tab', { name: 'Training' }).click();
    await page.getByTestId('new-adapter').click();
    await expect
      .poll(() => page.getByTestId('model-summary').textContent())
      .toMatch(/adapter r=8, α=16 on q_proj, v_proj/);
    const downloads: Record<string, string> = {};
    page.on('download', async (d) => {
      const p = resultPath(`exported-${d.suggestedFilename()}`);
      await d.saveAs(p);
      downloads[d.suggestedFilename()] = p;
    });
    await page.getByRole('button', { name: 'Export (PEFT)' }).click();
    // no update has trained this adapter: the panel says so and asks before exporting it
    await expect.poll(() => page.getByTestId('untrained-warning').textContent()).toContain('no training update here');
    expect(Object.keys(downloads)).toEqual([]);
    await page.getByTestId('export-anyway').click();
    await expect
      .poll(() => Object.keys(downloads).sort(), { timeout: 30_000 })
      .toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    await expect
      .poll(() => readFileSync(downloads['adapter_model.safetensors']!).length, { timeout: 30_000 })
      .toBeGreaterThan(100);
    const adapter = importPeft(
      JSON.parse(readFileSync(downloads['adapter_config.json']!, 'utf8')),
      readFileSync(downloads['adapter_model.safetensors']!),
    );
    expect(adapter.config).toMatchObject({ r: 8, alpha: 16 });
    expect(adapter.tensors.size).toBe(2 * 2 * 2); // 2 layers × (q, v) × (A, B)
    await page.screenshot({ path: resultPath('training.png'), fullPage: true });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('trains a tiny fresh model after a cycle, refusing while a trained role samples elsewhere', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1200, height: 1000 } });
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=training`);
    // this run decodes with the f16 KV cache (the default is f32): plays and training go on the same
    await page.getByTestId('kv-format').selectOption('f16');
    await page.getByTestId('start-fresh').click();
    await expect
      .poll(() => page.getByTestId('model-summary').textContent(), { timeout: 120_000 })
      .toMatch(/fresh-qwen2-2L-64h-seed1 · qwen2 .* 2 layers .*f32 weights.*f16 KV cache.*adapter r=8/s);
    await page.getByTestId('auto-train').check();
    await setConfig(page, SMALL);

    // the agent is ours, the designer still WebLLM: refused, naming the designer and the fix
    await useLocal(page, ['agent']);
    await page.getByRole('tab', { name: 'Run' }).click();
    const open = page.getByTestId('open-loop');
    await expect
      .poll(() => open.textContent())
      .toMatch(/The designer samples from webllm:.*Choose our engine \(local\) for the designer/);
    expect(await open.textContent()).not.toMatch(/The agent samples/);
    expect(await open.getByRole('button', { name: '→ Models' }).count()).toBe(1);
    await page.getByTestId('start').click();
    await expect.poll(() => page.getByTestId('run-error').textContent()).toMatch(/^Not started: The designer samples/);
    expect(await page.getByTestId('run-status').textContent()).toBe('status: idle');
    await open.getByRole('button', { name: '→ Models' }).click();
    expect(await page.getByRole('tab', { name: 'Models' }).getAttribute('aria-selected')).toBe('true');

    // every role ours: the loop is closed, one cycle runs and trains
    await useLocal(page, ['designer', 'hint']);
    await page.getByRole('tab', { name: 'Run' }).click();
    expect(await page.getByTestId('open-loop').count()).toBe(0);
    await page.getByTestId('iterations').fill('1');
    await page.getByTestId('start').click();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 560_000, interval: 1000 })
      .toMatch(/status: (done|error)/);
    expect(await page.locator('.run .error').allTextContents()).toEqual([]);

    await page.getByRole('tab', { name: 'Training' }).click();
    const progress = page.getByTestId('train-progress');
    await expect.poll(() => progress.textContent()).toMatch(/^update \d+, trained through cycle 1$/);
    const updates = Number((await progress.textContent())!.match(/update (\d+)/)![1]);
    expect(await page.getByTestId('last-round').textContent()).toMatch(/cycle 1: /);
    const charts = page.getByTestId('training-charts');
    // probe (before training, and after each update), returns, designer reward, band share; update charts when a step ran
    await expect.poll(() => charts.locator('.chart').count()).toBe(4 + (updates > 0 ? 4 : 0));
    expect(await charts.locator('figcaption .title').first().textContent()).toMatch(/Probe set/);
    expect(await page.getByTestId('win-rate-histogram').count()).toBe(1);
    await page.screenshot({ path: resultPath('training-loop.png'), fullPage: true });

    // a reload and the same fresh model: the saved training comes back (adapter, progress, probe)
    await page.reload();
    await page.getByRole('tab', { name: 'Training' }).click();
    await page.getByTestId('start-fresh').click();
    await expect
      .poll(() => page.getByTestId('train-progress').textContent(), { timeout: 120_000 })
      .toBe(`update ${updates}, trained through cycle 1`);
    expect(await page.getByTestId('model-summary').textContent()).toMatch(/adapter r=8/);
    expect(errors).toEqual([]);
    await page.close();
  }, 900_000);
});
