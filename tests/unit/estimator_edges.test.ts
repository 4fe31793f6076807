// Estimator edges the known-answer table in estimators.test.ts does not reach: learning potential
// before its EMA exists, the win-rate terms reading the designer's window rather than the cycle's
// plays, and the computed env-reward scale with its reuse factor and cap.
import { describe, expect, it } from 'vitest';
import { computedEnvRewardScale, ENV_REWARD_SCALE_CAP, estimate } from '../../src/core/spade/estimators.ts';

describe('estimator edges', () => {
  it('learning potential is 0 before the EMA exists, whatever the win rate', () => {
    expect(estimate('learning_potential', { noHint: [1, 1, 1, 0], withHint: [] })).toBe(0);
    expect(estimate('learning_potential', { noHint: [1, 1, 1, 0], withHint: [], emaWinRate: 0.5 })).toBeCloseTo(0.25);
  });

  it('win-rate terms read the window when there is one; the regret stays on the matched plays', () => {
    // cycle plays: 0 of 4 won (plateau 0); window: 2 of 4 won (plateau 1)
    const s = { noHint: [0, 0, 0, 0], withHint: [1, 1, 1, 1], window: [1, 0, 1, 0] };
    expect(estimate('solve_rate_plateau', s)).toBe(1);
    expect(estimate('variance', s)).toBe(1); // Var([1,0,1,0]) = 0.25
    expect(estimate('hint_regret', s)).toBe(1);
  });

  it('the computed env-reward scale is plays per design times the reuse, capped', () => {
    expect(computedEnvRewardScale(8, 2, 3)).toBe(12);
    expect(computedEnvRewardScale(8, 2, 1)).toBe(4);
    expect(computedEnvRewardScale(400, 2, 3)).toBe(ENV_REWARD_SCALE_CAP);
    expect(computedEnvRewardScale(0, 2, 3)).toBe(1);
    expect(computedEnvRewardScale(8, 0, 3)).toBe(1);
  });
});
