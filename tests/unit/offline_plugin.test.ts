// The build's offline service worker (scripts/offline_plugin.ts): what it precaches and its version,
// read from an output folder, and the compiled sw.js (a classic script with the list defined in it).
// tests/e2e/static_host.test.ts drives the real one in Chromium, online, offline and across a deploy.
import { readFileSync } from 'node:fs';
import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { compileServiceWorker, precacheManifest, SW_FILE } from '../../scripts/offline_plugin.ts';

const FILES = [
  'assets/index-abc.js',
  'assets/index-abc.js.map',
  'assets/quickjs-def.wasm',
  'corpus/default.jsonl',
  'favicon.svg',
  'index.html',
  SW_FILE,
];
const bytes =
  (over: Record<string, string> = {}) =>
  (f: string) =>
    new TextEncoder().encode(over[f] ?? `bytes of ${f}`);

describe('the offline precache list', () => {
  it('keeps every built file but source maps and sw.js, with the page as its folder', () => {
    expect(precacheManifest(FILES, bytes()).files).toEqual([
      'assets/index-abc.js',
      'assets/quickjs-def.wasm',
      'corpus/default.jsonl',
      'favicon.svg',
      './',
    ]);
  });

  it('has a version that changes with any kept file, and only with those', () => {
    const v = precacheManifest(FILES, bytes()).version;
    expect(v).toMatch(/^[0-9a-f]{16}$/);
    expect(precacheManifest([...FILES].reverse(), bytes()).version).toBe(v);
    expect(precacheManifest(FILES, bytes({ 'index.html': '<p>new</p>' })).version).not.toBe(v);
    expect(precacheManifest(FILES, bytes({ 'corpus/default.jsonl': '{}' })).version).not.toBe(v);
    expect(precacheManifest([...FILES, 'assets/new-x.js'], bytes()).version).not.toBe(v);
    expect(precacheManifest(FILES, bytes({ 'assets/index-abc.js.map': '{}', [SW_FILE]: 'x' })).version).toBe(v);
  });
});

describe('sw.js', () => {
  it('is one classic script with the list and version in it', async () => {
    const manifest = precacheManifest(FILES, bytes());
    const code = await compileServiceWorker(readFileSync('workers/service.worker.ts', 'utf8'), manifest);
    expect(() => new Script(code)).not.toThrow(); // no import/export: a classic worker script
    expect(code).not.toMatch(/__SPADE_|\bdeclare\b/);
    expect(code).toContain(JSON.stringify(manifest.version));
    for (const f of manifest.files) expect(code).toContain(JSON.stringify(f));
    expect(code.split('\n')[0]).toContain(`version ${manifest.version}`);
  });
});
