/**
 * The y axis of the app's charts (ui/Chart.svelte), pure: an auto range padded around the data and
 * kept within optional bounds (a rate stays within 0–1 but is not stretched to it), and tick labels
 * with as many decimals as the tick step needs (so a small range never shows only "0").
 */

/**
 * [lo, hi] for data spanning [min, max]: 10% padding each side (a flat line gets ±10% of its value,
 * at least ±0.05), clamped to `bounds` when given. Non-finite input (no data) gives the bounds or [0, 1].
 */
export function axisRange(
  min: number | null,
  max: number | null,
  bounds: [number, number] | null = null,
): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return bounds ?? [0, 1];
  const span = max - min;
  const pad = span > 0 ? span * 0.1 : Math.max(Math.abs(max) * 0.1, 0.05);
  let lo = min - pad;
  let hi = max + pad;
  if (bounds) {
    lo = Math.max(bounds[0], lo);
    hi = Math.min(bounds[1], hi);
    if (hi <= lo) [lo, hi] = bounds;
  }
  return [lo, hi];
}

/** Labels for evenly spaced ticks: the decimals the step needs (0.25 → 2, 0.5 → 1, 5 → 0), at most 4. */
export function tickLabels(splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs(splits[1]! - splits[0]!) : 1;
  let decimals = 0;
  while (decimals < 4 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6 * 10 ** decimals)
    decimals++;
  return splits.map((v) => (Math.abs(v) < step / 1e6 ? '0' : v.toFixed(decimals)));
}
