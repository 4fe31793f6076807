// The Lab panel's pure parts (src/state/lab.svelte.ts): its settings in the link (the app's one link
// parser, core/url_state.ts, over the Lab's schema, core/lab/settings.ts: bad values are dropped
// with a warning, the old designer name `regret` read as `learned`) and the comparison it shows (the
// rows of its runs judged by core/lab/compare.ts as `spade lab compare` judges them, screened-out
// seeds left out; on the climb round 4's arms and top-half metric, as `spade lab compare --space climb`),
// the headline naming every arm that beat SPADE's designer, and each probe as a row of rungs with the
// highest one mastered, filled in as a comparison's cycles arrive.
import { describe, expect, it } from 'vitest';
import {
  compareRuns,
  compareSpecOf,
  PRE_REGISTERED_SPEC,
  ROUND4_SPEC,
  type CompareResult,
} from '../../src/core/lab/compare.ts';
import type { CycleReport, ProbeReport } from '../../src/core/lab/lab.ts';
import { clampLabChoices, LAB_SCHEMA } from '../../src/core/lab/settings.ts';
import { CHAIN_SPACE, CLIMB_SPACE, GRID_SPACE, spaceChance } from '../../src/core/lab/spaces.ts';
import { formatUrlState, parseUrlState, URL_DEFAULTS } from '../../src/core/url_state.ts';
import {
  armName,
  armsAboveSpade,
  climbText,
  compareResult,
  headline,
  isLadder,
  LAB_DEFAULTS,
  LabState,
  rowsToRuns,
  rungsOf,
  topHalfText,
  topLength,
  topRungText,
  type CompareRow,
} from '../../src/state/lab.svelte.ts';
import type { LabEvent, LabWorkerApi } from '../../workers/lab.worker.ts';

describe('lab URL fields', () => {
  it('round-trips the settings, leaving defaults out, and ignores other fields', () => {
    const s = {
      ...LAB_DEFAULTS,
      seed: 3,
      cycles: 2,
      designer: 'fixed' as const,
      estimator: 'paper_blend' as const,
      levels: 2,
      plays: 1,
      seeds: 3,
    };
    const hash = formatUrlState({ ...URL_DEFAULTS, lab: s }, LAB_DEFAULTS);
    expect(hash).toBe('lab.seed=3&lab.cycles=2&lab.designer=fixed&lab.est=paper_blend&lab.K=2&lab.N=1&lab.S=3');
    const { fields, problems } = parseUrlState(`#panel=lab&seed=9&${hash}`);
    expect(fields.lab).toEqual({
      seed: 3,
      cycles: 2,
      designer: 'fixed',
      estimator: 'paper_blend',
      levels: 2,
      plays: 1,
      seeds: 3,
    });
    expect(fields.config).toEqual({ seed: 9 });
    expect(problems).toEqual([]);
    expect(formatUrlState({ ...URL_DEFAULTS, lab: LAB_DEFAULTS }, LAB_DEFAULTS)).toBe('');
    // with no defaults to compare with, every Lab setting is written, none dropped
    const all = parseUrlState(formatUrlState({ ...URL_DEFAULTS, lab: LAB_DEFAULTS }));
    expect(all.fields.lab).toEqual(LAB_DEFAULTS);
    // a link from before the rename still opens: `regret` is the learned designer's old name
    expect(parseUrlState('#lab.designer=regret').fields.lab).toEqual({ designer: 'learned' });
  });

  it('drops bad values with a warning each, keeping the good ones', () => {
    const lab = new LabState();
    // as the app's link owner (state/wiring.svelte.ts) hands them over: the good fields, the Lab's problems
    const { fields, problems } = parseUrlState('#lab.seed=abc&lab.K=99&lab.designer=oracle&lab.N=2&lab.cycles=&seed=x');
    lab.applyLink(
      fields.lab,
      problems.filter((p) => p.scope === 'lab').map((p) => p.message),
    );
    expect(lab.settings).toEqual({ ...LAB_DEFAULTS, plays: 2 });
    // in schema order; the app's own `seed=x` is the app's notice, not the Lab's
    expect(lab.warnings).toEqual([
      'ignored from the link: lab.seed must be a number; got "abc"',
      'ignored from the link: lab.cycles must be a number; got ""',
      'ignored from the link: lab.designer must be one of learned, untrained, scripted, gated, sfl, ladder, random, fixed, hand; got "oracle"',
      'ignored from the link: lab.K must be between 1 and 8; got 99',
    ]);
    expect(formatUrlState({ ...URL_DEFAULTS, lab: lab.linkChoices() }, LAB_DEFAULTS)).toBe('lab.N=2');
  });

  it('cleans typed-in values into bounds', () => {
    expect(clampLabChoices({ ...LAB_DEFAULTS, levels: 50, plays: 0, cycles: 2.6 }, LAB_DEFAULTS)).toMatchObject({
      levels: 8,
      plays: 1,
      cycles: 3,
    });
  });
});

