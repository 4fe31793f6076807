/**
 * The built app's offline copy and its updates, as a rune class: `start()` registers the service
 * worker (platform/browser/service_worker.ts) in a production build only — `npm start` (Vite's dev
 * server) never has one, so edits always show — and `updateReady` turns true when a newer build has
 * been deployed and installed beside this one; the shell then shows "A new version is available —
 * Reload" (UpdateBanner.svelte). `reload()` switches to it (the page reloads); `dismiss()` keeps this
 * version until the next visit.
 */
import { checkForUpdate, registerServiceWorker } from '../platform/browser/service_worker.ts';

export class OfflineState {
  updateReady = $state(false);
  private apply: (() => void) | null = null;

  /** Register the service worker (relative to the page: any path works); `enabled` is false in dev. */
  start(enabled = import.meta.env.PROD): void {
    if (!enabled) return;
    void registerServiceWorker(`${import.meta.env.BASE_URL}sw.js`, {
      onUpdate: (apply) => {
        this.apply = apply;
        this.updateReady = true;
      },
      // e.g. a plain-http address other than localhost: the app still works, online only
      onError: (err) => console.warn('SPADE Playground: no offline copy:', err),
    });
    // a tab left open for a lesson looks for a new build when it is shown again (loads look anyway)
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') checkForUpdate().catch(() => undefined);
    });
  }

  reload(): void {
    if (this.apply) this.apply();
    else location.reload();
  }

  dismiss(): void {
    this.updateReady = false;
  }
}
