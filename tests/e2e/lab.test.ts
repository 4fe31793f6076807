// The Lab in Chromium: it starts from the first screen with no model (the introduction's Lab button,
// then ▶), the pre-registered result's plain sentence is there before any run, the charts appear
// after a cycle (the learned designer and random levels beside it), the link carries the Lab's seed
// and settings, and opening that link in a fresh browser context reproduces the first cycle's
// numbers (the levels designed and the probe per stage) — the numbers `spade lab` computes in Node
// for the same settings. Short on purpose: one cycle, K = 2 levels, N = 1 play, 1 probe play.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { engineLabDeps } from '../../src/lab/roles.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { LabLoop, type ProbeReport } from '../../src/core/lab/lab.ts';
import { CHAIN_SPACE, spaceChance } from '../../src/core/lab/spaces.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const LONG = { timeout: 300_000, interval: 500 };

const SETTINGS = { seed: 3, designer: 'learned', space: 'chain', levels: 2, plays: 1, probePlays: 1 } as const;
const f2 = (x: number) => x.toFixed(2);
const probeText = (p: ProbeReport) =>
  `${f2(p.mean)} (${CHAIN_SPACE.stages.map((st, i) => `${st} ${f2(p.byStage[i]!)}`).join(', ')})`;

/** The same first cycle computed in Node, as `spade lab` computes it (engineLabDeps, CPU references). */
async function nodeFirstCycle(): Promise<{ levels: string; probe: string; probe0: string }> {
  const deps = await engineLabDeps(SETTINGS.seed, SETTINGS.designer, createSandboxWorkerApi(), { space: 'chain' });
  const lab = new LabLoop({ ...SETTINGS, plannedCycles: 1 }, deps); // a run of 1 cycle: probed after it, as the Lab's worker plans it
  const r = await lab.cycle();
  await lab.close();
  return {
    levels: r.designs.map((d) => (d.description ?? `invalid “${d.text}”`) + (d.explore ? ' (edit)' : '')).join(', '),
    probe: `probe ${probeText(r.probe!)}`,
    probe0: `Probe before training (cycle 0): ${probeText(lab.initialProbe!)}`,
  };
}

/** Wait for cycle 1 and read what it designed and its probe line. */
async function firstCycle(page: Page): Promise<{ levels: string; probe: string; probe0: string }> {
  await expect.poll(() => page.getByTestId('lab-status').textContent(), LONG).toBe('status: done: 1 cycle');
  return {
    levels: (await page.getByTestId('lab-levels-1').textContent()) ?? '',
    probe: (await page.getByTestId('lab-probe-1').textContent()) ?? '',
    probe0: (await page.getByTestId('lab-probe0').textContent()) ?? '',
  };
}

describe('the Lab in Chromium', () => {
  const app = appInBrowser();

  it('runs from the first screen with no model, charts a cycle, and its link reproduces the cycle', async () => {
    const context = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(app.url);
    await page.getByTestId('intro-lab').click(); // the first screen's way in
    await expect.poll(() => page.getByRole('tab', { name: 'Lab' }).getAttribute('aria-selected')).toBe('true');
    await page.getByTestId('lab-seed').fill(String(SETTINGS.seed));
    await page.getByTestId('lab-cycles').fill('1');
    await page.getByTestId('lab-levels').fill('2');
    await page.getByTestId('lab-plays').fill('1');
    await page.getByTestId('lab-probe-plays').fill('1');
    expect(await page.getByTestId('lab-charts').count()).toBe(0);
    // what the pre-registered comparison found, in one plain sentence, before anything runs
    expect((await page.getByTestId('lab-measured-sentence').textContent())!.length).toBeGreaterThan(40);
    await page.getByTestId('lab-run').click();
    const first = await firstCycle(page);
    // what the CLI computes for the same settings: the worker builds the lab exactly as `spade lab`
    expect(first).toEqual(await nodeFirstCycle());
    // six charts (the probe, per stage, the highest rung mastered, the designed level, the agent's steps, the
    // reward), the live run in one sentence, the chance level and the measured speed
    expect(await page.getByTestId('lab-charts').locator('.chart').count()).toBe(6);
    // every y tick of every chart reads the value it marks (a single tick at 0.5 once read "1")
    for (const ticks of await page
      .getByTestId('lab-charts')
      .locator('.chart')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-yticks') ?? ''))) {
      const pairs = ticks
        .split(' ')
        .filter(Boolean)
        .map((t) => t.split('=').map(Number) as [number, number]);
      expect(pairs.length, ticks).toBeGreaterThan(0);
      for (const [value, label] of pairs) expect(Math.abs(label - value), ticks).toBeLessThan(1e-9);
    }
    expect(await page.getByTestId('lab-live-sentence').textContent()).toMatch(/^After 1 cycle the agent taught by/);
    expect(await page.getByTestId('lab-chance').textContent()).toBe(f2(spaceChance(CHAIN_SPACE)));
    expect(await page.getByTestId('lab-speed').textContent()).toMatch(/^~\d+(\.\d)? s per cycle on this machine$/);
    const link = await page.evaluate(() => location.href);
    expect(new URL(link).hash).toBe('#panel=lab&lab.seed=3&lab.cycles=1&lab.K=2&lab.N=1&lab.P=1');
    await page.screenshot({ path: resultPath('lab.png'), fullPage: true });
    // "play it yourself": the level lands in the Environments panel, selected; nothing runs until Play
    await page.getByTestId('lab-play-1-0').click();
    await expect.poll(() => page.getByRole('tab', { name: 'Environments' }).getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => page.getByRole('heading', { name: /From the Lab/ }).count()).toBe(1);
    expect(errors).toEqual([]);

    // the same link in a fresh context (a new, empty profile's worth of state) gives the same numbers
    const fresh = await app.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const again = await fresh.newPage();
    const errors2 = watchErrors(again);
    await again.goto(link);
    expect(await again.getByTestId('lab-seed').inputValue()).toBe(String(SETTINGS.seed));
    await again.getByTestId('lab-run').click();
    expect(await firstCycle(again)).toEqual(first);
    expect(errors2).toEqual([]);
    await fresh.close();
    await context.close();
  });
});