describe('compare designers: what the panel shows', () => {
  const row = (seed: number, designer: string, last: number, status: CompareRow['status'] = 'done'): CompareRow => ({
    seed,
    designer,
    curve: [0.05, last / 2, last, last],
    hardCurve: [0, last / 4, last / 2, last / 2],
    stages: [
      [0.1, 0, 0, 0],
      [0.5, 0.2, 0, 0],
      [0.9, 0.5, 0.2, 0.1],
      [0.9, 0.6, 0.2, 0.1],
    ],
    level: [0.2, 0.3, 0.4],
    medianRegret: [0.5, 0.4, 0.3],
    distinctLevels: [3, 3, 2],
    steps: { agent: 30, designer: 5 },
    stepsCurve: [0, 10, 20, 30],
    plays: 96,
    topRung: [-1, 0, 1, 1],
    status,
  });
  const rows = (lastDone = true) =>
    [1, 2, 3].flatMap((seed) =>
      PRE_REGISTERED_SPEC.arms.map((d, i) =>
        row(
          seed,
          d,
          d === 'learnability' ? 0.6 + seed / 100 : 0.1 + i / 100,
          lastDone || d !== 'control' ? 'done' : 'running',
        ),
      ),
    );

  it('waits for every run, then judges them exactly as `spade lab compare`', () => {
    expect(compareResult(rows(false))).toBeNull();
    expect(compareResult([])).toBeNull();
    const r = compareResult(rows())!;
    const chance = spaceChance(CHAIN_SPACE);
    expect(r).toEqual(compareRuns(rowsToRuns(rows()), chance, PRE_REGISTERED_SPEC));
    expect(r.seeds).toEqual([1, 2, 3]);
    expect(r.spadeDesigner).toBe('learnability');
    const random = PRE_REGISTERED_SPEC.arms.indexOf('random');
    expect(r.comparisons['learnability-random']!.diffs.map((x) => +x.toFixed(6))).toEqual(
      [1, 2, 3].map((s) => +(0.6 + s / 100 - (0.1 + random / 100)).toFixed(6)),
    );
    expect(r.gain.random!.steps).toEqual({ agent: 30, designer: 5 });
    expect(r.success).toBe(true);
    expect(r.sentence).toMatch(/The learned designer helped/);
  });

  it('a screened-out seed counts as finished and is left out of the judgement', () => {
    const withScreened = [
      ...rows(),
      ...PRE_REGISTERED_SPEC.arms.map((d) => ({ ...row(4, d, 0), status: 'screened' as const })),
    ];
    const r = compareResult(withScreened, [{ seed: 4, level: 'F2 L0 A0 D0', wins: 0, plays: 64, pass: false }])!;
    expect(r.seeds).toEqual([1, 2, 3]);
  });
});

