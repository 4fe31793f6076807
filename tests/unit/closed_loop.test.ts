// The closed training loop (core/train/closed_loop.ts) with a test-double trainer and an in-memory
// store: the order of its phases (decode memory freed before every round's forward passes), the
// history window it reads and reads back after a restart, a stop honoured between two optimiser
// steps (nothing saved), and the probe cadence. Replays and probes play in the in-process sandbox.
import { describe, expect, it } from 'vitest';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import type { ChatModel, ChatResult } from '../../src/core/llm/chat_model.ts';
import type { ArchiveRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';
import {
  ClosedLoop,
  type LoopProgress,
  type LoopStep,
  type ProbeRecord,
  type TrainerPort,
  type TrainerSample,
  type TrainStore,
} from '../../src/core/train/closed_loop.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';

const runner = inProcessRunner();

/** One turn, then done: the return is the seed's parity, so replays on fresh seeds differ. */
const PARITY_ENV = `class ParityEnv {
  constructor(maxTurns = 1) { this.maxTurns = maxTurns; }
  reset(seed) { this.s = seed; return ['Say anything.', {}]; }
  step(action) { return ['Done.', this.s % 2, true, false, {}]; }
}`;

/** A trainable agent double whose every reply carries token records (a one-turn trace). */
const agent: ChatModel = {
  backend: 'local',
  model: 'agent-with-tokens',
  capabilities: { streaming: false, logprobs: true, trainable: true, contextWindow: 8192 },
  async chat(): Promise<ChatResult> {
    return {
      text: '\\boxed{1}',
      finishReason: 'stop',
      usage: { promptTokens: 2, completionTokens: 1 },
      ms: 0,
      tokens: { prompt: [1, 2], completion: [3], logprobs: [-1] },
    };
  },
};

const cfgOf = (over: Partial<Config>): Config => ({
  ...DEFAULTS,
  setting: 'games',
  seed: 5,
  maxTurns: 1,
  playsPerEnv: 4,
  trainSteps: 'minibatches',
  trainEpochs: 1,
  minibatchTokens: 1, // one sample per step
  tisCap: 2,
  designerLag: 0,
  envReuse: 1,
  probeEvery: 0,
  ...over,
});

/**
 * Cycle c's records: two unhinted plays of environment 0 (ids tagged 100 + c, returns `returns`)
 * and two designs of one skill with different win rates (ids tagged 200 + c).
 */
function cycleRecords(c: number, returns: [number, number] = [1, 0]) {
  const rollouts = returns.map(
    (r, play) =>
      ({
        cycle: c,
        index: 0,
        skill: 's',
        envId: 'parity',
        play,
        seed: play,
        hinted: false,
        return: r,
        end: 'terminated',
        turns: [],
        tokens: 1,
        trace: { ids: [100 + c, play, 9], spans: [[2, 3]], logprobs: [-1] },
      }) as unknown as RolloutRecord,
  );
  const design = (index: number, noHint: number[], adv: number) =>
    ({
      cycle: c,
      index,
      skill: 's',
      valid: true,
      firstAttemptValid: true,
      code: PARITY_ENV,
      envId: `parity-${index}`,
      attempts: [{ tokens: { prompt: [200 + c, index], completion: [7], logprobs: [-1] } }],
      stats: { noHint, withHint: [1, 1], winRate: noHint.filter((x) => x > 0).length / noHint.length, timedOut: false },
      rawReward: adv,
      designerAdvantage: adv,
    }) as unknown as ArchiveRecord;
  return { archive: [design(0, [1, 0], 1), design(1, [0, 0], -1)], rollouts };
}

/** The double trainer and the in-memory store, both writing what happens, in order, to one log. */
function doubles(o: { records?: (c: number) => ReturnType<typeof cycleRecords>; onStep?: () => void } = {}) {
  const log: string[] = [];
  const stepped: TrainerSample[][] = [];
  const steps: LoopStep[] = [];
  const probes: ProbeRecord[] = [];
  const saved: LoopProgress[] = [];
  const trainer: TrainerPort = {
    releaseDecodeMemory: () => void log.push('release'),
    async learnerLogprobs(ss) {
      log.push('logprobs');
      return ss.map((s) => s.oldLogprobs);
    },
    async step(mb) {
      log.push('step');
      stepped.push(mb);
      o.onStep?.();
      return { loss: 0.5, clipFraction: 0, approxKl: 0, gradNorm: 1, tokens: mb.length, ms: 1 };
    },
  };
  const store: TrainStore = {
    async read(c) {
      log.push(`read ${c}`);
      return (o.records ?? cycleRecords)(c);
    },
    phase: (p) => log.push(p.phase === 'probe' ? `probe ${p.label}` : `${p.phase} ${p.cycle}/${p.round}`),
    step: (s) => void steps.push(s),
    async save(p) {
      log.push(`save ${p.trainedThrough}`);
      saved.push(p);
    },
    async probe(r) {
      log.push(`probed ${r.label}`);
      probes.push({ updates: r.updates, label: r.label, meanReturn: r.meanReturn, winRate: r.winRate });
    },
  };
  return { log, stepped, steps, probes, saved, trainer, store };
}

/** The log with each run of optimiser steps written once. */
const phases = (log: string[]) => log.filter((l, i) => l !== 'step' || log[i - 1] !== 'step');

describe('the closed training loop', () => {
  it('probes, frees decode memory, recomputes π_old and steps in each round, replays, saves, then probes', async () => {
    const d = doubles();
    const cfg = cfgOf({ envReuse: 2, probeEvery: 1 });
    const loop = new ClosedLoop(
      { cfg, trainer: d.trainer, store: d.store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: false },
    );
    await loop.afterCycle({ cycle: 0, ...cycleRecords(0) });
    expect(phases(d.log)).toEqual([
      'probe before training',
      'probed before training',
      'round 0/0',
      'release',
      'logprobs',
      'step',
      'replay 0/1',
      'round 0/1',
      'release',
      'logprobs',
      'step',
      'save 0',
      'probe after update 1',
      'probed after update 1',
    ]);
    // round 1 trains the agent on its replays (fresh ids from the double), designers stay in round 0
    const rounds = d.steps.map((s) => [s.round, s.role]);
    expect(rounds).toContainEqual([1, 'agent']);
    expect(rounds.filter(([r, role]) => r === 1 && role === 'designer')).toEqual([]);
    expect(d.steps.every((s) => s.update === 1 && s.cycle === 0)).toBe(true);
    expect(loop.trained).toEqual({ updates: 1, trainedThrough: 0 });
    expect(d.probes.map((p) => [p.updates, p.label])).toEqual([
      [0, 'before training'],
      [1, 'after update 1'],
    ]);
  });

  it('reports every play of the probe and of the replays as it goes (done of total, the play under way)', async () => {
    const d = doubles();
    const plays: string[] = [];
    const store: TrainStore = {
      ...d.store,
      phase: (p) => plays.push(p.phase === 'probe' ? 'probe' : p.phase),
      plays: (p) => plays.push(`${p.done}/${p.total}${p.turn === null ? '' : ` turn ${p.turn}`} ${p.seed}`),
    };
    const loop = new ClosedLoop(
      { cfg: cfgOf({ envReuse: 2 }), trainer: d.trainer, store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: false },
    );
    await loop.afterCycle({ cycle: 0, ...cycleRecords(0) });
    const probe = plays.slice(1, plays.indexOf('round'));
    // the probe: 3 environments × 2 seeds, a line per turn (the play under way) and one as each play ends
    expect(probe.filter((l) => !l.includes('turn')).map((l) => l.split(' ')[0])).toEqual([
      '1/6',
      '2/6',
      '3/6',
      '4/6',
      '5/6',
      '6/6',
    ]);
    expect(probe[0]).toBe('0/6 turn 1 101');
    // the replays of round 1: the cycle's two valid environments, playsPerEnv (4) plays each
    const replays = plays.slice(plays.indexOf('replay') + 1, plays.lastIndexOf('round'));
    expect(replays.filter((l) => !l.includes('turn')).map((l) => l.split(' ')[0])).toEqual(
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => `${n}/8`),
    );
  });

  it('frees decode memory before the steps when TIS is off (no π_old forward)', async () => {
    const d = doubles();
    const loop = new ClosedLoop(
      { cfg: cfgOf({ tisCap: 0 }), trainer: d.trainer, store: d.store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: true },
    );
    await loop.afterCycle({ cycle: 0, ...cycleRecords(0) });
    expect(phases(d.log)).toEqual(['round 0/0', 'release', 'step', 'save 0']);
  });

  it('trains the agent on cycle k and the designer on k − designerLag, reading the window back after a restart', async () => {
    const cfg = cfgOf({ designerLag: 1 });
    const tags = (mb: TrainerSample[]) => mb.map((s) => s.ids[0]!);
    const a = doubles();
    const first = new ClosedLoop(
      { cfg, trainer: a.trainer, store: a.store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: true },
    );
    await first.afterCycle({ cycle: 0, ...cycleRecords(0) });
    await first.afterCycle({ cycle: 1, ...cycleRecords(1) });
    expect(a.log.filter((l) => l.startsWith('read'))).toEqual([]); // both cycles were in memory
    const round1 = a.stepped.slice(a.steps.findIndex((s) => s.cycle === 1)).flatMap(tags);
    expect(new Set(round1)).toEqual(new Set([101, 200])); // agent: cycle 1; designer: cycle 0
    expect(
      a.stepped
        .slice(
          0,
          a.steps.findIndex((s) => s.cycle === 1),
        )
        .flatMap(tags),
    ).not.toContain(200);

    // a restart after cycle 0 was trained: cycle 0 (the designer's) comes back from the store
    const b = doubles();
    const resumed = new ClosedLoop(
      { cfg, trainer: b.trainer, store: b.store, runner, model: agent },
      { updates: 1, trainedThrough: 0, probed: true },
    );
    await resumed.afterCycle({ cycle: 1, ...cycleRecords(1) });
    expect(b.log.filter((l) => l.startsWith('read'))).toEqual(['read 0']);
    expect(b.stepped.flatMap(tags).sort()).toEqual(round1.sort());

    // cycles written but not trained are trained in order, each saved
    const c = doubles();
    const behind = new ClosedLoop(
      { cfg, trainer: c.trainer, store: c.store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: true },
    );
    await behind.trainThrough(1);
    expect(c.log.filter((l) => /^(read|save)/.test(l))).toEqual(['read 0', 'save 0', 'read 1', 'save 1']);
    expect(c.saved.at(-1)).toEqual({ updates: 2, trainedThrough: 1 });
  });

  it('stops between two optimiser steps when the signal aborts, and saves nothing', async () => {
    const ac = new AbortController();
    const d = doubles({ onStep: () => ac.abort() });
    const loop = new ClosedLoop(
      { cfg: cfgOf({}), trainer: d.trainer, store: d.store, runner, model: agent, signal: ac.signal },
      { updates: 3, trainedThrough: 4, probed: true },
    );
    const records = cycleRecords(5);
    await expect(loop.afterCycle({ cycle: 5, ...records })).rejects.toMatchObject({ name: 'AbortError' });
    expect(d.stepped).toHaveLength(1); // the round has four samples, one step each: one ran
    expect(d.saved).toEqual([]);
    expect(loop.trained).toEqual({ updates: 3, trainedThrough: 4 });
  });

  it('does not record a probe the signal stopped', async () => {
    const ac = new AbortController();
    const d = doubles();
    const stopping: ChatModel = {
      ...agent,
      chat: async (m, o) => {
        ac.abort();
        return agent.chat(m, o);
      },
    };
    const loop = new ClosedLoop(
      { cfg: cfgOf({}), trainer: d.trainer, store: d.store, runner, model: stopping, signal: ac.signal },
      { updates: 0, trainedThrough: -1, probed: false },
    );
    await expect(loop.afterCycle({ cycle: 0, ...cycleRecords(0) })).rejects.toMatchObject({ name: 'AbortError' });
    expect(d.probes).toEqual([]);
    expect(d.stepped).toEqual([]);
  });

  it('probes every probeEvery updates; a cycle without training signal is no update', async () => {
    const d = doubles();
    const loop = new ClosedLoop(
      { cfg: cfgOf({ probeEvery: 2 }), trainer: d.trainer, store: d.store, runner, model: agent },
      { updates: 0, trainedThrough: -1, probed: false },
    );
    const flat = () => {
      const r = cycleRecords(2, [1, 1]); // every play scored the same, every design earned the same
      return { archive: r.archive.map((a) => ({ ...a, designerAdvantage: 0 })), rollouts: r.rollouts };
    };
    for (let c = 0; c < 5; c++) await loop.afterCycle({ cycle: c, ...(c === 2 ? flat() : cycleRecords(c)) });
    expect(d.saved.map((p) => p.updates)).toEqual([1, 2, 2, 3, 4]);
    expect(d.probes.map((p) => [p.updates, p.label])).toEqual([
      [0, 'before training'],
      [2, 'after update 2'],
      [4, 'after update 4'],
    ]);
  });
});
