// The Lab's loop (src/core/lab/lab.ts) and its level spaces (spaces.ts): with scripted models, the
// designer rewards and their centring by hand; every designer's designs (learned with its trained
// edit slot, frontier, ladder, random, fixed off the probe, control with 1-of-N wins in its band);
// the probe per stage; the dead-seed screen; and one cycle on two tiny engine models, end to end and
// deterministic: the same seed gives the same numbers.
import { describe, expect, it } from 'vitest';
import type { ChatMessage, ChatModel, ChatResult } from '../../src/core/llm/chat_model.ts';
import { describeLevel, levelValues, lockDigit, type Level } from '../../src/core/lab/families.ts';
import { EDIT_FROM, LabLoop, screenSeed, summarise, type CycleReport, type LabPolicy } from '../../src/core/lab/lab.ts';
import { CHAIN2_SPACE, CHAIN_SPACE, GRID_SPACE, SPACE, spaceChance } from '../../src/core/lab/spaces.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { engineLabDeps } from '../../src/lab/roles.ts';
import type { TokenSample } from '../../src/core/train/grpo.ts';
import type { LocalChatModel } from '../../src/engine/model/local_model.ts';

const runner = createSandboxWorkerApi();

const result = (text: string): ChatResult => ({
  text,
  finishReason: 'stop',
  usage: { promptTokens: 0, completionTokens: 1 },
  ms: 0,
});
const scripted = (reply: (m: ChatMessage[]) => string): ChatModel => ({
  backend: 'scripted',
  model: 'scripted',
  capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: 4096 },
  chat: async (m) => result(reply(m)),
});
const oks = (m: ChatMessage[]) => m.filter((x) => x.role === 'user' && x.content.startsWith('ok.')).length;

/** Plays the lock of alphabet 2 perfectly without any hint (1 0 1 0 …, by the "ok."s so far). */
const lockOfTwo = scripted((m) => String(lockDigit(oks(m), 2)));
/** Knows the lock of alphabet 2 up to `n` digits, then guesses 4 (always wrong at alphabet 2). */
const lockUpTo = (n: number) => scripted((m) => (oks(m) < n ? String(lockDigit(oks(m), 2)) : '4'));
const never = scripted(() => '4');
const name = (l: Level | null) => (l ? describeLevel(l) : null);

