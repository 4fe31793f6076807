// Known-answer tests for every estimator, computed by hand.
import { describe, expect, it } from 'vitest';
import { ESTIMATORS } from '../../src/core/config.ts';
import {
  designerAdvantages,
  rawDesignReward,
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
    // learnability 4p(1 − p): w = 0.25 → 0.75; one win in eight → 0.4375 (paper_blend gives it the same as none)
    expect(estimate('learnability', S)).toBeCloseTo(0.75);
    const oneOfEight = { noHint: [1, 0, 0, 0, 0, 0, 0, 0], withHint: [1, 1, 1, 1, 1, 1, 1, 1] };
    const none = { noHint: [0, 0, 0, 0, 0, 0, 0, 0], withHint: oneOfEight.withHint };
    expect(estimate('learnability', oneOfEight)).toBeCloseTo(0.4375);
    expect(estimate('learnability', none)).toBe(0);
    // α-curriculum exp(−10(p − 1/2)²): w = 0.25 → exp(−0.625); 1 in 8 → exp(−1.40625); none → exp(−2.5)
    expect(estimate('alpha_curriculum', S)).toBeCloseTo(Math.exp(-0.625), 12);
    expect(estimate('alpha_curriculum', oneOfEight)).toBeCloseTo(Math.exp(-1.40625), 12);
    expect(estimate('alpha_curriculum', none)).toBeCloseTo(Math.exp(-2.5), 12);
    expect(estimate('alpha_curriculum', { noHint: [1, 0], withHint: [] })).toBe(1);
    expect(estimate('learnability', { noHint: [1, 1], withHint: [] })).toBe(0);
    expect(estimate('paper_blend', oneOfEight)).toBeCloseTo(estimate('paper_blend', none));
  });
  it('covers every estimator in the config enum', () => {
    for (const e of ESTIMATORS) expect(Number.isFinite(estimate(e, S))).toBe(true);
  });
  it('raw design reward: estimator value if the first attempt was valid, 0 if not, -0.5 for a time-out, null for a model failure', () => {
    const base = { firstAttemptValid: true, timedOut: false, scoredRaw: 0.7, modelFailed: false };
    expect(rawDesignReward(base)).toBe(0.7);
    expect(rawDesignReward({ ...base, firstAttemptValid: false })).toBe(0); // repaired later: still 0
    expect(rawDesignReward({ ...base, timedOut: true })).toBe(-0.5);
    expect(rawDesignReward({ ...base, firstAttemptValid: false, timedOut: true })).toBe(-0.5);
    expect(rawDesignReward({ ...base, scoredRaw: null, modelFailed: true })).toBeNull();
  });
  it('centres within each skill with invalid (0) and time-out (-0.5) designs inside the centring, times the role scale', () => {
    // spatial: raws 1.0 (in band, high regret), 0 (always solved), 0 (invalid), -0.5 (time-out): mean 0.125
    // mathematical: 0.6 and 0.2: mean 0.4
    const { advantages } = designerAdvantages(
      [
        { skill: 'spatial', raw: 1 },
        { skill: 'spatial', raw: 0 },
        { skill: 'mathematical', raw: 0.6 },
        { skill: 'spatial', raw: 0 },
        { skill: 'spatial', raw: -0.5 },
        { skill: 'mathematical', raw: 0.2 },
        { skill: 'spatial', raw: null },
      ],
      2,
    );
    expect(advantages[0]).toBeCloseTo((1 - 0.125) * 2);
    expect(advantages[1]).toBeCloseTo((0 - 0.125) * 2);
    expect(advantages[2]).toBeCloseTo((0.6 - 0.4) * 2);
    expect(advantages[3]).toBeCloseTo((0 - 0.125) * 2);
    expect(advantages[4]).toBeCloseTo((-0.5 - 0.125) * 2);
    expect(advantages[5]).toBeCloseTo((0.2 - 0.4) * 2);
    expect(advantages[6]).toBeNull();
    // the time-out ranks below the invalid design, which ranks below the valid high-regret one
    expect(advantages[4]!).toBeLessThan(advantages[3]!);
    expect(advantages[3]!).toBeLessThan(advantages[0]!);
  });
  it('with one design per skill, centres on the running baseline instead of producing zeros', () => {
    // cycle 1: no baseline yet -> centre 0; the baseline becomes the raw values
    const c1 = designerAdvantages(
      [
        { skill: 'spatial', raw: 1 },
        { skill: 'mathematical', raw: 0 },
      ],
      1,
    );
    expect(c1.advantages).toEqual([1, 0]);
    expect(c1.baseline).toEqual({ spatial: 1, mathematical: 0 });
    // cycle 2: spatial 0.4 against baseline 1 -> -0.6; mathematical 1 against 0 -> 1
    const c2 = designerAdvantages(
      [
        { skill: 'spatial', raw: 0.4 },
        { skill: 'mathematical', raw: 1 },
      ],
      1,
      c1.baseline,
    );
    expect(c2.advantages[0]).toBeCloseTo(-0.6);
    expect(c2.advantages[1]).toBeCloseTo(1);
    // EMA with alpha 0.3: 0.7 * 1 + 0.3 * 0.4 = 0.82; 0.7 * 0 + 0.3 * 1 = 0.3
    expect(c2.baseline.spatial).toBeCloseTo(0.82);
    expect(c2.baseline.mathematical).toBeCloseTo(0.3);
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
