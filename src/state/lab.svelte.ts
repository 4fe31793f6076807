/// <reference types="vite/client" />
/**
 * The Lab in the browser, as a rune class: its settings (also in the URL hash, so a link reproduces
 * a run: same seed and settings → the same numbers), ▶ run / pause / reset, the cycles streamed from
 * the Lab's worker (workers/lab.worker.ts: LabLoop on the engine's fast path and the in-process
 * QuickJS sandbox), the measured time per cycle, the learning-curve check per family, "Compare
 * designers" (the dead-seed screen, then every pre-registered arm on `seeds` seeds from the seed, one
 * after another, judged by core/lab/compare.ts as `spade lab compare` judges them: on the climb round
 * 4's arms and its top-half metric, as `spade lab compare --space climb`) and "play this level
 * yourself" records for the Environments panel. Also the pure parts the panel shows: each probe as a
 * row of rungs with the highest one mastered, and the headline naming every arm that beat SPADE's
 * designer.
 *
 * ▶ runs the chosen designer and, beside it, random levels on the same seed (the same fresh agent),
 * a cycle of each in turn: a class sees the designer's levels and the agent's probe climb next to
 * what random levels do.
 *
 * The Lab's settings, their ranges and defaults are core/lab/settings.ts's table — the same
 * defaults as `spade lab` (one source); in the link they are the `lab.*` keys, read by the app's
 * one link parser (core/url_state.ts): the app's config has a `seed` of its own, and the Lab's keys
 * mean nothing elsewhere.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import { recordFromCode, type EnvRecord } from '../core/env/envset.ts';
import { serializeError } from '../core/errors.ts';
import { ARMS, compareRuns, compareSpecOf, type CompareResult, type SeedRun } from '../core/lab/compare.ts';
import { describeLevel, FAMILIES, hintText, levelCode } from '../core/lab/families.ts';
import { DESIGNER_ALIASES, MASTERED, type CycleReport, type ProbeReport, type ScreenResult } from '../core/lab/lab.ts';
import { clampLabChoices, labDefaults, type LabChoices } from '../core/lab/settings.ts';
import type { MeasuredComparison } from '../core/lab/measured.ts';
import { SPACE, spaceChance, type LevelSpace, type SpaceName } from '../core/lab/spaces.ts';
import type { LearningCheck } from '../lab/roles.ts';
import { hashSeed } from '../core/rng.ts';
import type { LabEvent, LabSettings, LabWorkerApi } from '../../workers/lab.worker.ts';

/** The Lab's starting settings: the schema's defaults (`spade lab`'s), the `browser` preset's seeds. */
export const LAB_DEFAULTS: Readonly<LabChoices> = Object.freeze(labDefaults('browser'));

/** Typed-in settings made valid: into their range, anything unreadable back to the Lab's default. */
const clean = (s: LabChoices): LabChoices => clampLabChoices(s, LAB_DEFAULTS);

const madeKey = (s: LabSettings) =>
  JSON.stringify([s.seed, s.designer, s.space, s.estimator, s.levels, s.plays, s.probePlays]);

/** The designer the run shows beside the chosen one. */
export const BESIDE = 'random' as const;

export interface CompareRow {
  seed: number;
  /** The arm (compare.ts ARMS). */
  designer: string;
  /** Probe mean return, cycle 0 (before training) then one per cycle (null: not probed that cycle). */
  curve: (number | null)[];
  hardCurve: (number | null)[];
  stages: (number[] | null)[];
  level: (number | null)[];
  /** Per cycle: the median regret of its designs, and its distinct levels. */
  medianRegret: number[];
  distinctLevels: number[];
  steps: { agent: number; designer: number };
  /** The agent's optimiser steps so far: 0 at cycle 0, then after each cycle (the comparison at equal steps). */
  stepsCurve: number[];
  /** The agent's unhinted plays so far (the sample budget). */
  plays: number;
  /** The highest rung the probe won at least half the time (−1: none), cycle 0 then one per cycle (null: not probed). */
  topRung: (number | null)[];
  status: 'waiting' | 'running' | 'done' | 'screened';
}

/** A row's curves and counts before its first cycle (a new row, or a paused one starting over). */
const noProgress = (): Omit<CompareRow, 'seed' | 'designer' | 'status'> => ({
  curve: [],
  hardCurve: [],
  stages: [],
  level: [],
  medianRegret: [],
  distinctLevels: [],
  steps: { agent: 0, designer: 0 },
  stepsCurve: [],
  plays: 0,
  topRung: [],
});

