// The micro lab's loop (src/core/micro/lab.ts): with scripted models, the designer rewards and
// their centring by hand; the baselines' designs; and one cycle on two tiny fresh engine models
// (CPU references), end to end and deterministic: the same seed gives the same numbers.
import { describe, expect, it } from 'vitest';
import type { ChatMessage, ChatModel, ChatResult } from '../../src/core/llm/chat_model.ts';
import { describeLevel, difficulty, lockDigit } from '../../src/core/micro/families.ts';
import { FIXED_KNOBS, MicroLab, probeChance, summarise, type CycleReport } from '../../src/core/micro/lab.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { engineMicroDeps } from '../../src/engine/lab/micro_policy.ts';
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

/** Plays the lock of alphabet 2 perfectly without any hint (1 0 1 0 …, by the "ok."s so far). */
const lockOfTwo = scripted((m) =>
  String(lockDigit(m.filter((x) => x.role === 'user' && x.content.startsWith('ok.')).length, 2)),
);

describe('micro lab, scripted models', () => {
  it('scores designs with the estimator against the oracle, gives invalid ones 0, adds the exploration slot and centres the cycle', async () => {
    const replies = ['000', '110', 'x'];
    let i = 0;
    const designer = { chat: scripted(() => replies[i++]!), trainer: null };
    const lab = new MicroLab(
      {
        seed: 3,
        designer: 'regret',
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
      text: '2000',
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
    expect(r.designs[2]).toMatchObject({ text: '2x', level: null, raw: 0, noHint: [], withHint: [] });
    expect(r.designs[2]!.invalid).toMatch(/four digits/);
    // the last slot is the untrained exploration move (memory is empty: a uniform lock level), scored like the others
    const explore = r.designs[3]!;
    expect(explore).toMatchObject({ explore: true, level: { family: 2 } });
    expect(explore.withHint).toEqual([1, 1, 1]); // the oracle wins every level
    const raws = r.designs.map((d) => d.raw);
    const centre = raws.reduce((x, y) => x + y, 0) / raws.length;
    expect(r.designs.map((d) => d.advantage)).toEqual(raws.map((x) => expect.closeTo(x - centre, 9)));
    expect(r.distinctLevels).toBe(
      new Set([r.designs[0]!.description, r.designs[1]!.description, explore.description]).size,
    );
    expect(r.updates).toEqual([]); // no trainer, nothing trained
    // the probe (lock L1 A1) is lost without the hint, before and after; its chance is tiny
    expect(lab.initialProbe!.mean).toBe(0);
    expect(r.probe.byLevel).toEqual([0]);
    expect(probeChance(lab.settings.probeLevels)).toBeCloseTo(0.0272, 4);
    expect(summarise(lab)).toMatchObject({ probeReturnFirst: 0, probeReturnLast: 0, cycles: 1 });
    // the played levels enter memory with their win rates
    expect(lab.memory.map((m) => describeLevel(m.level))).toEqual([
      r.designs[0]!.description,
      r.designs[1]!.description,
      explore.description,
    ]);
    await lab.close();
  });

  it("random draws seeded uniform levels of the cycle's family; fixed writes one medium level; the families rotate", async () => {
    const agent = { chat: scripted(() => '0'), trainer: null };
    const probeLevels = [{ family: 2, L: 0, A: 0, D: 0 }];
    const designs = async (designer: 'random' | 'fixed', seed: number) => {
      const lab = new MicroLab({ seed, designer, levels: 4, plays: 1, probePlays: 1, probeLevels }, { runner, agent });
      const out = [(await lab.cycle()).designs, (await lab.cycle()).designs].flat().map((d) => d.level!);
      await lab.close();
      return out;
    };
    const a = await designs('random', 5);
    expect(a).toEqual(await designs('random', 5));
    expect(a).not.toEqual(await designs('random', 6));
    expect(a.map((l) => l.family)).toEqual([1, 1, 1, 1, 2, 2, 2, 2]); // MAIN_FAMILIES, one per cycle
    expect(new Set(a.map(describeLevel)).size).toBeGreaterThan(4);
    const f = await designs('fixed', 5);
    expect(f.map(describeLevel)).toEqual(
      [1, 1, 1, 1, 2, 2, 2, 2].map((family) => describeLevel({ family, ...FIXED_KNOBS })),
    );
    expect(difficulty({ family: 0, ...FIXED_KNOBS })).toBeCloseTo(1 / 3);
  });

  it('the control edits an in-band level from memory by one knob (else draws a uniform level)', async () => {
    const agent = { chat: scripted(() => '0'), trainer: null };
    const lab = new MicroLab(
      {
        seed: 9,
        designer: 'control',
        levels: 6,
        plays: 1,
        probePlays: 1,
        families: [1],
        probeLevels: [{ family: 1, L: 0, A: 0, D: 0 }],
      },
      { runner, agent },
    );
    const seen = { family: 1, L: 1, A: 2, D: 0 };
    lab.memory.push({ level: seen, winRate: 0.5 }, { level: { family: 1, L: 3, A: 3, D: 3 }, winRate: 0 });
    const r = await lab.cycle();
    for (const d of r.designs) {
      const l = d.level!;
      const moved = Math.abs(l.L - seen.L) + Math.abs(l.A - seen.A) + Math.abs(l.D - seen.D);
      expect(moved, d.description!).toBe(1);
    }
    await lab.close();
  });

  it('continues after close(): the probe environments are reloaded on demand (the worker closes labs between runs)', async () => {
    const agent = { chat: lockOfTwo, trainer: null };
    const probeLevels = [{ family: 2, L: 0, A: 0, D: 0 }];
    const lab = new MicroLab(
      { seed: 1, designer: 'fixed', levels: 1, plays: 1, probePlays: 2, probeLevels },
      { runner, agent },
    );
    const first = await lab.cycle();
    await lab.close();
    const second = await lab.cycle();
    expect(second.cycle).toBe(2);
    expect(second.probe).toEqual(first.probe); // lock of alphabet 2, played perfectly: 1 both times
    expect(second.probe.mean).toBe(1);
    await lab.close();
  });

  it('refuses settings it cannot run', () => {
    const agent = { chat: lockOfTwo, trainer: null };
    expect(() => new MicroLab({ designer: 'regret' }, { runner, agent })).toThrow(/designer policy/);
    expect(() => new MicroLab({ designer: 'oracle' as never }, { runner, agent })).toThrow(
      /regret, random, fixed, control/,
    );
    expect(() => new MicroLab({ designer: 'fixed', plays: 0 }, { runner, agent })).toThrow(/plays/);
    expect(() => new MicroLab({ designer: 'fixed', families: [7] }, { runner, agent })).toThrow(/families/);
  });
});

/** A cycle's numbers without wall times. */
const numbers = (h: CycleReport[]) => JSON.parse(JSON.stringify(h, (k, v) => (k === 'ms' ? undefined : v))) as unknown;

describe('micro lab on two tiny engine models', () => {
  const size = { layers: 1, hidden: 16 };
  const settings = {
    designer: 'regret' as const,
    levels: 4,
    plays: 4,
    probePlays: 1,
    probeLevels: [
      { family: 1, L: 0, A: 0, D: 0 },
      { family: 2, L: 1, A: 1, D: 1 },
    ],
  };
  const oneCycle = async (seed: number) => {
    const deps = await engineMicroDeps(seed, 'regret', runner, size);
    const lab = new MicroLab({ ...settings, seed }, deps);
    const r = await lab.cycle();
    await lab.close();
    return { lab, r, deps };
  };

  /**
   * Σ_s A_s · (log π_new − log π_old) over a role's trained tokens, π the model's masked policy at
   * T = 1 (the lab's default temperature), with A_s worked out here from the cycle's returns and rewards (not the sample's own).
   */
  const improvement = async (chat: ChatModel, samples: TokenSample[], adv: (key: string) => number) => {
    const m = chat as LocalChatModel<unknown>;
    let total = 0;
    for (const s of samples) {
      const { logits } = m.llm.forward(s.ids.slice(0, -1));
      const z = await m.llm.ops.read(logits); // (L, V)
      const V = m.llm.cfg.vocabSize;
      let j = 0;
      for (const [a, b] of s.spans)
        for (let t = a; t < b; t++) {
          const row = z.subarray((t - 1) * V, t * V).map((x, id) => x + (m.logitBias?.[id] ?? 0));
          const mx = Math.max(...row);
          const lse = mx + Math.log(row.reduce((acc, x) => acc + Math.exp(x - mx), 0));
          total += adv(s.key) * (row[s.ids[t]!]! - lse - s.logprobs[j++]!);
        }
      m.llm.ops.free(logits);
    }
    return total;
  };

  it('runs a cycle end to end — designs written by the model, both roles trained the way their advantages point — and repeats it exactly', async () => {
    const a = await oneCycle(13); // a seed whose first cycle has signal for both roles (most do not: the levels are hard)
    const { r } = a;
    expect(r.designs).toHaveLength(4);
    for (const d of r.designs) {
      // the model writes the knobs (its vocabulary: the digits 0-3, so always a level); the last slot explores
      if (!d.explore) expect(d.text).toMatch(/^1[0-3]{3}$/);
      expect(d.level).not.toBeNull();
      expect(d.noHint).toHaveLength(4);
      expect(d.withHint).toHaveLength(4);
    }
    const roles = new Set(r.updates.map((u) => u.role));
    // the designer trains whenever the raw rewards differ; the agent whenever a level's plays differ
    if (new Set(r.designs.map((d) => d.raw)).size > 1) expect(roles.has('designer')).toBe(true);
    if (r.samples.agent > 0) expect(roles.has('agent')).toBe(true);
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
    const b = await oneCycle(13);
    expect(numbers(b.lab.history)).toEqual(numbers(a.lab.history));
    expect(b.lab.initialProbe).toEqual(a.lab.initialProbe);
    const c = await oneCycle(14);
    expect(c.r.designs.map((d) => d.text)).not.toEqual(r.designs.map((d) => d.text));
  }, 240_000);
});

describe('spade micro', () => {
  it('refuses an unknown designer with exit code 2 and says which ones exist', async () => {
    const { main } = await import('../../src/cli/spade.ts');
    const lines: string[] = [];
    const code = await main(['micro', '--designer', 'oracle'], {
      out: (l) => lines.push(l),
      err: (l) => lines.push(l),
    });
    expect(code).toBe(2);
    expect(lines.join('\n')).toMatch(/regret, random, fixed, control/);
  });
});
