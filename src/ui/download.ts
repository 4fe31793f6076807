/**
 * Saving something from the page as a file: one helper for every "Export" button (env sets, runs,
 * memory, LoRA adapters). Browser-only (DOM); the data itself is built by the state classes.
 */

/**
 * How long the object URL outlives the click. Browsers read the blob when the download starts, which
 * can be after the click handler returns, so revoking at once can cancel it (seen in Firefox).
 */
const REVOKE_AFTER_MS = 10_000;

/** Offer `data` as a download named `name`. */
export function downloadFile(name: string, data: BlobPart, type = 'application/json'): void {
  const url = URL.createObjectURL(new Blob([data], { type }));
  Object.assign(document.createElement('a'), { href: url, download: name }).click();
  setTimeout(() => URL.revokeObjectURL(url), REVOKE_AFTER_MS);
}
