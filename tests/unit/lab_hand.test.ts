// The hand designer (src/core/lab/hand.ts, lab.ts `hand`): a person's curriculum as text, checked
// against the space and K; a live run that grows it a cycle at a time and a replay of the recorded
// text give the same numbers bit for bit on two tiny engine models; the levels played are the ones
// picked; a curriculum that rewrites a played cycle is refused; the race's order and the board's CSV.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.ts';
import {
  boardCsv,
  curriculumCycles,
  curriculumProblem,
  formatCurriculum,
  raceOrder,
  spreadPicks,
  type BoardRow,
  type RaceScore,
} from '../../src/core/lab/hand.ts';
import { LabLoop, type CycleReport } from '../../src/core/lab/lab.ts';
import { checkAppRecord } from '../../src/core/spade/app_records.ts';
import { CHAIN_SPACE, SPACE } from '../../src/core/lab/spaces.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import { engineLabDeps } from '../../src/lab/roles.ts';

const climb = SPACE.climb;
const runner = createSandboxWorkerApi();

/** A run's numbers without its timings (the cycle's and each optimiser step's ms). */
const numbers = (h: readonly CycleReport[]) =>
  JSON.stringify(
    h.map(({ ms: _ms, updates, ...rest }) => ({ ...rest, updates: updates.map(({ ms: _u, ...u }) => u) })),
  );

describe('a hand-made curriculum as text', () => {
  it('is K level letters a cycle; a wrong length, a letter past the ladder or too many cycles is named', () => {
    expect(curriculumProblem(climb, 'aabb.oooo', 4)).toBeNull();
    expect(curriculumProblem(climb, '', 4)).toBeNull();
    expect(curriculumProblem(climb, 'aabb.abc', 4)).toMatch(/cycle 2 .* has 3 levels/);
    expect(curriculumProblem(climb, 'aabp', 4)).toMatch(/"p", which is no level of the climb space: write a–o/);
    expect(curriculumProblem(climb, 'aab<', 4)).toMatch(/"<"/);
    expect(curriculumProblem(CHAIN_SPACE, '0127', 4)).toBeNull(); // the chain's levels are digits
    expect(curriculumProblem(CHAIN_SPACE, '0128', 4)).toMatch(/"8"/);
    expect(curriculumProblem(climb, Array(401).fill('a').join('.'), 1)).toMatch(/401 cycles; it may have at most 400/);
    expect(curriculumCycles(formatCurriculum(['ab', 'cd']))).toEqual(['ab', 'cd']);
  });

  it('spreads the rungs a person picked over the K slots in the order picked', () => {
    expect(spreadPicks(climb, [3, 5], 4)).toBe('dfdf');
    expect(spreadPicks(climb, [0], 3)).toBe('aaa');
    expect(spreadPicks(climb, [14, 0, 1], 4)).toBe('oabo');
    expect(() => spreadPicks(climb, [], 4)).toThrow(ConfigError);
    expect(() => spreadPicks(climb, [15], 4)).toThrow(/no level 15/);
  });
});

describe('the hand designer in the loop', () => {
  const settings = { seed: 5, designer: 'hand' as const, space: 'climb' as const, levels: 3, plays: 4, probePlays: 2 };
  const picks = ['aaa', 'aab', 'bbb', 'abc', 'ccb', 'bcd'];

  it('plays exactly the levels picked; a live run grown cycle by cycle equals the replay of its record, bit for bit', async () => {
    const live = new LabLoop(
      { ...settings, curriculum: '', probeEvery: 2 },
      await engineLabDeps(5, 'hand', runner, { space: 'climb' }),
    );
    await expect(live.cycle()).rejects.toThrow(/has 0 cycles; pick the levels of cycle 1 first/);
    for (let c = 0; c < picks.length; c++) {
      live.setCurriculum(formatCurriculum(picks.slice(0, c + 1)));
      await live.cycle();
    }
    await live.close();
    const played = live.history.map((r) => r.designs.map((d) => climb.reply(d.level!)).join(''));
    expect(played).toEqual(picks);
    expect(live.history.every((r) => r.designs.every((d) => !d.replay && !d.explore && !d.trained))).toBe(true);
    expect(live.history.reduce((n, r) => n + r.steps.agent, 0)).toBeGreaterThan(0); // the agent trained on them

    const record = live.settings.curriculum;
    expect(record).toBe('aaa.aab.bbb.abc.ccb.bcd');
    const replay = new LabLoop(
      { ...settings, curriculum: record, probeEvery: 2 },
      await engineLabDeps(5, 'hand', runner, { space: 'climb' }),
    );
    for (let c = 0; c < picks.length; c++) await replay.cycle();
    await replay.close();
    expect(numbers(replay.history)).toBe(numbers(live.history));
    expect(JSON.stringify(replay.initialProbe)).toBe(JSON.stringify(live.initialProbe));
    expect(replay.history.filter((r) => r.probe).length).toBe(3);

    // another curriculum on the same seed gives other numbers: the picks are what the numbers follow
    const other = new LabLoop(
      { ...settings, curriculum: 'aaa.aaa.aaa.aaa.aaa.aaa', probeEvery: 2 },
      await engineLabDeps(5, 'hand', runner, { space: 'climb' }),
    );
    for (let c = 0; c < picks.length; c++) await other.cycle();
    await other.close();
    expect(numbers(other.history)).not.toBe(numbers(live.history));
  }, 120_000);

  it('refuses a curriculum that rewrites a cycle already played, and a bad one at the start', async () => {
    const deps = await engineLabDeps(5, 'hand', runner, { space: 'climb' });
    expect(() => new LabLoop({ ...settings, curriculum: 'aaaa' }, deps)).toThrow(ConfigError);
    const lab = new LabLoop({ ...settings, curriculum: 'aaa', probeEvery: 10 }, deps);
    await lab.cycle();
    expect(() => lab.setCurriculum('aab.bbb')).toThrow(/changes cycles already played \(1–1\)/);
    expect(lab.settings.curriculum).toBe('aaa'); // nothing lost
    lab.setCurriculum('aaa.bbb');
    expect(() => lab.setCurriculum('aaa.bbz')).toThrow(/"z"/);
    expect(lab.settings.curriculum).toBe('aaa.bbb');
    await lab.close();
  }, 60_000);
});

