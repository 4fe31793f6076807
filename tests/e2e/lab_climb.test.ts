// The climb in the Lab panel, in Chromium at 1280 and 360 px: pick the climb from the settings, run two tiny cycles
// (K = 3 levels, N = 1 play, 1 probe play: seconds) and see the ladder — each agent's highest rung mastered and its
// probe as a row of the climb's 15 rungs, lengths 2–16 — then compare every arm of round 4 on one seed (each arm's
// rungs, the headline naming the arms that beat SPADE's designer on top-half success), see the latest
// pre-registration's held-out result with every arm (or, before its runs are in, the note that it is running) and read the glossary.
// At 360 px nothing scrolls sideways and the controls are touch-sized. Cheap on purpose: the numbers are the CLI's
// (lab.test.ts checks that on the chain); here only what the panel shows.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROUND4_SPEC, ROUND5_SPEC } from '../../src/core/lab/compare.ts';
import { CLIMB_SPACE } from '../../src/core/lab/spaces.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const LONG = { timeout: 240_000, interval: 500 };
/** Pre-registrations 4 and 5's held-out runs, once measured (scripts/lab_measured.js writes them). */
const PREREG4 = 'src/core/lab/measured_prereg4.json';
const PREREG5 = 'src/core/lab/measured_prereg5.json';
const LENGTHS = CLIMB_SPACE.stages.map((s) => s.replace('length ', ''));
const TOP = /^(none yet|length (\d|1[0-6]))$/;

describe('the climb in the Lab panel', () => {
  const app = appInBrowser();

  for (const width of [1280, 360])
    it(`at ${width} px: picks the climb, shows the ladder climbing per arm, the headline and the glossary`, async () => {
      const context = await app.browser.newContext({ viewport: { width, height: 900 } });
      const page = await context.newPage();
      const errors = watchErrors(page);
      await page.goto(`${app.url}#panel=lab`);
      await page.getByTestId('lab-space').selectOption('climb');
      await page.getByTestId('lab-seed').fill('3');
      await page.getByTestId('lab-cycles').fill('2');
      await page.getByTestId('lab-levels').fill('3');
      await page.getByTestId('lab-plays').fill('1');
      await page.getByTestId('lab-probe-plays').fill('1');
      await page.getByTestId('lab-run').click();
      await expect.poll(() => page.getByTestId('lab-status').textContent(), LONG).toBe('status: done: 2 cycles');
      expect(new URL(page.url()).hash).toContain('lab.space=climb');

      // the live run: the chosen designer's agent and random levels' beside it, each a row of 15 rungs
      for (const key of ['main', 'beside']) {
        expect(await page.getByTestId(`lab-top-rung-${key}`).textContent()).toMatch(TOP);
        const rungs = page.getByTestId(`lab-rungs-${key}`).locator('li');
        expect(await rungs.count()).toBe(15);
        expect((await rungs.locator('[aria-hidden="true"]').allTextContents()).map((t) => t.trim())).toEqual(LENGTHS);
      }
      expect(await page.getByTestId('lab-ladder-main').textContent()).toMatch(/probe after cycle 2/);
      // six charts on the climb: the probe, top-half success, the highest rung, the level, the steps, the reward
      expect(await page.getByTestId('lab-charts').locator('.chart').count()).toBe(6);

      // round 4's arms on one seed, each arm's ladder filled in as its cycles arrive
      expect(await page.getByTestId('lab-compare-arms').textContent()).toBe(ROUND4_SPEC.arms.join(', '));
      await page.getByTestId('lab-compare').click();
      await expect.poll(() => page.getByTestId('lab-compare-result-headline').count(), LONG).toBe(1);
      const headline = (await page.getByTestId('lab-compare-result-headline').textContent()) ?? '';
      expect(headline).toMatch(
        /^(No arm|One arm|\d arms) beat SPADE’s designer \(learnability: [+−]\d\.\d\d in top-half success, mean over 1 seed\)/,
      );
      for (const arm of ROUND4_SPEC.arms) {
        expect(await page.getByTestId(`lab-compare-top-${arm}`).textContent(), arm).toMatch(TOP);
        expect(await page.getByTestId(`lab-compare-rungs-${arm}`).locator('li').count(), arm).toBe(15);
      }
      expect(await page.getByTestId('lab-compare-result').textContent()).toContain('gain in top-half success');

      // the latest pre-registration's held-out result with every arm once its runs are in the repository
      // (src/core/lab/measured_prereg{4,5}.json, loaded when the panel opens), the one before it among the earlier
      // ones; before any, the note that round 4 is running
      const armsOf = async (testid: string, n: number) => {
        const table = page.getByTestId(testid);
        await expect.poll(() => table.locator('tbody tr').count(), LONG).toBe(n);
        return (await table.locator('tbody tr td:first-child').allTextContents()).map((t) => t.split(' ')[0]);
      };
      if (existsSync(PREREG5)) {
        expect(await armsOf('lab-measured', ROUND5_SPEC.arms.length)).toEqual(ROUND5_SPEC.arms);
        expect(await page.getByTestId('lab-measured-headline').textContent()).toMatch(
          /beat SPADE’s designer \(learnability-steps:/,
        );
        expect(await page.getByTestId('lab-measured-pairs').textContent()).toContain(
          'learnability-steps − untrained-steps',
        );
        if (existsSync(PREREG4))
          expect(await armsOf('lab-measured-fourth', ROUND4_SPEC.arms.length)).toEqual(ROUND4_SPEC.arms);
      } else if (existsSync(PREREG4)) {
        expect(await armsOf('lab-measured', ROUND4_SPEC.arms.length)).toEqual(ROUND4_SPEC.arms);
        expect(await page.getByTestId('lab-measured-headline').textContent()).toMatch(/beat SPADE’s designer/);
        expect(await page.getByTestId('lab-measured-share').textContent()).toMatch(
          /gained .*× the gated ladder's gain/,
        );
      } else expect(await page.getByTestId('lab-round4-note').textContent()).toMatch(/is pre-registered/);

      // the glossary: the Lab's words, and level codes true for the chain and the climb
      await page.getByTestId('glossary').locator('summary').click();
      const terms = await page.getByTestId('glossary').locator('dt').allTextContents();
      for (const t of [
        'learnability',
        'regret',
        'oracle',
        'headroom',
        'untrained',
        'learnability-steps, untrained-steps',
        'scripted',
        'gated',
        'sfl',
        'top half',
        'rung',
      ])
        expect(terms, t).toContain(t);
      const glossary = (await page.getByTestId('glossary').textContent()) ?? '';
      expect(glossary).toContain('F4 L0–L14 A3 D0: lengths 2–16');
      expect(glossary).toContain('F2 L0–L7 A3 D0: lengths 2–9');
      expect(glossary).toContain('spade lab');
      expect(glossary).not.toContain('each knob 0–3, higher is harder');

      if (width === 360) {
        // nothing wider than the phone, and touch-sized controls
        const wide = await page.evaluate(() =>
          Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
        );
        expect(wide).toBeLessThanOrEqual(360);
        for (const id of ['lab-space', 'lab-seed', 'lab-run', 'lab-compare', 'lab-seeds']) {
          const box = await page.getByTestId(id).boundingBox();
          expect(box!.height, id).toBeGreaterThanOrEqual(44);
          expect(box!.x + box!.width, id).toBeLessThanOrEqual(360);
        }
      }
      await page.screenshot({ path: resultPath(`lab-climb-${width}.png`), fullPage: true });
      expect(errors).toEqual([]);
      await context.close();
    });
});
