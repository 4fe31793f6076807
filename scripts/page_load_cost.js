#!/usr/bin/env node
// What a first load of the built app costs Chromium, in CPU seconds: the sum of Chromium's processes'
// /proc times (browser, renderer, GPU process, network and storage services) over a load of dist/ in a
// fresh context until its Run tab shows, and the 5 s after it, with service workers allowed (the
// offline worker precaches every built file) and blocked (what the e2e tests' appInBrowser() opens),
// beside a blank page's. Used for docs/testing.md's figures on the e2e tier; Linux only (/proc).
//   node scripts/page_load_cost.js [--loads N]     after `npm run build`; N loads of each kind (default 3)
// Each load takes about 9 s; which one is under way is said on stderr, the figures go to stdout.
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { preview } from 'vite';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Chromium's flags for WebGPU on a machine without a GPU, in a closed network (docs/testing.md); the e2e tests' too. */
export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** CPU seconds of every Chromium process now alive, by pid. */
function chromiumCpu() {
  const out = new Map();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('chromium')) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      out.set(pid, (Number(fields[11]) + Number(fields[12])) / 100); // utime + stime, in clock ticks of 1/100 s
    } catch {
      // the process ended while it was read
    }
  }
  return out;
}

/** CPU seconds Chromium spends on one first load of `url` in a fresh context. */
async function loadCost(browser, url, serviceWorkers, ready) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, serviceWorkers });
  await (await context.newPage()).goto('about:blank');
  await new Promise((ok) => setTimeout(ok, 2000)); // the context's own start-up, not counted
  const before = chromiumCpu();
  const page = await context.newPage();
  await page.goto(url);
  await ready(page);
  await page.waitForTimeout(5000);
  let sum = 0;
  for (const [pid, t] of chromiumCpu()) sum += t - (before.get(pid) ?? 0);
  await context.close();
  return sum;
}

/** Measure and print, `loads` first loads of each kind. */
async function main(loads) {
  if (!(loads >= 1)) throw new Error('--loads must be a number ≥ 1');
  if (!existsSync('dist/index.html')) throw new Error('dist/ is missing: run `npm run build` first');
  const blank = mkdtempSync(join(tmpdir(), 'spade-blank-'));
  writeFileSync(join(blank, 'index.html'), '<!doctype html><title>blank</title><button role="tab">Run</button>');
  const app = await preview({ preview: { host: '127.0.0.1', port: 0 }, logLevel: 'warn' });
  const blankServer = await preview({
    root: blank,
    build: { outDir: blank },
    preview: { host: '127.0.0.1', port: 0 },
    logLevel: 'silent',
  });
  const at = (s) => `http://127.0.0.1:${s.httpServer.address().port}/`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const runTab = (page) => page.getByRole('tab', { name: 'Run' }).waitFor();
  const kinds = [
    ['blank page', at(blankServer), 'block'],
    ['app, service workers allowed', at(app), 'allow'],
    ['app, service workers blocked', at(app), 'block'],
  ];
  for (const [name, url, sw] of kinds) {
    const costs = [];
    for (let n = 0; n < loads; n++) {
      // each load takes about 9 s (2 s of the context's start-up, the load, 5 s after it)
      process.stderr.write(`page_load_cost: ${name}, load ${n + 1} of ${loads}…\n`);
      costs.push(await loadCost(browser, url, sw, runTab));
    }
    console.log(`${name}: ${costs.map((c) => c.toFixed(2)).join(', ')} CPU-s a first load`);
  }
  await browser.close();
  await app.close();
  await blankServer.close();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf('--loads');
  await main(i > 0 ? Number(process.argv[i + 1]) : 3);
}