describe('the Lab, scripted models', () => {
  it('scores designs with the estimator against the oracle, gives invalid ones 0, edits a won level and centres the cycle', async () => {
    const replies = ['000', '110', 'x'];
    let i = 0;
    const designer = { chat: scripted(() => replies[i++]!), trainer: null };
    const lab = new LabLoop(
      {
        seed: 3,
        designer: 'learned',
        space: 'grid',
        estimator: 'paper_blend',
        levels: 4,
        plays: 3,
        probePlays: 2,
        families: [2],
        probeLevels: [{ family: 2, L: 1, A: 1, D: 0 }],
      },
      { runner, agent: { chat: lockOfTwo, trainer: null }, designer },
    );
    const r = await lab.cycle();
    expect(r.family).toBe(2);
    // lock L0 A0 (code 1 0): the agent wins without the hint, as the oracle does with it: regret 0 → 0
    expect(r.designs[0]).toMatchObject({
      text: '000',
      description: 'F2 L0 A0 D0',
      explore: false,
      noHint: [1, 1, 1],
      withHint: [1, 1, 1],
      regret: 0,
      raw: 0,
    });
    // lock L1 A1 (code 1 0 2): the agent's third digit is wrong; the oracle follows the hint: plateau(0) = 0, 0.4·clip(1/0.15) = 0.4
    expect(r.designs[1]).toMatchObject({
      description: 'F2 L1 A1 D0',
      noHint: [0, 0, 0],
      withHint: [1, 1, 1],
      regret: 1,
    });
    expect(r.designs[1]!.raw).toBeCloseTo(0.4);
    expect(r.designs[2]).toMatchObject({ text: 'x', level: null, raw: 0, noHint: [], withHint: [] });
    expect(r.designs[2]!.invalid).toMatch(/four digits/);
    // the last slot is the edit (memory is empty: a uniform lock level), scored like the others
    const explore = r.designs[3]!;
    expect(explore).toMatchObject({ explore: true, level: { family: 2 } });
    expect(explore.withHint).toEqual([1, 1, 1]); // the oracle wins every level
    const raws = r.designs.map((d) => d.raw);
    const centre = raws.reduce((x, y) => x + y, 0) / raws.length;
    expect(r.designs.map((d) => d.advantage)).toEqual(raws.map((x) => expect.closeTo(x - centre, 9)));
    expect(r.updates).toEqual([]); // no trainer, nothing trained
    expect(r.steps).toEqual({ agent: 0, designer: 0 });
    expect(lab.initialProbe!.mean).toBe(0);
    expect(summarise(lab)).toMatchObject({ probeReturnFirst: 0, probeReturnLast: 0, cycles: 1 });
    // next cycle the edit moves one knob up from F2 L0 A0 D0, which the agent won every time
    const r2 = await lab.cycle();
    const e = r2.designs[3]!.level!;
    expect(GRID_SPACE.up({ family: 2, L: 0, A: 0, D: 0 }).map(describeLevel)).toContain(describeLevel(e));
    await lab.close();
  });

  it('learnability sees the frontier: a level won 1 time in 8 scores 0.44, one never won 0', async () => {
    const lab = new LabLoop(
      {
        seed: 1,
        designer: 'fixed',
        space: 'chain2',
        levels: 1,
        plays: 8,
        probePlays: 1,
        fixedLevel: { L: 1, A: 0, D: 0 },
      },
      { runner, agent: { chat: lockUpTo(2), trainer: null } },
    );
    const r = await lab.cycle(); // length 3 needs three digits: the agent gets two, never wins
    expect(r.designs[0]!.raw).toBe(0);
    await lab.close();
    let n = 0;
    const oneIn8 = scripted((m) => (n++ < 3 ? String(lockDigit(oks(m), 2)) : '4')); // only the first play wins
    const lab2 = new LabLoop(
      {
        seed: 1,
        designer: 'fixed',
        space: 'chain2',
        levels: 1,
        plays: 8,
        probePlays: 1,
        probeLevels: [], // no probe: the agent's first three replies are the first play's
        fixedLevel: { L: 1, A: 0, D: 0 },
      },
      { runner, agent: { chat: oneIn8, trainer: null } },
    );
    const r2 = await lab2.cycle();
    expect(r2.designs[0]!.winRate).toBe(1 / 8);
    expect(r2.designs[0]!.raw).toBeCloseTo(4 * (1 / 8) * (7 / 8), 12);
    await lab2.close();
  });

  it('the learned designer trains on its edit slot: the slot’s level as the designer writes it, scored by its policy', async () => {
    const scored: string[] = [];
    // wins length 2 without distractors always and every other episode of the edit's levels (length 3,
    // or distractors): the design (level 0) scores learnability 0, the edit 4·½·½ = 1, so the slot's
    // centred advantage is +½ and it must be trained
    let episodes = 0;
    const halfOnEdits = scripted((m) => {
      if (m.length === 1) episodes++;
      const hard = /Lock 3/.test(m[0]!.content) || m.some((x) => x.role === 'user' && x.content.includes('['));
      return hard && episodes % 2 ? '4' : String(lockDigit(oks(m), 2));
    });
    const designer: LabPolicy = {
      chat: scripted(() => '0'),
      trainer: { step: async () => ({ loss: 0, clipFraction: 0, approxKl: 0, gradNorm: 0, tokens: 1, ms: 0 }) },
      score: async (_m, reply) => {
        scored.push(reply);
        return { ids: [1, 2, 3], spans: [[2, 3]], logprobs: [-2] };
      },
    };
    const lab = new LabLoop(
      { seed: 4, designer: 'learned', space: 'chain2', levels: 2, plays: 2, probePlays: 1 },
      { runner, agent: { chat: halfOnEdits, trainer: null }, designer },
    );
    await lab.cycle(); // memory is empty: the edit slot is a uniform level
    lab.memory.splice(0); // now only length 2 without distractors, won every time
    lab.memory.push({ level: { family: 2, L: 0, A: 0, D: 0 }, winRate: 1, cycle: 0 });
    const r = await lab.cycle();
    const edit = r.designs[1]!;
    expect(edit.explore).toBe(true);
    // one knob up from length 2 / no distractors: length 3, or 3 distractors
    expect(['F2 L1 A0 D0', 'F2 L0 A0 D3']).toContain(edit.description);
    expect(scored.at(-1)).toBe(CHAIN2_SPACE.reply(edit.level!));
    expect(edit.winRate).toBe(0.5);
    expect(r.designs[0]!.winRate).toBe(1);
    expect(edit.advantage).toBeCloseTo(0.5, 12);
    expect(edit.trained).toBe(true);
    expect(lab.lastBatch.designer.some((s) => s.key === `${r.cycle}:1`)).toBe(true);
    // with trainEdit off the slot is scored and centred but never trained
    const off = new LabLoop(
      { seed: 4, designer: 'learned', space: 'chain2', levels: 2, plays: 2, probePlays: 1, trainEdit: false },
      { runner, agent: { chat: lockUpTo(3), trainer: null }, designer },
    );
    const before = scored.length;
    const r3 = await off.cycle();
    expect(scored.length).toBe(before);
    expect(r3.designs[1]!.trained).toBe(false);
    await lab.close();
    await off.close();
  });

  it('frontier replays the most learnable levels seen, edits one knob up from a won level and adds a uniform one', async () => {
    const lab = new LabLoop(
      { seed: 5, designer: 'sfl', space: 'chain2', levels: 4, plays: 2, probePlays: 1 },
      { runner, agent: { chat: never, trainer: null } },
    );
    const L = (l: number, d: number): Level => ({ family: 2, L: l, A: 0, D: d });
    lab.memory.push(
      { level: L(0, 0), winRate: 1, cycle: 0 }, // mastered: learnability 0, but the edit starts from it
      { level: L(1, 0), winRate: 0.5, cycle: 0 }, // p(1 − p) = 0.25, the best
      { level: L(2, 0), winRate: 0.125, cycle: 0 }, // 0.109
      { level: L(3, 3), winRate: 0, cycle: 0 }, // never won: 0
    );
    const r = await lab.cycle();
    expect(r.designs.slice(0, 2).map((d) => d.description)).toEqual(['F2 L1 A0 D0', 'F2 L2 A0 D0']);
    // the edit: one knob up from a level won at least EDIT_FROM (L0 D0 at 1, L1 D0 at 0.5)
    expect(EDIT_FROM).toBe(0.5);
    const ups = [...CHAIN2_SPACE.up(L(0, 0)), ...CHAIN2_SPACE.up(L(1, 0))].map(describeLevel);
    expect(ups).toContain(r.designs[2]!.description);
    expect(CHAIN2_SPACE.levelsOf(2).map(describeLevel)).toContain(r.designs[3]!.description);
    await lab.close();
  });

  it('ladder climbs the space easiest first, ladderStep cycles a rung; fixed is off the probe; random is seeded and uniform', async () => {
    const agent = { chat: never, trainer: null };
    const ladder = new LabLoop(
      { seed: 1, designer: 'ladder', space: 'chain2', levels: 2, plays: 1, probePlays: 1, ladderStep: 2 },
      { runner, agent },
    );
    const rungs: (string | null)[] = [];
    for (let c = 0; c < 5; c++) rungs.push(name((await ladder.cycle()).designs[0]!.level));
    const chain = CHAIN2_SPACE.levelsOf(2).map(describeLevel);
    expect(rungs).toEqual([chain[0], chain[0], chain[1], chain[1], chain[2]]);
    await ladder.close();
    const fixed = new LabLoop(
      { seed: 1, designer: 'fixed', space: 'chain2', levels: 2, plays: 1, probePlays: 1 },
      { runner, agent },
    );
    const f = (await fixed.cycle()).designs.map((d) => d.description);
    expect(f).toEqual(['F2 L1 A0 D1', 'F2 L1 A0 D1']);
    expect(CHAIN2_SPACE.probe.map(describeLevel)).not.toContain(f[0]); // the probe is the space: length 3 with 1 distractor is not in it
    await fixed.close();
    const designs = async (seed: number) => {
      const lab = new LabLoop(
        {
          seed,
          designer: 'random',
          space: 'grid',
          levels: 4,
          plays: 1,
          probePlays: 1,
          probeLevels: [{ family: 2, L: 0, A: 0, D: 0 }],
        },
        { runner, agent },
      );
      const out = [(await lab.cycle()).designs, (await lab.cycle()).designs].flat().map((d) => d.level!);
      await lab.close();
      return out;
    };
    const a = await designs(5);
    expect(a).toEqual(await designs(5));
    expect(a).not.toEqual(await designs(6));
    expect(a.map((l) => l.family)).toEqual([1, 1, 1, 1, 2, 2, 2, 2]); // the grid's families rotate, one per cycle
  });

  it('the control edits a level from memory won at least once (1 of N counts) and at most 85%, by one knob', async () => {
    const agent = { chat: never, trainer: null };
    const lab = new LabLoop(
      {
        seed: 9,
        designer: 'scripted',
        space: 'chain2',
        levels: 6,
        plays: 8,
        probePlays: 1,
        probeLevels: [{ family: 2, L: 0, A: 0, D: 0 }],
      },
      { runner, agent },
    );
    const seen: Level = { family: 2, L: 1, A: 0, D: 0 };
    lab.memory.push(
      { level: seen, winRate: 1 / 8, cycle: 0 }, // one win in eight: in band now (the old band [0.15, 0.85] dropped it)
      { level: { family: 2, L: 3, A: 0, D: 3 }, winRate: 0, cycle: 0 }, // never won: out
      { level: { family: 2, L: 0, A: 0, D: 3 }, winRate: 1, cycle: 0 }, // always won: out
    );
    const r = await lab.cycle();
    const near = [...CHAIN2_SPACE.up(seen), ...CHAIN2_SPACE.down(seen)].map(describeLevel);
    for (const d of r.designs) expect(near, d.description!).toContain(d.description);
    await lab.close();
  });

  it('probes per stage and the hardest half; the chain probe is the whole space; the chance line is a uniform player’s', async () => {
    const lab = new LabLoop(
      { seed: 1, designer: 'fixed', space: 'chain2', levels: 1, plays: 1, probePlays: 2 },
      { runner, agent: { chat: lockUpTo(3), trainer: null } },
    );
    const p = await lab.start();
    // lengths 2 and 3 are won (with or without distractors), 4 and 5 never
    expect(p.byLevel).toEqual([1, 1, 1, 1, 0, 0, 0, 0]);
    expect(p.byStage).toEqual([1, 1, 0, 0]);
    expect(p.hardHalf).toBe(0);
    expect(p.mean).toBe(0.5);
    expect(CHAIN2_SPACE.stages).toHaveLength(4);
    expect(spaceChance(CHAIN2_SPACE)).toBeCloseTo((0.104 + 0.0272 + 0.00672 + 0.0016) / 4, 3);
    await lab.close();
  });

  it('probes after every probeEvery-th cycle and the last two of a planned run; the ladder spreads its rungs over it', async () => {
    const lab = new LabLoop(
      {
        seed: 1,
        designer: 'ladder',
        space: 'chain2',
        levels: 1,
        plays: 1,
        probePlays: 1,
        probeEvery: 5,
        plannedCycles: 16,
      },
      { runner, agent: { chat: never, trainer: null } },
    );
    const probed: boolean[] = [];
    const rungs: string[] = [];
    for (let c = 0; c < 16; c++) {
      const r = await lab.cycle();
      probed.push(r.probe !== null);
      rungs.push(r.designs[0]!.description!);
    }
    expect(probed.flatMap((p, i) => (p ? [i + 1] : []))).toEqual([5, 10, 15, 16]);
    expect(summarise(lab).probeReturnLast).toBe(0); // the last probe (never won)
    const chain = CHAIN2_SPACE.levelsOf(2).map(describeLevel);
    expect(rungs).toEqual(chain.flatMap((l) => [l, l])); // 16 cycles over 8 levels: 2 cycles a rung
    await lab.close();
  });

  it('the chain (pre-registration 3): the lock at alphabet 5, lengths 2–9, a level a stage; fixed off the probe; one digit a design', () => {
    const levels = CHAIN_SPACE.levelsOf(2);
    expect(levels.map((l) => levelValues(l).length)).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
    expect(new Set(levels.map((l) => `${levelValues(l).alphabet}/${levelValues(l).distractors}`))).toEqual(
      new Set(['5/0']),
    );
    expect(CHAIN_SPACE.probe).toEqual(levels);
    expect(CHAIN_SPACE.stages).toHaveLength(8);
    expect(levels.filter((l) => CHAIN_SPACE.hardHalf(l)).map((l) => levelValues(l).length)).toEqual([6, 7, 8, 9]);
    const fixed = CHAIN_SPACE.fixed(2);
    expect(levelValues(fixed)).toMatchObject({ length: 5, distractors: 1 });
    expect(CHAIN_SPACE.probe.map(describeLevel)).not.toContain(describeLevel(fixed));
    expect(CHAIN_SPACE.parse(2, '7')).toMatchObject({ ok: true, level: levels[7] });
    expect(CHAIN_SPACE.parse(2, '8').ok).toBe(false);
    expect(CHAIN_SPACE.up(levels[0]!)).toEqual([levels[1]]); // one knob up: the next length (no distractor knob here)
    expect(CHAIN_SPACE.down(levels[0]!)).toEqual([]);
    expect(spaceChance(CHAIN_SPACE)).toBeLessThan(0.02); // a random player: 0.104 at length 2, ~0 beyond 4
  });

  it('the dead-seed screen: a fresh agent that never wins the easiest level in 64 plays is screened out', async () => {
    const dead = await screenSeed(7, CHAIN2_SPACE, runner, never);
    expect(dead).toMatchObject({ level: 'F2 L0 A0 D0', wins: 0, plays: 64, pass: false });
    const alive = await screenSeed(7, CHAIN2_SPACE, runner, lockOfTwo, 1, 8);
    expect(alive).toMatchObject({ wins: 8, plays: 8, pass: true });
  });

  it('continues after close(): the level programs are reloaded on demand (the worker closes labs between runs)', async () => {
    const probeLevels = [{ family: 2, L: 0, A: 0, D: 0 }];
    const lab = new LabLoop(
      { seed: 1, designer: 'fixed', space: 'chain2', levels: 1, plays: 1, probePlays: 2, probeEvery: 1, probeLevels },
      { runner, agent: { chat: lockOfTwo, trainer: null } },
    );
    const first = await lab.cycle();
    await lab.close();
    const second = await lab.cycle();
    expect(second.cycle).toBe(2);
    expect(second.probe).toEqual(first.probe);
    expect(second.probe!.mean).toBe(1);
    await lab.close();
  });

  it('refuses settings it cannot run', () => {
    const agent = { chat: lockOfTwo, trainer: null };
    expect(() => new LabLoop({ designer: 'learned' }, { runner, agent })).toThrow(/designer policy/);
    expect(() => new LabLoop({ designer: 'oracle' as never }, { runner, agent })).toThrow(
      /learned, untrained, scripted, gated, sfl, ladder, random, fixed/,
    );
    expect(() => new LabLoop({ designer: 'fixed', plays: 0 }, { runner, agent })).toThrow(/plays/);
    expect(() => new LabLoop({ designer: 'fixed', space: 'cube' as never }, { runner, agent })).toThrow(/space/);
    expect(() => new LabLoop({ designer: 'fixed', families: [7] }, { runner, agent })).toThrow(/families/);
    expect(() => new LabLoop({ designer: 'sfl', levels: 2 }, { runner, agent })).toThrow(/frontier/);
  });
});

