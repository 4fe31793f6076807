// The full SPADE loop in Node with recorded and replayed models: valid environments enter the
// archive with the regret their plays imply, memory updates by the rules, a run killed mid-cycle
// resumes losing only the environment in flight, and a hanging environment is penalised and
// blacklisted without stopping the run.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import { RecordingChatModel, ReplayChatModel } from '../../src/core/llm/replay.ts';
import type { ChatModel } from '../../src/core/llm/chat_model.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { SpadeLoop, skillsForCycle, type LoopEvent } from '../../src/core/spade/loop.ts';
import { StoreRunStore, type RunSpec } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { DirRunStore } from '../../src/platform/node/run_dir.ts';
import {
  ScriptedChatModel,
  scriptedAgent,
  scriptedDesigner,
  scriptedHinter,
  scriptedTrio,
} from '../../src/core/llm/scripted_models.ts';
import { envId } from '../../src/core/env/envset.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { ModelCallError, WorkerCrashedError } from '../../src/core/errors.ts';
import { cycleRecords } from '../helpers/run_records.ts';

const CONFIG: Config = { ...DEFAULTS, seed: 7, playsPerEnv: 2, maxTurns: 12, envsPerSkill: 1 };
const spec = (config = CONFIG): RunSpec => ({
  config,
  skills: [],
  models: { designer: 'test double', hint: 'test double', agent: 'test double' },
  corpus: 'test',
  createdAt: '2026-11-30T00:00:00Z',
});
const corpus = chunkText(
  'Binary search halves an interval.\n\nEach probe tells which half holds the target.',
  'doc',
  50,
);
const runner = inProcessRunner();

async function record(iterations: number) {
  const models = {
    designer: new RecordingChatModel(scriptedDesigner()),
    hint: new RecordingChatModel(scriptedHinter()),
    agent: new RecordingChatModel(scriptedAgent()),
  };
  const store = new StoreRunStore(new MemoryStore(), 'rec');
  await new SpadeLoop({ spec: spec(), models, runner, corpus, store }).run(iterations);
  return {
    store,
    transcripts: { designer: models.designer.toJsonl(), hint: models.hint.toJsonl(), agent: models.agent.toJsonl() },
  };
}

const replayModels = (
  t: Record<'designer' | 'hint' | 'agent', string>,
): Record<'designer' | 'hint' | 'agent', ChatModel> => ({
  designer: new ReplayChatModel(t.designer),
  hint: new ReplayChatModel(t.hint),
  agent: new ReplayChatModel(t.agent),
});