/** The finished rows as the comparison's per-seed runs. */
export const rowsToRuns = (rows: readonly CompareRow[]): SeedRun[] =>
  rows
    .filter((r) => r.status === 'done')
    .map((r) => ({
      seed: r.seed,
      designer: r.designer,
      curve: r.curve,
      hardCurve: r.hardCurve,
      stages: r.stages,
      level: r.level,
      medianRegret: r.medianRegret,
      distinctLevels: r.distinctLevels,
      steps: r.steps,
      stepsCurve: r.stepsCurve,
      plays: r.plays,
      topRung: r.topRung,
      seconds: 0,
    }));

/**
 * The comparison's figures and verdict (core/lab/compare.ts) once every row is done or screened; null
 * before. `space`: the space the rows were run on (its chance level and its comparison, compareSpecOf).
 */
export function compareResult(
  rows: readonly CompareRow[],
  screens: readonly ScreenResult[] = [],
  space: SpaceName = LAB_DEFAULTS.space,
): CompareResult | null {
  if (!rows.length || rows.some((r) => r.status !== 'done' && r.status !== 'screened')) return null;
  return compareRuns(
    rowsToRuns(rows),
    spaceChance(SPACE[space]),
    compareSpecOf(space),
    screens.filter((s) => !s.pass).map((s) => s.seed),
  );
}

/**
 * A pre-registration's held-out runs from round 4 on: src/core/lab/measured_prereg{4,5}.json, written from
 * `spade lab compare --combine … --json` by scripts/lab_measured.js. Loaded when the Lab panel opens, so a
 * first page load does not carry tens of runs of 400 cycles (~1.4 MB each file); null while its file does
 * not exist (that run not yet finished).
 */
// (import.meta.glob is Vite's, typed by vite/client: the reference lets the tests' Node config check this file too)
const PREREGS = import.meta.glob<MeasuredComparison>('../core/lab/measured_prereg*.json', { import: 'default' });
export async function loadPrereg(n: 4 | 5): Promise<MeasuredComparison | null> {
  const load = PREREGS[`../core/lab/measured_prereg${n}.json`];
  return load ? await load() : null;
}

/** What a comparison's gains read, in words: "top-half success" or "the probe". */
export const metricWords = (r: Pick<CompareResult, 'metric'>) =>
  r.metric === 'topHalf' ? 'top-half success' : 'the probe';

/**
 * Arms renamed since a run was recorded (pre-registration 3's `control` is today's `scripted`, its
 * `frontier` today's `sfl`): lab.ts's designer aliases whose arm is a scripted designer.
 */
const RENAMED: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(DESIGNER_ALIASES).filter(([old]) => Object.hasOwn(ARMS, old) && !ARMS[old]!.estimator),
);

/** An arm's name as the panel shows it: a renamed arm with its name today. */
export const armName = (arm: string) => (Object.hasOwn(RENAMED, arm) ? `${arm} (now ${RENAMED[arm]})` : arm);

const signed = (v: number) => `${v >= 0 ? '+' : '−'}${Math.abs(v).toFixed(2)}`;

/** The arms whose mean gain on the comparison's metric is above SPADE's designer's, highest first. */
export function armsAboveSpade(r: CompareResult): { arm: string; gain: number }[] {
  const own = r.gain[r.spadeDesigner]!.interval.mean;
  return r.arms
    .filter((a) => a !== r.spadeDesigner && r.gain[a]!.interval.mean > own)
    .map((arm) => ({ arm, gain: r.gain[arm]!.interval.mean }))
    .sort((a, b) => b.gain - a.gain);
}

/**
 * The comparison's headline: every arm that beat SPADE's designer — a higher mean gain on the
 * comparison's metric over its seeds — named with its gain, or that none did. Plain on purpose: the
 * intervals beside it say whether a difference could be luck.
 */
export function headline(r: CompareResult): string {
  const n = r.seeds.length;
  if (!n) return 'No seed has every arm yet.';
  const own = `${r.spadeDesigner}: ${signed(r.gain[r.spadeDesigner]!.interval.mean)} in ${metricWords(r)}, mean over ${n} seed${n === 1 ? '' : 's'}`;
  const above = armsAboveSpade(r);
  if (!above.length) return `No arm beat SPADE’s designer (${own}).`;
  const list = above.map((x) => `${armName(x.arm)} ${signed(x.gain)}`).join(', ');
  return `${above.length === 1 ? 'One arm' : `${above.length} arms`} beat SPADE’s designer (${own}): ${list}.`;
}

