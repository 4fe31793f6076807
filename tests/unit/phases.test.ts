// Known-answer tests for each phase of a SPADE task (src/core/spade/phases.ts) and for the
// event reducer (run_events.ts): checks at the paper and strict levels, a checker that crashes,
// a designer call that fails, hints, plays with the real sandbox, the leak probe, scoring and
// the cycle's metrics — each against values worked out by hand.
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import type { CheckReport } from '../../src/core/env/checker.ts';
import { envId } from '../../src/core/env/envset.ts';
import { FAKE_ENV, HOSTILE } from '../../src/core/env/hostile.ts';
import { LOCK_ENV } from '../../src/core/env/broken.ts';
import { createNodeSandboxPool } from '../../src/platform/node/sandbox_pool.ts';
import { ModelCallError, WorkerCrashedError } from '../../src/core/errors.ts';
import { MeteredChatModel, type ChatModel } from '../../src/core/llm/chat_model.ts';
import { ScriptedChatModel, scriptedAgent } from '../../src/core/llm/scripted_models.ts';
import { createRng } from '../../src/core/rng.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { playFresh, type Episode } from '../../src/core/spade/agent.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { emptyMemory } from '../../src/core/spade/memory.ts';
import {
  brief,
  checkAndRepair,
  checkDesign,
  cycleMetrics,
  play,
  probeLeaks,
  score,
  writeHint,
  type CheckingRunner,
  type Play,
  type TaskContext,
} from '../../src/core/spade/phases.ts';
import { applyEvent, emptyRunView, type LoopEvent } from '../../src/core/spade/run_events.ts';
import { replayUnhinted } from '../../src/core/spade/unhinted_replays.ts';
import { Limiter } from '../../src/core/limiter.ts';
import type { ArchiveRecord, PendingTask } from '../../src/core/spade/run_store.ts';

const sandbox = inProcessRunner();
const fail = (): never => {
  throw new ModelCallError('HTTP 500 from the server: overloaded');
};
const failing: ChatModel = new ScriptedChatModel('down', fail);

function ctx(
  over: Partial<Omit<TaskContext, 'cfg'>> & { cfg?: Partial<Config> } = {},
): TaskContext & { events: LoopEvent[] } {
  const events: LoopEvent[] = [];
  const { cfg, ...rest } = over;
  const agent = new MeteredChatModel(scriptedAgent());
  const config = { ...DEFAULTS, seed: 3, playsPerEnv: 2, maxTurns: 12, repairTurns: 1, ...cfg };
  return {
    cfg: config,
    cycle: 0,
    index: 0,
    skill: 'mathematical',
    memory: emptyMemory(),
    blacklist: [],
    emaWinRate: undefined,
    runner: sandbox,
    models: { designer: agent, hint: agent, agent },
    budget: new Limiter(config.concurrency),
    corpus: chunkText('Binary search halves an interval each time.', 'doc', 50),
    rng: createRng(1),
    limits: DEFAULT_LIMITS,
    emit: (e) => events.push(e),
    gate: async () => undefined,
    events,
    ...rest,
  };
}

/** A report with every check passing except the named ones. */
function report(failing: string[]): CheckReport {
  const names = [
    'loads',
    'reset',
    'step',
    'garbage_input',
    'solution_solves',
    'multi_turn',
    'not_solved_at_reset',
    'deterministic',
    'random_policy_ends',
  ] as const;
  return {
    ok: failing.length === 0,
    className: 'XEnv',
    setting: 'games',
    checks: names.map((name) => ({ name, ok: !failing.includes(name), message: `${name} message` })),
    solutionSteps: [],
    ms: 1,
  };
}
const fakeRunner = (check: CheckingRunner['check']): CheckingRunner => ({ ...sandbox, check });

describe('phases: brief', () => {
  it('grounds the designer on a corpus excerpt and emits the document', async () => {
    const c = ctx();
    const b = await brief(c);
    expect(b.doc?.source).toBe('doc §1');
    expect(b.messages).toHaveLength(2);
    expect(b.messages[1]!.content).toContain('Binary search halves an interval each time.');
    expect(b.messages[1]!.content).toContain('"mathematical"');
    expect(c.events).toEqual([
      {
        type: 'document',
        cycle: 0,
        index: 0,
        skill: 'mathematical',
        source: 'doc §1',
        excerpt: 'Binary search halves an interval each time.',
      },
    ]);
  });
});

