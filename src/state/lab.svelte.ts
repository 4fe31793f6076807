/**
 * The micro self-play lab in the browser (issue 15), as a rune class: its settings (also in the URL
 * hash, so a link reproduces a run: same seed and settings → the same numbers), ▶ run / pause /
 * reset, the cycles streamed from the lab worker (workers/lab.worker.ts: MicroLab on the engine's
 * CPU references and the in-process QuickJS sandbox), the measured time per cycle, "Compare
 * designers" (the three designers on the same seed, one after another) with a plain verdict, and
 * "play this level yourself" records for the Environments panel.
 *
 * The lab's URL fields are its own small codec (lab.seed, lab.cycles, lab.designer, lab.K, lab.N,
 * lab.P): the app's config has a `seed` of its own, and the lab's fields mean nothing elsewhere.
 */
import * as Comlink from 'comlink';
import '../../workers/rpc.ts';
import { recordFromCode, type EnvRecord } from '../core/env/envset.ts';
import { serializeError } from '../core/errors.ts';
import { describeLevel, difficulty, FAMILIES, levelCode } from '../core/micro/families.ts';
import {
  bucketOf,
  DESIGNERS,
  PROBE_LEVELS,
  type CycleReport,
  type DesignerKind,
  type ProbeReport,
} from '../core/micro/lab.ts';
import { hashSeed } from '../core/rng.ts';
import type { LabEvent, LabSettings, LabWorkerApi } from '../../workers/lab.worker.ts';

export interface LabUrlSettings extends LabSettings {
  cycles: number;
}

/**
 * Defaults for a browser tab: seed 1 (the measured run of docs/micro.md); 10 cycles, K = 4 levels
 * (enough for the designer's centring), N = 2 plays per level and condition and 2 probe plays per
 * probe level (half the CLI's N = 4: a cycle is ~40 episodes instead of ~70, about 10 s on a
 * loaded 2-core machine, a few seconds on a laptop).
 */
export const LAB_DEFAULTS: LabUrlSettings = {
  seed: 1,
  cycles: 10,
  designer: 'regret',
  levels: 4,
  plays: 2,
  probePlays: 2,
};

/** Bounds of each numeric field (a link outside them is ignored, with a warning). */
export const LAB_BOUNDS = {
  seed: [0, 2 ** 31 - 1],
  cycles: [1, 200],
  levels: [1, 8],
  plays: [1, 8],
  probePlays: [1, 4],
} as const satisfies Record<string, readonly [number, number]>;

/** URL key per field. */
const KEYS = {
  seed: 'lab.seed',
  cycles: 'lab.cycles',
  designer: 'lab.designer',
  levels: 'lab.K',
  plays: 'lab.N',
  probePlays: 'lab.P',
} as const satisfies Record<keyof LabUrlSettings, string>;

/** The lab fields a hash validly sets (absent or bad ones are missing), with a warning per bad one. */
export function parseLabHash(hash: string): { fields: Partial<LabUrlSettings>; warnings: string[] } {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const fields: Partial<LabUrlSettings> = {};
  const warnings: string[] = [];
  const designer = params.get(KEYS.designer);
  if (designer !== null) {
    if ((DESIGNERS as readonly string[]).includes(designer)) fields.designer = designer as DesignerKind;
    else warnings.push(`ignored from the link: ${KEYS.designer} must be one of ${DESIGNERS.join(', ')}`);
  }
  for (const k of Object.keys(LAB_BOUNDS) as (keyof typeof LAB_BOUNDS)[]) {
    const raw = params.get(KEYS[k]);
    if (raw === null) continue;
    const v = Number(raw);
    const [lo, hi] = LAB_BOUNDS[k];
    if (raw.trim() !== '' && Number.isInteger(v) && v >= lo && v <= hi) fields[k] = v;
    else warnings.push(`ignored from the link: ${KEYS[k]} must be a whole number from ${lo} to ${hi}`);
  }
  return { fields, warnings };
}

/** The lab's part of the hash (no "#"); fields equal to their default are left out. */
export function formatLabHash(s: LabUrlSettings): string {
  const params = new URLSearchParams();
  for (const k of Object.keys(KEYS) as (keyof LabUrlSettings)[])
    if (s[k] !== LAB_DEFAULTS[k]) params.set(KEYS[k], String(s[k]));
  return params.toString();
}

/** Whole numbers within bounds; anything else falls back to the default (the inputs are free text). */
export function cleanSettings(s: LabUrlSettings): LabUrlSettings {
  const out = { ...s };
  for (const k of Object.keys(LAB_BOUNDS) as (keyof typeof LAB_BOUNDS)[]) {
    const [lo, hi] = LAB_BOUNDS[k];
    const v = Number(s[k]);
    out[k] = Number.isFinite(v) ? Math.min(hi, Math.max(lo, Math.round(v))) : LAB_DEFAULTS[k];
  }
  if (!DESIGNERS.includes(out.designer)) out.designer = LAB_DEFAULTS.designer;
  return out;
}

const madeKey = (s: LabSettings) => JSON.stringify([s.seed, s.designer, s.levels, s.plays, s.probePlays]);

