/**
 * Registers the built app's offline service worker (`sw.js` beside index.html, written by the build:
 * scripts/offline_plugin.ts, workers/service.worker.ts) and reports a new build waiting to take over.
 * The worker's address is relative to the page, so the app works offline at any path it is served
 * from (a site's root, /spade/ on GitHub Pages); its scope is that folder.
 *
 * A new version never takes over by itself: `onUpdate` gets a function that asks the waiting worker to
 * take over and reloads this tab once it has (a reload only this tab asked for: another tab's choice
 * leaves this one as it is).
 */
export interface ServiceWorkerHooks {
  /** A new build is installed and waiting; call `apply` to switch to it and reload. */
  onUpdate: (apply: () => void) => void;
  /** Registration failed (an insecure origin, storage refused): the app works, online only. */
  onError?: (err: unknown) => void;
}

export async function registerServiceWorker(scriptUrl: string, hooks: ServiceWorkerHooks): Promise<void> {
  if (typeof navigator === 'undefined' || !('serviceWorker' in navigator)) return;
  const container = navigator.serviceWorker;
  let asked = false;
  container.addEventListener('controllerchange', () => {
    if (asked) location.reload();
  });
  const offer = (waiting: ServiceWorker) =>
    hooks.onUpdate(() => {
      asked = true;
      waiting.postMessage({ type: 'skip-waiting' });
    });
  const offered = new WeakSet<ServiceWorker>();
  /** Offer `w` once it is installed, if this page runs an older version (a first install has none). */
  const track = (w: ServiceWorker | null) => {
    if (!w) return;
    const ready = () => {
      if (w.state !== 'installed' || !container.controller || offered.has(w)) return;
      offered.add(w);
      offer(w);
    };
    ready();
    w.addEventListener('statechange', ready);
  };
  try {
    const reg = await container.register(scriptUrl);
    // one already waiting (installed on an earlier visit), one installing now, or one found later
    track(reg.waiting);
    track(reg.installing);
    reg.addEventListener('updatefound', () => track(reg.installing));
  } catch (err) {
    hooks.onError?.(err);
  }
}

/** Ask the browser to look for a new build now (it also looks on every load of the page). */
export async function checkForUpdate(): Promise<void> {
  if (typeof navigator === 'undefined' || !('serviceWorker' in navigator)) return;
  const reg = await navigator.serviceWorker.getRegistration();
  await reg?.update();
}
