/**
 * e2e helpers: serve the built app (dist/) on 127.0.0.1 with Vite's preview
 * server, or with a plain static file server under any path (serveStatic), and launch
 * Debian's Chromium through playwright-core with WebGPU enabled (SwiftShader on machines
 * without a GPU). playwright-core gives each launch a fresh, empty profile. See docs/testing.md.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { preview, type PreviewServer } from 'vite';
import { CHROMIUM_ARGS } from '../../scripts/page_load_cost.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const RESULTS = 'test-results';

export async function serveDist(): Promise<{ url: string; close: () => Promise<void> }> {
  if (!existsSync('dist/index.html')) throw new Error('dist/ is missing: run `npm run build` first (npm test does it)');
  const server: PreviewServer = await preview({
    preview: { host: '127.0.0.1', port: 0, strictPort: false },
    logLevel: 'warn',
  });
  const addr = server.httpServer.address();
  if (!addr || typeof addr === 'string') throw new Error('preview server has no port');
  return { url: `http://127.0.0.1:${addr.port}/`, close: () => server.close() };
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.map': 'application/json',
};

/**
 * A plain static file server, as a school's server or GitHub Pages is: the files under `root` at
 * `http://127.0.0.1:PORT{prefix}` (prefix '/' or '/spade/'), a folder's index.html for its address
 * with a slash (without one: a redirect to it), 404 for everything else — no rewrites, no fallback
 * page, no knowledge of Vite. `missing` lists the paths it answered 404, so a test can say no asset
 * was asked for at the wrong place.
 */
export async function serveStatic(
  root: string,
  prefix: string,
): Promise<{ url: string; missing: string[]; close: () => Promise<void> }> {
  if (!existsSync(join(root, 'index.html')))
    throw new Error(`${root}/index.html is missing: run \`npm run build\` first`);
  const base = resolve(root);
  const missing: string[] = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const notFound = () => {
      missing.push(path);
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    };
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !path.startsWith(prefix)) return notFound();
    let file = resolve(base, `.${path.slice(prefix.length - 1)}`);
    if (file !== base && !file.startsWith(base + sep)) return notFound();
    if (existsSync(file) && statSync(file).isDirectory()) {
      if (!path.endsWith('/')) return void res.writeHead(301, { location: `${path}/` }).end();
      file = join(file, 'index.html');
    }
    if (!existsSync(file) || !statSync(file).isFile()) return notFound();
    const body = readFileSync(file);
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-length': body.length,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('static server has no port');
  return {
    url: `http://127.0.0.1:${addr.port}${prefix}`,
    missing,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
}

/** Collect console errors and uncaught page errors for a page. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

export function resultPath(name: string): string {
  mkdirSync(RESULTS, { recursive: true });
  return join(RESULTS, name);
}

/** What a test opens its pages with: a context (or a page in a context of its own). */
export type ContextOpener = Pick<Browser, 'newContext' | 'newPage'>;

/**
 * Registers beforeAll/afterAll hooks that serve dist/ and launch Chromium for the enclosing
 * suite; the returned object's `url` and `browser` are valid inside tests.
 *
 * Its contexts block service workers unless a test's own options allow them: in a fresh context the
 * built app's offline worker precaches every built file (17 MB; about 2.1 of the 3.6 CPU-seconds a
 * first load costs, measured with Chromium's processes' /proc times), work no assertion outside the
 * offline tests reads. static_host.test.ts launches its own Chromium with them allowed and tests the
 * offline copy: its install, a load with the network cut, and an update.
 */
export function appInBrowser(): { readonly url: string; readonly browser: ContextOpener } {
  let server: Awaited<ReturnType<typeof serveDist>> | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    server = await serveDist();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });
  const opener: ContextOpener = {
    newContext: (options) => browser!.newContext({ serviceWorkers: 'block', ...options }),
    newPage: (options) => browser!.newPage({ serviceWorkers: 'block', ...options }),
  };
  return {
    get url() {
      return server!.url;
    },
    get browser() {
      return opener;
    },
  };
}

/** Polls (a second apart) for the toy run's verdict before giving up: 20× its slowest measured 25 s. */
const TOY_MAX_POLLS = 500;

/**
 * Click the first screen's "no download" start (the toy Lucky Digit demo); resolve with the seconds
 * until its verdict shows and the progress lines seen on the way. The verdict comes after the run's 8
 * updates (14–18 s, docs/teaching.md). No time assertion: a run that never
 * ends fails after TOY_MAX_POLLS polls a second apart (20× the slowest, for a loaded machine), naming
 * the last status, before a test limit of 600 s.
 */
export async function noDownloadStart(page: Page): Promise<{ seconds: number; statusTexts: string[] }> {
  const start = page.getByRole('button', { name: /no download/i });
  expect(await start.count()).toBe(1);
  const t0 = Date.now();
  await start.click();
  // the progress line while it runs: phase, updates done, elapsed (it changes at least every few seconds)
  const statusTexts: string[] = [];
  await expect.poll(() => page.getByTestId('toy-status').count(), { timeout: 30_000 }).toBe(1);
  for (let polls = 0; (await page.getByTestId('verdict').count()) === 0; polls++) {
    expect(polls, `no verdict; the status said ${JSON.stringify(statusTexts.at(-1))}`).toBeLessThan(TOY_MAX_POLLS);
    const s = await page
      .getByTestId('toy-status')
      .textContent({ timeout: 1000 })
      .catch(() => null);
    if (s && s !== statusTexts.at(-1)) statusTexts.push(s);
    await page.waitForTimeout(1000);
  }
  return { seconds: (Date.now() - t0) / 1000, statusTexts };
}