/** One rung of a probe: its stage name ("length 9"), the short label ("9"), its win rate and whether it is mastered. */
export interface Rung {
  stage: string;
  short: string;
  p: number;
  mastered: boolean;
}

/** A probe as a row of rungs (the space's stages, easiest first); mastered: won at least half the time (lab.ts MASTERED). */
export const rungsOf = (space: LevelSpace, probe: Pick<ProbeReport, 'byStage'>): Rung[] =>
  space.stages.map((stage, i) => {
    const p = probe.byStage[i] ?? 0;
    return { stage, short: stage.replace(/^length /, ''), p, mastered: p >= MASTERED };
  });

/** The highest rung mastered in words: its stage ("length 9", rung + 2 on the chain and the climb), or "none yet". */
export const topRungText = (space: LevelSpace, rung: number | null | undefined) =>
  rung === null || rung === undefined || rung < 0 ? 'none yet' : (space.stages[rung] ?? `rung ${rung}`);

/** Whether the space's stages are lengths (the chains and the climb: a ladder whose rung r is length r + 2). */
export const isLadder = (space: LevelSpace) => space.stages.every((st) => /^length \d+$/.test(st));

/** The length of the highest rung mastered (0: none yet), for a ladder's charts; null off a ladder. */
export function topLength(space: LevelSpace, rung: number | null | undefined): number | null {
  if (rung === null || rung === undefined || !isLadder(space)) return null;
  return rung < 0 ? 0 : Number(space.stages[rung]!.slice('length '.length));
}

/** The probe's top half as the stages it spans ("lengths 9–16" on the climb; "medium–hard" on the grid). */
export function topHalfText(space: LevelSpace): string {
  const st = [...new Set(space.probe.filter((l) => space.hardHalf(l)).map((l) => space.stageOf(l)))].sort(
    (x, y) => x - y,
  );
  const [lo, hi] = [space.stages[st[0]!] ?? '', space.stages[st.at(-1)!] ?? ''];
  if (isLadder(space)) return `lengths ${lo.slice(7)}–${hi.slice(7)}`;
  return lo === hi ? lo : `${lo}–${hi}`;
}

/**
 * A row's highest rung mastered at each probe so far, in words, oldest first, with repeats folded
 * ("none yet → length 3 → length 5"): the ladder climbing.
 */
export function climbText(space: LevelSpace, topRung: readonly (number | null)[]): string {
  const seen = topRung.filter((x): x is number => x !== null).map((x) => topRungText(space, x));
  return seen.filter((x, i) => i === 0 || x !== seen[i - 1]).join(' → ') || '–';
}

/**
 * What the designer did in a cycle and why, in words a newcomer reads: the levels it wrote (by their
 * stage, "length 4"), which were replays or its edit, how often the agent won each, and the reward
 * that follows. "Cycle 3: the designer wrote length 3, length 4, length 4 and edited length 5; the
 * agent won 6 of 8, 3 of 8, 4 of 8 and 0 of 8 plays. Its reward (learnability) is highest for levels
 * won about half the time: 0.83 this cycle."
 */
export function designerNarration(space: LevelSpace, r: CycleReport, estimator: string, designer = 'learned'): string {
  const name = (d: CycleReport['designs'][number]) =>
    d.level ? (space.stages[space.stageOf(d.level)] ?? d.description ?? '?') : `an invalid level “${d.text}”`;
  const list = (xs: string[]) => (xs.length < 2 ? (xs[0] ?? '') : `${xs.slice(0, -1).join(', ')} and ${xs.at(-1)}`);
  const own = r.designs.filter((d) => !d.replay && !d.explore).map(name);
  const parts = [
    ...(own.length ? [`wrote ${list(own)}`] : []),
    ...r.designs.filter((d) => d.explore).map((d) => `edited up to ${name(d)}`),
    ...(r.designs.some((d) => d.replay)
      ? [`replayed ${list(r.designs.filter((d) => d.replay).map(name))} from its buffer`]
      : []),
  ];
  const wins = list(
    r.designs
      .filter((d) => d.level)
      .map((d) => `${Math.round((d.winRate ?? 0) * d.noHint.length)} of ${d.noHint.length}`),
  );
  const why =
    estimator === 'learnability'
      ? 'Its reward (learnability) is highest for levels the agent wins about half the time — hard enough to teach, easy enough to win'
      : `Its reward (${estimator}) scores each level by the agent's plays with and without the hint`;
  const who = designer === 'learned' ? 'the designer' : `the ${designer} designer`;
  return `Cycle ${r.cycle}: ${who} ${list(parts)}; the agent won ${wins} plays. ${why}: ${r.meanDesignerReward.toFixed(2)} this cycle.`;
}