export interface CompareRow {
  designer: DesignerKind;
  /** Probe mean return, cycle 0 (before training) then one per cycle. */
  curve: number[];
  status: 'waiting' | 'running' | 'done';
}

/**
 * Gaps of at most this many probe plays count as a tie. The probe's seeds are fixed, so one policy
 * always scores the same; but the three designers train three different agents, and a play or two
 * either way is what training noise alone moves at this scale (docs/micro.md's measured runs).
 */
export const NOISE_PLAYS = 2;

/**
 * The comparison's verdict in words, from the last probe of each designer: each baseline's gap to
 * regret in probe plays, a gap of ≤ NOISE_PLAYS called within the noise. Null until all three are done.
 */
export function compareVerdict(rows: CompareRow[], probePlays: number): string | null {
  if (rows.length < 3 || rows.some((r) => r.status !== 'done' || r.curve.length < 2)) return null;
  const last = Object.fromEntries(rows.map((r) => [r.designer, r.curve.at(-1)!])) as Record<DesignerKind, number>;
  const cycles = rows[0]!.curve.length - 1;
  const onePlay = 1 / (PROBE_LEVELS.length * probePlays);
  const f = (x: number) => x.toFixed(2);
  const plays = (n: number) => `${n} probe play${n === 1 ? '' : 's'}`;
  const head = `After ${cycles} cycle${cycles === 1 ? '' : 's'} the probe return is regret ${f(last.regret)}, random ${f(last.random)}, fixed ${f(last.fixed)} (one probe play = ${f(onePlay)}).`;
  const gaps = (['random', 'fixed'] as const).map((d) => ({ d, n: Math.round((last.regret - last[d]) / onePlay) }));
  if (gaps.every((g) => g.n > NOISE_PLAYS))
    return `${head} The regret designer beat both baselines on the probe set (by ${gaps.map((g) => `${plays(g.n)} over ${g.d}`).join(' and ')}).`;
  if (gaps.every((g) => g.n < -NOISE_PLAYS))
    return `${head} The regret designer did worse than both baselines on the probe set.`;
  const parts = gaps.map((g) =>
    g.n > NOISE_PLAYS
      ? `it beat ${g.d} (by ${plays(g.n)})`
      : g.n < -NOISE_PLAYS
        ? `${g.d} did better (by ${plays(-g.n)})`
        : `against ${g.d} the gap is ${plays(Math.abs(g.n))}, within the noise`,
  );
  return `${head} The regret designer did not clearly beat both baselines: ${parts.join('; ')}.`;
}

export class LabState {
  settings = $state<LabUrlSettings>({ ...LAB_DEFAULTS });
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
  busy = $derived(this.status === 'running' || this.compareStatus === 'running');
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

  /** Apply the lab fields of a location hash (others keep their values). */
  applyHash(hash: string): void {
    const { fields, warnings } = parseLabHash(hash);
    this.warnings = warnings;
    if (!Object.keys(fields).length) return;
    this.settings = { ...this.settings, ...fields };
  }

  hash(): string {
    return formatLabHash(cleanSettings(this.settings));
  }

  /** ▶: continue the run on screen up to `cycles`, or start a new one (first run, or the settings changed). */
  async start(): Promise<void> {
    if (this.busy) return;
    this.settings = cleanSettings(this.settings);
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
    const row = this.compare.find((r) => `cmp:${r.designer}` === e.key);
    if (!row) return;
    if (e.type === 'probe0') row.curve = [e.probe.mean];
    else if (e.type === 'cycle') row.curve = [...row.curve, e.report.probe.mean];
    else this.progress = { cycle: e.cycle, episodes: e.episodes, of: e.of };
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
  }

  /**
   * Run the three designers on this seed and settings, one after another (continuing a paused
   * comparison). The run on screen is reused for its own designer when it already has the cycles.
   */
  async compareDesigners(): Promise<void> {
    if (this.busy) return;
    this.settings = cleanSettings(this.settings);
    const s = $state.snapshot(this.settings);
    const key = JSON.stringify([madeKey(s), s.cycles]);
    if (this.compareMade !== key) {
      this.compare = DESIGNERS.map((designer) => ({ designer, curve: [], status: 'waiting' }));
      this.compareMade = key;
    }
    this.compareStatus = 'running';
    this.error = null;
    try {
      for (const row of this.compare) {
        if (row.status === 'done') continue;
        const own = this.made === madeKey({ ...s, designer: row.designer }) && this.history.length >= s.cycles;
        if (own && this.probe0) {
          row.curve = [this.probe0.mean, ...this.history.slice(0, s.cycles).map((h) => h.probe.mean)];
          row.status = 'done';
          continue;
        }
        row.status = 'running';
        const r = await this.remote().run(
          `cmp:${row.designer}`,
          lab({ ...s, designer: row.designer }),
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
      hint: 'The code itself ("code 314"): the agent sees it after HINT: in the first observation.',
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

/** The worker's part of the settings. */
function lab(s: LabUrlSettings): LabSettings {
  return { seed: s.seed, designer: s.designer, levels: s.levels, plays: s.plays, probePlays: s.probePlays };
}