describe('phases: checkDesign', () => {
  it('paper level fails only the paper checks; the rest become soft facts', async () => {
    const r = fakeRunner(async () => report(['solution_solves', 'multi_turn']));
    const paper = await checkDesign(ctx({ runner: r, cfg: { checks: 'paper' } }), FAKE_ENV);
    expect(paper.failures).toEqual([]);
    expect(paper.soft).toEqual(['solution_solves: solution_solves message', 'multi_turn: multi_turn message']);
    const strict = await checkDesign(ctx({ runner: r, cfg: { checks: 'strict' } }), FAKE_ENV);
    expect(strict.failures).toEqual(['solution_solves: solution_solves message', 'multi_turn: multi_turn message']);
    expect(strict.soft).toEqual([]);
    const badStep = await checkDesign(ctx({ runner: fakeRunner(async () => report(['step'])) }), FAKE_ENV);
    expect(badStep.failures).toEqual(['step: step message']);
  });

  it('a checker that crashes fails the design (never the run) and marks it for the blacklist', async () => {
    const r = fakeRunner(async () => {
      throw new WorkerCrashedError('The sandbox worker was killed after 60 s.');
    });
    const out = await checkDesign(ctx({ runner: r }), FAKE_ENV);
    expect(out.failures).toEqual(['checker: WorkerCrashedError: The sandbox worker was killed after 60 s.']);
    expect(out.crashed).toEqual({
      phase: 'check',
      name: 'WorkerCrashedError',
      message: 'The sandbox worker was killed after 60 s.',
    });
  });

  it('no program, and a blacklisted program, fail without running anything', async () => {
    let ran = 0;
    const r = fakeRunner(async () => (ran++, report([])));
    expect((await checkDesign(ctx({ runner: r }), null)).failures[0]).toMatch(/^no program found/);
    const c = ctx({ runner: r, blacklist: [envId(FAKE_ENV)] });
    expect((await checkDesign(c, FAKE_ENV)).failures[0]).toMatch(/blacklisted/);
    expect(ran).toBe(0);
  });

  it('runs the real checker on the shared fake environment', async () => {
    const out = await checkDesign(ctx({ cfg: { checks: 'strict' } }), FAKE_ENV);
    expect(out.failures).toEqual([]);
    expect(out.report?.className).toBe('FakeHuntEnv');
  });
});

describe('phases: the paper-level checker still rejects every hostile program', () => {
  const pool = createNodeSandboxPool({ size: 2, graceMs: 700, checkMs: 15_000 });
  // the programs that need the kill switch get a pool of their own: a worker that is killed fails
  // every check in flight on it, which would hide which check each other program fails
  const killPool = createNodeSandboxPool({ size: 1, graceMs: 700, checkMs: 15_000 });
  afterAll(() => Promise.all([pool.terminate(), killPool.terminate()]));
  // the check that fails when the host call of a hostile entry's phase fails; a program the
  // watchdog has to kill crashes the checker itself
  const CHECK_OF_PHASE = { load: 'loads', reset: 'reset', step: 'step', close: 'closes' } as const;
  it('fails each catalogue entry at checks: paper, at the check of its phase (the pool contains the ones that need a kill)', async () => {
    const outs = await Promise.all(
      HOSTILE.map(async (h) => {
        const t0 = Date.now();
        const runner = h.needsKill ? killPool : pool;
        const out = await checkDesign(ctx({ runner, cfg: { checks: 'paper' } }), h.code);
        return { h, out, ms: Date.now() - t0 };
      }),
    );
    for (const { h, out } of outs)
      expect(
        out.failures.map((f) => f.slice(0, f.indexOf(':'))),
        `${h.name}: ${out.failures.join(' | ')}`,
      ).toEqual([h.needsKill ? 'checker' : CHECK_OF_PHASE[h.phase]]);
    console.log(`paper checks on ${outs.length} hostile programs: slowest ${Math.max(...outs.map((o) => o.ms))} ms`);
  }, 180_000);
});

describe('phases: a program is not blamed for a neighbour that broke their shared worker', () => {
  const pool = createNodeSandboxPool({ size: 1, graceMs: 700, checkMs: 15_000 });
  afterAll(() => pool.terminate());
  it('checks a good program again when its environment was lost with the worker; the breaker alone fails', async () => {
    const nativeLoop = HOSTILE.find((h) => h.needsKill)!;
    // one worker: the good program's calls queue behind the native loop's, and are lost when it is killed
    const [bad, good] = await Promise.all([
      checkDesign(ctx({ runner: pool, cfg: { checks: 'paper' } }), nativeLoop.code),
      checkDesign(ctx({ runner: pool, cfg: { checks: 'paper' } }), LOCK_ENV),
    ]);
    expect(pool.kills).toBeGreaterThanOrEqual(1);
    expect(bad.crashed, nativeLoop.name).not.toBeNull();
    expect(good.failures).toEqual([]);
    expect(good.crashed).toBeNull();
  }, 60_000);
});

