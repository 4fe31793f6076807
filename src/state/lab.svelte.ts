/**
 * The micro self-play lab in the browser, as a rune class: its settings (also in the URL hash, so a
 * link reproduces a run: same seed and settings → the same numbers), ▶ run / pause / reset, the
 * cycles streamed from the lab worker (workers/lab.worker.ts: MicroLab on the engine's CPU
 * references and the in-process QuickJS sandbox), the measured time per cycle, the learning-curve
 * check per family, "Compare designers" (the four designers on `seeds` seeds from the seed, one
 * after another, judged by core/micro/compare.ts as `spade micro compare` judges them) and
 * "play this level yourself" records for the Environments panel.
 *
 * The lab's settings, their ranges and defaults are core/micro/settings.ts's table (the `browser`
 * preset); in the link they are the `lab.*` keys (lab.seed, lab.cycles, lab.designer, lab.K, lab.N,
 * lab.P, lab.S), read by the app's one link parser (core/url_state.ts): the app's config has a
 * `seed` of its own, and the lab's keys mean nothing elsewhere.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import { recordFromCode, type EnvRecord } from '../core/env/envset.ts';
import { serializeError } from '../core/errors.ts';
import { compareRuns, type CompareResult, type SeedRun } from '../core/micro/compare.ts';
import { describeLevel, difficulty, FAMILIES, hintText, levelCode, MAIN_FAMILIES } from '../core/micro/families.ts';
import {
  bucketOf,
  DESIGNERS,
  PROBE_LEVELS,
  probeChance,
  type CycleReport,
  type DesignerKind,
  type ProbeReport,
} from '../core/micro/lab.ts';
import { clampLabChoices, labDefaults, type LabChoices } from '../core/micro/settings.ts';
import { formatLabLink, parseUrlState } from '../core/url_state.ts';
import type { LearningCheck } from '../engine/engine_api.ts';
import { hashSeed } from '../core/rng.ts';
import type { LabEvent, LabSettings, LabWorkerApi } from '../../workers/lab.worker.ts';

/** The Lab's starting settings: the `browser` preset of the lab's schema (core/micro/settings.ts). */
export const LAB_DEFAULTS: Readonly<LabChoices> = Object.freeze(labDefaults('browser'));

/** Typed-in settings made valid: into their range, anything unreadable back to the Lab's default. */
const clean = (s: LabChoices): LabChoices => clampLabChoices(s, LAB_DEFAULTS);

const madeKey = (s: LabSettings) => JSON.stringify([s.seed, s.designer, s.levels, s.plays, s.probePlays]);

export interface CompareRow {
  seed: number;
  designer: DesignerKind;
  /** Probe mean return, cycle 0 (before training) then one per cycle. */
  curve: number[];
  /** Per cycle: the median regret of its designs, and its distinct levels. */
  medianRegret: number[];
  distinctLevels: number[];
  status: 'waiting' | 'running' | 'done';
}

/** The comparison's chance line: a uniform random player's probe return. */
export const PROBE_CHANCE = probeChance(PROBE_LEVELS);

/** The finished rows as the comparison's per-seed runs. */
export const rowsToRuns = (rows: readonly CompareRow[]): SeedRun[] =>
  rows
    .filter((r) => r.status === 'done')
    .map((r) => ({
      seed: r.seed,
      designer: r.designer,
      curve: r.curve,
      medianRegret: r.medianRegret,
      distinctLevels: r.distinctLevels,
      seconds: 0,
    }));

/** The comparison's figures and verdict (core/micro/compare.ts) once every row is done; null before. */
export function compareResult(rows: readonly CompareRow[]): CompareResult | null {
  if (!rows.length || rows.some((r) => r.status !== 'done')) return null;
  return compareRuns(rowsToRuns(rows), PROBE_CHANCE);
}

/** One line on the hint for a user: what it is per family, and who reads it. */
export const HINT_NOTE = `The hint is a strategy, never the episode's code (e.g. mirror A = 4: "${hintText({ family: 1, L: 0, A: 2, D: 0 })}"); it is read by an oracle — a scripted player that follows it exactly, standing in for a pretrained model's instruction following (a fresh tiny model cannot read it) — so it never hurts, and regret is how much of the level the agent has still to learn.`;

export class LabState {
  settings = $state<LabChoices>({ ...LAB_DEFAULTS });
  status = $state<'idle' | 'running' | 'paused' | 'done' | 'error'>('idle');
  error = $state<string | null>(null);
  /** The probe before any training. */
  probe0 = $state<ProbeReport | null>(null);
  history = $state<CycleReport[]>([]);
  /** The cycle in flight: sandbox episodes started of about how many. */
  progress = $state<{ cycle: number; episodes: number; of: number } | null>(null);
  /** A pause was asked for; the cycle in flight finishes first. */
  pausing = $state(false);
  compare = $state<CompareRow[]>([]);
  compareStatus = $state<'idle' | 'running' | 'paused' | 'done' | 'error'>('idle');
  /** The learning-curve checks of this seed, one per main family. */
  checks = $state<LearningCheck[]>([]);
  checkStatus = $state<'idle' | 'running' | 'done' | 'error'>('idle');
  /** Link warnings (bad lab fields). */
  warnings = $state<string[]>([]);

  /** The settings the run on screen was made with (null before any run). */
  private made = $state<string | null>(null);
  private runSeed = 0;
  private compareMade: string | null = null;
  private api: Comlink.Remote<LabWorkerApi> | null = null;

