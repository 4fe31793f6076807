// The run record's one schema (core/spade/run_schema.ts, read through core/schema.ts): the types
// run_store.ts exports are the schemas' inferred types (checked by tsc: a field added to one only
// fails the typecheck), a record with every optional field filled in reads back unchanged, counts
// are whole numbers from 0 (a negative or fractional count is refused, naming its path), difficulty
// is one of easy/medium/hard, and the generic combinators name the path of the first bad value.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { DEFAULTS, type Difficulty } from '../../src/core/config.ts';
import { RunFileError } from '../../src/core/errors.ts';
import { decode, int, list, num, object, opt, orNull, str, type Infer, type Reader } from '../../src/core/schema.ts';
import type { Episode, Turn } from '../../src/core/spade/agent.ts';
import { addRecord, emptyMemory } from '../../src/core/spade/memory.ts';
import { makeRunFile, parseRunFileJson, runFileToJson } from '../../src/core/spade/run_file.ts';
import type {
  ARCHIVE_RECORD,
  METRICS_RECORD,
  ROLLOUT_RECORD,
  RUN_SPEC,
  TURN,
} from '../../src/core/spade/run_schema.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord, RunSpec } from '../../src/core/spade/run_store.ts';

const FAILURE = { phase: 'play', name: 'ModelError', message: 'the server went away' } as const;

/** An archive record with every optional field present. */
const ARCHIVE: ArchiveRecord = {
  cycle: 2,
  index: 1,
  skill: 'planning',
  setting: 'games',
  difficulty: 'hard',
  envId: 'e1',
  title: 'Lock',
  code: 'export default {}',
  hint: 'turn left',
  source: { title: 'Moby-Dick', ref: 'ch. 1' },
  valid: true,
  firstAttemptValid: false,
  firstAttemptCrashed: false,
  attempts: [{ reply: 'r', code: null, ok: false, failures: ['no step'], soft: ['short'] }],
  validator: { accept: true, reason: 'fine' },
  stats: {
    noHint: [0, -1],
    withHint: [1, 1],
    winRate: 0,
    winRateHinted: 1,
    regret: 1.5,
    raw: 0.25,
    designerReward: -3,
    timedOut: false,
    blacklisted: false,
  },
  leak: { values: ['42'], suspicious: true, reasons: ['the hint names the answer'] },
  error: FAILURE,
  hintError: null,
  rawReward: -0.5,
  designerAdvantage: 2,
  calls: [
    {
      role: 'designer',
      promptTokens: 900,
      exact: true,
      window: 4096,
      maxTokens: 2048,
      clamped: false,
      shrunk: ['examples'],
      skipped: false,
    },
  ],
};

/** A rollout with every optional field present. */
const ROLLOUT: RolloutRecord = {
  cycle: 2,
  index: 1,
  skill: 'planning',
  envId: 'e1',
  play: 3,
  seed: 2 ** 32,
  hinted: true,
  firstObservation: 'a door',
  turns: [{ action: 'open', observation: 'shut', reward: -2, terminated: false, truncated: true, formatError: true }],
  return: 0,
  end: 'model_error',
  error: { name: 'ModelError', message: 'timeout' },
  tokens: 12,
  maxPromptTokens: 800,
  droppedTurns: 1,
};

/** A metrics record with every optional field present. */
const METRICS: MetricsRecord = {
  cycle: 2,
  skills: ['planning'],
  envs: 1,
  valid: 1,
  validityRate: 1,
  firstAttemptValidityRate: 0,
  meanRegret: 1.5,
  meanWinRate: 0,
  meanWinRateHinted: 1,
  meanDesignerReward: 0.25,
  meanDesignerAdvantage: 2,
  inBandShare: null,
  timeouts: 0,
  leaks: 1,
  errors: 1,
  budget: {
    calls: 3,
    maxPromptTokens: 900,
    window: null,
    clamped: 0,
    shrunk: 1,
    skipped: 0,
    agentTurnsDropped: 1,
    contextFullPlays: 0,
  },
  envRewardScale: 1,
  designerWindow: { lag: 1, designsOf: 1, rounds: 2, designs: 3, plays: 8 },
  ms: 12.5,
  modelMs: 10.25,
};