describe('the race and the class board', () => {
  const score = (mean: number, topRung: number): RaceScore => ({ mean, hardHalf: 0, topRung, plays: 96, steps: 10 });

  it('orders arms by probe mean, then the rung held, then the table order', () => {
    const rows = [
      { arm: 'hand', score: score(0.2, 3) },
      { arm: 'learned', score: score(0.3, 2) },
      { arm: 'random', score: score(0.2, 4) },
      { arm: 'gated', score: null },
    ];
    expect(raceOrder(rows).map((r) => r.arm)).toEqual(['learned', 'random', 'hand', 'gated']);
    expect(raceOrder([rows[0]!, { arm: 'x', score: score(0.2, 3) }]).map((r) => r.arm)).toEqual(['hand', 'x']);
  });

  it('writes CSV that a spreadsheet reads as text: quotes, commas and a formula-like name made harmless', () => {
    const row: BoardRow = {
      who: '=HYPERLINK("x")',
      seed: 3,
      space: 'climb',
      levels: 4,
      plays: 8,
      probePlays: 16,
      cycles: 2,
      curriculum: 'aabb.bbcc',
      link: 'https://x.test/#lab.hand=aabb.bbcc&lab.who=a,b',
      score: score(0.125, 1),
    };
    const csv = boardCsv([row, { ...row, who: 'Ana', score: null }]);
    const lines = csv.trim().split('\n');
    expect(lines[0]).toBe('who,seed,space,K,N,P,cycles,score,top_half,top_rung,plays,steps,curriculum,link');
    expect(lines[1]).toBe(
      `"'=HYPERLINK(""x"")",3,climb,4,8,16,2,0.125,0,1,96,10,aabb.bbcc,"https://x.test/#lab.hand=aabb.bbcc&lab.who=a,b"`,
    );
    expect(lines[2]).toBe('Ana,3,climb,4,8,16,2,,,,,,aabb.bbcc,"https://x.test/#lab.hand=aabb.bbcc&lab.who=a,b"');
    // the stored form: app_records' check takes both rows as they are, and refuses a score out of range
    const stored = [row, { ...row, who: 'Ana', score: null }];
    expect(checkAppRecord('settings', 'classBoard', stored)).toEqual(stored);
    expect(() => checkAppRecord('settings', 'classBoard', [{ ...row, score: { ...row.score!, mean: 2 } }])).toThrow(
      /mean/,
    );
  });
});

describe('a race from a pasted link', () => {
  it('reads the seed, K, N, P, the curriculum and the name; refuses what is no race, saying why', async () => {
    const { raceFromLink } = await import('../../src/state/hand_race.svelte.ts');
    expect(
      raceFromLink('https://x.test/spade/#panel=lab&lab.seed=3&lab.K=2&lab.hand=ab.ac&lab.who=%3Cb%3EA%3C%2Fb%3E'),
    ).toEqual({
      ok: true,
      race: { seed: 3, levels: 2, plays: 8, probePlays: 16, curriculum: 'ab.ac', who: '<b>A</b>' },
    });
    expect(raceFromLink('#lab.K=2')).toEqual({ ok: false, message: 'the link has no hand-made curriculum (lab.hand)' });
    const bad = (hash: string) => {
      const r = raceFromLink(hash);
      return r.ok ? 'ok' : r.message;
    };
    expect(bad('#lab.hand=aaaa.%3Cscript%3E')).toMatch(/cycle 2 of the curriculum has 8 levels/);
    expect(bad('#lab.K=1&lab.hand=a.%3C')).toMatch(/names "<", which is no level/);
    expect(bad(`#lab.K=1&lab.hand=${'a.'.repeat(2000)}a`)).toMatch(/no hand-made curriculum/); // over the link's limit: dropped
    expect(bad('#lab.K=9&lab.hand=aaaa')).toBe('ok'); // a bad K is dropped from the link: the default (4) reads it
  });
});

describe('the race while the Lab runs', () => {
  it('says to pause the Lab instead of doing nothing, and asks nothing of the worker', async () => {
    const { HandRace, LAB_BUSY } = await import('../../src/state/hand_race.svelte.ts');
    const { LAB_DEFAULTS } = await import('../../src/state/lab.svelte.ts');
    const asked: string[] = [];
    const lab = {
      settings: { ...LAB_DEFAULTS },
      busy: true,
      remote: () => new Proxy({}, { get: (_, k) => (asked.push(String(k)), async () => undefined) }),
    };
    const race = new HandRace(lab as never);
    await race.play(1);
    expect(race.error).toBe(LAB_BUSY);
    expect(race.status).toBe('idle');
    expect(race.played).toEqual([]);
    expect(asked).toEqual([]);
  });
});
