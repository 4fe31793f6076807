// Watching, reviewing and sharing runs in Chromium: a replay whose designer repeats one program takes
// its settings from the recording and leaves the Environments panel working; review mode steps
// through every cycle after a reload and hands an environment to "play it yourself"; pacing holds
// and steps the view; a run file opens from a #run= link in a fresh context with no model, hostile
// run files are refused with a message; first load at 1280 and 360 px in both themes.
import { readFileSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { DEFAULTS } from '../../src/core/config.ts';
import type { ChatMessage, ChatModel, ChatOptions } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { RecordingChatModel } from '../../src/core/llm/replay.ts';
import { parseCorpusJsonl } from '../../src/core/spade/corpus.ts';
import { defaultSkills, SpadeLoop } from '../../src/core/spade/loop.ts';
import { makeRunFile, runFileToJson } from '../../src/core/spade/run_file.ts';
import { StoreRunStore, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const CYCLES = 2;
let transcript: string;
let runFileText: string;
let envsMade: number;

/** The scripted trio, but every design is the same program (small models repeat themselves). */
function repeatingDesigner(): ChatModel {
  const inner = scriptedTrio();
  return {
    backend: inner.backend,
    model: 'repeat-double',
    capabilities: inner.capabilities,
    async chat(messages: ChatMessage[], options: ChatOptions = {}) {
      const r = await inner.chat(messages, { ...options, onToken: undefined });
      const text = r.text.replace(/\/\/ designed for the .* task/g, '// designed once');
      options.onToken?.(text);
      return { ...r, text };
    },
  };
}

beforeAll(async () => {
  const spec: RunSpec = {
    config: { ...DEFAULTS, seed: 5, playsPerEnv: 2 },
    skills: defaultSkills('games'),
    models: { designer: 'x', hint: 'x', agent: 'x' },
    corpus: 'default',
    createdAt: '',
  };
  const model = new RecordingChatModel(repeatingDesigner(), undefined, { spec, cycles: CYCLES });
  const store = new StoreRunStore(new MemoryStore(), 'r');
  const corpus = parseCorpusJsonl(readFileSync('dist/corpus/default.jsonl', 'utf8'), 'default');
  const state = await new SpadeLoop({
    spec,
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus,
    store,
  }).run(CYCLES);
  transcript = model.toJsonl();
  const archive = await store.readArchive();
  envsMade = archive.filter((a) => a.valid && a.code).length;
  const programs = archive.filter((a) => a.valid && a.code).map((a) => a.code);
  expect(new Set(programs).size, 'one program, designed every time').toBeLessThan(programs.length);
  runFileText = runFileToJson(
    makeRunFile({
      spec,
      archive,
      rollouts: await store.readRollouts(),
      metrics: await store.readMetrics(),
      memory: state.memory,
      state,
    }),
  );
  // served by the preview server next to the app, like a run file on any CORS-enabled host
  writeFileSync('dist/e2e-example.spade-run.json', runFileText);
  writeFileSync(
    'dist/e2e-hostile.spade-run.json',
    runFileText.replace('"archive":[{', '"archive":[{"__proto__":{"polluted":true},'),
  );
}, 120_000);

async function useTranscript(page: Page, url: string) {
  await page.goto(`${url}#panel=models`);
  for (const role of ['designer', 'hint', 'agent']) await page.getByTestId(`source-${role}`).selectOption('replay');
  const file = resultPath('review-transcript.jsonl');
  writeFileSync(file, transcript);
  await page.getByTestId('replay-file').setInputFiles(file);
  await expect.poll(() => page.getByTestId('replay-name').textContent()).toBe('loaded review-transcript.jsonl');
}

const text = async (page: Page, id: string) => ((await page.getByTestId(id).textContent()) ?? '').replace(/\s+/g, ' ');

describe('watching, reviewing and sharing runs', () => {
  const app = appInBrowser();

  it('a replay of a repeating designer takes the recorded settings; Environments opens; review survives a reload', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await useTranscript(page, app.url);
    await page.goto(`${app.url}#panel=run`); // the form keeps its defaults: seed 0, 3 cycles
    expect(await page.getByTestId('iterations').inputValue()).toBe('3');
    expect(await text(page, 'replay-note')).toContain('takes its settings');
    await page.getByTestId('start').click();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 120_000, interval: 500 })
      .toBe('status: done');
    expect(await page.getByTestId('run-error').count()).toBe(0);
    expect(await text(page, 'from-recording')).toContain('2 cycles, seed 5');
    expect(await text(page, 'review-cycle')).toBe('Cycle 2 of 2');
    // the same program twice is two environments, and the Environments panel opens
    await page.getByRole('tab', { name: 'Environments' }).click();
    await expect.poll(() => page.getByRole('heading', { name: /Made in this run/ }).count()).toBe(1);
    expect(await page.getByRole('heading', { name: /Made in this run/ }).textContent()).toContain(`(${envsMade})`);
    expect(envsMade).toBeGreaterThan(1);
    await page.getByRole('tab', { name: 'Run' }).click();

    // after a reload, every cycle is reviewable from IndexedDB
    await page.reload();
    await expect.poll(() => text(page, 'review-cycle')).toBe('Cycle 2 of 2');
    expect(await page.getByTestId('no-run').count()).toBe(0);
    await page.keyboard.press('ArrowLeft');
    expect(await text(page, 'review-cycle')).toBe('Cycle 1 of 2');
    expect(await text(page, 'review-score-0')).toMatch(
      /regret \d\.\d\d · designer reward -?\d\.\d\d raw · -?\d\.\d\d centred/,
    );
    await page.getByTestId('review-env-0').getByTestId('review-play').first().locator('summary').click();
    await page.screenshot({ path: resultPath('review-after-reload.png'), fullPage: true });
    await page.keyboard.press('ArrowRight');
    expect(await text(page, 'review-cycle')).toBe('Cycle 2 of 2');
    // play it yourself: the environment and its seed, handed over; nothing runs before Play
    await page.getByTestId('review-play-0').click();
    await expect.poll(() => page.getByTestId('env-title').count()).toBe(1);
    expect(await page.getByTestId('play-idle').count()).toBe(1);
    await page.getByTestId('play-start').click();
    await expect.poll(() => page.getByTestId('transcript').locator('li').count()).toBe(1);
    // the action box has focus after the environment loads
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('action');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('paces a replay: held, stepped by environment and by cycle, then played out', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await useTranscript(page, app.url);
    await page.goto(`${app.url}#panel=run`);
    await page.getByTestId('pace-speed').selectOption('5');
    await page.getByTestId('pace-pause').click();
    await page.getByTestId('start').click();
    // the replay itself is instant; the view holds its events
    await expect.poll(() => text(page, 'pace-queued'), { timeout: 60_000 }).toMatch(/^[1-9]\d* events waiting/);
    expect(await page.locator('[data-testid^=score-]').count()).toBe(0);
    expect(await text(page, 'run-status')).toMatch(/^status: running/);
    await page.getByTestId('step-env').click();
    await expect.poll(() => page.locator('[data-testid^=score-]').count()).toBe(1);
    await page.getByTestId('step-event').click();
    await page.getByTestId('step-cycle').click();
    await expect.poll(() => text(page, 'review-cycle')).toBe('Cycle 1 of 1');
    await page.screenshot({ path: resultPath('review-paced.png'), fullPage: true });
    await page.getByTestId('pace-speed').selectOption('0');
    await page.getByTestId('pace-play').click();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 60_000, interval: 300 })
      .toBe('status: done');
    expect(await text(page, 'review-cycle')).toBe('Cycle 2 of 2');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('opens a run file from a #run= link in a fresh context, with no model, and plays one of its environments', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#run=e2e-example.spade-run.json`);
    await expect.poll(() => page.getByTestId('opened-run').count(), { timeout: 30_000 }).toBe(1);
    expect(await text(page, 'opened-run')).toContain('no model needed');
    expect(await text(page, 'review-cycle')).toBe('Cycle 2 of 2');
    expect(page.url()).toContain('run=e2e-example.spade-run.json'); // a reload reopens it
    await page.getByTestId('cycle-prev').click();
    expect(await text(page, 'review-cycle')).toBe('Cycle 1 of 2');
    await page.screenshot({ path: resultPath('review-from-link.png'), fullPage: true });
    await page.getByTestId('review-play-1').click();
    await expect.poll(() => page.getByTestId('env-title').count()).toBe(1);
    await page.getByTestId('play-start').click();
    await expect.poll(() => page.getByTestId('transcript').locator('li').count()).toBe(1);
    await page.getByTestId('action').fill('50');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByTestId('transcript').locator('li').count()).toBe(2);
    await page.screenshot({ path: resultPath('review-play-yourself.png'), fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('refuses hostile run files from a link and from a file, with a message', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${app.url}#run=e2e-hostile.spade-run.json`);
    await expect.poll(() => page.getByTestId('open-error').count(), { timeout: 30_000 }).toBe(1);
    expect(await text(page, 'open-error')).toContain('has a key "__proto__"');
    expect(page.url()).toContain('run=e2e-hostile.spade-run.json'); // the failed link stays, to correct or retry
    expect(await page.evaluate(() => ({}) as Record<string, unknown>)).not.toHaveProperty('polluted');
    const wrong = resultPath('wrong-version.spade-run.json');
    writeFileSync(wrong, runFileText.replace('"version":1', '"version":99'));
    await page.getByTestId('open-run-file').setInputFiles(wrong);
    await expect.poll(() => text(page, 'open-error')).toContain('Unsupported run file version 99');
    const typed = resultPath('wrong-type.spade-run.json');
    writeFileSync(typed, runFileText.replace(/"regret":[-\d.e]+/, '"regret":"<img src=x onerror=alert(1)>"'));
    await page.getByTestId('open-run-file').setInputFiles(typed);
    await expect.poll(() => text(page, 'open-error')).toMatch(/stats\.regret must be a number from -2 to 2/);
    expect(await page.getByTestId('opened-run').count()).toBe(0);
    await page.screenshot({ path: resultPath('review-hostile.png') });
    await context.close();
  });

  for (const theme of ['light', 'dark'] as const) {
    it(`first load in the ${theme} theme at 1280 and 360 px: what SPADE is, where to start, no errors`, async () => {
      for (const width of [1280, 360]) {
        const context = await app.browser.newContext({ viewport: { width, height: 800 } });
        const page = await context.newPage();
        const errors = watchErrors(page);
        await page.goto(`${app.url}#theme=${theme}`);
        await expect.poll(() => page.getByTestId('intro').count()).toBe(1);
        expect(await text(page, 'intro')).toContain('SPADE is self-play for language models');
        expect(await page.getByText('No run yet').count()).toBe(1);
        expect(await page.getByTestId('resume-run').count()).toBe(0);
        expect(await text(page, 'missing-models')).toContain('Load a model for the designer');
        await page.screenshot({ path: resultPath(`first-load-${theme}-${width}.png`), fullPage: true });
        if (width === 360) {
          // the tabs wrap onto a second row: the last one is on screen, no sideways scrolling
          const last = (await page.getByRole('tab', { name: 'Settings' }).boundingBox())!;
          expect(last.x + last.width).toBeLessThanOrEqual(360);
          await page.getByRole('button', { name: 'Load a model for the designer' }).click();
          await expect.poll(() => page.getByTestId('catalog').count()).toBe(1);
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
          expect(overflow).toBeLessThanOrEqual(360);
          await page.screenshot({ path: resultPath(`models-${theme}-360.png`), fullPage: true });
        }
        await page.getByRole('tab', { name: 'Run' }).click();
        await page.getByTestId('intro-play').click();
        await expect.poll(() => page.getByTestId('env-title').count()).toBe(1);
        expect(errors).toEqual([]);
        await context.close();
      }
    });
  }
});
