// The learning proofs, on the CPU references (seeded; minutes of CPU at most):
// a tiny fresh model learns an environment through the app's path (engine sampling → QuickJS
// sandbox → GRPO update), the designer learns to write the rewarded kind, and an interrupted run
// resumed from its saved state (PEFT adapter, optimiser state, update index) repeats the same losses.
import { describe, expect, it } from 'vitest';
import { checkEnv } from '../../src/core/env/checker.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { LUCKY_DIGIT_ENV, toyDesignerTrain, toyTrain } from '../../src/engine/tiny/toy_train.ts';

const MINUTES = 60_000;

describe('learning proofs (CPU references)', () => {
  it('the toy environment follows the seed contract (every check but multi-turn, which a one-shot toy fails)', async () => {
    const report = await checkEnv(createSandboxWorkerApi(), LUCKY_DIGIT_ENV, { maxTurns: 1 });
    const failed = report.checks.filter((c) => !c.ok).map((c) => c.name);
    expect(failed).toEqual(['multi_turn']);
    expect(report.checks.length).toBeGreaterThan(5);
  });

  it(
    'a tiny fresh model raises its mean return from ≤ 0.2 to ≥ 0.8 on Lucky Digit',
    async () => {
      const r = await toyTrain({ updates: 8 });
      console.log(`toy curve: ${r.curve.map((u) => u.meanReturn.toFixed(2)).join(' ')} (${r.seconds.toFixed(1)} s)`);
      expect(r.returnFirst).toBeLessThanOrEqual(0.2);
      const last2 = r.curve.slice(-2).map((u) => u.meanReturn);
      expect(Math.min(...last2)).toBeGreaterThanOrEqual(0.8);
      // it learned by training: updates with signal made optimiser steps
      expect(r.curve.some((u) => u.steps > 0)).toBe(true);
    },
    5 * MINUTES,
  );

  it(
    'the designer writes the rewarded kind more often (rigged reward, centred over k designs per skill)',
    async () => {
      const r = await toyDesignerTrain({ rounds: 4, skills: 2, k: 4 });
      console.log(`designer P(A): ${r.pBefore.toFixed(3)} → ${r.pAfter.toFixed(3)}`);
      expect(r.pBefore).toBeLessThan(0.7);
      expect(r.pAfter).toBeGreaterThan(0.9);
    },
    5 * MINUTES,
  );

  it(
    'a run interrupted after 2 updates and resumed from its state gives the same losses as 4 uninterrupted',
    async () => {
      const o = { groups: 1, plays: 8, seed: 1 };
      const full = await toyTrain({ ...o, updates: 4 });
      const half = await toyTrain({ ...o, updates: 2 });
      // the state travels as bytes: PEFT adapter files and the optimiser's safetensors
      const state = structuredClone(half.state);
      const resumed = await toyTrain({ ...o, updates: 4, resume: state });
      const losses = (c: typeof full.curve) => c.map((u) => [u.loss, u.clipFraction, u.meanReturn, u.steps]);
      expect(losses(resumed.curve)).toEqual(losses(full.curve));
      expect(full.curve.slice(2).some((u) => u.steps > 0)).toBe(true); // the compared updates trained
      expect(Buffer.from(resumed.state.adapterWeights).equals(Buffer.from(full.state.adapterWeights))).toBe(true);
      expect(Buffer.from(resumed.state.optimizer).equals(Buffer.from(full.state.optimizer))).toBe(true);
    },
    5 * MINUTES,
  );
});

describe('spade train toy / spade bench train', () => {
  const cli = async (...argv: string[]) => {
    const { main } = await import('../../src/cli/spade.ts');
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err, json: () => JSON.parse(out.at(-1)!) };
  };

  it(
    'prints one line per update and, with --json, a last line with the curve ends (exit 1: one update does not learn it)',
    async () => {
      const r = await cli('train', 'toy', '--updates', '1', '--json');
      expect(r.code, r.err.join('\n')).toBe(1);
      expect(r.out[0]).toMatch(/^update {2}1 {2}return 0\.\d{3} {2}loss +-?\d\.\d{4} {2}clip \d\.\d{3}/);
      expect(r.json()).toMatchObject({ ok: false, returnFirst: 0.125, returnLast: 0.125, updates: 1 });
      expect(r.json().seconds).toBeGreaterThan(0);
      expect((await cli('train', 'toy', '--updates', '0')).code).toBe(2);
      expect((await cli('train', 'nothing')).code).toBe(2);
    },
    5 * MINUTES,
  );

  it(
    'bench train reports training tokens/s and the generate/train split',
    async () => {
      const r = await cli('bench', 'train', '--updates', '1', '--json');
      expect(r.code, r.err.join('\n')).toBe(0);
      const j = r.json();
      expect(j.trainTokens).toBeGreaterThan(0);
      expect(j.trainTokensPerSecond).toBeGreaterThan(0);
      expect(j.generateShare + j.trainShare).toBeCloseTo(1, 2);
    },
    5 * MINUTES,
  );
});