/** One line on the hint for a user: what it is, and who reads it. */
export const HINT_NOTE = `The hint is a strategy, never the episode's code (the lock's: "${hintText({ family: 2, L: 0, A: 3, D: 0 })}"); it is read by an oracle — a scripted player that follows it exactly, standing in for a pretrained model's instruction following (a fresh tiny model cannot read it) — so it never hurts, and regret is how much of the level the agent has still to learn.`;

/** One lab's stream on screen: its probe before training and its cycles. */
export interface LabRun {
  probe0: ProbeReport | null;
  history: CycleReport[];
}

export class LabState {
  settings = $state<LabChoices>({ ...LAB_DEFAULTS });
  status = $state<'idle' | 'running' | 'paused' | 'done' | 'error'>('idle');
  error = $state<string | null>(null);
  /** The chosen designer's run, and random levels' beside it (same seed). */
  main = $state<LabRun>({ probe0: null, history: [] });
  beside = $state<LabRun>({ probe0: null, history: [] });
  /** The cycle in flight: sandbox episodes started of about how many. */
  progress = $state<{ cycle: number; episodes: number; of: number } | null>(null);
  /** A pause was asked for; the cycle in flight finishes first. */
  pausing = $state(false);
  compare = $state<CompareRow[]>([]);
  screens = $state<ScreenResult[]>([]);
  compareStatus = $state<'idle' | 'running' | 'paused' | 'done' | 'error'>('idle');
  /** The space the comparison on screen was made on (its arms and metric follow it: compareSpecOf). */
  compareSpace = $state<SpaceName>(LAB_DEFAULTS.space);
  /** The learning-curve checks of this seed, one per family of the space. */
  checks = $state<LearningCheck[]>([]);
  checkStatus = $state<'idle' | 'running' | 'done' | 'error'>('idle');
  /** Link warnings (bad lab fields). */
  warnings = $state<string[]>([]);

  /** The settings the run on screen was made with (null before any run). */
  private made = $state<string | null>(null);
  private runSeed = 0;
  private compareMade: string | null = null;
  private api: Comlink.Remote<LabWorkerApi> | null = null;

  /** The chosen designer's cycles (the charts' and the cycle list's). */
  history = $derived(this.main.history);
  probe0 = $derived(this.main.probe0);
  /** Mean measured seconds per cycle of this run, both designers' cycles (null before the first ends). */
  secondsPerCycle = $derived.by(() => {
    const all = [...this.main.history, ...this.beside.history];
    return all.length ? all.reduce((a, h) => a + h.ms, 0) / all.length / 1000 : null;
  });
  busy = $derived(this.status === 'running' || this.compareStatus === 'running' || this.checkStatus === 'running');
  /** The settings changed since the run on screen was made: ▶ starts a new one. */
  stale = $derived(this.made !== null && this.made !== madeKey(lab(this.settings)));
  /** Whether random levels run beside the chosen designer (not when it is random itself). */
  hasBeside = $derived(this.settings.designer !== BESIDE);

  /** The Lab's worker (started on first use): one lab runs at a time, the race's included. */
  remote(): Comlink.Remote<LabWorkerApi> {
    if (!this.api) {
      const worker = new Worker(new URL('../../workers/lab.worker.ts', import.meta.url), {
        type: 'module',
        name: 'spade-lab',
      });
      // a worker that fails to start never answers: say so instead of spinning
      worker.addEventListener('error', (e) => {
        this.error = `The lab's worker failed: ${e.message || 'it could not start'}. Reload the page to try again.`;
        this.status = this.status === 'running' ? 'error' : this.status;
        this.compareStatus = this.compareStatus === 'running' ? 'error' : this.compareStatus;
      });
      this.api = Comlink.wrap<LabWorkerApi>(worker);
    }
    return this.api;
  }

  /**
   * Take a link's `lab.*` settings (the app's one parse, state/wiring.svelte.ts; the others keep
   * their values) and what it got wrong in them, as warnings.
   */
  applyLink(fields: Partial<LabChoices>, problems: readonly string[]): void {
    this.warnings = [...new Set(problems)];
    if (!Object.keys(fields).length) return;
    this.settings = { ...this.settings, ...fields };
  }

