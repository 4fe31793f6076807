// The Environments panel in Chromium: play a seed environment to the win, toggle the hint,
// run the checker, share a link that opens in a fresh browser, import a file, and watch
// hostile programs and hostile links get contained. A link runs nothing until the user presses
// Play, and an environment that fails to load shows its error once (no reload loop).
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { encodeShareLink, envSetToJson, makeEnvSet, recordFromCode } from '../../src/core/env/envset.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { SandboxHost } from '../../src/core/sandbox/host.ts';
import { appInBrowser, resultPath, watchErrors } from './browser.ts';

const game = SEED_ENVS.find((e) => e.setting === 'games')!;

/** The reference solution for `code` at `seed`, computed in Node's own sandbox. */
async function solutionFor(code: string, seed: number): Promise<string[]> {
  const host = await SandboxHost.create();
  const env = await host.load(code, 12);
  host.reset(env.id, seed);
  const sol = host.solution(env.id);
  host.dispose(env.id);
  return sol;
}

/**
 * Record every call the page makes into a sandbox worker (load, reset, step, check, ...) in
 * `window.__sandboxCalls`, by wrapping the Worker constructor before the app's code runs.
 */
async function countSandboxCalls(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    const calls: string[] = [];
    (window as unknown as { __sandboxCalls: string[] }).__sandboxCalls = calls;
    const Native = window.Worker;
    window.Worker = class extends Native {
      constructor(url: string | URL, opts?: WorkerOptions) {
        super(url, opts);
        if (opts?.name !== 'spade-sandbox') return;
        const post = this.postMessage.bind(this) as (m: unknown, t?: Transferable[]) => void;
        this.postMessage = ((msg: { op?: string }[], transfer?: Transferable[]) => {
          // the pool's batch protocol (src/core/sandbox/worker_api.ts): an array of calls, by op
          if (Array.isArray(msg)) for (const c of msg) calls.push(String(c?.op));
          post(msg, transfer);
        }) as Worker['postMessage'];
      }
    };
  });
}
const sandboxCalls = (page: Page) =>
  page.evaluate(() => (window as unknown as { __sandboxCalls: string[] }).__sandboxCalls.filter((c) => c !== 'ping'));

async function select(page: Page, title: string) {
  await page
    .getByRole('button', { name: new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) })
    .first()
    .click();
  await expect.poll(() => page.getByTestId('env-title').textContent()).toBe(title);
}

