/**
 * The y axis of the app's charts (ui/Chart.svelte), pure: an auto range padded around the data, never
 * narrower than a minimum span (so two values 0.02 apart do not fill the chart and look like a
 * change) and kept within optional bounds (a rate stays within 0–1 but is not stretched to it), and
 * tick labels with as many decimals as the ticks need (so a small range never shows only "0", and a
 * single tick at 0.5 reads 0.5).
 */

/** The minimum span of a bounded axis when the chart names none: a fifth of the bounds (0.2 of a 0–1 rate). */
export const DEFAULT_MIN_SPAN_SHARE = 0.2;

/**
 * [lo, hi] for data spanning [min, max]: 10% padding each side (a flat line gets ±10% of its value,
 * at least ±0.05), widened about its middle to `minSpan` when narrower, then moved (not squeezed)
 * inside `bounds` when given. Non-finite input (no data) gives the bounds or [0, 1].
 */
export function axisRange(
  min: number | null,
  max: number | null,
  bounds: [number, number] | null = null,
  minSpan = bounds ? (bounds[1] - bounds[0]) * DEFAULT_MIN_SPAN_SHARE : 0,
): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) return bounds ?? [0, 1];
  const span = max - min;
  const pad = span > 0 ? span * 0.1 : Math.max(Math.abs(max) * 0.1, 0.05);
  let lo = min - pad;
  let hi = max + pad;
  if (hi - lo < minSpan) {
    const mid = (lo + hi) / 2;
    [lo, hi] = [mid - minSpan / 2, mid + minSpan / 2];
  }
  if (bounds) {
    const width = Math.min(hi - lo, bounds[1] - bounds[0]);
    if (lo < bounds[0]) [lo, hi] = [bounds[0], bounds[0] + width];
    if (hi > bounds[1]) [lo, hi] = [bounds[1] - width, bounds[1]];
    if (!(hi > lo)) [lo, hi] = bounds;
  }
  return [lo, hi];
}

/**
 * The x axis of a chart across cycles or updates (shown 1-based): from the first to the last, and
 * for a single point one unit centred on it ([c − 0.5, c + 0.5]: the dot in the middle over its one
 * whole-number tick, not at the left edge of an axis from c to c + 1). No data: [0, 1].
 */
export function xAxisRange(xs: ArrayLike<number>): [number, number] {
  if (!xs.length) return [0, 1];
  const lo = xs[0]!;
  const hi = xs[xs.length - 1]!;
  return hi > lo ? [lo, hi] : [lo - 0.5, lo + 0.5];
}

/** Decimals that write `v` exactly to 1e-6 of a unit in its last place, at most 4. */
function decimalsOf(v: number): number {
  let d = 0;
  while (d < 4 && Math.abs(v * 10 ** d - Math.round(v * 10 ** d)) > 1e-6 * 10 ** d) d++;
  return d;
}

/**
 * Labels for evenly spaced ticks: the decimals the step needs (0.25 → 2, 0.5 → 1, 5 → 0), at most 4;
 * a single tick: the decimals its own value needs (0.5 → "0.5", not the "1" a step of 1 would give).
 */
export function tickLabels(splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs(splits[1]! - splits[0]!) : null;
  const decimals = step !== null ? decimalsOf(step) : decimalsOf(splits[0] ?? 0);
  const zero = (step ?? 1) / 1e6;
  return splits.map((v) => (Math.abs(v) < zero ? '0' : v.toFixed(decimals)));
}
