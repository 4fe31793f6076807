// The class plays designer, in Chromium at 1280 and 360 px, light and dark: the first screen's primary start runs
// self-play live (designed levels, the agent's wins and the charts appear); then a scripted "person" picks rungs of
// the climb for a short race (K = 2, N = 1, one probe play: seconds a cycle), the race table lists the person's
// curriculum, SPADE's designer, random levels and the gated ladder with their scores; the page's link, opened in a
// fresh context, replays the race to the same scores, and the class board scores the pasted link to the same number.
// A name with markup in it stays text. At 360 px nothing scrolls sideways and the rungs are touch-sized.
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const LONG = { timeout: 300_000, interval: 500 };
const ARMS = ['hand', 'learned', 'random', 'gated'];

const scores = async (page: Page) =>
  Object.fromEntries(
    await Promise.all(ARMS.map(async (a) => [a, await page.getByTestId(`race-score-${a}`).textContent()] as const)),
  );

describe('the class plays designer', () => {
  const app = appInBrowser();

  for (const [width, theme] of [
    [1280, 'light'],
    [360, 'dark'],
  ] as const)
    it(`at ${width} px (${theme}): self-play from the first screen, a hand-made race, its link and the board`, async () => {
      const context = await app.browser.newContext({ viewport: { width, height: 900 }, colorScheme: theme });
      const page = await context.newPage();
      const errors = watchErrors(page);
      await page.goto(app.url);

      // the first screen's primary start: self-play, live
      const primary = page.locator('.intro .primary');
      expect(await primary.getAttribute('data-testid')).toBe('intro-selfplay');
      const t0 = Date.now();
      await primary.click();
      await expect.poll(() => page.getByTestId('lab-status').textContent(), LONG).toMatch(/running/);
      await expect.poll(() => page.getByTestId('lab-levels-1').count(), LONG).toBe(1);
      expect(await page.getByTestId('lab-levels-1').textContent()).toMatch(/F2 L\d/); // the designer's levels
      await expect.poll(() => page.getByTestId('lab-charts').locator('.chart').count(), LONG).toBeGreaterThan(0);
      // what the designer did and the agent's wins, in words; then the next cycle arrives (the page updates live)
      expect(await page.getByTestId('lab-designer-sentence').textContent()).toMatch(
        /^\s*Cycle 1: the designer wrote .*; the agent won \d+ of 8, .* Its reward \(learnability\)/,
      );
      await expect.poll(() => page.getByTestId('lab-levels-2').count(), LONG).toBe(1);
      await expect.poll(() => page.getByTestId('lab-designer-sentence').textContent(), LONG).toMatch(/^\s*Cycle [2-9]/);
      console.log(`self-play: cycle 2 shown ${((Date.now() - t0) / 1000).toFixed(1)} s after the click (${width} px)`);
      await page.screenshot({ path: resultPath(`race-selfplay-${theme}-${width}.png`) });
      await page.getByTestId('lab-pause').click();
      await expect.poll(() => page.getByTestId('lab-status').textContent(), LONG).toMatch(/paused/);

      // a short race: 3 cycles, K = 2, N = 1, one probe play
      await page.getByTestId('lab-seed').fill('3');
      await page.getByTestId('lab-cycles').fill('3');
      await page.getByTestId('lab-levels').fill('2');
      await page.getByTestId('lab-plays').fill('1');
      await page.getByTestId('lab-probe-plays').fill('1');
      await page.getByTestId('race-who').fill('<b>Ana</b>');
      expect(await page.getByTestId('race-rungs').locator('button').count()).toBe(15);
      await page.getByTestId('race-rung-1').click(); // lengths 2 and 3
      expect(await page.getByTestId('race-next').textContent()).toContain('2 3');
      await page.getByTestId('race-play').click();
      await expect.poll(() => page.getByTestId('race-status').textContent(), LONG).toBe('cycle 1 of 3');
      // the keyboard: "b" unpicks length 3, "c" picks length 4; the rest with ▶▶ (only the 2 cycles left):
      // the curriculum is ab.ac.ac (letters a–o are lengths 2–16)
      await page.getByTestId('race-rung-0').focus();
      await page.keyboard.press('b');
      await page.keyboard.press('c');
      expect(await page.getByTestId('race-next').textContent()).toContain('2 4');
      await page.getByTestId('race-play5').click();
      await expect.poll(() => page.getByTestId('race-status').textContent(), LONG).toBe('cycle 3 of 3 · finished');
      const won = await scores(page);
      for (const a of ARMS) expect(won[a], a).toMatch(/^\d\.\d\d$/);
      expect(await page.getByTestId('race-table').locator('tbody tr').count()).toBe(4);
      expect(await page.getByTestId('race-table').textContent()).toContain("SPADE's designer");
      expect(await page.getByTestId('race-row-hand').textContent()).toContain('your curriculum');
      expect(await page.getByTestId('race-chart').locator('.chart').count()).toBe(1);
      const link = page.url();
      expect(new URL(link).hash).toContain('lab.hand=ab.ac.ac');
      expect(decodeURIComponent(new URL(link).hash)).toContain('lab.who=<b>Ana</b>');

      if (width === 360) {
        const wide = await page.evaluate(() =>
          Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
        );
        expect(wide).toBeLessThanOrEqual(360);
        for (const id of ['race-rung-0', 'race-rung-14', 'race-play', 'race-reset']) {
          const box = await page.getByTestId(id).boundingBox();
          expect(box!.height, id).toBeGreaterThanOrEqual(44);
          expect(box!.x + box!.width, id).toBeLessThanOrEqual(360);
        }
      }
      await page.getByTestId('race').screenshot({ path: resultPath(`race-${theme}-${width}.png`) });
      if (width === 1280) {
        // present mode: the rungs and the race table large enough for a projector
        const size = () =>
          page
            .getByTestId('race-rung-0')
            .evaluate((b) => parseFloat(getComputedStyle(b.querySelector('.len')!).fontSize));
        const before = await size();
        await page.getByTestId('present').click();
        expect(await size()).toBeGreaterThan(before * 1.4);
        await page.getByTestId('race').screenshot({ path: resultPath(`race-present-${theme}-${width}.png`) });
        await page.getByTestId('present').click();
      }

      // the link in a fresh context: the recorded race, replayed to the same scores
      const fresh = await app.browser.newContext({ viewport: { width, height: 900 }, colorScheme: theme });
      const again = await fresh.newPage();
      const errors2 = watchErrors(again);
      await again.goto(link);
      await expect.poll(() => again.getByTestId('race-recorded').count(), LONG).toBe(1);
      expect(await again.getByTestId('race-recorded').textContent()).toContain('3 cycles');
      expect(await again.getByTestId('race-recorded').textContent()).toContain('by <b>Ana</b>'); // text, not markup
      expect(await again.locator('[data-testid=race-recorded] b').count()).toBe(0);
      await again.getByTestId('race-replay').click();
      await expect.poll(() => again.getByTestId('race-status').textContent(), LONG).toBe('cycle 3 of 3 · finished');
      expect(await scores(again)).toEqual(won);

      // the class board: the link pasted in, scored by replaying it, the same number; exported as CSV
      await again.getByTestId('race-board-paste').fill(`${link}\nhttps://example.org/#lab.K=2&lab.hand=zz`);
      await again.getByTestId('race-board-add').click();
      expect(await again.getByTestId('race-board-note').textContent()).toMatch(/^1 added; skipped 1: .*"z"/);
      await again.getByTestId('race-board-score-btn-0').click();
      await expect.poll(() => again.getByTestId('race-board-score-0').textContent(), LONG).toBe(won.hand);
      expect(await again.getByTestId('race-board-row-0').textContent()).toContain('<b>Ana</b>');
      const download = again.waitForEvent('download');
      await again.getByTestId('race-board-csv').click();
      expect((await download).suggestedFilename()).toBe('class-board.csv');
      // the board is kept (IndexedDB): a reload shows it, scored
      await again.reload();
      await again
        .getByRole('tab', { name: 'Lab' })
        .click()
        .catch(() => undefined);
      await expect.poll(() => again.getByTestId('race-board-score-0').textContent(), LONG).toBe(won.hand);

      expect(errors).toEqual([]);
      expect(errors2).toEqual([]);
      await fresh.close();
      await context.close();
    }, 600_000);
});
