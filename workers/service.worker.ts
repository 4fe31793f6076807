/**
 * The offline service worker: after one visit the built app (its page, chunks, workers, .wasm, styles
 * and the default corpus) loads with the network cut. It is not bundled by Vite: the build's
 * `offlinePlugin` (scripts/offline_plugin.ts) compiles this file to `sw.js` at the root of `dist/`,
 * defining `__SPADE_PRECACHE__` (every built file but source maps, relative to sw.js; the page itself as
 * './') and `__SPADE_VERSION__` (a hash of those files), so a new build is a new sw.js.
 *
 * - install: the files go into one cache per scope and version (files of an older version's cache are
 *   reused where their content-hashed name is the same, the rest fetched, revalidated);
 * - activate: older versions' caches of this scope are deleted. No `clients.claim()`: a page keeps the
 *   worker it loaded with, and a new version waits until the page asks for it (the update banner's
 *   Reload posts `{type: 'skip-waiting'}`), so a tab never mixes two builds;
 * - fetch: only a GET of a precached file, or a navigation to the app's page (with any query), is
 *   answered — from the cache, falling back to the network. Everything else (model weights, a run
 *   file, a model server, other pages on the host) goes to the network untouched, so models and run
 *   data stay where they are (WebLLM's cache, IndexedDB).
 *
 * Registered only by the built app (platform/browser/service_worker.ts); `npm start` never has one.
 */
/// <reference lib="webworker" />
declare const self: ServiceWorkerGlobalScope;
declare const __SPADE_PRECACHE__: readonly string[];
declare const __SPADE_VERSION__: string;

const PREFIX = `spade-offline ${self.registration.scope} `;
const CACHE = `${PREFIX}${__SPADE_VERSION__}`;
const PAGE = new URL('./', self.location.href).href;
const FILES = new Set(__SPADE_PRECACHE__.map((f) => new URL(f, self.location.href).href));

/** A copy of `res` that a navigation may use (a redirected response may not answer one). */
async function unredirected(res: Response): Promise<Response> {
  if (!res.redirected) return res;
  return new Response(await res.blob(), { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** A content-hashed file (Vite's assets/) is the same file in any version that names it. */
const immutable = (url: string) => url.startsWith(new URL('assets/', self.location.href).href);

async function precache(): Promise<void> {
  const cache = await caches.open(CACHE);
  const older = (await caches.keys()).filter((k) => k.startsWith(PREFIX) && k !== CACHE);
  await Promise.all(
    [...FILES].map(async (url) => {
      if (immutable(url)) {
        for (const name of older) {
          const hit = await (await caches.open(name)).match(url);
          if (hit) return cache.put(url, hit);
        }
      }
      const res = await fetch(new Request(url, { cache: 'no-cache' }));
      if (!res.ok) throw new Error(`offline cache: ${url} answered ${res.status}`);
      await cache.put(url, await unredirected(res));
    }),
  );
}

self.addEventListener('install', (e) => e.waitUntil(precache()));

self.addEventListener('activate', (e) =>
  e.waitUntil(
    caches
      .keys()
      .then((keys) =>
        Promise.all(keys.filter((k) => k.startsWith(PREFIX) && k !== CACHE).map((k) => caches.delete(k))),
      ),
  ),
);

self.addEventListener('message', (e) => {
  if ((e.data as { type?: unknown } | null)?.type === 'skip-waiting') void self.skipWaiting();
});

/** The cache key that answers `req`, or null when the network should. */
function keyFor(req: Request): string | null {
  if (req.method !== 'GET') return null;
  const url = new URL(req.url);
  url.hash = '';
  if (req.mode === 'navigate') {
    url.search = '';
    return url.href === PAGE || url.href === `${PAGE}index.html` ? PAGE : null;
  }
  return FILES.has(url.href) ? url.href : null;
}

self.addEventListener('fetch', (e) => {
  const key = keyFor(e.request);
  if (!key) return;
  e.respondWith(
    caches
      .open(CACHE)
      .then((cache) => cache.match(key))
      .then((hit) => hit ?? fetch(e.request)),
  );
});

export {};
