// Known-answer tests for every estimator, computed by hand.
import { describe, expect, it } from 'vitest';
import { ESTIMATORS } from '../../src/core/config.ts';
import {
  designerRewards,
  episodeReturn,
  estimate,
  groupAdvantages,
  plateau,
  regret,
  updateEma,
  winRate,
} from '../../src/core/spade/estimators.ts';

// no hint: one win in four (w = 0.25, mean 0.25); with hint: three wins (mean 0.75)
const S = { noHint: [1, 0, 0, 0], withHint: [1, 1, 1, 0] };

describe('estimators', () => {
  it('episode return and win rate', () => {
    expect(episodeReturn(1, true)).toBe(1);
    expect(episodeReturn(0.7, false)).toBe(0); // truncated: partial rewards do not count
    expect(episodeReturn(3, true)).toBe(1);
    expect(episodeReturn(-2, true)).toBe(-1);
    expect(winRate([1, 0, -0.1, 0.5])).toBe(0.5);
  });
  it('plateau', () => {
    expect(plateau(0.4)).toBe(1);
    expect(plateau(0.5)).toBe(1);
    expect(plateau(0.6)).toBe(1);
    expect(plateau(0.25)).toBeCloseTo(0.4); // 0.15 below the band: 1 − 0.15/0.25
    expect(plateau(0.85)).toBeCloseTo(0); // exactly 0.25 above
    expect(plateau(0.7)).toBeCloseTo(0.6);
    expect(plateau(0)).toBe(0);
    expect(plateau(1)).toBe(0);
  });
  it('each estimator on the same plays', () => {
    expect(regret(S)).toBeCloseTo(0.5);
    expect(estimate('hint_regret', S)).toBeCloseTo(0.5);
    expect(estimate('floored_regret', { noHint: [1, 1], withHint: [0, 0] })).toBe(0);
    expect(estimate('hint_regret', { noHint: [1, 1], withHint: [0, 0] })).toBe(-1);
    expect(estimate('solve_rate_plateau', S)).toBeCloseTo(0.4);
    // 0.6·0.4 + 0.4·clip(0.5/0.15) = 0.24 + 0.4
    expect(estimate('paper_blend', S)).toBeCloseTo(0.64);
    // regret 0.03 → 0.4·0.2 = 0.08; w = 0.5 → 0.6
    expect(estimate('paper_blend', { noHint: [1, 0], withHint: [1, 0.06] })).toBeCloseTo(0.68);
    expect(estimate('learning_potential', { ...S, emaWinRate: 0.6 })).toBeCloseTo(0.35);
    // Var([1,0,0,0]) = 0.1875 → exp(−(−0.0625)²/0.02) = exp(−0.1953125)
    expect(estimate('variance', S)).toBeCloseTo(Math.exp(-0.1953125));
    expect(estimate('variance', { noHint: [1, 0, 1, 0], withHint: [] })).toBe(1);
    expect(estimate('azr_learnability', S)).toBeCloseTo(0.75);
    expect(estimate('azr_learnability', { noHint: [1, 1], withHint: [] })).toBe(0);
    expect(estimate('azr_learnability', { noHint: [0, 0], withHint: [] })).toBe(0);
    expect(estimate('paired', S)).toBeCloseTo(0.75);
  });
  it('covers every estimator in the config enum', () => {
    for (const e of ESTIMATORS) expect(Number.isFinite(estimate(e, S))).toBe(true);
  });
  it('centres per skill, zeroes invalid first attempts, penalises timeouts', () => {
    const r = designerRewards([
      { skill: 'spatial', raw: 0.8 },
      { skill: 'spatial', raw: 0.2 },
      { skill: 'mathematical', raw: 0.5 },
      { skill: 'spatial', raw: null },
      { skill: 'spatial', raw: 0.9, timedOut: true },
    ]);
    expect(r[0]).toBeCloseTo(0.3);
    expect(r[1]).toBeCloseTo(-0.3);
    expect(r[2]).toBe(0);
    expect(r[3]).toBe(0);
    expect(r[4]).toBe(-0.5);
  });
  it('EMA and group advantages', () => {
    expect(updateEma(undefined, 0.5)).toBe(0.5);
    expect(updateEma(0.5, 1)).toBeCloseTo(0.525);
    const a = groupAdvantages([1, 0, 0, 0]);
    expect(a[0]).toBeCloseTo(0.75 / Math.sqrt(0.1875), 4);
    expect(a.reduce((x, y) => x + y, 0)).toBeCloseTo(0);
    expect(groupAdvantages([1, 1])).toEqual([0, 0]);
  });
});