describe('the SPADE loop', () => {
  it('rotates skills 3 of 6', () => {
    const s = ['a', 'b', 'c', 'd', 'e', 'f'];
    expect(skillsForCycle(s, 0, 3)).toEqual(['a', 'b', 'c']);
    expect(skillsForCycle(s, 1, 3)).toEqual(['d', 'e', 'f']);
    expect(skillsForCycle(s, 2, 3)).toEqual(['a', 'b', 'c']);
    expect(skillsForCycle(s, 1, 4)).toEqual(['e', 'f', 'a', 'b']);
  });

  it('replays a recorded run into a run directory with the regret the plays imply', async () => {
    const { store: recStore, transcripts } = await record(2);
    const dir = await mkdtemp(join(tmpdir(), 'spade-run-'));
    const store = new DirRunStore(dir);
    const events: LoopEvent[] = [];
    await new SpadeLoop({
      spec: spec(),
      models: replayModels(transcripts),
      runner,
      corpus,
      store,
      onEvent: (e) => events.push(e),
    }).run(2);

    const archive = await store.readArchive();
    expect(archive).toEqual(await recStore.readArchive()); // replay reproduces the recorded run exactly
    expect(archive.map((a) => a.skill)).toEqual([
      'mathematical',
      'logical_deduction',
      'spatial',
      'pattern_recognition',
      'optimisation',
      'causal_reasoning',
    ]);
    const rollouts = await store.readRollouts();
    for (const a of archive.filter((x) => x.stats && !x.stats.timedOut)) {
      const mine = rollouts.filter((r) => r.cycle === a.cycle && r.index === a.index);
      expect(mine).toHaveLength(4);
      // two plays each way: regret = (h0 + h1) / 2 - (n0 + n1) / 2, worked out from the rollouts
      const [h0, h1] = mine.filter((r) => r.hinted).map((r) => r.return);
      const [n0, n1] = mine.filter((r) => !r.hinted).map((r) => r.return);
      expect(a.stats!.noHint).toEqual([n0, n1]);
      expect(a.stats!.regret).toBeCloseTo((h0! + h1!) / 2 - (n0! + n1!) / 2);
      expect(a.stats!.withHint).toEqual([1, 1]); // binary search with the hint always wins in 12 turns
    }
    // the broken first attempt for "spatial" was repaired: valid, but its designer sample earns 0
    const spatial = archive.find((a) => a.skill === 'spatial')!;
    expect(spatial.attempts.map((t) => t.ok)).toEqual([false, true]);
    expect(spatial.attempts[0]!.failures[0]).toMatch(
      /^reset: EnvContractError: reset\(seed\) must return \[observation, info\]/,
    );
    expect(spatial.valid && !spatial.firstAttemptValid).toBe(true);
    expect(spatial.stats!.designerReward).toBe(0);
    // the hanging environment: penalised, blacklisted, the run went on
    const causal = archive.find((a) => a.skill === 'causal_reasoning')!;
    expect(causal.stats).toMatchObject({ timedOut: true, blacklisted: true, designerReward: -0.5 });
    const state = await store.readState();
    expect(state!.blacklist).toEqual([causal.envId]);
    expect(state!.cycle).toBe(2);
    // memory: the seed library plus every valid, non-blacklisted environment, with its statistics
    const memory = JSON.parse(await readFile(join(dir, 'memory.json'), 'utf8')) as {
      skill: string;
      win_rate: number | null;
      regret: number | null;
      code: string;
    }[];
    const played = memory.filter((m) => m.win_rate !== null);
    expect(played.map((m) => m.skill).sort()).toEqual([
      'logical_deduction',
      'mathematical',
      'optimisation',
      'pattern_recognition',
      'spatial',
    ]);
    for (const m of memory) expect(m.code.length).toBeLessThanOrEqual(2000);
    // files a user expects
    const metrics = await store.readMetrics();
    expect(metrics.map((m) => m.cycle)).toEqual([0, 1]);
    expect(metrics[0]!.validityRate).toBe(1);
    expect(metrics[0]!.firstAttemptValidityRate).toBeCloseTo(2 / 3);
    expect(metrics[1]!.timeouts).toBe(1);
    expect(events.filter((e) => e.type === 'cycle_end')).toHaveLength(2);
    expect(events.some((e) => e.type === 'rollout_turn')).toBe(true);
  });

  it('resumes a run killed mid-cycle, losing only the environment in flight', async () => {
    const { transcripts } = await record(2);
    const full = new StoreRunStore(new MemoryStore(), 'full');
    await new SpadeLoop({ spec: spec(), models: replayModels(transcripts), runner, corpus, store: full }).run(2);

    const dir = await mkdtemp(join(tmpdir(), 'spade-run-'));
    const ac = new AbortController();
    let scored = 0;
    const killed = new SpadeLoop({
      spec: spec(),
      models: replayModels(transcripts),
      runner,
      corpus,
      store: new DirRunStore(dir),
      signal: ac.signal,
      onEvent: (e) => {
        if (e.type === 'env_scored' && e.cycle === 1 && ++scored === 1) ac.abort(); // kill during cycle 1
      },
    });
    await killed.run(2);
    const mid = await new DirRunStore(dir).readState();
    expect(mid!.cycle).toBe(1);
    expect(mid!.pending.length).toBeGreaterThanOrEqual(1); // finished environments of cycle 1 survived

    const resumed = new DirRunStore(dir);
    await new SpadeLoop({ spec: spec(), models: replayModels(transcripts), runner, corpus, store: resumed }).run(2);
    expect(await resumed.readArchive()).toEqual(await full.readArchive());
    expect((await resumed.readRollouts()).length).toBe((await full.readRollouts()).length);
  });

  it('writes a cycle idempotently', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-run-'));
    const s = new DirRunStore(dir);
    await s.init();
    // records that pass the run-record schema: every read checks each line against it
    await s.writeCycle(0, cycleRecords(0, 1));
    await s.writeCycle(0, cycleRecords(0, 1));
    await s.writeCycle(1, cycleRecords(1, 1));
    expect((await s.readArchive()).map((a) => a.cycle)).toEqual([0, 1]);
    expect(await s.readMetrics()).toHaveLength(2);
    expect(s.warnings).toEqual([]); // no line on disk twice (a read skips a repeat, with a warning)
  });

  it('with the LLM validator on, a rejected design is repaired or ends invalid with the reason', async () => {
    const trio = scriptedTrio();
    const store = new StoreRunStore(new MemoryStore(), 'val');
    const config = { ...CONFIG, llmValidator: 'on' as const, skillsPerCycle: 1 };
    await new SpadeLoop({
      spec: { ...spec(config), skills: ['mathematical'] },
      models: { designer: trio, hint: trio, agent: trio },
      runner,
      corpus,
      store,
    }).run(1);
    const [a] = await store.readArchive();
    expect(a!.valid).toBe(false);
    expect(a!.attempts).toHaveLength(2); // first attempt + one repair turn
    expect(a!.attempts[0]!.failures).toEqual(['validator: no reachable goal']);
    expect(a!.validator).toEqual({ accept: false, reason: 'no reachable goal' });
  });

  it('a design that crashes the checker is failed and blacklisted; the run goes on', async () => {
    // the checker rejects (as the pool does after a watchdog kill) for the hanging design
    const crashing = {
      ...runner,
      check: async (code: string, opts?: Parameters<typeof runner.check>[1]) => {
        if (code.includes('HangHuntEnv'))
          throw new WorkerCrashedError('The sandbox worker stopped answering and was killed.');
        return runner.check(code, opts);
      },
    };
    const store = new StoreRunStore(new MemoryStore(), 'crash');
    const state = await new SpadeLoop({
      spec: { ...spec({ ...CONFIG, repairTurns: 0 }), skills: ['optimisation', 'causal_reasoning'] },
      models: { designer: scriptedDesigner(), hint: scriptedHinter(), agent: scriptedAgent() },
      runner: crashing,
      corpus,
      store,
    }).run(1);
    const archive = await store.readArchive();
    expect(archive).toHaveLength(2);
    const causal = archive.find((a) => a.skill === 'causal_reasoning')!;
    expect(causal.valid).toBe(false);
    expect(causal.firstAttemptCrashed).toBe(true);
    expect(causal.attempts[0]!.failures).toEqual([
      'checker: WorkerCrashedError: The sandbox worker stopped answering and was killed.',
    ]);
    expect(causal.rawReward).toBe(-0.5);
    expect(causal.code).toContain('HangHuntEnv');
    expect(state.blacklist).toEqual([envId(causal.code!)]);
    expect(archive.find((a) => a.skill === 'optimisation')!.valid).toBe(true);
  });

  it('a cycle gives the same archive with one task at a time and with two at once, a crashing design included', async () => {
    // two designs of one skill; the first program crashes the checker: whichever task finishes
    // first, the other reads the blacklist as it was when the cycle began
    const crashing = {
      ...runner,
      check: async (code: string, opts?: Parameters<typeof runner.check>[1]) => {
        if (code.includes('HangHuntEnv')) throw new WorkerCrashedError('killed');
        return runner.check(code, opts);
      },
    };
    const run = async (concurrency: number) => {
      const store = new StoreRunStore(new MemoryStore(), `c${concurrency}`);
      const state = await new SpadeLoop({
        spec: {
          ...spec({ ...CONFIG, concurrency, envsPerSkill: 2, repairTurns: 0, skillsPerCycle: 1 }),
          skills: ['causal_reasoning'],
        },
        models: { designer: scriptedDesigner(), hint: scriptedHinter(), agent: scriptedAgent() },
        runner: crashing,
        corpus,
        store,
      }).run(1);
      const archive = (await store.readArchive()).map((a) => [a.index, a.attempts[0]!.failures, a.rawReward]);
      return { archive, blacklist: state.blacklist };
    };
    const one = await run(1);
    expect(one.archive).toEqual([
      [0, ['checker: WorkerCrashedError: killed'], -0.5],
      [1, ['checker: WorkerCrashedError: killed'], -0.5],
    ]);
    expect(one.blacklist).toHaveLength(1); // joined once, at the end of the cycle
    expect(await run(2)).toEqual(one);
  });

  it('one failed model call ends one task; three in a row stop the run with the cause; resume continues', async () => {
    let down = false;
    const trio = scriptedTrio();
    const calls = { n: 0 };
    const model: ChatModel = {
      backend: 'test',
      model: 'flaky-double',
      capabilities: trio.capabilities,
      chat: async (m, o) => {
        calls.n++;
        if (down || calls.n === 1) throw new ModelCallError('HTTP 503: the server is restarting');
        return trio.chat(m, o);
      },
    };
    const config = { ...CONFIG, skillsPerCycle: 3, maxConsecutiveErrors: 3 };
    const dir = await mkdtemp(join(tmpdir(), 'spade-run-'));
    // cycle 0: the very first designer call fails -> that task is recorded, the other two run
    const s1 = new DirRunStore(dir);
    await new SpadeLoop({
      spec: spec(config),
      models: { designer: model, hint: model, agent: model },
      runner,
      corpus,
      store: s1,
    }).run(1);
    const c0 = await s1.readArchive();
    expect(c0.map((a) => Boolean(a.error))).toEqual([true, false, false]);
    expect(c0[0]!.error).toEqual({
      phase: 'design',
      name: 'ModelCallError',
      message: 'HTTP 503: the server is restarting',
    });
    expect(c0[0]!.rawReward).toBeNull(); // not the design's fault: no part in the designer's reward
    expect((await s1.readMetrics())[0]!.errors).toBe(1);
    // cycle 1: the server is down -> three failed tasks in a row stop the run, naming the cause
    down = true;
    const events: LoopEvent[] = [];
    await expect(
      new SpadeLoop({
        spec: spec(config),
        models: { designer: model, hint: model, agent: model },
        runner,
        corpus,
        store: new DirRunStore(dir),
        onEvent: (e) => events.push(e),
      }).run(2),
    ).rejects.toThrow(
      /Stopped after 3 tasks in a row failed; the last failed in its design phase with ModelCallError: HTTP 503/,
    );
    expect(events.filter((e) => e.type === 'task_error')).toHaveLength(3);
    expect((await new DirRunStore(dir).readState())!.cycle).toBe(1);
    // the server is back: --resume retries the failed tasks and finishes the cycle
    down = false;
    const s3 = new DirRunStore(dir);
    await new SpadeLoop({
      spec: spec(config),
      models: { designer: model, hint: model, agent: model },
      runner,
      corpus,
      store: s3,
    }).run(2);
    const all = await s3.readArchive();
    expect(all.filter((a) => a.cycle === 1).map((a) => Boolean(a.error))).toEqual([false, false, false]);
  });

  it('several designs per skill give the designer a signal: centred within the skill, invalid ranked below', async () => {
    // two designs for one skill: the first valid (scored), the second broken with no repair turn
    let n = 0;
    const designer = new ScriptedChatModel('d', () =>
      n++ === 0 ? '```javascript\n' + FAKE_ENV + '\n```' : 'I cannot write that program.',
    );
    const store = new StoreRunStore(new MemoryStore(), 'k2');
    await new SpadeLoop({
      spec: { ...spec({ ...CONFIG, envsPerSkill: 2, repairTurns: 0, skillsPerCycle: 1 }), skills: ['mathematical'] },
      models: { designer, hint: scriptedHinter(), agent: scriptedAgent() },
      runner,
      corpus,
      store,
    }).run(1);
    const [good, bad] = await store.readArchive();
    expect([good!.index, bad!.index]).toEqual([0, 1]);
    expect(bad!.rawReward).toBe(0);
    const raw = good!.stats!.raw!;
    expect(good!.rawReward).toBe(raw);
    expect(raw).toBeGreaterThan(0);
    // centred on the skill's mean (raw + 0) / 2, times envRewardScale 1
    expect(good!.designerAdvantage).toBeCloseTo(raw / 2);
    expect(bad!.designerAdvantage).toBeCloseTo(-raw / 2);
  });

  it('checks: paper accepts a well-formed game whose solution() is wrong (kept as a soft fact); strict rejects it', async () => {
    const wrong = FAKE_ENV.replace(
      'const s = []; let lo = 1, hi = 20;',
      "return ['\\\\boxed{0}']; const s = []; let lo = 1, hi = 20;",
    );
    expect(wrong).not.toBe(FAKE_ENV);
    const designer = new ScriptedChatModel('d', () => '```javascript\n' + wrong + '\n```');
    const run = async (checks: 'paper' | 'strict') => {
      const store = new StoreRunStore(new MemoryStore(), checks);
      await new SpadeLoop({
        spec: { ...spec({ ...CONFIG, checks, repairTurns: 0, skillsPerCycle: 1 }), skills: ['mathematical'] },
        models: { designer, hint: scriptedHinter(), agent: scriptedAgent() },
        runner,
        corpus,
        store,
      }).run(1);
      return (await store.readArchive())[0]!;
    };
    const paper = await run('paper');
    expect(paper.valid).toBe(true);
    expect(paper.attempts[0]!.soft!.some((f) => f.startsWith('solution_solves:'))).toBe(true);
    const strict = await run('strict');
    expect(strict.valid).toBe(false);
    expect(strict.attempts[0]!.failures.some((f) => f.startsWith('solution_solves:'))).toBe(true);
  });
});
