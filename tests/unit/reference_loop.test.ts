// The loop as the reference runs it: the `paper` preset and its sources, the env-reward scale
// computed as the reference does (min(cap, agent plays ÷ designs × envReuse)), the designer's
// windowed reward (a lagged design scored over every play of its window), one optimiser step per
// role per rollout batch, failed plays kept in their group at −1 and a failed hint scored regret 0.
// The numbers are worked out by hand in the comments.
import { describe, expect, it } from 'vitest';
import {
  applyPreset,
  changeSetting,
  CONFIG_KEYS,
  DEFAULTS,
  PRESETS,
  presetValues,
  resolveConfig,
  type Config,
} from '../../src/core/config.ts';
import type { ChatModel } from '../../src/core/llm/chat_model.ts';
import { ScriptedChatModel, scriptedAgent, scriptedHinter } from '../../src/core/llm/scripted_models.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { ModelCallError } from '../../src/core/errors.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { computedEnvRewardScale } from '../../src/core/spade/estimators.ts';
import { SpadeLoop } from '../../src/core/spade/loop.ts';
import { parseRunSpec } from '../../src/core/spade/run_file.ts';
import { StoreRunStore, type ArchiveRecord, type RolloutRecord, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import type { TokenSample } from '../../src/core/train/grpo.ts';
import { cycleBatch, trainRound } from '../../src/core/train/grpo_rounds.ts';
import { createRng } from '../../src/core/rng.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';

const runner = inProcessRunner();
const corpus = chunkText(
  'Binary search halves an interval.\n\nEach probe tells which half holds the target.',
  'doc',
  50,
);
const spec = (config: Config): RunSpec => ({
  config,
  skills: ['mathematical'],
  models: { designer: 'd', hint: 'h', agent: 'a' },
  corpus: 'test',
  createdAt: '2026-12-01T00:00:00Z',
});
const goodThenBad = () => {
  let n = 0;
  return new ScriptedChatModel('d', () =>
    n++ === 0 ? '```javascript\n' + FAKE_ENV + '\n```' : 'I cannot write that program.',
  );
};
const SMALL: Config = { ...DEFAULTS, seed: 7, playsPerEnv: 2, maxTurns: 12, skillsPerCycle: 1, repairTurns: 0 };

describe('presets', () => {
  it('switching the setting under paper moves its per-setting values, keeping what the user changed', () => {
    const paper = { ...applyPreset({ ...DEFAULTS }, 'paper'), excerptWords: 500 };
    const tool = changeSetting(paper, 'tool_use');
    expect(tool).toMatchObject({ setting: 'tool_use', klCoef: 0.005, envReuse: 8, excerptWords: 500, playsPerEnv: 16 });
    expect(changeSetting(tool, 'games')).toMatchObject({ klCoef: 0, envReuse: 4, excerptWords: 500 });
    expect(changeSetting({ ...DEFAULTS }, 'tool_use')).toEqual({ ...DEFAULTS, setting: 'tool_use' });
  });
  it('paper sets the reference values, per setting where the reference differs, each with a reason', () => {
    expect(presetValues('paper', 'games')).toMatchObject({
      envsPerSkill: 8,
      playsPerEnv: 16,
      envReuse: 4,
      designerLag: 1,
      klCoef: 0,
      envRewardScaleMode: 'computed',
      envRewardScaleCap: 50,
      trainSteps: 'batch',
      trainEpochs: 1,
      tisCap: 2,
    });
    expect(presetValues('paper', 'tool_use')).toMatchObject({ klCoef: 0.005, envReuse: 8, excerptWords: 4000 });
    for (const e of Object.values(PRESETS.paper)) expect(e.why.length).toBeGreaterThan(10);
    expect(presetValues('laptop', 'games')).toEqual({}); // laptop is the schema's defaults, named
  });

  it('resolves defaults < preset < link < flag, and says where each value came from', () => {
    const r = resolveConfig({ link: { seed: 3, playsPerEnv: 8 }, flags: { preset: 'paper', playsPerEnv: 2 } });
    expect(r.config).toMatchObject({ preset: 'paper', seed: 3, playsPerEnv: 2, envsPerSkill: 8, maxTurns: 25 });
    expect(r.source).toMatchObject({
      preset: 'flag',
      seed: 'link',
      playsPerEnv: 'flag',
      envsPerSkill: 'preset',
      difficulty: 'default',
    });
    expect(Object.keys(r.source).sort()).toEqual([...CONFIG_KEYS].sort());
    // the preset's per-setting values follow the setting an upper layer chooses
    expect(resolveConfig({ flags: { preset: 'paper', setting: 'tool_use' } }).config.klCoef).toBe(0.005);
    expect(() => resolveConfig({ flags: { preset: 'huge' } })).toThrow(/preset must be one of laptop, paper/);
  });

  it('the preset name survives a run file (the spec carries the config)', () => {
    const config = resolveConfig({ flags: { preset: 'paper' } }).config;
    const back = parseRunSpec(JSON.parse(JSON.stringify(spec(config))));
    expect(back.config.preset).toBe('paper');
    expect(back.config).toEqual(config);
  });
});

describe('env-reward scale', () => {
  it('is min(cap, agent plays ÷ designs × envReuse), as the reference computes it', () => {
    // paper: 24 designs, 24 × 16 unhinted plays a step, 4 steps per generation: 16 × 4 = 64, capped at 50
    expect(computedEnvRewardScale(384, 24, 4)).toBe(50);
    expect(computedEnvRewardScale(8, 4, 4)).toBe(8); // 2 plays per design × 4
    expect(computedEnvRewardScale(8, 4, 4, 5)).toBe(5);
    expect(computedEnvRewardScale(0, 4, 4)).toBe(1); // nothing played: no scaling
  });

  it('scales the centred designer reward and is recorded per cycle', async () => {
    // one skill, two designs: the first valid (2 unhinted plays), the second invalid (raw 0).
    // computed scale = 2 plays ÷ 2 designs × envReuse 3 = 3; advantages ±raw/2 × 3
    const store = new StoreRunStore(new MemoryStore(), 'scale');
    const config: Config = { ...SMALL, envsPerSkill: 2, envReuse: 3, envRewardScaleMode: 'computed' };
    await new SpadeLoop({
      spec: spec(config),
      models: { designer: goodThenBad(), hint: scriptedHinter(), agent: scriptedAgent() },
      runner,
      corpus,
      store,
    }).run(1);
    const [good, bad] = await store.readArchive();
    const raw = good!.stats!.raw!;
    expect(raw).toBeGreaterThan(0);
    expect(good!.designerAdvantage).toBeCloseTo((raw / 2) * 3);
    expect(bad!.designerAdvantage).toBeCloseTo((-raw / 2) * 3);
    const [m] = await store.readMetrics();
    expect(m!.envRewardScale).toBe(3);
    expect(m!.designerWindow).toEqual({ lag: 1, designsOf: null, rounds: 3, designs: 0, plays: 0 });
  });
});

const tokens = { prompt: [1], completion: [2], logprobs: [0] };
function design(index: number, noHint: number[], withHint: number[], rawReward: number, adv: number): ArchiveRecord {
  return {
    cycle: 0,
    index,
    skill: 's',
    setting: 'games',
    difficulty: 'medium',
    envId: `e${index}`,
    title: 't',
    code: 'c',
    hint: 'h',
    source: null,
    valid: true,
    firstAttemptValid: true,
    attempts: [{ reply: '', code: 'c', ok: true, failures: [], tokens }],
    validator: null,
    stats: {
      noHint,
      withHint,
      winRate: 0,
      winRateHinted: 0,
      regret: 0,
      raw: rawReward,
      designerReward: adv,
      timedOut: false,
      blacklisted: false,
    },
    leak: null,
    rawReward,
    designerAdvantage: adv,
  };
}
const play = (index: number, ret: number, hinted = false): RolloutRecord =>
  ({
    cycle: 0,
    index,
    skill: 's',
    envId: `e${index}`,
    play: 0,
    hinted,
    return: ret,
    end: 'terminated',
    turns: [],
  }) as unknown as RolloutRecord;

describe('windowed designer reward', () => {
  // Cycle 0, one skill, two designs, 2 plays each with and without the hint:
  //   A: unhinted [1, 0] (win rate 0.5), hinted [1, 1] → regret 0.5
  //      paper_blend at its cycle: 0.6·plateau(0.5) + 0.4·clip(0.5/0.15) = 0.6 + 0.4 = 1
  //   B: unhinted [0, 0], hinted [0, 0] → 0.6·plateau(0) + 0 = 0
  //   centred at the cycle: A +0.5, B −0.5 (scale 1)
  // The reuse rounds replay them (3 rounds × 2 plays): A wins all 6, B wins 3 of 6.
  //   A's window: 7 wins of 8 → plateau(0.875) = max(0, 1 − 0.275/0.25) = 0 → raw 0.4 (regret stays 0.5: matched timing)
  //   B's window: 3 wins of 8 → plateau(0.375) = 1 − 0.025/0.25 = 0.9 → raw 0.54
  //   centred on 0.47: A −0.07, B +0.07 — the window reverses the ranking
  const archive = [design(0, [1, 0], [1, 1], 1, 0.5), design(1, [0, 0], [0, 0], 0, -0.5)];
  const rollouts = [play(0, 1), play(0, 0), play(0, 1, true), play(0, 1, true), play(1, 0), play(1, 0)];
  rollouts.push(play(1, 0, true), play(1, 0, true));
  const reuse = [...Array(6)].map(() => play(0, 1));
  reuse.push(play(1, 1), play(1, 0), play(1, 1), play(1, 0), play(1, 1), play(1, 0));
  const history = [
    { cycle: 0, archive, rollouts, reuse },
    { cycle: 1, archive: [], rollouts: [] },
  ];
  const adv = (cfg: Config) => cycleBatch(history, 1, 1, cfg).designer.map((s) => s.advantage);

  it('trains a lagged design on its reward recomputed over every play of the window', () => {
    const cfg: Config = { ...DEFAULTS, envReuse: 4 };
    const [a, b] = adv(cfg);
    expect(a).toBeCloseTo(-0.07, 10);
    expect(b).toBeCloseTo(0.07, 10);
  });

  it('with the computed scale: 4 unhinted plays ÷ 2 designs × envReuse 4 = 8', () => {
    const [a, b] = adv({ ...DEFAULTS, envReuse: 4, envRewardScaleMode: 'computed' });
    expect(a).toBeCloseTo(-0.56, 10);
    expect(b).toBeCloseTo(0.56, 10);
  });
});

describe('optimiser steps', () => {
  it('trainSteps: batch makes one step per role per rollout batch, whatever the minibatch budget', async () => {
    const s = (role: 'agent' | 'designer', n: number, i: number): TokenSample => ({
      role,
      ids: Array(n).fill(i),
      spans: [[0, n]],
      logprobs: Array(n).fill(0),
      advantage: 1,
      key: `${role}${i}`,
    });
    const batch = {
      agent: [5, 3, 4, 9].map((n, i) => s('agent', n, i)),
      designer: [7, 8].map((n, i) => s('designer', n, i)),
    };
    const sizes: number[] = [];
    const trainer = {
      step: async (mb: TokenSample[]) => {
        sizes.push(mb.length);
        return { loss: 0, clipFraction: 0, approxKl: 0, gradNorm: 0, tokens: 0, ms: 0 };
      },
    };
    const cfg = { minibatchTokens: 8, trainEpochs: 2 };
    const progress: string[] = [];
    await trainRound(trainer, batch, { ...cfg, trainSteps: 'minibatches' }, createRng(1), (_s, done, total) =>
      progress.push(`${done}/${total}`),
    );
    expect(sizes.length).toBeGreaterThan(2);
    // progress knows the round's total before its first step
    expect(progress).toEqual(sizes.map((_, i) => `${i + 1}/${sizes.length}`));
    sizes.length = 0;
    const steps = await trainRound(trainer, batch, { ...cfg, trainSteps: 'batch' }, createRng(1));
    expect(sizes).toEqual([4, 2]);
    expect(steps.map((x) => x.role)).toEqual(['agent', 'designer']);
  });
});

describe('failed plays and hints, scored as the reference scores them', () => {
  it('a play whose model call failed scores −1 and stays in its group; the task is scored', async () => {
    let calls = 0;
    const inner = scriptedAgent();
    const agent: ChatModel = {
      backend: inner.backend,
      model: inner.model,
      capabilities: inner.capabilities,
      chat: async (m, o) => {
        if (calls++ === 0) throw new ModelCallError('HTTP 500 from the server');
        return inner.chat(m, o);
      },
    };
    const store = new StoreRunStore(new MemoryStore(), 'failplay');
    await new SpadeLoop({
      spec: spec({ ...SMALL, concurrency: 1 }),
      models: { designer: goodThenBad(), hint: scriptedHinter(), agent },
      runner,
      corpus,
      store,
    }).run(1);
    const [a] = await store.readArchive();
    expect(a!.error ?? null).toBeNull();
    expect(a!.stats).not.toBeNull();
    // the first play (unhinted, play 0) failed: −1 in its group, and the mean counts it
    expect(a!.stats!.noHint[0]).toBe(-1);
    expect(a!.stats!.noHint).toHaveLength(2);
  });

  it('a failed hint leaves the unhinted plays and scores regret 0', async () => {
    const hint = new ScriptedChatModel('h', () => {
      throw new ModelCallError('HTTP 503 from the server');
    });
    const store = new StoreRunStore(new MemoryStore(), 'failhint');
    await new SpadeLoop({
      spec: spec(SMALL),
      models: { designer: goodThenBad(), hint, agent: scriptedAgent() },
      runner,
      corpus,
      store,
    }).run(1);
    const [a] = await store.readArchive();
    expect(a!.error ?? null).toBeNull();
    expect(a!.hintError?.phase).toBe('hint');
    expect(a!.stats!.noHint).toHaveLength(2);
    expect(a!.stats!.withHint).toEqual([]);
    expect(a!.stats!.regret).toBe(0);
    expect(a!.rawReward).not.toBeNull(); // it takes part in the designer's centring
  });
});
