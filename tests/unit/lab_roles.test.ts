// The Lab's engine roles (src/lab/roles.ts): the trainer's policy is the sampler's
// policy at the lab's temperature, so the first GRPO step on freshly sampled plays has ratio 1
// (approxKl 0, nothing clipped) at any temperature — a trainer built for T = 1 while the lab samples
// at T = 0.5 gives a wrong ratio from the first step. And the learning-curve check's shape.
import { describe, expect, it } from 'vitest';
import { extendTrace } from '../../src/core/train/grpo.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { agentLrFactor, CHECK_PLAYS, engineLabDeps, learningCheck, runLabSeed } from '../../src/lab/roles.ts';

const runner = createSandboxWorkerApi();

describe('Lab trainer temperature', () => {
  it('trains at the temperature the lab samples at: the first step on a fresh sample has ratio 1', async () => {
    for (const temperature of [0.5, 1.5]) {
      const { agent } = await engineLabDeps(2, 'fixed', runner, { layers: 1, hidden: 16, temperature });
      const samples = [];
      for (let j = 0; j < 4; j++) {
        const reply = await agent.chat.chat([{ role: 'user', content: 'Lock 2 digits, 0-1. Digit 1?' }], {
          temperature,
          max_tokens: 3,
          seed: 10 + j,
        });
        samples.push({
          role: 'agent' as const,
          ...extendTrace(null, reply.tokens!)!,
          advantage: j % 2 ? 1 : -1,
          key: `${j}`,
        });
      }
      const step = await agent.trainer!.step(samples);
      expect(Math.abs(step.approxKl), `T = ${temperature}`).toBeLessThan(1e-5);
      expect(step.clipFraction, `T = ${temperature}`).toBe(0);
    }
  }, 60_000);
});

describe('the learning-curve check', () => {
  it("trains the fixed designer on the family's easiest level and measures the trained agent with and without the hint", async () => {
    const c = await learningCheck(2, 1, 2, runner, { levels: 2, plays: 4 }, { layers: 1, hidden: 16 });
    expect(c).toMatchObject({ family: 2, seed: 1 });
    expect(c.curve).toHaveLength(2);
    for (const x of [...c.curve, c.agentNoHint, c.agentWithHint]) {
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThanOrEqual(1);
    }
    expect((c.agentNoHint * CHECK_PLAYS) % 1).toBeCloseTo(0, 9); // a share of CHECK_PLAYS plays
    expect(c.masteredAt === null || c.masteredAt === 2).toBe(true);
  }, 120_000);
});

describe("the climb's agent", () => {
  it("is its space's model — hidden 32, init std 0.14, weight decay 0.1 — unless the run names others", async () => {
    const trace = async (o: { hidden?: number; std?: number; weightDecay?: number; rank?: number }) => {
      const { agent } = await engineLabDeps(3, 'fixed', runner, { space: 'climb', ...o });
      const messages = [{ role: 'user' as const, content: 'Climb, 0-4, same code every time. Digit a?' }];
      const r = await agent.chat.chat(messages, { temperature: 1, max_tokens: 2, seed: 5 });
      const sample = { role: 'agent' as const, ...extendTrace(null, r.tokens!)!, advantage: 1, key: '0' };
      await agent.trainer!.step([sample]);
      const second = await agent.trainer!.step([sample]); // starts from the adapter the first step (and its decay) left
      return { logprobs: r.tokens!.logprobs, gradNorm: second.gradNorm, loss: second.loss };
    };
    const byDefault = await trace({});
    expect(await trace({ hidden: 32, std: 0.14, weightDecay: 0.1 })).toEqual(byDefault);
    expect((await trace({ hidden: 16, std: 0.2, weightDecay: 0.1 })).logprobs).not.toEqual(byDefault.logprobs);
    const noDecay = await trace({ weightDecay: 0 });
    expect(noDecay.logprobs).toEqual(byDefault.logprobs); // the same fresh model...
    expect(noDecay.gradNorm).not.toBe(byDefault.gradNorm); // ...but without the decay a different adapter after a step
    const rank16 = await trace({ rank: 16 });
    expect(rank16.logprobs).toEqual(byDefault.logprobs); // a fresh adapter (B = 0) changes nothing...
    expect(rank16.gradNorm).not.toBe(byDefault.gradNorm); // ...a rank-16 one learns differently
  }, 60_000);
});

