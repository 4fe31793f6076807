// Review mode's view model (core/spade/run_review.ts): cycles → environments → plays from the run
// store's records; repair turns with failures and soft findings; raw and centred designer reward
// labelled; the leak flag only when suspected, with its reasons; "no training signal" says why;
// the same program designed twice stays two environments with two play ids.
import { describe, expect, it } from 'vitest';
import { buildReview, noSignalReason, scoreText, stepCycle } from '../../src/core/spade/run_review.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';

const CODE = 'class XEnv {}';

function rec(cycle: number, index: number, over: Partial<ArchiveRecord> = {}): ArchiveRecord {
  return {
    cycle,
    index,
    skill: 'spatial',
    setting: 'games',
    difficulty: 'medium',
    envId: 'e1',
    title: `Env ${cycle}.${index}`,
    code: CODE,
    hint: 'probe the middle',
    source: { title: 'Binary search', ref: 'doc#1' },
    valid: true,
    firstAttemptValid: true,
    attempts: [{ reply: 'code', code: CODE, ok: true, failures: [] }],
    validator: null,
    stats: {
      noHint: [0, 1],
      withHint: [1, 1],
      winRate: 0.5,
      winRateHinted: 1,
      regret: 0.5,
      raw: 0.4,
      designerReward: 0.1,
      timedOut: false,
      blacklisted: false,
    },
    leak: { values: [], suspicious: false, reasons: [] },
    rawReward: 0.4,
    designerAdvantage: 0.1,
    ...over,
  };
}

function roll(cycle: number, index: number, play: number, hinted: boolean, ret: number): RolloutRecord {
  return {
    cycle,
    index,
    skill: 'spatial',
    envId: 'e1',
    play,
    seed: 100 + play + (hinted ? 10 : 0),
    hinted,
    firstObservation: 'start',
    turns: [
      {
        action: '\\boxed{3}',
        observation: 'too low',
        reward: 0,
        terminated: false,
        truncated: false,
        formatError: false,
      },
      { action: '\\boxed{5}', observation: 'yes', reward: ret, terminated: true, truncated: false, formatError: false },
    ],
    return: ret,
    end: 'terminated',
    tokens: 10,
  };
}

const metric = (cycle: number): MetricsRecord => ({
  cycle,
  skills: ['spatial'],
  envs: 2,
  valid: 2,
  validityRate: 1,
  firstAttemptValidityRate: 1,
  meanRegret: 0.5,
  meanWinRate: 0.5,
  meanWinRateHinted: 1,
  meanDesignerReward: 0.4,
  meanDesignerAdvantage: 0,
  inBandShare: 1,
  timeouts: 0,
  leaks: 0,
  ms: 1,
  modelMs: 1,
});