/** A cycle's numbers without wall times. */
const numbers = (h: CycleReport[]) => JSON.parse(JSON.stringify(h, (k, v) => (k === 'ms' ? undefined : v))) as unknown;

describe('the Lab on two tiny engine models', () => {
  const settings = {
    designer: 'learned' as const,
    space: 'chain2' as const,
    levels: 4,
    plays: 4,
    probePlays: 1,
    probeLevels: [
      { family: 2, L: 0, A: 0, D: 0 },
      { family: 2, L: 1, A: 0, D: 3 },
    ],
  };
  const oneCycle = async (seed: number) => {
    const deps = await engineLabDeps(seed, 'learned', runner, { layers: 1, hidden: 16, space: 'chain2' });
    const lab = new LabLoop({ ...settings, seed }, deps);
    const r = await lab.cycle();
    await lab.close();
    return { lab, r, deps };
  };

  /**
   * Σ_s A_s · (log π_new − log π_old) over a role's trained tokens, π the model's masked policy at
   * T = 1, with A_s worked out here from the cycle's returns and rewards (not the sample's own).
   */
  const improvement = async (chat: ChatModel, samples: TokenSample[], adv: (key: string) => number) => {
    const m = (chat as unknown as { lm: { llm: LocalChatModel<unknown>['llm'] } }).lm.llm;
    const V = m.cfg.vocabSize;
    const allowed = (chat as unknown as { allowed: number[] }).allowed;
    let total = 0;
    for (const s of samples) {
      const { logits } = m.forward(s.ids.slice(0, -1));
      const z = await m.ops.read(logits); // (L, V)
      let j = 0;
      for (const [a, b] of s.spans)
        for (let t = a; t < b; t++) {
          const row = allowed.map((id) => z[(t - 1) * V + id]!);
          const mx = Math.max(...row);
          const lse = mx + Math.log(row.reduce((acc, x) => acc + Math.exp(x - mx), 0));
          total += adv(s.key) * (z[(t - 1) * V + s.ids[t]!]! - lse - s.logprobs[j++]!);
        }
      m.ops.free(logits);
    }
    return total;
  };

  it('runs a cycle end to end — designs written by the model, both roles trained the way their advantages point — and repeats it exactly', async () => {
    const a = await oneCycle(2); // a seed whose first cycle has signal for both roles (on seed 1 it has none)
    const { r } = a;
    expect(r.designs).toHaveLength(4);
    for (const d of r.designs) {
      // the model writes one digit, the chain level's index (its vocabulary: 0-7, so always a level); the last slot is the edit
      if (!d.explore) expect(d.text).toMatch(/^[0-7]$/);
      expect(d.level).not.toBeNull();
      expect(d.noHint).toHaveLength(4);
      expect(d.withHint).toHaveLength(4);
    }
    const roles = new Set(r.updates.map((u) => u.role));
    if (new Set(r.designs.map((d) => d.raw)).size > 1) expect(roles.has('designer')).toBe(true);
    if (r.samples.agent > 0) expect(roles.has('agent')).toBe(true);
    expect(r.steps.agent + r.steps.designer).toBe(r.updates.length);
    for (const u of r.updates) expect(Number.isFinite(u.loss) && Number.isFinite(u.gradNorm)).toBe(true);
    // the update moved both policies the way their advantages point (first order of the GRPO step)
    expect(a.lab.lastBatch.designer.length).toBeGreaterThan(0);
    expect(a.lab.lastBatch.agent.length).toBeGreaterThan(0);
    const avg = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    const rawMean = avg(r.designs.map((d) => d.raw));
    const designerAdv = (key: string) => r.designs[Number(key.split(':')[1])]!.raw - rawMean;
    const agentAdv = (key: string) => {
      const [, k, j] = key.split(':').map(Number);
      const d = r.designs[k!]!;
      return d.noHint[j!]! - avg(d.noHint);
    };
    expect(await improvement(a.deps.designer!.chat, a.lab.lastBatch.designer, designerAdv)).toBeGreaterThan(0);
    expect(await improvement(a.deps.agent.chat, a.lab.lastBatch.agent, agentAdv)).toBeGreaterThan(0);
    const b = await oneCycle(2);
    expect(numbers(b.lab.history)).toEqual(numbers(a.lab.history));
    expect(b.lab.initialProbe).toEqual(a.lab.initialProbe);
    const c = await oneCycle(3);
    expect(c.r.designs.map((d) => d.text)).not.toEqual(r.designs.map((d) => d.text));
  }, 240_000);
});

