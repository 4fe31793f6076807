// Token-exact GRPO samples and the training schedule (src/core/train/grpo.ts, grpo_rounds.ts):
// an episode becomes one id sequence with the agent's own tokens marked, advantages are z-scored
// over the unhinted plays of one environment, designs train on their first attempt with the
// designer advantage, minibatches respect the token budget, and a role that does not sample
// from the trained engine is refused with the fix.
import { describe, expect, it } from 'vitest';
import { agentTokenSamples, designerTokenSamples, extendTrace } from '../../src/core/train/grpo.ts';
import { closedLoopProblems, cycleBatch, minibatches } from '../../src/core/train/grpo_rounds.ts';
import { createRng } from '../../src/core/rng.ts';
import type { ArchiveRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';

describe('token traces', () => {
  it('grows one sequence across turns, marking only the sampled ids', () => {
    // turn 1: prompt [1 2 3], sampled [4 5]; turn 2: prompt = [1 2 3 4 5] + observation [6 7], sampled [8]
    const t1 = extendTrace(null, { prompt: [1, 2, 3], completion: [4, 5], logprobs: [-0.1, -0.2] });
    expect(t1).toEqual({ ids: [1, 2, 3, 4, 5], spans: [[3, 5]], logprobs: [-0.1, -0.2] });
    const t2 = extendTrace(t1, { prompt: [1, 2, 3, 4, 5, 6, 7], completion: [8], logprobs: [-0.3] });
    expect(t2).toEqual({
      ids: [1, 2, 3, 4, 5, 6, 7, 8],
      spans: [
        [3, 5],
        [7, 8],
      ],
      logprobs: [-0.1, -0.2, -0.3],
    });
  });
  it('refuses a turn whose prompt does not extend the episode (old turns dropped, re-tokenised)', () => {
    const t1 = extendTrace(null, { prompt: [1, 2], completion: [3], logprobs: [-1] });
    expect(extendTrace(t1, { prompt: [1, 9, 3, 4], completion: [5], logprobs: [-1] })).toBeNull();
    expect(extendTrace(t1, { prompt: [1], completion: [5], logprobs: [-1] })).toBeNull();
    expect(extendTrace(null, { prompt: [1], completion: [5, 6], logprobs: [-1] })).toBeNull(); // misaligned
  });
});

const ep = (index: number, play: number, ret: number, hinted = false, trace = true): RolloutRecord =>
  ({
    cycle: 0,
    index,
    play,
    hinted,
    return: ret,
    trace: trace ? { ids: [1, 2, play], spans: [[2, 3]], logprobs: [-1] } : null,
  }) as RolloutRecord;

/** A complete archive record with the given fields. */
const record = (r: Partial<ArchiveRecord>): ArchiveRecord => ({
  cycle: 0,
  index: 0,
  skill: 'spatial',
  setting: 'games',
  difficulty: 'medium',
  envId: null,
  title: 't',
  code: null,
  hint: null,
  source: null,
  valid: false,
  firstAttemptValid: false,
  attempts: [],
  validator: null,
  stats: null,
  leak: null,
  ...r,
});

describe('GRPO samples', () => {
  it('agent: one sample per unhinted episode, z-scored within its environment', () => {
    const s = agentTokenSamples([
      ep(0, 0, 1),
      ep(0, 1, 0),
      ep(0, 0, 1, true), // hinted: never trained
      ep(0, 2, 0),
      ep(0, 3, 0),
      ep(1, 0, 1), // every play of env 1 won: no signal
      ep(1, 1, 1),
    ]);
    // env 0 returns [1, 0, 0, 0]: mean 0.25, std sqrt(0.1875) = 0.4330
    expect(s.map((x) => x.key)).toEqual(['0:0:0', '0:0:1', '0:0:2', '0:0:3']);
    expect(s[0]!.advantage).toBeCloseTo(0.75 / 0.4330127, 4);
    expect(s[1]!.advantage).toBeCloseTo(-0.25 / 0.4330127, 4);
    expect(s.every((x) => x.role === 'agent')).toBe(true);
    expect(s[1]!.ids).toEqual([1, 2, 1]);
  });
  it('agent: a play cut short by a failed model call or sandbox stays in its group at −1', () => {
    const failed = { ...ep(0, 2, 0), end: 'model_error' as const };
    const broken = { ...ep(1, 2, 0), end: 'env_error' as const };
    const s = agentTokenSamples([ep(0, 0, 1), ep(0, 1, 0), failed, ep(1, 0, 1), ep(1, 1, 1), broken]);
    // env 0 returns [1, 0, −1]: mean 0 (the play at 0 carries no signal), std sqrt(2/3);
    // env 1 [1, 1, −1]: mean 1/3, std sqrt(8/9)
    expect(s.map((x) => x.key)).toEqual(['0:0:0', '0:0:2', '0:1:0', '0:1:1', '0:1:2']);
    expect(s[1]!.advantage).toBeCloseTo(-1 / Math.sqrt(2 / 3), 4);
    expect(s[4]!.advantage).toBeCloseTo(-(4 / 3) / Math.sqrt(8 / 9), 4);
  });
  it('agent: an episode without a trace is left out, the rest of its group still trains', () => {
    const s = agentTokenSamples([ep(0, 0, 1, false, false), ep(0, 1, 0)]);
    expect(s.map((x) => x.key)).toEqual(['0:0:1']);
    expect(s[0]!.advantage).toBeCloseTo(-1, 4);
  });
  it('designer: the first attempt with its designer advantage; no tokens or zero advantage, no sample', () => {
    const rec = (index: number, adv: number | null, tokens = true): ArchiveRecord =>
      record({
        cycle: 2,
        index,
        designerAdvantage: adv,
        attempts: [
          {
            reply: 'x',
            code: null,
            ok: false,
            failures: [],
            ...(tokens ? { tokens: { prompt: [7, 8], completion: [9], logprobs: [-2] } } : {}),
          },
          { reply: 'y', code: 'z', ok: true, failures: [], tokens: { prompt: [0], completion: [0], logprobs: [0] } },
        ],
      });
    const s = designerTokenSamples([rec(0, 0.5), rec(1, 0), rec(2, null), rec(3, -0.25, false)]);
    expect(s).toEqual([
      { role: 'designer', ids: [7, 8, 9], spans: [[2, 3]], logprobs: [-2], advantage: 0.5, key: '2:0' },
    ]);
  });
});

describe('training schedule', () => {
  it('refuses roles that do not sample from the trained engine, naming the fix', () => {
    const m = (backend: string, trainable: boolean) => ({
      backend,
      model: 'm',
      capabilities: { streaming: true, logprobs: false, trainable, contextWindow: 4096 },
    });
    expect(
      closedLoopProblems({ designer: m('local', true), hint: m('webllm', false), agent: m('local', true) }),
    ).toEqual([]);
    expect(
      closedLoopProblems({ designer: m('webllm', false), hint: m('local', true), agent: m('local', true) }),
    ).toEqual([
      'The designer samples from webllm:m, which training does not change. Choose our engine (local) for the designer, or turn training off.',
    ]);
  });
  it('trains the agent on this cycle and the designer on the cycle designerLag back', () => {
    const design = (cycle: number) =>
      record({
        cycle,
        designerAdvantage: 1,
        attempts: [
          {
            reply: '',
            code: null,
            ok: true,
            failures: [],
            tokens: { prompt: [cycle], completion: [1], logprobs: [0] },
          },
        ],
      });
    const history = [0, 1, 2].map((c) => ({ cycle: c, archive: [design(c)], rollouts: [] }));
    expect(cycleBatch(history, 2, 1).designer.map((s) => s.key)).toEqual(['1:0']);
    expect(cycleBatch(history, 2, 0).designer.map((s) => s.key)).toEqual(['2:0']);
    expect(cycleBatch(history, 0, 1).designer).toEqual([]);
  });
  it('cuts minibatches at the token budget, every sample once per epoch', () => {
    const s = [5, 3, 4, 9, 2].map((n, i) => ({
      role: 'agent' as const,
      ids: Array(n).fill(i),
      spans: [[0, n]] as [number, number][],
      logprobs: Array(n).fill(0),
      advantage: 1,
      key: String(i),
    }));
    const mbs = minibatches(s, 8, 2, createRng(3));
    for (const mb of mbs) expect(mb.length === 1 || mb.reduce((n, x) => n + x.ids.length, 0) <= 8).toBe(true);
    const keys = mbs.flat().map((x) => x.key);
    expect(keys.sort()).toEqual(['0', '0', '1', '1', '2', '2', '3', '3', '4', '4']);
  });
});