const SPEC: RunSpec = {
  config: DEFAULTS,
  skills: ['planning'],
  models: { designer: 'd', hint: 'h', agent: 'a' },
  corpus: 'test',
  createdAt: '2026-01-01T00:00:00Z',
  iterations: 5,
};

const memory = addRecord(emptyMemory(8), {
  id: 'm1',
  skill: 'planning',
  setting: 'games',
  title: 'Lock',
  code: 'export default {}',
  winRate: 0.5,
  regret: null,
  cycle: 1,
  cut: true,
});

const FILE = makeRunFile({
  spec: SPEC,
  archive: [ARCHIVE],
  rollouts: [ROLLOUT],
  metrics: [METRICS],
  memory: [{ skill: 'planning', code: 'x', win_rate: 0.5, regret: null, title: 'Lock', setting: 'games' }],
  state: {
    version: 1,
    cycle: 3,
    memory,
    ema: { planning: 0.5 },
    blacklist: ['c1'],
    pending: [],
    rewardBaseline: { planning: 0.1 },
    consecutiveErrors: 2,
  },
});
const TEXT = runFileToJson(FILE);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reaches into arbitrary JSON paths
type Json = Record<string, any>;
function refusal(fn: (d: Json) => void): string {
  const d = JSON.parse(TEXT);
  fn(d);
  try {
    parseRunFileJson(JSON.stringify(d));
  } catch (err) {
    expect(err).toBeInstanceOf(RunFileError);
    return (err as Error).message;
  }
  throw new Error('the run file was accepted');
}