describe('spade lab', () => {
  it('refuses an unknown designer with exit code 2 and says which ones exist; reads the old name regret', async () => {
    const { main } = await import('../../src/cli/spade.ts');
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    expect(await main(['lab', '--designer', 'oracle'], io)).toBe(2);
    expect(lines.join('\n')).toMatch(/learned, untrained, scripted, gated, sfl, ladder, random, fixed/);
  });
});

describe('round 4 on the climb: the gated ladder, the level buffer, the designer that sees the agent, the untrained designer', () => {
  const climb = (L: number): Level => ({ family: 4, L, A: 3, D: 0 });
  const rung = (d: { level: Level | null }) => d.level!.L;

  it('the climb: 15 rungs, the probe every rung, its top half lengths 9–16, one letter a design', () => {
    const sp = SPACE.climb;
    expect(sp.probe.map((l) => levelValues(l).length)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    expect(sp.probe.filter((l) => sp.hardHalf(l)).map((l) => levelValues(l).length)).toEqual([
      9, 10, 11, 12, 13, 14, 15, 16,
    ]);
    expect(sp.designerDigits).toBe('abcdefghijklmno');
    expect(sp.parse(4, 'z')).toMatchObject({ ok: true, clamped: true, level: climb(14) }); // every letter is a level
    expect(sp.fixed(4)).toEqual(climb(14));
    // the chain's hardest half is unchanged: lengths 6–9
    expect(CHAIN_SPACE.probe.filter((l) => CHAIN_SPACE.hardHalf(l)).map((l) => levelValues(l).length)).toEqual([
      6, 7, 8, 9,
    ]);
  });

  it('gated plays the lowest rung not mastered (half the slots), the rung below and a lower one', async () => {
    const lab = new LabLoop(
      { seed: 2, designer: 'gated', space: 'climb', levels: 4, plays: 1, probePlays: 1, probeLevels: [] },
      { runner, agent: { chat: never, trainer: null } },
    );
    // rungs 0-2 mastered (latest two win rates' mean ≥ 0.5), rung 3 at 0.25 and 0.5: not yet
    for (const [L, w] of [
      [0, 1],
      [0, 0.75],
      [1, 0.5],
      [1, 0.5],
      [2, 0.625],
      [2, 1],
      [3, 0.25],
      [3, 0.5],
    ] as const)
      lab.memory.push({ level: climb(L), winRate: w, cycle: 0 });
    expect(lab.frontierRung(4)).toBe(3);
    const r = await lab.cycle();
    expect(r.designs.map(rung).slice(0, 3)).toEqual([3, 3, 2]);
    expect(rung(r.designs[3]!)).toBeLessThan(2);
    await lab.close();
    // a rung mastered once and then lost (its latest two below 0.5) is the frontier again
    const again = new LabLoop(
      { seed: 2, designer: 'gated', space: 'climb' },
      { runner, agent: { chat: never, trainer: null } },
    );
    again.memory.push(...lab.memory.slice(0, 8));
    again.memory.push({ level: climb(1), winRate: 0, cycle: 1 }, { level: climb(1), winRate: 0.25, cycle: 1 });
    expect(again.frontierRung(4)).toBe(1);
  });

  it('the learned designer replays half from the PLR buffer (only levels with 0 < p < 1), sees the frontier rung, and replays earn no reward', async () => {
    const prompts: string[] = [];
    const designer: LabPolicy = {
      chat: scripted((m) => (prompts.push(m[0]!.content), 'c')),
      trainer: null,
    };
    const lab = new LabLoop(
      { seed: 3, designer: 'learned', space: 'climb', levels: 4, plays: 2, probePlays: 1, probeLevels: [] },
      { runner, agent: { chat: never, trainer: null }, designer },
    );
    lab.memory.push(
      { level: climb(0), winRate: 1, cycle: 0 }, // mastered: p(1 − p) = 0, never replayed
      { level: climb(1), winRate: 0.5, cycle: 0 },
      { level: climb(2), winRate: 0.25, cycle: 0 },
      { level: climb(5), winRate: 0, cycle: 0 }, // never won: never replayed
    );
    const r = await lab.cycle();
    expect(lab.replayCount()).toBe(2);
    expect(r.designs.map((d) => !!d.replay)).toEqual([true, true, false, false]);
    expect(r.designs.slice(0, 2).map(rung).sort()).toEqual([1, 2]);
    for (const d of r.designs.slice(0, 2)) expect(d.advantage).toBe(0);
    // the prompt carries the agent's frontier: rungs 0 and 1 mastered (a mean of 0.5 counts), rung 2 not → "c"
    expect(prompts).toEqual(['F4 mc:']);
    expect(r.designs[2]!.level).toEqual(climb(2)); // the designer wrote "c": the third rung
    // the edit: one knob up from the hardest level won at least half the time (length 3 → 4)
    expect(r.designs[3]!.explore).toBe(true);
    expect(r.designs[3]!.level).toEqual(climb(2));
    await lab.close();
  });

  it('a step-writing designer (designerSteps): its letter is a step from the frontier rung, its edit written as a step', async () => {
    const replies = ['e', 'a', 'x'];
    const scored: string[] = [];
    const designer: LabPolicy = {
      chat: scripted(() => replies.shift()!),
      trainer: null,
      score: async (_m, reply) => (scored.push(reply), { ids: [1], logprobs: [0], mask: [1] }) as never,
    };
    const lab = new LabLoop(
      {
        seed: 3,
        designer: 'learned',
        space: 'climb',
        levels: 5,
        plays: 1,
        probePlays: 1,
        probeLevels: [],
        replay: 1,
        designerSteps: true,
      },
      { runner, agent: { chat: never, trainer: null }, designer },
    );
    // rungs 0–2 mastered, rung 3 not: the frontier is rung 3 ("F4 md:")
    lab.memory.push({ level: climb(0), winRate: 1, cycle: 0 }, { level: climb(1), winRate: 0.75, cycle: 0 });
    lab.memory.push({ level: climb(2), winRate: 0.5, cycle: 0 }, { level: climb(3), winRate: 0.25, cycle: 0 });
    const r = await lab.cycle();
    const own = r.designs.filter((d) => !d.replay && !d.explore);
    expect(own.map((d) => d.text)).toEqual(['e', 'a', 'x']);
    expect(own[0]!.level).toEqual(climb(5)); // two above the frontier
    expect(own[1]!.level).toEqual(climb(1)); // two below
    expect(own[2]!.level).toBeNull();
    expect(own[2]!.invalid).toMatch(/"x" is not a step: write one letter a-e/);
    // the edit (one up from length 4, the hardest won at least half the time: rung 3) is the step "c"
    const edit = r.designs.at(-1)!;
    expect(edit.level).toEqual(climb(3));
    expect(edit.text).toBe('c');
    expect(scored).toEqual(['c']);
    await lab.close();
    // the model designers on the engine write only the steps
    const deps = await engineLabDeps(5, 'untrained', runner, { space: 'climb', designerSteps: true });
    for (let k = 0; k < 6; k++) {
      const reply = await deps.designer!.chat.chat([{ role: 'user', content: 'F4 mc:' }], {
        temperature: 1,
        max_tokens: 1,
        seed: k,
      });
      expect(reply.text).toMatch(/^[a-e]$/);
    }
  });

  it('the untrained designer writes with the same model and prompt and is never trained; the learned one is', async () => {
    const run = async (designer: 'learned' | 'untrained') => {
      const deps = await engineLabDeps(7, designer, runner, { space: 'climb' });
      let designerSteps = 0;
      const step = deps.designer!.trainer!.step.bind(deps.designer!.trainer);
      deps.designer!.trainer!.step = async (mb) => {
        if (mb[0]!.role === 'designer') designerSteps++;
        return step(mb);
      };
      // an agent that wins the first two rungs every other play: learnability differs between levels
      let episodes = 0;
      deps.agent = {
        chat: scripted((m) => {
          if (m.length === 1) episodes++;
          const pos = oks(m);
          return episodes % 2 && pos < 3 ? '1402'[pos]! : '9';
        }),
        trainer: null,
      };
      const lab = new LabLoop(
        { seed: 7, designer, space: 'climb', levels: 4, plays: 4, probePlays: 1, probeLevels: [] },
        deps,
      );
      const texts: string[] = [];
      for (let c = 0; c < 4; c++)
        texts.push(...(await lab.cycle()).designs.filter((d) => !d.replay && !d.explore).map((d) => d.text));
      await lab.close();
      return { designerSteps, texts, reported: lab.history.reduce((a, h) => a + h.steps.designer, 0) };
    };
    const untrained = await run('untrained');
    expect(untrained.texts.length).toBeGreaterThan(0);
    for (const t of untrained.texts) expect(t).toMatch(/^[a-o]$/);
    expect(untrained.designerSteps).toBe(0);
    expect(untrained.reported).toBe(0);
    const learned = await run('learned');
    expect(learned.designerSteps).toBeGreaterThan(0);
    expect(learned.reported).toBe(learned.designerSteps);
  }, 120_000);
});
