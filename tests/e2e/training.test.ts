// Our engine in Chromium: a checkpoint picked as local files loads into the engine worker on the
// software GPU, chats through the Models panel as the "local" backend, gets a LoRA adapter and
// exports it in PEFT format.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { importPeft } from '../../src/engine/io/peft.ts';
import { writeTinyCheckpoint } from '../helpers/tiny_checkpoint.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

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
    await expect
      .poll(() => Object.keys(downloads).sort(), { timeout: 30_000 })
      .toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    await expect
      .poll(() => readFileSync(downloads['adapter_model.safetensors']!).length, { timeout: 10_000 })
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
});
