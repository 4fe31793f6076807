// The charts' y axis (src/core/chart_range.ts): a minimum span per metric, so noise never fills a
// chart (#32: 0.875–0.925 and 3.75–4.25 made a flat line look like a change), moved inside the
// bounds rather than squeezed; and tick labels that read what they mark, one tick included (#32:
// the only tick of the designed-level chart, at 0.5, read "1").
import { describe, expect, it } from 'vitest';
import { axisRange, DEFAULT_MIN_SPAN_SHARE, tickLabels, xAxisRange } from '../../src/core/chart_range.ts';

describe('the y axis never zooms into noise', () => {
  it('a rate near 0.9 spans at least a fifth of 0–1, moved inside the bounds', () => {
    const [lo, hi] = axisRange(0.875, 0.925, [0, 1]);
    expect(hi - lo).toBeCloseTo(DEFAULT_MIN_SPAN_SHARE, 12);
    expect(hi).toBe(1); // 0.9 ± 0.1 would pass 1: moved down, not squeezed
    expect(lo).toBeCloseTo(0.8, 12);
  });

  it('a count near 4 spans the metric’s minimum (here 2 levels), about its middle', () => {
    expect(axisRange(3.9, 4.1, null, 2)).toEqual([expect.closeTo(3, 12), expect.closeTo(5, 12)]);
    expect(axisRange(3.9, 4.1)).toEqual([expect.closeTo(3.88, 12), expect.closeTo(4.12, 12)]); // no minimum: as before
  });

  it('a wide range keeps its own padding; a minimum wider than the bounds gives the bounds', () => {
    expect(axisRange(0.1, 0.9, [0, 1])).toEqual([expect.closeTo(0.02, 12), expect.closeTo(0.98, 12)]);
    expect(axisRange(0.5, 0.5, [0, 1], 5)).toEqual([0, 1]);
  });
});

describe('tick labels', () => {
  it('one tick reads its own value, with the decimals it needs', () => {
    expect(tickLabels([0.5])).toEqual(['0.5']);
    expect(tickLabels([0.25])).toEqual(['0.25']);
    expect(tickLabels([3])).toEqual(['3']);
  });

  it('several ticks take the decimals of their step', () => {
    expect(tickLabels([0.2, 0.4, 0.6])).toEqual(['0.2', '0.4', '0.6']);
    expect(tickLabels([0.8, 0.85, 0.9, 0.95, 1])).toEqual(['0.80', '0.85', '0.90', '0.95', '1.00']);
  });
});

describe('the x axis', () => {
  it('spans the data; a single cycle is centred on its one tick, not at the left of an axis to the next', () => {
    expect(xAxisRange([1])).toEqual([0.5, 1.5]); // cycle 1 (shown 1-based): the dot mid-chart, tick "1" only
    expect(xAxisRange([1, 2, 3])).toEqual([1, 3]);
    expect(xAxisRange(new Float64Array([4, 9]))).toEqual([4, 9]);
    expect(xAxisRange([])).toEqual([0, 1]);
  });
});
