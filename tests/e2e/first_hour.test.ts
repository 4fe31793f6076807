// The first hour of a new visitor in Chromium, at 1280 and 360 px in both themes: the
// first screen's "no download" start runs the toy learning demo with one click (a tiny fresh model
// trained by GRPO on its own Lucky Digit plays, in a worker on the CPU references — `spade train toy`
// in the tab), shows its progress while it runs and ends with a plain verdict read from the measured
// curve, within two minutes on this machine; at 360 px the header is one compact row and no panel is
// wider than the viewport. Then the paths around it: a run shows its phase and counts, folds its
// settings and leaves no live cards behind; a fresh random model is warned about before a run and an
// untrained adapter before export; Models defaults to the smallest model on a software adapter, picks
// a model by its row and tests a server connection. Screenshots: test-results/first-hour-*.png.
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { DEFAULTS } from '../../src/core/config.ts';
import { encodeShareLink, makeEnvSet } from '../../src/core/env/envset.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { RecordingChatModel } from '../../src/core/llm/replay.ts';
import { parseCorpusJsonl } from '../../src/core/spade/corpus.ts';
import { defaultSkills, SpadeLoop } from '../../src/core/spade/loop.ts';
import { StoreRunStore, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { appInBrowser, noDownloadStart, resultPath, watchErrors } from './browser.ts';

/** A two-cycle run recorded in Node with the scripted doubles, as a replay transcript. */
async function recordedTranscript(): Promise<string> {
  const spec: RunSpec = {
    config: { ...DEFAULTS, seed: 5, playsPerEnv: 2 },
    skills: defaultSkills('games'),
    models: { designer: 'x', hint: 'x', agent: 'x' },
    corpus: 'default',
    createdAt: '',
  };
  const model = new RecordingChatModel(scriptedTrio());
  const corpus = parseCorpusJsonl(readFileSync('dist/corpus/default.jsonl', 'utf8'), 'default');
  await new SpadeLoop({
    spec,
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus,
    store: new StoreRunStore(new MemoryStore(), 'r'),
  }).run(2);
  return model.toJsonl();
}

const THEMES = ['light', 'dark'] as const;
const PANEL_TABS = ['Run', 'Environments', 'Memory', 'Training', 'Lab', 'Models', 'Settings'];

async function pageWidth(page: Page): Promise<number> {
  return page.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth));
}

