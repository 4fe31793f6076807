// The micro lab's loop (src/core/micro/lab.ts): with scripted models, the designer rewards and
// their centring by hand; the baselines' designs; and one cycle on two tiny fresh engine models
// (CPU references), end to end and deterministic: the same seed gives the same numbers.
import { describe, expect, it } from 'vitest';
import type { ChatMessage, ChatModel, ChatResult } from '../../src/core/llm/chat_model.ts';
import { describeLevel, difficulty } from '../../src/core/micro/families.ts';
import { FIXED_KNOBS, MicroLab, summarise, type CycleReport } from '../../src/core/micro/lab.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { engineMicroDeps } from '../../src/engine/micro_policy.ts';
import type { TokenSample } from '../../src/core/train/grpo.ts';
import type { LocalChatModel } from '../../src/engine/local_model.ts';

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

/** Reads the hint perfectly ("code 10": the digit at the position given by the "ok."s so far); without one, always "1". */
const hintReader = scripted((m) => {
  const code = /HINT: code (\d+)/.exec(m[0]!.content)?.[1];
  if (!code) return '1';
  const pos = m.filter((x) => x.role === 'user' && x.content.startsWith('ok.')).length;
  return code[pos]!;
});

describe('micro lab, scripted models', () => {
  it('scores designs with the estimator, gives invalid ones 0 and centres the cycle', async () => {
    const texts = ['F2 L0 A1 D0', 'F2 L0 A0 D0', 'banana', '2000'];
    let i = 0;
    const designer = { chat: scripted(() => texts[i++ % texts.length]!), trainer: null };
    const lab = new MicroLab(
      {
        seed: 3,
        designer: 'regret',
        levels: 4,
        plays: 3,
        probePlays: 1,
        probeLevels: [{ family: 2, L: 0, A: 0, D: 0 }],
      },
      { runner, agent: { chat: hintReader, trainer: null }, designer },
    );
    const r = await lab.cycle();
    // lock, alphabet 3: code 1 1 — "1" always wins, with or without the hint: win rate 1, regret 0 → 0
    expect(r.designs[0]).toMatchObject({
      description: 'F2 L0 A1 D0',
      noHint: [1, 1, 1],
      withHint: [1, 1, 1],
      regret: 0,
      raw: 0,
    });
    // lock, alphabet 2: code 1 0 — "1" never wins, the hint always: plateau(0) = 0, 0.4·clip(1/0.15) = 0.4
    for (const k of [1, 3]) {
      expect(r.designs[k]).toMatchObject({
        description: 'F2 L0 A0 D0',
        noHint: [0, 0, 0],
        withHint: [1, 1, 1],
        regret: 1,
      });
      expect(r.designs[k]!.raw).toBeCloseTo(0.4);
    }
    expect(r.designs[2]).toMatchObject({ level: null, raw: 0, noHint: [], withHint: [] });
    expect(r.designs[2]!.invalid).toMatch(/four digits/);
    // centred over the cycle (mean raw 0.2), role scale 1
    expect(r.designs.map((d) => d.advantage)).toEqual([-0.2, 0.2, -0.2, 0.2].map((x) => expect.closeTo(x, 9)));
    expect(r.meanDesignerReward).toBeCloseTo(0.2);
    expect(r.meanDifficulty).toBeCloseTo(mean3(difficulty({ family: 2, L: 0, A: 1, D: 0 }), 0, 0));
    expect(r.meanRegret).toBeCloseTo(2 / 3);
    expect(r.updates).toEqual([]); // no trainer, nothing trained
    // the probe (lock, alphabet 2) is lost without the hint, before and after
    expect(lab.initialProbe!.mean).toBe(0);
    expect(r.probe.byBucket.easy).toBe(0);
    expect(summarise(lab)).toMatchObject({ probeReturnFirst: 0, probeReturnLast: 0, cycles: 1 });
    await lab.close();
  });

  it('the random designer draws seeded uniform levels; the fixed one writes one medium level', async () => {
    const agent = { chat: scripted(() => '0'), trainer: null };
    const probeLevels = [{ family: 0, L: 0, A: 0, D: 0 }];
    const designs = async (designer: 'random' | 'fixed', seed: number) => {
      const lab = new MicroLab({ seed, designer, levels: 4, plays: 1, probePlays: 1, probeLevels }, { runner, agent });
      const out = [(await lab.cycle()).designs, (await lab.cycle()).designs].flat().map((d) => d.description);
      await lab.close();
      return out;
    };
    const a = await designs('random', 5);
    expect(a).toEqual(await designs('random', 5));
    expect(a).not.toEqual(await designs('random', 6));
    expect(new Set(a).size).toBeGreaterThan(4);
    const f = await designs('fixed', 5);
    expect(f).toEqual([0, 1, 2, 3, 0, 1, 2, 3].map((family) => describeLevel({ family, ...FIXED_KNOBS })));
    expect(difficulty({ family: 0, ...FIXED_KNOBS })).toBeCloseTo(4 / 9);
  });

  it('refuses settings it cannot run', () => {
    const agent = { chat: hintReader, trainer: null };
    expect(() => new MicroLab({ designer: 'regret' }, { runner, agent })).toThrow(/designer policy/);
    expect(() => new MicroLab({ designer: 'oracle' as never }, { runner, agent })).toThrow(/regret, random, fixed/);
    expect(() => new MicroLab({ designer: 'fixed', plays: 0 }, { runner, agent })).toThrow(/plays/);
  });
});

function mean3(a: number, b: number, c: number) {
  return (a + b + c) / 3;
}

/** A cycle's numbers without wall times. */
const numbers = (h: CycleReport[]) => JSON.parse(JSON.stringify(h, (k, v) => (k === 'ms' ? undefined : v))) as unknown;

describe('micro lab on two tiny engine models', () => {
  const size = { layers: 1, hidden: 16 };
  const settings = {
    designer: 'regret' as const,
    levels: 3,
    plays: 2,
    probePlays: 1,
    probeLevels: [
      { family: 0, L: 0, A: 0, D: 0 },
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
   * T = 1, with A_s worked out here from the cycle's returns and rewards (not the sample's own).
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
    const a = await oneCycle(11);
    const { r } = a;
    expect(r.designs).toHaveLength(3);
    for (const d of r.designs) {
      expect(d.text).toMatch(/^[0-3]{4}$/); // the designer's vocabulary: four digits 0-3, always a level
      expect(d.level).not.toBeNull();
      expect(d.noHint).toHaveLength(2);
      expect(d.withHint).toHaveLength(2);
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
    const b = await oneCycle(11);
    expect(numbers(b.lab.history)).toEqual(numbers(a.lab.history));
    expect(b.lab.initialProbe).toEqual(a.lab.initialProbe);
    const c = await oneCycle(12);
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
    expect(lines.join('\n')).toMatch(/regret, random, fixed/);
  });
});