  /** Mean measured seconds per cycle of this run (null before the first cycle ends). */
  secondsPerCycle = $derived(
    this.history.length ? this.history.reduce((a, h) => a + h.ms, 0) / this.history.length / 1000 : null,
  );
  busy = $derived(this.status === 'running' || this.compareStatus === 'running' || this.checkStatus === 'running');
  /** The settings changed since the run on screen was made: ▶ starts a new one. */
  stale = $derived(this.made !== null && this.made !== madeKey(this.settings));

  private remote(): Comlink.Remote<LabWorkerApi> {
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

  /** Apply the lab fields of a location hash (others keep their values); its `lab.*` problems become warnings. */
  applyHash(hash: string): void {
    const { fields, problems } = parseUrlState(hash);
    this.warnings = [...new Set(problems.filter((p) => p.scope === 'lab').map((p) => p.message))];
    if (!Object.keys(fields.lab).length) return;
    this.settings = { ...this.settings, ...fields.lab };
  }

  /** The lab's part of the hash (no "#"): the settings that differ from the Lab's defaults. */
  hash(): string {
    return formatLabLink(clean(this.settings), LAB_DEFAULTS);
  }

  /** ▶: continue the run on screen up to `cycles`, or start a new one (first run, or the settings changed). */
  async start(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    if (this.made !== madeKey(s)) {
      // new settings: a new run (the comparison, made with its own settings, stays)
      await this.api?.reset('main');
      this.history = [];
      this.probe0 = null;
    }
    this.made = madeKey(s);
    this.runSeed = s.seed;
    this.status = 'running';
    this.error = null;
    try {
      const r = await this.remote().run('main', lab(s), s.cycles, Comlink.proxy(this.onEvent));
      this.status = r.paused ? 'paused' : 'done';
    } catch (err) {
      this.status = 'error';
      this.error = serializeError(err).message;
    } finally {
      this.progress = null;
      this.pausing = false;
    }
  }

  private onEvent = (e: LabEvent) => {
    if (e.key === 'main') {
      if (e.type === 'probe0') this.probe0 = e.probe;
      else if (e.type === 'progress') this.progress = { cycle: e.cycle, episodes: e.episodes, of: e.of };
      else {
        this.history = [...this.history, e.report];
        this.progress = null;
      }
      return;
    }
    const row = this.compare.find((r) => compareKey(r) === e.key);
    if (!row) return;
    if (e.type === 'probe0') row.curve = [e.probe.mean];
    else if (e.type === 'cycle') {
      row.curve = [...row.curve, e.report.probe.mean];
      row.medianRegret = [...row.medianRegret, e.report.medianRegret];
      row.distinctLevels = [...row.distinctLevels, e.report.distinctLevels];
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
    this.history = [];
    this.probe0 = null;
    this.progress = null;
    this.status = 'idle';
    this.error = null;
    this.compare = [];
    this.compareStatus = 'idle';
    this.checks = [];
    this.checkStatus = 'idle';
  }

  /**
   * The learning-curve check of every main family on this seed, for `cycles` cycles: the fixed
   * designer on the family's easiest level, every play on it (must reach mastery before a designer
   * comparison means anything).
   */
  async runChecks(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    this.checks = [];
    this.checkStatus = 'running';
    this.error = null;
    try {
      for (const family of MAIN_FAMILIES)
        this.checks = [...this.checks, await this.remote().check(family, s.seed, s.cycles)];
      this.checkStatus = 'done';
    } catch (err) {
      this.checkStatus = 'error';
      this.error = serializeError(err).message;
    }
  }

  /**
   * Run the four designers on `seeds` seeds from this seed with these settings, one after another
   * (continuing a paused comparison). The run on screen is reused for its own seed and designer
   * when it already has the cycles.
   */
  async compareDesigners(): Promise<void> {
    if (this.busy) return;
    this.settings = clean(this.settings);
    const s = $state.snapshot(this.settings);
    const key = JSON.stringify([madeKey(s), s.cycles, s.seeds]);
    if (this.compareMade !== key) {
      this.compare = Array.from({ length: s.seeds }, (_, i) => s.seed + i).flatMap((seed) =>
        DESIGNERS.map((designer) => ({
          seed,
          designer,
          curve: [],
          medianRegret: [],
          distinctLevels: [],
          status: 'waiting' as const,
        })),
      );
      this.compareMade = key;
    }
    this.compareStatus = 'running';
    this.error = null;
    try {
      for (const row of this.compare) {
        if (row.status === 'done') continue;
        const own =
          this.made === madeKey({ ...s, seed: row.seed, designer: row.designer }) && this.history.length >= s.cycles;
        if (own && this.probe0) {
          const h = this.history.slice(0, s.cycles);
          row.curve = [this.probe0.mean, ...h.map((c) => c.probe.mean)];
          row.medianRegret = h.map((c) => c.medianRegret);
          row.distinctLevels = h.map((c) => c.distinctLevels);
          row.status = 'done';
          continue;
        }
        row.status = 'running';
        row.curve = [];
        row.medianRegret = [];
        row.distinctLevels = [];
        await this.api?.reset(compareKey(row)); // a paused row starts over: its events were dropped with its state
        const r = await this.remote().run(
          compareKey(row),
          lab({ ...s, seed: row.seed, designer: row.designer }),
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
      title: `micro ${FAMILIES[d.level.family]!.name} ${describeLevel(d.level)} (lab cycle ${report.cycle})`,
      skill: 'micro',
      difficulty: bucketOf(difficulty(d.level)),
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

/** The worker's part of the settings. */
function lab(s: LabChoices): LabSettings {
  return { seed: s.seed, designer: s.designer, levels: s.levels, plays: s.plays, probePlays: s.probePlays };
}
