// A full SPADE loop in Chromium with the replay backend: a transcript recorded in Node replays
// in the browser to the same archive (same prompts, same seeds, same corpus), environments land
// in the Environments panel, charts and memory update, and a run interrupted by a reload resumes.
import { readFileSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { DEFAULTS } from '../../src/core/config.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { RecordingChatModel } from '../../src/core/llm/replay.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { parseCorpusJsonl } from '../../src/core/spade/corpus.ts';
import { defaultSkills, SpadeLoop } from '../../src/core/spade/loop.ts';
import { StoreRunStore, type ArchiveRecord, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const CYCLES = 2;
let transcript: string;
let expected: ArchiveRecord[];

async function recordInNode() {
  const spec: RunSpec = {
    config: { ...DEFAULTS, seed: 5, playsPerEnv: 2 },
    skills: defaultSkills('games'),
    models: { designer: 'x', hint: 'x', agent: 'x' },
    corpus: 'default',
    createdAt: '',
  };
  const model = new RecordingChatModel(scriptedTrio());
  const store = new StoreRunStore(new MemoryStore(), 'r');
  const corpus = parseCorpusJsonl(readFileSync('dist/corpus/default.jsonl', 'utf8'), 'default');
  await new SpadeLoop({
    spec,
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus,
    store,
  }).run(CYCLES);
  transcript = model.toJsonl();
  expected = await store.readArchive();
}

async function useTranscript(page: Page, url: string) {
  await page.goto(`${url}#panel=models`);
  for (const role of ['designer', 'hint', 'agent']) await page.getByTestId(`source-${role}`).selectOption('replay');
  const file = resultPath('transcript.jsonl');
  writeFileSync(file, transcript);
  await page.getByTestId('replay-file').setInputFiles(file);
  await expect.poll(() => page.getByTestId('replay-name').textContent()).toBe('loaded transcript.jsonl');
}

describe('the SPADE loop in Chromium (replay backend)', () => {
  beforeAll(recordInNode);
  const app = appInBrowser();

  it('replays a recorded run to the same archive, live, with charts, environments and memory', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors = watchErrors(page);
    await useTranscript(page, app.url);
    await page.goto(`${app.url}#panel=run&seed=5&playsPerEnv=2`);
    await page.getByTestId('iterations').fill('1');
    await page.getByTestId('start').click();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 120_000, interval: 500 })
      .toBe('status: done');
    expect(await page.getByTestId('run-error').count()).toBe(0);
    // the cycle's three environments, scored with the regret the recorded plays imply
    for (const a of expected.filter((x) => x.cycle === 0)) {
      const score = (await page.getByTestId(`review-score-${a.index}`).textContent())?.replace(/\s+/g, ' ');
      expect(score).toContain(`regret ${a.stats!.regret.toFixed(2)}`);
    }
    expect(await page.getByTestId('charts').locator('.chart').count()).toBe(4);
    await page.screenshot({ path: resultPath('run-panel.png'), fullPage: true });
    // every environment produced is in the Environments panel, playable
    await page.getByRole('tab', { name: 'Environments' }).click();
    await expect.poll(() => page.getByRole('heading', { name: /Made in this run/ }).count()).toBe(1);
    // memory grew by the played environments, with statistics
    await page.getByRole('tab', { name: 'Memory' }).click();
    const rows = await page.getByTestId('memory-table').locator('tbody tr').allTextContents();
    expect(rows.filter((r) => /Fake Hunt/.test(r) && /\d\.\d\d/.test(r)).length).toBe(3);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('resumes after a reload mid-run, losing at most the environment in flight', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    await useTranscript(page, app.url);
    // one environment at a time (the recording's setting), so the reload below lands mid-run: at the
    // default concurrency a replay can finish cycle 2 between two polls
    await page.goto(`${app.url}#panel=settings`);
    await page.locator('#cfg-concurrency').fill('1');
    await page.locator('#cfg-concurrency').blur();
    await page.goto(`${app.url}#panel=run&seed=5&playsPerEnv=2`);
    await page.getByTestId('iterations').fill(String(CYCLES));
    await page.getByTestId('start').click();
    // wait until cycle 2 has scored its first environment, then reload
    await expect
      .poll(() => page.locator('[data-testid^=score-]').count(), { timeout: 120_000, interval: 200 })
      .toBeGreaterThan(0);
    await expect
      .poll(async () => (await page.getByTestId('run-status').textContent()) ?? '', { timeout: 120_000, interval: 200 })
      .toMatch(/cycle 2 of 2/);
    await expect
      .poll(() => page.locator('[data-testid^=score-]').count(), { timeout: 120_000, interval: 200 })
      .toBeGreaterThan(0);
    await page.reload(); // the models, the transcript and the run's progress come back from IndexedDB
    await page.getByTestId('resume-run').click();
    await expect
      .poll(() => page.getByTestId('run-status').textContent(), { timeout: 120_000, interval: 500 })
      .toBe('status: done');
    const exported = await page.evaluate(async () => {
      const req = indexedDB.open('spade-playground');
      const db: IDBDatabase = await new Promise((r) => (req.onsuccess = () => r(req.result)));
      const tx = db.transaction('runs');
      const all: IDBRequest<string[]> = tx.objectStore('runs').getAll() as IDBRequest<string[]>;
      const keys = tx.objectStore('runs').getAllKeys();
      await new Promise((r) => (tx.oncomplete = r));
      return keys.result.map((k, i) => [String(k), all.result[i]!] as const).filter(([k]) => /\.c\d+$/.test(k));
    });
    const archive = exported.flatMap(([, v]) => (JSON.parse(v) as { archive: ArchiveRecord[] }).archive);
    expect(archive.map((a) => [a.cycle, a.skill, a.stats?.regret])).toEqual(
      expected.map((a) => [a.cycle, a.skill, a.stats?.regret]),
    );
    await context.close();
  });

  it('imports an env_memory.json as the starting memory of the next run, and refuses a bad one', async () => {
    const page = await app.browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=memory`);
    const good = resultPath('env_memory.json');
    writeFileSync(good, JSON.stringify([{ skill: 'spatial', code: 'class XEnv {}', win_rate: 0.4, regret: 0.2 }]));
    await page.getByTestId('memory-import').setInputFiles(good);
    await expect.poll(() => page.getByTestId('memory-imported').textContent()).toBe('imported: 1 records');
    expect(await page.getByTestId('memory-table').locator('tbody tr').count()).toBe(1);
    const bad = resultPath('bad_memory.json');
    writeFileSync(bad, '{"not": "a list"}');
    await page.getByTestId('memory-import').setInputFiles(bad);
    await expect
      .poll(() => page.getByRole('alert').first().textContent())
      .toContain('env_memory.json must be a JSON array');
    expect(errors).toEqual([]);
    await page.close();
  });
});