  /** The settings a link carries (core/url_state.ts's formatUrlState writes those that differ from LAB_DEFAULTS). */
  linkChoices(): LabChoices {
    return clean(this.settings);
  }

  /**
   * ▶: continue the run on screen up to `cycles`, or start a new one (first run, or the settings
   * changed): a cycle of the chosen designer, then one of random levels beside it, in turn.
   */
  async start(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    const mk = madeKey(lab(s));
    if (this.made !== mk) {
      // new settings: a new run (the comparison, made with its own settings, stays)
      await this.api?.reset('main');
      await this.api?.reset('beside');
      this.main = { probe0: null, history: [] };
      this.beside = { probe0: null, history: [] };
    }
    this.made = mk;
    this.runSeed = s.seed;
    this.status = 'running';
    this.error = null;
    try {
      await this.remote().pause(false); // a pause left from an earlier run does not stop this one
      for (let c = this.main.history.length + 1; c <= s.cycles; c++) {
        const r = await this.remote().run('main', lab(s), c, Comlink.proxy(this.onEvent));
        if (r.paused) return void (this.status = 'paused');
        if (this.hasBeside && this.beside.history.length < c) {
          const b = await this.remote().run('beside', lab({ ...s, designer: BESIDE }), c, Comlink.proxy(this.onEvent));
          if (b.paused) return void (this.status = 'paused');
        }
      }
      this.status = 'done';
    } catch (err) {
      this.status = 'error';
      this.error = serializeError(err).message;
    } finally {
      this.progress = null;
      this.pausing = false;
    }
  }

  private onEvent = (e: LabEvent) => {
    const target = e.key === 'main' ? this.main : e.key === 'beside' ? this.beside : null;
    if (target) {
      if (e.type === 'probe0') target.probe0 = e.probe;
      else if (e.type === 'progress') this.progress = { cycle: e.cycle, episodes: e.episodes, of: e.of };
      else {
        target.history = [...target.history, e.report];
        this.progress = null;
      }
      return;
    }
    const row = this.compare.find((r) => compareKey(r) === e.key);
    if (!row) return;
    if (e.type === 'probe0') {
      row.curve = [e.probe.mean];
      row.hardCurve = [e.probe.hardHalf];
      row.stages = [e.probe.byStage];
      row.topRung = [e.probe.topRung];
      row.stepsCurve = [0];
    } else if (e.type === 'cycle') {
      const p = e.report.probe;
      row.curve = [...row.curve, p?.mean ?? null];
      row.hardCurve = [...row.hardCurve, p?.hardHalf ?? null];
      row.stages = [...row.stages, p?.byStage ?? null];
      row.topRung = [...row.topRung, p?.topRung ?? null];
      row.stepsCurve = [...row.stepsCurve, (row.stepsCurve.at(-1) ?? 0) + e.report.steps.agent];
      row.plays += e.report.designs.reduce((a, d) => a + d.noHint.length, 0);
      row.level = [...row.level, e.report.meanDifficulty];
      row.medianRegret = [...row.medianRegret, e.report.medianRegret];
      row.distinctLevels = [...row.distinctLevels, e.report.distinctLevels];
      row.steps = {
        agent: row.steps.agent + e.report.steps.agent,
        designer: row.steps.designer + e.report.steps.designer,
      };
    } else this.progress = { cycle: e.cycle, episodes: e.episodes, of: e.of };
  };

  /** Stop after the cycle in flight (the run or the comparison). */
  pause(): void {
    if (!this.busy) return;
    this.pausing = true;
    void this.api?.pause();
  }

  /** Forget the run on screen (and the comparison); nothing runs until ▶. */
  async reset(): Promise<void> {
    if (this.busy) return;
    await this.api?.reset();
    this.made = null;
    this.compareMade = null;
    this.main = { probe0: null, history: [] };
    this.beside = { probe0: null, history: [] };
    this.progress = null;
    this.status = 'idle';
    this.error = null;
    this.compare = [];
    this.screens = [];
    this.compareStatus = 'idle';
    this.compareSpace = LAB_DEFAULTS.space;
    this.checks = [];
    this.checkStatus = 'idle';
  }