describe('the run record schema', () => {
  it('the record types are the schemas’ inferred types, and agree with the types other modules define', () => {
    expectTypeOf<ArchiveRecord>().toEqualTypeOf<Infer<typeof ARCHIVE_RECORD>>();
    expectTypeOf<RolloutRecord>().toEqualTypeOf<Infer<typeof ROLLOUT_RECORD>>();
    expectTypeOf<MetricsRecord>().toEqualTypeOf<Infer<typeof METRICS_RECORD>>();
    expectTypeOf<RunSpec>().toEqualTypeOf<Infer<typeof RUN_SPEC>>();
    expectTypeOf<Infer<typeof TURN>>().toEqualTypeOf<Turn>();
    expectTypeOf<Omit<RolloutRecord, 'cycle' | 'index' | 'skill' | 'envId' | 'play'>>().toEqualTypeOf<
      Omit<Episode, never>
    >();
    expectTypeOf<ArchiveRecord['difficulty']>().toEqualTypeOf<Difficulty>();
  });

  it('a record with every optional field filled in reads back unchanged', () => {
    const back = parseRunFileJson(TEXT);
    expect(back.archive).toEqual([ARCHIVE]);
    expect(back.rollouts).toEqual([ROLLOUT]);
    expect(back.metrics).toEqual([METRICS]);
    expect(back.spec).toEqual(SPEC);
    expect(back.memory).toEqual(FILE.memory);
    expect(back.state).toEqual(FILE.state);
  });

  it('training-only fields (token ids, traces) are typed but never read from a file', () => {
    const d = JSON.parse(TEXT);
    d.archive[0].attempts[0].tokens = { ids: [1, 2], logprobs: [0, 0] };
    d.rollouts[0].trace = { ids: [1], mask: [1] };
    const back = parseRunFileJson(JSON.stringify(d));
    expect(back.archive[0]!.attempts[0]).not.toHaveProperty('tokens');
    expect(back.rollouts[0]).not.toHaveProperty('trace');
  });

  it('refuses a negative or fractional count anywhere, naming its path', () => {
    const whole = (path: string, max: number) => `${path} must be a whole number from 0 to ${max}.`;
    const COUNT = 2 ** 40;
    expect(refusal((d) => (d.metrics[0].envs = -1))).toBe(whole('metrics[0].envs', COUNT));
    expect(refusal((d) => (d.metrics[0].timeouts = -3))).toBe(whole('metrics[0].timeouts', COUNT));
    expect(refusal((d) => (d.metrics[0].errors = 0.5))).toBe(whole('metrics[0].errors', COUNT));
    expect(refusal((d) => (d.metrics[0].budget.calls = -1))).toBe(whole('metrics[0].budget.calls', COUNT));
    expect(refusal((d) => (d.metrics[0].designerWindow.lag = -1))).toBe(
      whole('metrics[0].designerWindow.lag', 100_000),
    );
    expect(refusal((d) => (d.rollouts[0].droppedTurns = -2))).toBe(whole('rollouts[0].droppedTurns', COUNT));
    expect(refusal((d) => (d.rollouts[0].tokens = 1.5))).toBe(whole('rollouts[0].tokens', COUNT));
    expect(refusal((d) => (d.archive[0].calls[0].promptTokens = -900))).toBe(
      whole('archive[0].calls[0].promptTokens', COUNT),
    );
    expect(refusal((d) => (d.state.consecutiveErrors = -1))).toBe(whole('state.consecutiveErrors', COUNT));
    expect(refusal((d) => (d.state.ema.planning = -0.5))).toBe('state.ema.planning must be a number from 0 to 1.');
    expect(refusal((d) => (d.metrics[0].ms = -1))).toBe(`metrics[0].ms must be a number from 0 to ${COUNT}.`);
  });

  it('refuses a difficulty other than easy, medium or hard', () => {
    expect(refusal((d) => (d.archive[0].difficulty = 'impossible'))).toBe(
      'archive[0].difficulty must be one of easy, medium, hard.',
    );
    expect(refusal((d) => (d.archive[0].difficulty = 3))).toBe(
      'archive[0].difficulty must be one of easy, medium, hard.',
    );
  });

  it('keeps a spec’s iterations, and refuses a bad one', () => {
    expect(parseRunFileJson(TEXT).spec.iterations).toBe(5);
    expect(refusal((d) => (d.spec.iterations = -1))).toBe('spec.iterations must be a whole number from 0 to 100000.');
  });

  it('names a root field by the root, and a missing object by its path', () => {
    expect(refusal((d) => (d.spec = 'x'))).toBe('run.spec must be an object.');
    expect(refusal((d) => (d.archive[0].leak = 7))).toBe('archive[0].leak must be an object.');
    expect(refusal((d) => (d.memory = {}))).toBe('run.memory must be a list of {skill, code, win_rate, regret}.');
  });
});

describe('schema combinators', () => {
  const reader: Reader = {
    fail: (message) => {
      throw new Error(message);
    },
  };
  const POINT = object({ x: int(0, 9), label: opt(str()), weight: orNull(num(0, 1)) });

  it('read only the known fields, leave an absent optional field out, and read a missing nullable as null', () => {
    expect(decode(list(POINT), [{ x: 1, extra: true }], reader, 'points')).toEqual([{ x: 1, weight: null }]);
    expect(decode(POINT, { x: 2, label: 'a', weight: 0.5 }, reader, 'p')).toEqual({ x: 2, label: 'a', weight: 0.5 });
  });

  it('name the path of the first bad value', () => {
    expect(() => decode(list(POINT), [{ x: 1 }, { x: 1, weight: 2 }], reader, 'points')).toThrow(
      'points[1].weight must be a number from 0 to 1, or null.',
    );
    expect(() => decode(list(str()), ['a', 1], reader, 'names')).toThrow('names must be a list of strings.');
    expect(() => decode(list(POINT), [{ x: 1 }, { x: 1 }], reader, 'pts')).not.toThrow();
    expect(() =>
      decode(list(POINT, { unique: (p) => [String(p.x), `x ${p.x}`] }), [{ x: 1 }, { x: 1 }], reader, 'pts'),
    ).toThrow('pts[1] repeats pts[0] (x 1); each appears once in the file. It was rejected.');
  });
});
