/**
 * e2e helpers: serve the built app (dist/) on 127.0.0.1 with Vite's preview
 * server, and launch Debian's Chromium through playwright-core with WebGPU
 * enabled (SwiftShader on machines without a GPU). playwright-core gives each launch
 * a fresh, empty profile. See docs/testing.md.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { preview, type PreviewServer } from 'vite';

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

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--enable-unsafe-webgpu',
      '--no-sandbox',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
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

/**
 * Registers beforeAll/afterAll hooks that serve dist/ and launch Chromium for the enclosing
 * suite; the returned object's `url` and `browser` are valid inside tests.
 */
export function appInBrowser(): { readonly url: string; readonly browser: Browser } {
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
  return {
    get url() {
      return server!.url;
    },
    get browser() {
      return browser!;
    },
  };
}