describe('phases: checkAndRepair', () => {
  it('repairs a broken first attempt with the checker failures fed back', async () => {
    const seen: number[] = [];
    const designer = new ScriptedChatModel('d', (m) => {
      seen.push(m.length);
      return m.length === 2 ? 'no code here' : '```javascript\n' + FAKE_ENV + '\n```';
    });
    const c = ctx({ models: { ...ctx().models, designer: new MeteredChatModel(designer) } });
    const d = await checkAndRepair(c, await brief(c));
    expect(seen).toEqual([2, 4]); // the repair turn sees the first reply and the failures
    expect(d.attempts.map((a) => a.ok)).toEqual([false, true]);
    expect(d.code).toBe(FAKE_ENV);
    expect(d.error).toBeNull();
  });

  it('a failed designer call ends the task with the cause, not the run', async () => {
    const c = ctx({ models: { ...ctx().models, designer: new MeteredChatModel(failing) } });
    const d = await checkAndRepair(c, await brief(c));
    expect(d.attempts).toEqual([]);
    expect(d.code).toBeNull();
    expect(d.error).toEqual({
      phase: 'design',
      name: 'ModelCallError',
      message: 'HTTP 500 from the server: overloaded',
    });
  });

  it('a design that crashes the checker is blacklisted, and its first attempt counts as crashed', async () => {
    let calls = 0;
    const r = fakeRunner(async () => {
      if (calls++ === 0) throw new WorkerCrashedError('killed');
      return report([]);
    });
    const designer = new ScriptedChatModel('d', () => '```javascript\n' + FAKE_ENV + '\n```');
    const c = ctx({ runner: r, models: { ...ctx().models, designer: new MeteredChatModel(designer) } });
    const d = await checkAndRepair(c, await brief(c));
    expect(d.firstAttemptCrashed).toBe(true);
    expect(d.blacklist).toEqual([envId(FAKE_ENV)]);
    expect(d.attempts.map((a) => a.ok)).toEqual([false, true]);
  });

  it('stops (AbortError) rather than record a failure when the run is stopped', async () => {
    const ac = new AbortController();
    ac.abort();
    const c = ctx({ signal: ac.signal, models: { ...ctx().models, designer: new MeteredChatModel(failing) } });
    await expect(checkAndRepair(c, await brief(c))).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('phases: hint, plays, leaks, score', () => {
  it('writes the hint from the first paragraph of the reply', async () => {
    const hinter = new ScriptedChatModel('h', () => 'Hint: Halve the range.\n\nMore text.');
    const c = ctx({ models: { ...ctx().models, hint: new MeteredChatModel(hinter) } });
    expect((await writeHint(c, FAKE_ENV)).hint).toBe('Halve the range.');
    expect(c.events).toEqual([{ type: 'hint', cycle: 0, index: 0, hint: 'Halve the range.' }]);
  });

  it('plays N times without and N with the hint on the same seeds', async () => {
    const c = ctx();
    const { seeds, plays } = await play(c, FAKE_ENV, 'Halve the range each time.');
    expect(seeds).toHaveLength(2);
    expect(plays.map((p) => [p.play, p.hinted])).toEqual([
      [0, false],
      [0, true],
      [1, false],
      [1, true],
    ]);
    expect(plays.map((p) => p.seed)).toEqual([seeds[0], seeds[0], seeds[1], seeds[1]]);
    // the agent double binary-searches 1..20 with the hint: it always wins within 5 guesses
    for (const p of plays.filter((x) => x.hinted)) expect(p.ep).toMatchObject({ return: 1, end: 'terminated' });
    expect(plays[1]!.ep.firstObservation.endsWith('\n\nHINT: Halve the range each time.')).toBe(true);
    expect(c.events.filter((e) => e.type === 'rollout_end')).toHaveLength(4);
  });

  it('an agent whose token budget cannot fit another reply ends on token_budget, not context_full', async () => {
    // each reply costs 90 tokens of a 100-token budget: 10 left is below the 32 a reply needs
    const wordy = new ScriptedChatModel('wordy', () => `${'word '.repeat(89)}\\boxed{1}`);
    const ep = await playFresh(FAKE_ENV, {
      runner: sandbox,
      setting: 'games',
      model: wordy,
      seed: 5,
      hint: null,
      maxTurns: 12,
      tokenBudget: 100,
      temperature: 0,
      sampleSeed: 1,
    });
    expect(ep.turns).toHaveLength(1);
    expect(ep.end).toBe('token_budget');
  });

  it('a failed agent call ends that play as a model error', async () => {
    const c = ctx({ models: { ...ctx().models, agent: new MeteredChatModel(failing) } });
    const { plays } = await play(c, FAKE_ENV, 'h');
    expect(plays.every((p) => p.ep.end === 'model_error')).toBe(true);
    expect(plays[0]!.ep.error).toEqual({ name: 'ModelCallError', message: 'HTTP 500 from the server: overloaded' });
  });

  const ep = (ret: number, hinted: boolean, first = 'Find it.', error?: Episode['error']): Play => ({
    seed: 1,
    play: 0,
    hinted,
    ep: { seed: 1, hinted, firstObservation: first, turns: [], return: ret, end: 'terminated', tokens: 0, error },
  });

  it('scores by hand: regret, win rates and the paper blend', () => {
    // without hint: returns 0 and 1 (win rate 0.5, in the band: plateau 1); with hint 1 and 1
    // regret = 1 - 0.5 = 0.5; paper blend = 0.6 * 1 + 0.4 * min(1, 0.5 / 0.15) = 1
    const s = score({ ...DEFAULTS }, [ep(0, false), ep(1, true), ep(1, false), ep(1, true)], undefined);
    expect(s).toMatchObject({ noHint: [0, 1], withHint: [1, 1], winRate: 0.5, winRateHinted: 1, regret: 0.5 });
    expect(s.raw).toBeCloseTo(1);
    expect(s.timedOut).toBe(false);
    // win rate 0.25 (plateau 1 - 0.15/0.25 = 0.4), regret 0.75 - 0.25 = 0.5: 0.6*0.4 + 0.4 = 0.64
    const t = score(
      { ...DEFAULTS },
      [ep(1, false), ep(0, false), ep(0, false), ep(0, false), ep(1, true), ep(1, true), ep(1, true), ep(0, true)],
      undefined,
    );
    expect(t.raw).toBeCloseTo(0.64);
    const timed = score({ ...DEFAULTS }, [ep(0, false, '', { name: 'SandboxTimeoutError', message: 'x' })], undefined);
    expect(timed).toMatchObject({ timedOut: true, blacklisted: true });
  });

  it('flags a leak with what triggered it, and only then', async () => {
    const c = ctx();
    const honest = await probeLeaks(c, FAKE_ENV, [5], 'Halve the range each time.', [ep(0, false), ep(1, true)]);
    expect(honest.values).toEqual([]);
    // r_hint = 1 while r_no_hint = 0: suspicious even without a literal value
    expect(honest.suspicious).toBe(true);
    expect(honest.reasons).toEqual(['won almost always with the hint and almost never without']);
    const fine = await probeLeaks(c, FAKE_ENV, [5], 'Halve the range.', [ep(1, false), ep(1, true)]);
    expect(fine).toEqual({ values: [], suspicious: false, reasons: [] });
  });
});

describe('reusing a generation for more agent updates', () => {
  it('replays each valid environment unhinted on fresh seeds, the same for the same round', async () => {
    const cfg = { ...DEFAULTS, seed: 3, playsPerEnv: 2, maxTurns: 12 };
    const rec = (index: number, r: Partial<ArchiveRecord>) =>
      ({
        cycle: 1,
        index,
        skill: 'mathematical',
        valid: true,
        code: FAKE_ENV,
        envId: envId(FAKE_ENV),
        stats: { timedOut: false },
        ...r,
      }) as ArchiveRecord;
    const archive = [
      rec(0, {}),
      rec(1, { valid: false }),
      rec(2, { stats: { timedOut: true } as ArchiveRecord['stats'] }),
    ];
    const agent = scriptedAgent();
    const a = await replayUnhinted(sandbox, agent, archive, cfg, 1);
    expect(a.map((r) => [r.index, r.play, r.hinted])).toEqual([
      [0, 0, false],
      [0, 1, false],
    ]);
    expect(a.every((r) => r.firstObservation.includes('HINT') === false)).toBe(true);
    const again = await replayUnhinted(sandbox, agent, archive, cfg, 1);
    expect(again.map((r) => r.seed)).toEqual(a.map((r) => r.seed));
    const next = await replayUnhinted(sandbox, agent, archive, cfg, 2);
    expect(next.map((r) => r.seed)).not.toEqual(a.map((r) => r.seed));
  });
});

describe('phases: cycle metrics', () => {
  const task = (a: Partial<ArchiveRecord>, ms = 10): PendingTask => ({
    archive: { valid: false, firstAttemptValid: false, stats: null, leak: null, ...a } as ArchiveRecord,
    rollouts: [],
    ms,
    modelMs: ms / 2,
  });
  it('computes the metrics line by hand', () => {
    const stats = (winRate: number, regret: number, timedOut = false) =>
      ({ winRate, winRateHinted: 1, regret, timedOut }) as ArchiveRecord['stats'];
    const m = cycleMetrics(
      4,
      ['a', 'b'],
      [
        task({ valid: true, firstAttemptValid: true, stats: stats(0.5, 0.5), rawReward: 1, designerAdvantage: 0.5 }),
        task({ valid: true, firstAttemptValid: false, stats: stats(1, 0), rawReward: 0, designerAdvantage: -0.5 }),
        task({ valid: false, rawReward: 0, designerAdvantage: 0, error: { phase: 'design', name: 'E', message: 'x' } }),
        task({ valid: true, firstAttemptValid: true, stats: stats(0, 0, true), rawReward: -0.5, designerAdvantage: 0 }),
      ],
    );
    expect(m).toMatchObject({ cycle: 4, skills: ['a', 'b'], envs: 4, valid: 3, validityRate: 0.75 });
    expect(m.firstAttemptValidityRate).toBe(0.5);
    expect(m.meanRegret).toBeCloseTo(0.5 / 3);
    expect(m.meanWinRate).toBeCloseTo(0.5);
    expect(m.meanDesignerReward).toBeCloseTo(0.5 / 4);
    expect(m.meanDesignerAdvantage).toBeCloseTo(0);
    expect(m.inBandShare).toBeCloseTo(1 / 3);
    expect(m).toMatchObject({ timeouts: 1, errors: 1, ms: 40, modelMs: 20 });
  });
});

describe('run events reducer', () => {
  it('folds a task from cycle start to score, keeping plays apart', () => {
    const v = emptyRunView();
    const events: LoopEvent[] = [
      { type: 'cycle_start', cycle: 2, skills: ['spatial', 'spatial'] },
      { type: 'document', cycle: 2, index: 1, skill: 'spatial', source: 's', excerpt: 'e' },
      { type: 'designer_token', cycle: 2, index: 1, attempt: 0, delta: 'cl' },
      { type: 'designer_token', cycle: 2, index: 1, attempt: 0, delta: 'ass' },
      { type: 'checks', cycle: 2, index: 1, attempt: 0, ok: true, failures: [], soft: ['multi_turn: x'], report: null },
      { type: 'hint', cycle: 2, index: 1, hint: 'go left' },
      {
        type: 'rollout_turn',
        cycle: 2,
        index: 1,
        play: 0,
        hinted: true,
        turn: 0,
        data: { action: 'a', observation: 'o', reward: 0.5, terminated: false, truncated: false, formatError: false },
      },
      { type: 'rollout_end', cycle: 2, index: 1, play: 0, hinted: true, return: 1, end: 'terminated' },
      { type: 'rollout_end', cycle: 2, index: 1, play: 0, hinted: false, return: 0, end: 'model_error' },
      { type: 'task_error', cycle: 2, index: 0, phase: 'design', message: 'ModelCallError: down' },
      { type: 'paused', cycle: 2 },
    ];
    for (const e of events) applyEvent(v, e);
    expect(v.cycle).toBe(2);
    expect(v.status).toBe('paused');
    expect(v.tasks).toHaveLength(2);
    expect(v.tasks[0]!.error).toBe('design: ModelCallError: down');
    const t = v.tasks[1]!;
    expect(t).toMatchObject({ source: 's', excerpt: 'e', designer: 'class', hint: 'go left', error: null });
    expect(t.attempts).toEqual([{ ok: true, failures: [], soft: ['multi_turn: x'] }]);
    expect(t.plays).toEqual([
      { play: 0, hinted: true, turns: [{ action: 'a', observation: 'o', reward: 0.5 }], result: 1, end: 'terminated' },
      { play: 0, hinted: false, turns: [], result: 0, end: 'model_error' },
    ]);
  });
});