describe('the climb in the panel', () => {
  it('is a space the settings offer, and is judged by round 4’s comparison as `spade lab compare --space climb`', () => {
    expect(LAB_SCHEMA.space.values).toContain('climb');
    expect(compareSpecOf('climb')).toBe(ROUND4_SPEC);
    expect(compareSpecOf('chain')).toBe(PRE_REGISTERED_SPEC);
    // cli/cmd_lab.ts specOf at its defaults on the climb: these arms, baselines, headroom and metric
    expect(ROUND4_SPEC).toMatchObject({
      arms: ['learnability', 'untrained', 'scripted', 'gated', 'sfl', 'random', 'fixed'],
      spade: 'learnability',
      baselines: ['random', 'untrained', 'fixed'],
      headroom: ['gated', 'random'],
      metric: 'topHalf',
    });
  });

  /** A climb row: top-half success `top` after training (0 before), its highest rung `rung`. */
  const climbRow = (seed: number, designer: string, top: number, rung: number): CompareRow => ({
    seed,
    designer,
    curve: [0.05, 0.2, 0.3, 0.3],
    hardCurve: [0, top / 2, top, top],
    stages: [Array(15).fill(0), null, Array(15).fill(0.2), Array.from({ length: 15 }, (_, i) => (i <= rung ? 0.9 : 0))],
    level: [0.1, 0.2, 0.3],
    medianRegret: [0, 0, 0],
    distinctLevels: [2, 2, 2],
    steps: { agent: 30, designer: 0 },
    stepsCurve: [0, 10, 20, 30],
    plays: 96,
    topRung: [-1, null, 2, rung],
    status: 'done',
  });
  const GAINS: Record<string, number> = {
    learnability: 0.2,
    untrained: 0.1,
    scripted: 0.25,
    gated: 0.4,
    sfl: 0.2,
    random: 0.05,
    fixed: 0,
  };
  const climbRows = [1, 2].flatMap((seed) => ROUND4_SPEC.arms.map((a) => climbRow(seed, a, GAINS[a]! + seed / 100, 8)));

  it('judges climb rows on top-half success, with the equal-steps gains and plays to the target', () => {
    const r = compareResult(climbRows, [], 'climb')!;
    expect(r).toEqual(compareRuns(rowsToRuns(climbRows), spaceChance(CLIMB_SPACE), ROUND4_SPEC));
    expect(r.metric).toBe('topHalf');
    expect(r.gain.gated!.interval.mean).toBeCloseTo(0.415, 9);
    expect(r.gainAtEqualSteps).not.toBeNull();
    expect(r.toTarget!.gated!.plays).toEqual([null, null]); // 0.41 and 0.42: the target 0.5 never reached
    expect(Object.keys(r.comparisons)).toEqual([
      'learnability-random',
      'learnability-untrained',
      'learnability-fixed',
      'gated-random',
    ]);
  });

  it('the headline names every arm that beat SPADE’s designer, on the metric, or says none did', () => {
    const r = compareResult(climbRows, [], 'climb')!;
    // sfl ties the learned designer (the same gain): a tie is no win
    expect(armsAboveSpade(r).map((x) => x.arm)).toEqual(['gated', 'scripted']);
    expect(headline(r)).toBe(
      '2 arms beat SPADE’s designer (learnability: +0.22 in top-half success, mean over 2 seeds): gated +0.42, scripted +0.27.',
    );
    const none = compareResult(
      climbRows.map((x) => (x.designer === 'learnability' ? climbRow(x.seed, x.designer, 0.9, 14) : x)),
      [],
      'climb',
    )!;
    expect(headline(none)).toBe(
      'No arm beat SPADE’s designer (learnability: +0.90 in top-half success, mean over 2 seeds).',
    );
    // pre-registration 3's arms by their names today, and the probe's mean as the metric
    const one: CompareResult = compareRuns(
      rowsToRuns(
        PRE_REGISTERED_SPEC.arms.map((d) => ({
          ...climbRow(1, d, 0, 0),
          curve: [0, d === 'control' ? 0.3 : d === 'learnability' ? 0.2 : 0.1],
        })),
      ),
      0,
      PRE_REGISTERED_SPEC,
    );
    expect(headline(one)).toBe(
      'One arm beat SPADE’s designer (learnability: +0.20 in the probe, mean over 1 seed): control (now scripted) +0.30.',
    );
    expect([armName('frontier'), armName('regret'), armName('gated')]).toEqual([
      'frontier (now sfl)',
      'regret',
      'gated',
    ]);
  });

  it('shows a probe as rungs: each length, its share, mastered at half, the highest mastered as a length', () => {
    const probe = { byStage: Array.from({ length: 15 }, (_, i) => [0.9, 0.5, 0.49, 0.6][i] ?? 0) };
    const rungs = rungsOf(CLIMB_SPACE, probe);
    expect(rungs).toHaveLength(15);
    expect(rungs.slice(0, 4)).toEqual([
      { stage: 'length 2', short: '2', p: 0.9, mastered: true },
      { stage: 'length 3', short: '3', p: 0.5, mastered: true },
      { stage: 'length 4', short: '4', p: 0.49, mastered: false },
      { stage: 'length 5', short: '5', p: 0.6, mastered: true },
    ]);
    expect(rungs.at(-1)!.stage).toBe('length 16');
    expect([topRungText(CLIMB_SPACE, -1), topRungText(CLIMB_SPACE, 3), topRungText(CLIMB_SPACE, 14)]).toEqual([
      'none yet',
      'length 5',
      'length 16',
    ]);
    expect(climbText(CLIMB_SPACE, [-1, null, -1, 0, 3, null, 3, 1])).toBe('none yet → length 2 → length 5 → length 3');
    expect([topLength(CLIMB_SPACE, -1), topLength(CLIMB_SPACE, 7), topLength(GRID_SPACE, 1)]).toEqual([0, 9, null]);
    expect([isLadder(CLIMB_SPACE), isLadder(CHAIN_SPACE), isLadder(GRID_SPACE)]).toEqual([true, true, false]);
    // read off the space's own top half (spaces.ts hardHalf)
    const tops = CLIMB_SPACE.probe.filter((l) => CLIMB_SPACE.hardHalf(l)).map((l) => l.L + 2);
    expect(topHalfText(CLIMB_SPACE)).toBe(`lengths ${Math.min(...tops)}–${Math.max(...tops)}`);
    expect(topHalfText(CHAIN_SPACE)).toBe('lengths 6–9');
  });

  it('Compare designers on the climb runs round 4’s arms and fills each row’s rungs as its cycles arrive', async () => {
    const lab = new LabState();
    lab.settings = { ...lab.settings, space: 'climb', seeds: 1, cycles: 2, seed: 7 };
    const probe = (rung: number): ProbeReport => {
      const byStage = Array.from({ length: 15 }, (_, i) => (i <= rung ? 0.75 : 0));
      return { byLevel: byStage, byStage, hardHalf: 0, mean: 0.1, topRung: rung };
    };
    const cycle = (n: number, rung: number): CycleReport =>
      ({
        cycle: n,
        family: 4,
        designs: [{ noHint: [0, 1, 0] }, { noHint: [1, 1, 0] }],
        distinctLevels: 2,
        meanDifficulty: 0.2,
        medianRegret: 0,
        steps: { agent: 3, designer: 0 },
        probe: probe(rung),
      }) as unknown as CycleReport;
    const seen: { key: string; designer: string; estimator: string; rungs: (number | null)[] }[] = [];
    const fake: Partial<LabWorkerApi> = {
      screen: async (seed) => ({ seed, level: 'F4 L0 A3 D0', wins: 3, plays: 64, pass: true }),
      reset: async () => undefined,
      pause: () => undefined,
      run: async (key, settings, cycles, onEvent: (e: LabEvent) => void) => {
        onEvent({ type: 'probe0', key, probe: probe(-1), ms: 1 });
        const row = lab.compare.find((r) => `cmp:${r.seed}:${r.designer}` === key)!;
        for (let c = 1; c <= cycles; c++) {
          onEvent({ type: 'cycle', key, report: cycle(c, c) });
          seen.push({ key, designer: settings.designer, estimator: settings.estimator, rungs: [...row.topRung] });
        }
        return { cycles, paused: false };
      },
    };
    (lab as unknown as { api: unknown }).api = fake;
    await lab.compareDesigners();
    expect(lab.compareStatus).toBe('done');
    expect(lab.compareSpace).toBe('climb');
    expect(lab.compare.map((r) => r.designer)).toEqual(ROUND4_SPEC.arms);
    // the arm's designer and reward reach the worker, and the rungs grow cycle by cycle
    expect(seen.filter((x) => x.key === 'cmp:7:untrained').map((x) => [x.designer, x.estimator, x.rungs])).toEqual([
      ['untrained', 'learnability', [-1, 1]],
      ['untrained', 'learnability', [-1, 1, 2]],
    ]);
    const row = lab.compare[0]!;
    expect(row.stepsCurve).toEqual([0, 3, 6]);
    expect(row.plays).toBe(12);
    expect(row.stages.at(-1)).toEqual(probe(2).byStage);
    const r = compareResult(lab.compare, lab.screens, lab.compareSpace)!;
    expect(r.metric).toBe('topHalf');
    expect(r.arms).toEqual(ROUND4_SPEC.arms);
    expect(r.gainAtEqualSteps!.gated!.steps).toEqual([6]);
  });
});

