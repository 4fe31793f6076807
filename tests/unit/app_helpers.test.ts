// Core helpers the app's panels call instead of computing things themselves: the \boxed{} form
// of a typed game action, a call's tokens/s, and a run's environments as records with one
// identity per archive entry (the same program designed twice is two records).
import { describe, expect, it } from 'vitest';
import { boxedAction, extractBoxed } from '../../src/core/env/contract.ts';
import { callSpeed } from '../../src/core/llm/chat_model.ts';
import { runEnvId, runEnvRecords } from '../../src/core/spade/run_envs.ts';
import type { ArchiveRecord } from '../../src/core/spade/run_store.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';

describe('boxedAction', () => {
  it('wraps plain text, trimmed, and keeps text that already has a complete \\boxed{}', () => {
    expect(boxedAction('probe 3')).toBe('\\boxed{probe 3}');
    expect(boxedAction('  probe 3 \n')).toBe('\\boxed{probe 3}');
    expect(boxedAction('I say \\boxed{probe {3}}')).toBe('I say \\boxed{probe {3}}');
    // an unclosed \boxed{ is not complete: the wrap closes it, and the game reads the 3
    expect(boxedAction('\\boxed{3')).toBe('\\boxed{\\boxed{3}');
    expect(extractBoxed(boxedAction('\\boxed{3'))).toBe('3');
    expect(extractBoxed(boxedAction('set {a: 1}'))).toBe('set {a: 1}');
  });
});

describe('callSpeed', () => {
  it('divides completion tokens by the wall time', () => {
    expect(callSpeed({ usage: { promptTokens: 9, completionTokens: 50 } }, 2000)).toEqual({
      tokens: 50,
      seconds: 2,
      tokensPerSecond: 25,
    });
  });
  it('counts streamed pieces when the backend reports no tokens, and never divides by zero', () => {
    expect(callSpeed({ usage: { promptTokens: 0, completionTokens: 0 } }, 500, 12).tokensPerSecond).toBe(24);
    expect(callSpeed({ usage: { promptTokens: 0, completionTokens: 7 } }, 0)).toEqual({
      tokens: 7,
      seconds: 0,
      tokensPerSecond: 0,
    });
  });
});

describe('runEnvRecords', () => {
  const entry = (cycle: number, index: number, over: Partial<ArchiveRecord> = {}): ArchiveRecord => ({
    cycle,
    index,
    skill: 'spatial',
    setting: 'games',
    difficulty: 'easy',
    envId: 'x',
    title: `Env ${cycle}.${index}`,
    code: FAKE_ENV,
    hint: 'look left',
    source: null,
    valid: true,
    firstAttemptValid: true,
    attempts: [],
    validator: null,
    stats: {
      noHint: [0, 1],
      withHint: [1, 1],
      winRate: 0.5,
      winRateHinted: 1,
      regret: 0.5,
      raw: 0.4,
      designerReward: null,
      timedOut: false,
      blacklisted: false,
    },
    leak: null,
    ...over,
  });

  it('gives the same program designed twice two records with distinct ids', () => {
    const records = runEnvRecords('run-a', [entry(0, 0), entry(0, 1), entry(1, 0)]);
    expect(records.map((r) => r.id)).toEqual([
      runEnvId('run-a', 0, 0),
      runEnvId('run-a', 0, 1),
      runEnvId('run-a', 1, 0),
    ]);
    expect(new Set(records.map((r) => r.id)).size).toBe(3);
    // another run's first environment is another record
    expect(runEnvRecords('run-b', [entry(0, 0)])[0]!.id).not.toBe(records[0]!.id);
    expect(records.every((r) => r.code === FAKE_ENV)).toBe(true);
    expect(records[1]).toMatchObject({
      title: 'Env 0.1',
      setting: 'games',
      skill: 'spatial',
      hint: 'look left',
      stats: { plays: 4, winRate: 0.5, winRateHinted: 1, regret: 0.5, designerReward: undefined, checked: true },
    });
  });
  it('leaves out invalid entries and entries without code', () => {
    const records = runEnvRecords('run-a', [entry(0, 0, { valid: false }), entry(0, 1, { code: null }), entry(0, 2)]);
    expect(records.map((r) => r.id)).toEqual([runEnvId('run-a', 0, 2)]);
  });
});
