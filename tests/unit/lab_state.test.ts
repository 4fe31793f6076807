// The Lab panel's pure parts (src/state/lab.svelte.ts): its URL codec (a link carries the seed and
// the settings; bad values are dropped with a warning) and the comparison's verdict in words.
import { describe, expect, it } from 'vitest';
import {
  cleanSettings,
  compareVerdict,
  formatLabHash,
  LAB_DEFAULTS,
  parseLabHash,
  type CompareRow,
} from '../../src/state/lab.svelte.ts';

describe('lab URL fields', () => {
  it('round-trips the settings, leaving defaults out, and ignores other fields', () => {
    const s = {
      seed: 3,
      cycles: 2,
      designer: 'fixed' as const,
      levels: 2,
      plays: 1,
      probePlays: LAB_DEFAULTS.probePlays,
    };
    const hash = formatLabHash(s);
    expect(hash).toBe('lab.seed=3&lab.cycles=2&lab.designer=fixed&lab.K=2&lab.N=1');
    expect(parseLabHash(`#panel=lab&seed=9&${hash}`)).toEqual({
      fields: { seed: 3, cycles: 2, designer: 'fixed', levels: 2, plays: 1 },
      warnings: [],
    });
    expect(formatLabHash(LAB_DEFAULTS)).toBe('');
  });

  it('drops bad values with a warning each, keeping the good ones', () => {
    const { fields, warnings } = parseLabHash('#lab.seed=abc&lab.K=99&lab.designer=oracle&lab.N=2&lab.cycles=');
    expect(fields).toEqual({ plays: 2 });
    expect(warnings).toEqual([
      'ignored from the link: lab.designer must be one of regret, random, fixed',
      'ignored from the link: lab.seed must be a whole number from 0 to 2147483647',
      'ignored from the link: lab.cycles must be a whole number from 1 to 200',
      'ignored from the link: lab.K must be a whole number from 1 to 8',
    ]);
  });

  it('cleans typed-in values into bounds', () => {
    expect(cleanSettings({ ...LAB_DEFAULTS, levels: 50, plays: 0, cycles: 2.6 })).toMatchObject({
      levels: 8,
      plays: 1,
      cycles: 3,
    });
  });
});

describe('compare designers: the verdict', () => {
  const rows = (regret: number, random: number, fixed: number, done = true): CompareRow[] =>
    (
      [
        ['regret', regret],
        ['random', random],
        ['fixed', fixed],
      ] as const
    ).map(([designer, last]) => ({ designer, curve: [0.29, last], status: done ? 'done' : 'running' }));
  // probePlays 2: 24 probe plays, one play = 1/24
  const p = (n: number) => n / 24;

  it('waits for all three designers', () => {
    expect(compareVerdict(rows(p(7), p(2), p(6), false), 2)).toBeNull();
  });

  it('says plainly when regret wins, ties within the noise, or loses', () => {
    expect(compareVerdict(rows(p(10), p(2), p(6)), 2)).toBe(
      'After 1 cycle the probe return is regret 0.42, random 0.08, fixed 0.25 (one probe play = 0.04). ' +
        'The regret designer beat both baselines on the probe set (by 8 probe plays over random and 4 probe plays over fixed).',
    );
    expect(compareVerdict(rows(p(7), p(2), p(6)), 2)).toMatch(
      /did not clearly beat both baselines: it beat random \(by 5 probe plays\); against fixed the gap is 1 probe play, within the noise\.$/,
    );
    expect(compareVerdict(rows(p(2), p(7), p(6)), 2)).toMatch(/did worse than both baselines on the probe set\.$/);
  });
});