describe('Environments panel in Chromium', () => {
  const app = appInBrowser();

  it('plays a seed environment to the win, with the hint toggle', async () => {
    const page = await app.browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors = watchErrors(page);
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    await page.goto(`${app.url}#panel=environments`);
    await select(page, game.title);
    await expect.poll(() => page.getByTestId('transcript').textContent(), { timeout: 30_000 }).not.toBe('');
    await page.getByLabel('Show hint').check();
    expect(await page.getByTestId('hint').textContent()).toBe(game.hint);
    for (const a of await solutionFor(game.code, 0)) {
      await page.getByTestId('action').fill(a);
      await page.getByTestId('action').press('Enter');
      await expect.poll(() => page.getByTestId('action').inputValue()).toBe('');
      await expect
        .poll(
          async () =>
            (await page.getByTestId('action').isDisabled()) ||
            (await page.getByRole('button', { name: 'Send' }).isEnabled()),
          { timeout: 30_000 },
        )
        .toBe(true);
    }
    await expect.poll(() => page.getByTestId('outcome').textContent(), { timeout: 30_000 }).toBe('Solved!');
    expect(await page.getByTestId('reward').textContent()).toBe('reward 1');
    // the code editor is loaded when the code is first shown, not with the app
    expect(requested.filter((u) => u.includes('code_editor'))).toEqual([]);
    await page.locator('summary').getByText('Code', { exact: true }).click();
    const code = page.getByTestId('code-view');
    await expect.poll(() => code.locator('.cm-content[aria-label="Environment code"]').count()).toBe(1);
    expect(await code.locator('pre').count()).toBe(0); // the plain text it showed until then is gone
    expect(await code.locator('.cm-content').textContent()).toContain(game.code.split('\n')[0]!.trim());
    expect(requested.filter((u) => u.includes('code_editor'))).toHaveLength(1);
    await page.screenshot({ path: resultPath('environments-play.png'), fullPage: true });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('runs the checker in the sandbox worker and shows every check', async () => {
    const page = await app.browser.newPage();
    await page.goto(`${app.url}#panel=environments`);
    await select(page, game.title);
    await page.getByRole('button', { name: 'Run checks' }).click();
    await expect
      .poll(() => page.getByTestId('check-report').textContent(), { timeout: 30_000 })
      .toContain('all checks pass');
    expect(await page.locator('[data-testid=check-report] li.ok').count()).toBe(10);
    await page.close();
  });

  it('contains a hostile environment and keeps working', async () => {
    const page = await app.browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${app.url}#panel=environments`);
    await select(page, 'Hostile: infinite loop in step');
    await expect.poll(() => page.getByTestId('transcript').textContent(), { timeout: 30_000 }).toContain('start');
    await page.getByTestId('action').fill('go');
    await page.getByTestId('action').press('Enter');
    await expect
      .poll(() => page.getByTestId('play-error').textContent(), { timeout: 30_000 })
      .toMatch(/step ran past its 250 ms limit/);
    await page.screenshot({ path: resultPath('environments-hostile.png') });
    await select(page, game.title);
    await expect.poll(() => page.getByTestId('transcript').textContent(), { timeout: 30_000 }).not.toBe('');
    expect(await page.getByTestId('play-error').count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('shares a set as a link that opens in a fresh browser, and rejects a hostile link', async () => {
    const page = await app.browser.newPage();
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
    await page.goto(`${app.url}#panel=environments`);
    await select(page, game.title);
    await page.getByRole('button', { name: 'Share link' }).click();
    const link = await page.getByTestId('share-link').inputValue();
    expect(link).toMatch(/#panel=environments&set=1\./);
    await page.close();

    const fresh = await app.browser.newContext();
    const p2 = await fresh.newPage();
    const errors = watchErrors(p2);
    await p2.goto(link);
    await expect
      .poll(() => p2.getByTestId('env-message').textContent(), { timeout: 30_000 })
      .toContain(`Opened "${game.title}" from the link`);
    expect(await p2.getByRole('heading', { name: /From link:/ }).count()).toBe(1);
    await p2.goto(`${app.url}#panel=environments&set=1.AAAA<img src=x onerror=alert(1)>`);
    await p2.reload();
    await expect
      .poll(() => p2.getByTestId('env-message').textContent(), { timeout: 30_000 })
      .toMatch(/damaged|never has/);
    expect(await p2.locator('img').count()).toBe(0);
    expect(errors).toEqual([]);
    await fresh.close();
  });

  it('opens a link without running it; a failing load shows its error once and never reloads', async () => {
    const broken = recordFromCode(
      [
        '// @title Broken on load',
        "class BrokenEnv { reset() { return ['x', {}]; } step() { return ['x', 0, true, false, {}]; } solution() { return []; } }",
        "throw new Error('broken on purpose while loading');",
      ].join('\n'),
    );
    const link = `${app.url}#panel=environments&set=${encodeShareLink(makeEnvSet('Broken demo', [broken]))}`;
    const fresh = await app.browser.newContext();
    await countSandboxCalls(fresh);
    const page = await fresh.newPage();
    const errors = watchErrors(page);
    await page.goto(link);
    await expect
      .poll(() => page.getByTestId('env-message').textContent(), { timeout: 30_000 })
      .toContain('Opened "Broken demo" from the link');
    expect(await page.getByTestId('env-title').textContent()).toBe('Broken on load');
    expect(await page.getByTestId('play-idle').count()).toBe(1);
    // give an effect time to start a load by itself (before the fix: thousands of loads in seconds)
    await page.waitForTimeout(1500);
    expect(await sandboxCalls(page)).toEqual([]);
    expect(await page.getByTestId('transcript').textContent()).toBe('');

    await page.getByTestId('play-start').click();
    await expect
      .poll(() => page.getByTestId('play-error').textContent(), { timeout: 30_000 })
      .toContain('broken on purpose while loading');
    await page.waitForTimeout(1500); // a loop would load again as soon as the first load settled
    expect((await sandboxCalls(page)).filter((c) => c === 'load')).toEqual(['load']);
    expect(await page.getByTestId('play-error').count()).toBe(1);
    await page.screenshot({ path: resultPath('environments-broken-link.png') });
    expect(errors).toEqual([]);
    await fresh.close();
  });

  it('offers the tools the loaded environment declares', async () => {
    const tool = SEED_ENVS.find((e) => e.setting === 'tool_use')!;
    const host = await SandboxHost.create();
    const names = (await host.load(tool.code, 12)).tools.map((t) => t.function.name);
    expect(names.length).toBeGreaterThan(0);
    const page = await app.browser.newPage();
    await page.goto(`${app.url}#panel=environments`);
    await select(page, tool.title);
    await expect.poll(() => page.getByTestId('transcript').textContent(), { timeout: 30_000 }).not.toBe('');
    expect(await page.getByTestId('tools').locator('button').allTextContents()).toEqual([...names, 'answer']);
    // a tool with parameters: its button inserts a call with an argument for each of them
    const tools = (await host.load(tool.code, 12)).tools;
    const withParams = tools.find(
      (t) => Object.keys((t.function.parameters as { properties?: object }).properties ?? {}).length > 0,
    )!;
    expect(withParams).toBeDefined();
    await page.getByTestId('tools').getByRole('button', { name: withParams.function.name, exact: true }).click();
    const action = await page.getByTestId('action').inputValue();
    const call = JSON.parse(/<tool_call>([\s\S]*)<\/tool_call>/.exec(action)![1]!) as {
      name: string;
      arguments: Record<string, unknown>;
    };
    expect(call.name).toBe(withParams.function.name);
    expect(Object.keys(call.arguments).sort()).toEqual(
      Object.keys((withParams.function.parameters as { properties: object }).properties).sort(),
    );
    await page.close();
  });

  it('imports an env set file and keeps it across a reload', async () => {
    const file = resultPath('import-set.json');
    writeFileSync(file, envSetToJson(makeEnvSet('Imported demo', [recordFromCode(FAKE_ENV)])));
    const page = await app.browser.newPage();
    await page.goto(`${app.url}#panel=environments`);
    await page.getByTestId('import-file').setInputFiles(file);
    await expect.poll(() => page.getByTestId('env-message').textContent()).toContain('Imported "Imported demo"');
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { name: /Imported demo/ }).count()).toBe(1);
    // a second set, then Remove on the first: exactly the first goes, also after a reload
    const second = resultPath('import-set-2.json');
    writeFileSync(second, envSetToJson(makeEnvSet('Second demo', [recordFromCode(FAKE_ENV)])));
    await page.getByTestId('import-file').setInputFiles(second);
    await expect.poll(() => page.getByTestId('env-message').textContent()).toContain('Imported "Second demo"');
    await page.getByRole('button', { name: 'Remove set Imported demo' }).click();
    await expect.poll(() => page.getByRole('heading', { name: /Imported demo/ }).count()).toBe(0);
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { name: /Second demo/ }).count()).toBe(1);
    expect(await page.getByRole('heading', { name: /Imported demo/ }).count()).toBe(0);
    await page.close();
  });
});
