// Small run records that pass the run-record schema (core/spade/run_schema.ts), for tests that write
// run directories by hand: an archive record with a program, a rollout and a cycle's metrics.
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';

export function archiveRecord(cycle: number, index: number, over: Partial<ArchiveRecord> = {}): ArchiveRecord {
  return {
    cycle,
    index,
    skill: 'logical_deduction',
    setting: 'games',
    difficulty: 'easy',
    envId: null,
    title: `env ${cycle}.${index}`,
    code: `// @title env ${cycle}.${index}\nclass E${cycle}x${index}Env { reset(s){ return ['go', {}]; } step(a){ return ['x', 1, true, false, {}]; } solution(){ return ['\\\\boxed{1}']; } }`,
    hint: 'h',
    source: null,
    valid: true,
    firstAttemptValid: true,
    attempts: [],
    validator: null,
    stats: {
      noHint: [1, 0],
      withHint: [1, 1],
      winRate: 0.5,
      winRateHinted: 1,
      regret: 0.5,
      raw: 0.5,
      designerReward: 0.5,
      timedOut: false,
      blacklisted: false,
    },
    leak: null,
    error: null,
    rawReward: null,
    designerAdvantage: null,
    ...over,
  };
}

export function rolloutRecord(cycle: number, index: number, play: number): RolloutRecord {
  return {
    cycle,
    index,
    skill: 'logical_deduction',
    envId: `e${cycle}.${index}`,
    play,
    seed: play,
    hinted: false,
    firstObservation: 'go',
    turns: [
      { action: '\\boxed{1}', observation: 'x', reward: 1, terminated: true, truncated: false, formatError: false },
    ],
    return: 1,
    end: 'terminated',
    tokens: 3,
  };
}

export function metricsRecord(cycle: number, envs: number): MetricsRecord {
  return {
    cycle,
    skills: ['logical_deduction'],
    envs,
    valid: envs,
    validityRate: 1,
    firstAttemptValidityRate: 1,
    meanRegret: 0.5,
    meanWinRate: 0.5,
    meanWinRateHinted: 1,
    meanDesignerReward: 0.5,
    timeouts: 0,
    leaks: 0,
    errors: 0,
    ms: 1,
    modelMs: 1,
  };
}

/** One cycle as DirRunStore.writeCycle takes it: `n` environments, one rollout each, the metrics. */
export function cycleRecords(cycle: number, n: number) {
  return {
    archive: Array.from({ length: n }, (_, i) => archiveRecord(cycle, i)),
    rollouts: Array.from({ length: n }, (_, i) => rolloutRecord(cycle, i, 0)),
    metrics: metricsRecord(cycle, n),
  };
}

/** A record as one line of a .jsonl. */
export const line = (x: unknown): string => `${JSON.stringify(x)}\n`;
