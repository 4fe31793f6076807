// The Training panel's evidence series, hand-computed: per-cycle returns with and without hint,
// designer reward raw and centred, band share and the win-rate histogram; per-update loss per
// role, clip fraction, KL, gradient norm and tokens/s over an update's steps.
import { describe, expect, it } from 'vitest';
import type { ArchiveRecord, MetricsRecord } from '../../src/core/spade/run_store.ts';
import { cycleEvidence, updateEvidence, winRateBin, type StepRecord } from '../../src/core/train/chart_series.ts';

const env = (cycle: number, noHint: number[], withHint: number[], winRate: number): ArchiveRecord =>
  ({ cycle, stats: { noHint, withHint, winRate } }) as unknown as ArchiveRecord;
const metrics = (cycle: number, more: Partial<MetricsRecord> = {}): MetricsRecord =>
  ({
    cycle,
    meanRegret: 0.25,
    meanDesignerReward: 0.5,
    meanDesignerAdvantage: -0.1,
    inBandShare: 0.5,
    ...more,
  }) as MetricsRecord;

describe('training evidence', () => {
  it('bins win rates with the band [0.4, 0.6] closed on both ends', () => {
    expect([0, 0.19, 0.2, 0.39, 0.4, 0.5, 0.6, 0.61, 0.8, 0.81, 1].map(winRateBin)).toEqual([
      0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4,
    ]);
  });

  it('averages returns per environment, per cycle, and counts win rates per bin', () => {
    const archive = [
      env(0, [0, 1], [1, 1], 0.5),
      env(0, [0, 0], [0.5, 0.5], 0),
      { cycle: 0, stats: null } as unknown as ArchiveRecord, // invalid design: not scored
      env(1, [1], [], 1),
    ];
    const out = cycleEvidence(archive, [metrics(0), metrics(1, { meanDesignerAdvantage: undefined })]);
    expect(out[0]).toEqual({
      cycle: 0,
      returnNoHint: 0.25, // mean(0.5, 0)
      returnHinted: 0.75, // mean(1, 0.5)
      regret: 0.25,
      designerRaw: 0.5,
      designerCentred: -0.1,
      inBandShare: 0.5,
      winRateBins: [1, 0, 1, 0, 0],
    });
    expect(out[1]).toMatchObject({
      returnNoHint: 1,
      returnHinted: null,
      designerCentred: null,
      winRateBins: [0, 0, 0, 0, 1],
    });
  });

  it('groups steps by update: loss per role, means, tokens/s over total time', () => {
    const step = (
      update: number,
      role: 'agent' | 'designer',
      loss: number,
      tokens: number,
      ms: number,
    ): StepRecord => ({
      cycle: update - 1,
      update,
      role,
      loss,
      clipFraction: role === 'agent' ? 0.2 : 0,
      approxKl: 0.01,
      gradNorm: 2,
      tokens,
      ms,
    });
    const out = updateEvidence([
      step(2, 'agent', 5, 10, 10),
      step(1, 'agent', 1, 100, 500),
      step(1, 'agent', 3, 100, 500),
      step(1, 'designer', -1, 200, 1000),
    ]);
    expect(out.map((u) => u.update)).toEqual([1, 2]);
    expect(out[0]).toMatchObject({ agentLoss: 2, designerLoss: -1, steps: 3, tokensPerSecond: 200, gradNorm: 2 });
    expect(out[0]!.clipFraction).toBeCloseTo(0.4 / 3);
    expect(out[1]).toMatchObject({ agentLoss: 5, designerLoss: null, tokensPerSecond: 1000, cycle: 1 });
  });
});