describe("the agent's spike guard (--skip-spikes)", () => {
  it('guards the agent only; a run counts the steps it skipped apart from the steps taken', async () => {
    const settings = { seed: 4, designer: 'learned' as const, space: 'chain' as const, levels: 4, plays: 8 };
    const o = { probePlays: 1, probeEvery: 100 };
    // ratio 1: a step whose norm is over the median of the recent ones is skipped (about half, after 16)
    const guarded = await runLabSeed({ ...settings, ...o }, 24, runner, { skipSpikes: 1 });
    const plain = await runLabSeed({ ...settings, ...o }, 24, runner);
    const updates = guarded.lab.history.flatMap((c) => c.updates);
    const skipped = updates.filter((u) => u.skipped);
    expect(plain.run.skippedSteps).toBeUndefined();
    expect(skipped.length).toBeGreaterThan(0);
    expect(skipped.every((u) => u.role === 'agent')).toBe(true);
    expect(updates.filter((u) => u.role === 'designer').length).toBeGreaterThan(16); // the designer's could have been
    expect(guarded.run.skippedSteps).toBe(skipped.length);
    expect(guarded.run.steps!.agent).toBe(updates.filter((u) => u.role === 'agent').length - skipped.length);
    // the first 16 agent steps are never judged, so the runs agree until the guard first skips
    const first = updates.filter((u) => u.role === 'agent').findIndex((u) => u.skipped);
    expect(first).toBeGreaterThanOrEqual(16);
    const agentLoss = (r: typeof guarded) =>
      r.lab.history.flatMap((c) => c.updates.filter((u) => u.role === 'agent').map((u) => [u.loss, u.gradNorm]));
    expect(agentLoss(guarded).slice(0, first + 1)).toEqual(agentLoss(plain).slice(0, first + 1));
  }, 120_000);

  it("--agent-lr-end: the agent's rate falls linearly over the run's cycles to that fraction", async () => {
    expect([1, 2, 3, 4, 5].map((c) => agentLrFactor(c, 5, 0.5))).toEqual([1, 0.875, 0.75, 0.625, 0.5]);
    expect(agentLrFactor(1, 1, 0.25)).toBe(1);
    const settings = { seed: 4, designer: 'gated' as const, space: 'chain' as const, levels: 4, plays: 8 };
    const o = { probePlays: 1, probeEvery: 100 };
    const agentSteps = (r: Awaited<ReturnType<typeof runLabSeed>>) =>
      r.lab.history.map((c) => c.updates.filter((u) => u.role === 'agent').map((u) => u.loss));
    const falling = agentSteps(await runLabSeed({ ...settings, ...o }, 4, runner, { agentLrEnd: 0.1 }));
    const constant = agentSteps(await runLabSeed({ ...settings, ...o }, 4, runner));
    expect(falling[0]!.length).toBeGreaterThan(1);
    // cycle 1 trains at the full rate: the same steps; from the second step on, a smaller rate moves less
    expect(falling[0]).toEqual(constant[0]);
    expect(falling.slice(1)).not.toEqual(constant.slice(1));
    await expect(engineLabDeps(1, 'fixed', runner, { agentLrEnd: 0 })).rejects.toThrow(ConfigError);
  }, 120_000);

  it('refuses a ratio between 0 and 1 before it builds anything', async () => {
    await expect(engineLabDeps(1, 'fixed', runner, { skipSpikes: 0.5 })).rejects.toThrow(ConfigError);
    await expect(engineLabDeps(1, 'fixed', runner, { skipSpikes: 0.5 })).rejects.toThrow(/0 \(off\) or from 1/);
  });
});