describe("the designer's cycle in words", () => {
  it('names the levels written, the edit and the replays by their stage, the wins of each and the reward', async () => {
    const { designerNarration } = await import('../../src/state/lab.svelte.ts');
    const { SPACE } = await import('../../src/core/lab/spaces.ts');
    const lvl = (L: number) => ({ family: 4, L, A: 3, D: 0 });
    const d = (L: number | null, wins: number, extra: object = {}) => ({
      index: 0,
      text: L === null ? 'z' : 'x',
      explore: false,
      trained: false,
      level: L === null ? null : lvl(L),
      description: null,
      difficulty: null,
      noHint: Array.from({ length: 8 }, (_, j) => (j < wins ? 1 : 0)),
      withHint: [],
      winRate: wins / 8,
      regret: null,
      raw: 0,
      advantage: 0,
      ...extra,
    });
    const report = {
      cycle: 3,
      family: 4,
      designs: [d(1, 6, { replay: true }), d(2, 3), d(2, 4), d(3, 0, { explore: true })],
      meanDesignerReward: 0.8312,
    } as unknown as CycleReport;
    expect(designerNarration(SPACE.climb, report, 'learnability')).toBe(
      'Cycle 3: the designer wrote length 4 and length 4, edited up to length 5 and replayed length 3 from its buffer; the agent won 6 of 8, 3 of 8, 4 of 8 and 0 of 8 plays. Its reward (learnability) is highest for levels the agent wins about half the time — hard enough to teach, easy enough to win: 0.83 this cycle.',
    );
    expect(designerNarration(SPACE.climb, report, 'paper_blend', 'gated')).toMatch(
      /^Cycle 3: the gated designer wrote .* Its reward \(paper_blend\) scores each level by the agent's plays with and without the hint: 0\.83 this cycle\.$/,
    );
  });
});