describe('run review', () => {
  it('groups a run into cycles of environments with their plays, in order', () => {
    // the archive and rollouts arrive out of order (e.g. concurrent tasks): the review sorts them
    const archive = [rec(1, 1), rec(0, 1), rec(0, 0), rec(1, 0)];
    const rollouts = [roll(0, 0, 1, true, 1), roll(0, 0, 0, false, 0), roll(0, 0, 0, true, 1), roll(0, 0, 1, false, 1)];
    const review = buildReview('run-a', archive, rollouts, [metric(1), metric(0)]);
    expect(review.map((c) => [c.cycle, c.metrics?.cycle, c.envs.map((e) => e.index)])).toEqual([
      [0, 0, [0, 1]],
      [1, 1, [0, 1]],
    ]);
    const env = review[0]!.envs[0]!;
    expect(env.plays.map((p) => [p.hinted, p.play, p.seed, p.result])).toEqual([
      [false, 0, 100, 0],
      [false, 1, 101, 1],
      [true, 0, 110, 1],
      [true, 1, 111, 1],
    ]);
    expect(env.plays[0]!.turns.map((t) => [t.action, t.reward])).toEqual([
      ['\\boxed{3}', 0],
      ['\\boxed{5}', 0],
    ]);
    expect(review[1]!.envs[0]!.plays).toEqual([]);
  });

  it('keys stay unique when a store repeats an environment or a play (the view keys lists by them)', () => {
    const archive = [rec(0, 0), rec(0, 1), rec(0, 0)];
    const rollouts = [roll(0, 0, 0, false, 1), roll(0, 0, 0, false, 0), roll(0, 0, 0, true, 1)];
    const [cycle] = buildReview('r', archive, rollouts, []);
    expect(cycle!.envs.map((e) => e.key)).toEqual(['c0:0', 'c0:0#2', 'c0:1']);
    expect(cycle!.envs[0]!.plays.map((p) => p.key)).toEqual(['u0', 'u0#2', 'h0']);
  });

  it('the same program designed twice is two environments with two play ids', () => {
    const review = buildReview('run-a', [rec(0, 0), rec(0, 1)], [], []);
    const ids = review[0]!.envs.map((e) => e.playId);
    expect(ids).toEqual(['run-a:c0:0', 'run-a:c0:1']);
    expect(review[0]!.envs.map((e) => e.key)).toEqual(['c0:0', 'c0:1']);
  });

  it('shows repair turns with failures and soft findings; an invalid design is not playable', () => {
    const bad = rec(0, 0, {
      valid: false,
      firstAttemptValid: false,
      stats: null,
      attempts: [
        { reply: 'a', code: 'x', ok: false, failures: ['reset() threw'], soft: [] },
        { reply: 'b', code: 'y', ok: false, failures: ['reward out of range'], soft: ['hint names the answer'] },
      ],
    });
    const [env] = buildReview('r', [bad], [], [])[0]!.envs;
    expect(env!.attempts.map((a) => [a.n, a.ok, a.failures, a.soft])).toEqual([
      [1, false, ['reset() threw'], []],
      [2, false, ['reward out of range'], ['hint names the answer']],
    ]);
    expect(env!.playId).toBeNull();
    expect(env!.score).toBeNull();
    expect(env!.noSignal).toMatch(/never passed the checks/);
  });

  it('flags a leak only when suspected, with what triggered it', () => {
    const quiet = rec(0, 0, { leak: { values: ['5'], suspicious: false, reasons: [] } });
    const loud = rec(0, 1, {
      leak: { values: ['5'], suspicious: true, reasons: ['the hint contains the answer "5"'] },
    });
    const [a, b] = buildReview('r', [quiet, loud], [], [])[0]!.envs;
    expect(a!.leak).toBeNull();
    expect(b!.leak).toEqual({ reasons: ['the hint contains the answer "5"'], values: ['5'] });
  });

  it('labels raw and centred designer reward apart', () => {
    const [env] = buildReview('r', [rec(0, 0, { rawReward: 0.4, designerAdvantage: -0.25 })], [], [])[0]!.envs;
    expect(scoreText(env!.score!)).toBe(
      'win 50% without hint → 100% with hint · regret 0.50 · designer reward 0.40 raw · -0.25 centred',
    );
  });

  it('says why an environment gives no training signal', () => {
    const same = rec(0, 0, {
      stats: { ...rec(0, 0).stats!, noHint: [1, 1], withHint: [1, 1], winRate: 1, winRateHinted: 1, regret: 0 },
    });
    expect(noSignalReason(same)).toBe(
      'every play scored the same (R = 1 with and without the hint), so the plays cannot tell a good attempt from a bad one',
    );
    expect(noSignalReason(rec(0, 0))).toBeNull();
    expect(noSignalReason(rec(0, 0, { stats: { ...rec(0, 0).stats!, timedOut: true } }))).toMatch(/time-out/);
    expect(
      noSignalReason(rec(0, 0, { error: { phase: 'hint', name: 'ModelCallError', message: 'HTTP 500' } })),
    ).toMatch(/hint failed/);
  });

  it('steps between cycles, clamped at both ends', () => {
    const review = buildReview('r', [rec(0, 0), rec(1, 0), rec(3, 0)], [], []);
    expect(stepCycle(review, 0, 1)).toBe(1);
    expect(stepCycle(review, 1, 1)).toBe(3);
    expect(stepCycle(review, 3, 1)).toBe(3);
    expect(stepCycle(review, 0, -1)).toBe(0);
    expect(stepCycle([], 0, 1)).toBe(0);
  });
});