describe('the first hour in Chromium', () => {
  const app = appInBrowser();

  for (const [theme, width] of [
    ['light', 1280],
    ['dark', 360],
  ] as const) {
    // the test's limit is over noDownloadStart's poll budget, so its loop is what ends a run that hangs
    it(
      `one click from the first screen, no download: a model visibly learns and a verdict ends it (${theme}, ${width} px)`,
      { timeout: 600_000 },
      async () => {
        const context = await app.browser.newContext({ viewport: { width, height: 800 } });
        const page = await context.newPage();
        const errors = watchErrors(page);
        await page.goto(`${app.url}#theme=${theme}`);
        await page.getByTestId('intro').waitFor();
        await page.screenshot({ path: resultPath(`first-hour-start-${theme}-${width}.png`) });
        const { seconds, statusTexts } = await noDownloadStart(page);
        console.log(`no-download start → verdict: ${seconds.toFixed(1)} s (${theme}, ${width} px)`);
        // the progress named the phase and counted updates and time
        expect(statusTexts.some((s) => /update \d of 8/.test(s) && /\d+ s elapsed/.test(s))).toBe(true);
        expect(statusTexts.some((s) => /about .* left/.test(s))).toBe(true);
        const verdict = (await page.getByTestId('verdict').textContent()) ?? '';
        expect(verdict).toMatch(
          /^It learned: the model picked the winning digit 7 in \d+% of its plays in update 1 and \d+% in update 8/,
        );
        expect(verdict.split('\n')).toHaveLength(1);
        // the curve and the plays of every update are on screen
        expect(await page.getByTestId('toy-demo').locator('.chart').count()).toBe(1);
        expect(await page.getByTestId('toy-demo').locator('.plays li').count()).toBe(8);
        expect(await pageWidth(page)).toBeLessThanOrEqual(width);
        await page.getByTestId('toy-demo').scrollIntoViewIfNeeded();
        await page.screenshot({ path: resultPath(`first-hour-verdict-${theme}-${width}.png`), fullPage: true });
        expect(errors).toEqual([]);
        await context.close();
      },
    );
  }

  for (const theme of THEMES) {
    it(`at 360 px (${theme}): a one-row header, every tab visible, no panel wider than the viewport`, async () => {
      const context = await app.browser.newContext({ viewport: { width: 360, height: 740 } });
      const page = await context.newPage();
      const errors = watchErrors(page);
      await page.goto(`${app.url}#theme=${theme}`);
      await page.getByTestId('intro').waitFor();
      await page
        .getByTestId('gpu-chip')
        .filter({ hasText: /WebGPU: (?!checking)/ })
        .waitFor({ timeout: 60_000 });
      // the header is one row (name, chip, theme icon): as tall as its tallest item, not three rows
      const header = await page.locator('header.top').boundingBox();
      expect(header!.height).toBeLessThan(64); // three rows were 130 px
      // every tab is on screen without scrolling the strip sideways
      for (const tab of PANEL_TABS) {
        const box = await page.getByRole('tab', { name: tab }).boundingBox();
        expect(box!.x, tab).toBeGreaterThanOrEqual(0);
        expect(box!.x + box!.width, tab).toBeLessThanOrEqual(360);
      }
      for (const tab of PANEL_TABS) {
        await page.getByRole('tab', { name: tab }).click();
        await expect.poll(() => page.getByRole('tab', { name: tab }).getAttribute('aria-selected')).toBe('true');
        await page.waitForTimeout(300);
        expect(await pageWidth(page), tab).toBeLessThanOrEqual(360);
        await page.screenshot({ path: resultPath(`first-hour-360-${theme}-${tab.toLowerCase()}.png`), fullPage: true });
      }
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it('a run shows its phase and counts, folds its settings while on, and leaves no live cards after the end', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=models`);
    for (const role of ['designer', 'hint', 'agent']) await page.getByTestId(`source-${role}`).selectOption('replay');
    const file = resultPath('first-hour-transcript.jsonl');
    writeFileSync(file, await recordedTranscript());
    await page.getByTestId('replay-file').setInputFiles(file);
    await expect.poll(() => page.getByTestId('replay-name').textContent()).toBe('loaded first-hour-transcript.jsonl');
    await page.goto(`${app.url}#panel=run&seed=5&playsPerEnv=2`); // the recording's settings
    await page.getByTestId('iterations').fill('2');
    await page.getByTestId('pace-speed').selectOption('20'); // slow enough to watch: the run stays on a while
    await page.getByTestId('start').click();
    const progress = page.getByTestId('run-progress');
    await expect.poll(() => progress.textContent(), { timeout: 30_000 }).toMatch(/environments valid so far/);
    expect(await progress.textContent()).toMatch(/ s in this cycle/);
    // the settings fold into one line, so the live cards start near the top
    expect(await page.getByRole('form', { name: 'Run configuration' }).isVisible()).toBe(false);
    expect(await page.getByTestId('run-settings-summary').textContent()).toMatch(/seed 5/);
    await expect.poll(() => page.getByRole('heading', { name: /\(live\)/ }).count()).toBe(1);
    await page.screenshot({ path: resultPath('first-hour-run-live-1280.png') });
    // the progress line moves while the run is on (the status never sits still for 10 s)
    const before = await progress.textContent();
    await expect.poll(() => progress.textContent(), { timeout: 30_000 }).not.toBe(before);
    await page.getByTestId('pace-speed').selectOption('0');
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 120_000, interval: 500 })
      .toBe('status: done');
    // after the end: the review shows the last cycle once; no "(live)" heading repeats its cards
    expect(await page.getByRole('heading', { name: /\(live\)/ }).count()).toBe(0);
    expect(await page.getByTestId('run-progress').count()).toBe(0);
    await expect.poll(() => page.getByTestId('review-cycle').textContent()).toBe('Cycle 2 of 2');
    expect(await page.getByRole('form', { name: 'Run configuration' }).isVisible()).toBe(true);
    await page.screenshot({ path: resultPath('first-hour-run-done-1280.png'), fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('warns before a run on a fresh random model, and before exporting an adapter no update trained', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=training`);
    await page.getByTestId('start-fresh').click();
    await expect
      .poll(() => page.getByTestId('model-summary').textContent(), { timeout: 120_000 })
      .toMatch(/fresh-qwen2-2L-64h-seed1 .*adapter r=8/s);
    const warning = page.getByTestId('fresh-warning');
    expect(await warning.textContent()).toMatch(/random weights.*no valid environment.*software adapter.*580 s/s);
    expect(await warning.textContent()).toMatch(/Watch a model learn a game \(no download\)/);
    // the fresh model's size is not shown beside the Hugging Face repository field as if it were that one's
    expect(await page.getByTestId('weight-bytes').count()).toBe(0);
    let downloads = 0;
    page.on('download', () => downloads++);
    await page.getByRole('button', { name: 'Export (PEFT)' }).click();
    await expect.poll(() => page.getByTestId('untrained-warning').textContent()).toMatch(/update 0/);
    await page.screenshot({ path: resultPath('first-hour-training-warnings-1280.png'), fullPage: true });
    expect(downloads).toBe(0);
    await page.getByTestId('export-anyway').click();
    await expect.poll(() => downloads).toBe(2);
    // before Start, the Run panel says what a run with it will do
    await page.getByRole('tab', { name: 'Models' }).click();
    for (const r of ['designer', 'hint', 'agent']) await page.getByTestId(`source-${r}`).selectOption('local');
    await page.getByRole('tab', { name: 'Run' }).click();
    expect((await page.getByTestId('fresh-run-warning').textContent())!.replace(/\s+/g, ' ')).toMatch(
      /The designer, hint writer and agent use our engine's fresh random model\..*no valid environment/,
    );
    expect(errors).toEqual([]);
    await context.close();
  });

  it('Models: the smallest model on a software adapter, a row picks its model, test connection and CORS recipes', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=models`);
    await page
      .getByTestId('gpu-chip')
      .filter({ hasText: /WebGPU: (?!checking)/ })
      .waitFor({ timeout: 60_000 });
    const chosen = page.locator('input[name="webllm"]:checked');
    await expect
      .poll(() => chosen.getAttribute('value'), { timeout: 30_000 })
      .toBe('SmolLM2-360M-Instruct-q4f32_1-MLC');
    // clicking the model's name (not the radio) picks it
    await page.getByTestId('row-Qwen2.5-0.5B-Instruct-q4f32_1-MLC').getByText('Qwen2.5 0.5B').click();
    await expect.poll(() => chosen.getAttribute('value')).toBe('Qwen2.5-0.5B-Instruct-q4f32_1-MLC');
    // a server that is not there: test connection says so and points to the CORS recipes
    await page.getByTestId('openai-url').fill('http://127.0.0.1:9/v1');
    await page.getByTestId('test-connection').click();
    await expect
      .poll(() => page.getByTestId('connection-report').textContent(), { timeout: 30_000 })
      .toMatch(/Could not reach http:\/\/127\.0\.0\.1:9\/v1\/models.*CORS/);
    await page.getByTestId('cors-recipes').locator('summary').click();
    const recipes = (await page.getByTestId('cors-recipes').textContent()) ?? '';
    for (const want of ['--allowed-origins', 'OLLAMA_ORIGINS', 'llama-server', 'sglang.launch_server'])
      expect(recipes).toContain(want);
    // "Try a prompt" with no model loaded points above, not to the panel it is in
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => page.getByRole('alert').last().textContent()).toMatch(/load one above/);
    await page.screenshot({ path: resultPath('first-hour-models-1280.png'), fullPage: true });
    expect(errors.filter((e) => !/ERR_CONNECTION_REFUSED|Failed to load resource/.test(e))).toEqual([]);
    await context.close();
  });

  it('presentation mode: larger charts, and a glossary on the page explains the terms and codes', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${app.url}#theme=dark`);
    await page.getByTestId('glossary').locator('summary').click();
    const glossary = (await page.getByTestId('glossary').textContent()) ?? '';
    for (const term of ['regret', 'probe', 'centred', 'GRPO', 'F3 L1 A3 D1']) expect(glossary).toContain(term);
    await page.getByTestId('present').click();
    await page.getByRole('button', { name: /no download/i }).click();
    await expect.poll(() => page.locator('[data-testid=toy-demo] .chart').count(), { timeout: 60_000 }).toBe(1);
    const box = await page.locator('[data-testid=toy-demo] .chart canvas').boundingBox();
    expect(box!.height).toBeGreaterThanOrEqual(300);
    await page.screenshot({ path: resultPath('first-hour-present-dark-1280.png') });
    await page.getByTestId('toy-cancel').click();
    await context.close();
  });

  it('at 360 px a shared link scrolls to the environment it opened, below the whole list', async () => {
    const context = await app.browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await context.newPage();
    const set = makeEnvSet('A shared pair', [SEED_ENVS[3]!, SEED_ENVS[5]!]);
    await page.goto(`${app.url}#panel=environments&set=${encodeShareLink(set)}`);
    const title = page.getByTestId('env-title');
    await expect.poll(() => title.textContent()).toBe(SEED_ENVS[3]!.title);
    await expect
      .poll(async () => {
        const box = await title.boundingBox();
        return box !== null && box.y >= 0 && box.y + box.height <= 740;
      })
      .toBe(true);
    await page.screenshot({ path: resultPath('first-hour-shared-link-360.png') });
    await context.close();
  });

  it('cancel stops the demo at once, and its verdict says plainly it did not learn', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(app.url);
    await page.getByRole('button', { name: /no download/i }).click();
    await page.getByTestId('toy-cancel').click();
    await expect.poll(() => page.getByTestId('verdict').textContent()).toMatch(/^No update finished|^It did not learn/);
    expect(await page.getByTestId('toy-status').count()).toBe(0);
    await context.close();
  });
});