  /**
   * The learning-curve check of every family of the space on this seed, for `cycles` cycles: the
   * fixed designer on the family's easiest level, every play on it (must reach mastery before a
   * designer comparison means anything).
   */
  async runChecks(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    this.checks = [];
    this.checkStatus = 'running';
    this.error = null;
    try {
      for (const family of SPACE[s.space].families)
        this.checks = [...this.checks, await this.remote().check(family, s.seed, s.cycles, s.space)];
      this.checkStatus = 'done';
    } catch (err) {
      this.checkStatus = 'error';
      this.error = serializeError(err).message;
    }
  }

  /**
   * Screen `seeds` seeds from this seed, then run every arm of the space's comparison (compareSpecOf)
   * on those kept, with these settings, one after another (continuing a paused comparison).
   */
  async compareDesigners(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    const key = JSON.stringify([madeKey(lab(s)), s.cycles, s.seeds]);
    if (this.compareMade !== key) {
      this.compare = Array.from({ length: s.seeds }, (_, i) => s.seed + i).flatMap((seed) =>
        compareSpecOf(s.space).arms.map((designer) => ({
          seed,
          designer,
          ...noProgress(),
          status: 'waiting' as const,
        })),
      );
      this.screens = [];
      this.compareMade = key;
      this.compareSpace = s.space;
    }
    this.compareStatus = 'running';
    this.error = null;
    try {
      await this.remote().pause(false);
      for (const row of this.compare) {
        if (row.status === 'done' || row.status === 'screened') continue;
        let screen = this.screens.find((x) => x.seed === row.seed);
        if (!screen) {
          screen = await this.remote().screen(row.seed, s.space);
          this.screens = [...this.screens, screen];
        }
        if (!screen.pass) {
          row.status = 'screened';
          continue;
        }
        row.status = 'running';
        Object.assign(row, noProgress());
        await this.api?.reset(compareKey(row)); // a paused row starts over: its events were dropped with its state
        const arm = ARMS[row.designer]!;
        const r = await this.remote().run(
          compareKey(row),
          lab({ ...s, seed: row.seed, designer: arm.designer, estimator: arm.estimator ?? s.estimator }),
          s.cycles,
          Comlink.proxy(this.onEvent),
        );
        if (r.paused) {
          row.status = 'waiting';
          this.compareStatus = 'paused';
          return;
        }
        row.status = 'done';
      }
      this.compareStatus = 'done';
    } catch (err) {
      this.compareStatus = 'error';
      this.error = serializeError(err).message;
    } finally {
      this.progress = null;
      this.pausing = false;
    }
  }

  /**
   * A designed level as an Environments-panel record and the seed of the agent's first unhinted
   * play of it (lab.ts's `${seed}:env:${cycle}:${index}:0`), for "play this level yourself".
   */
  playable(report: CycleReport, index: number): { record: EnvRecord; seed: number } | null {
    const d = report.designs[index];
    if (!d?.level) return null;
    const code = levelCode(d.level);
    const record = recordFromCode(code, {
      id: `lab:${describeLevel(d.level).replace(/ /g, '')}`,
      title: `Lab ${FAMILIES[d.level.family]!.name} ${describeLevel(d.level)} (cycle ${report.cycle})`,
      skill: 'micro',
      difficulty: (d.difficulty ?? 0) < 1 / 3 ? 'easy' : (d.difficulty ?? 0) < 2 / 3 ? 'medium' : 'hard',
      hint: hintText(d.level),
      stats: {
        plays: d.noHint.length + d.withHint.length,
        winRate: d.winRate ?? undefined,
        winRateHinted: d.withHint.length ? d.withHint.reduce((a, b) => a + b, 0) / d.withHint.length : undefined,
        regret: d.regret ?? undefined,
        designerReward: d.raw,
        checked: true,
      },
    });
    return { record, seed: hashSeed(`${this.runSeed}:env:${report.cycle}:${index}:0`) };
  }
}

/** The worker's key of a comparison row. */
const compareKey = (r: Pick<CompareRow, 'seed' | 'designer'>) => `cmp:${r.seed}:${r.designer}`;

/** The worker's part of the settings (the curriculum only for the hand designer, whose levels it is). */
export function lab(s: LabChoices): LabSettings {
  return {
    ...(s.designer === 'hand' ? { curriculum: s.curriculum } : {}),
    seed: s.seed,
    designer: s.designer,
    space: s.space,
    estimator: s.estimator,
    levels: s.levels,
    plays: s.plays,
    probePlays: s.probePlays,
    plannedCycles: s.cycles, // the ladder spreads its rungs over the run (not part of madeKey: more cycles continue it)
  };
}
