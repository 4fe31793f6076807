/**
 * "You design the curriculum", as a rune class: a person (or a class voting) picks the levels of each
 * cycle on the climb — rungs chosen, spread over the K slots (core/lab/hand.ts spreadPicks) — the
 * agent trains on exactly those (the Lab's `hand` designer), and after each of the person's cycles
 * SPADE's designer, random levels and the gated ladder play a cycle of their own on the same seed,
 * K × N plays and probe: a race, scored by the probe (hand.ts RaceScore), probed after every cycle so
 * the ladder each arm holds is on screen as it changes.
 *
 * The curriculum played is the Lab's `curriculum` setting, so the app's link carries it (`lab.hand`,
 * with `lab.who`); opening that link loads it as a recorded race, and ▶ Replay plays every arm
 * through it to the same numbers. The class board keeps curricula pasted in as links (IndexedDB,
 * settings/classBoard), replays each on demand and exports JSON or CSV.
 *
 * Runs on the Lab's worker (LabState.remote): one lab runs at a time, so the race and the Lab's own
 * run never overlap; ❚❚ pauses either after the cycle in flight.
 */
import * as Comlink from 'comlink';
import { serializeError } from '../core/errors.ts';
import {
  curriculumCycles,
  curriculumProblem,
  formatCurriculum,
  RACE_ARMS,
  raceOrder,
  spreadPicks,
  type BoardRow,
  type RaceArm,
  type RaceScore,
} from '../core/lab/hand.ts';
import type { CycleReport, ProbeReport } from '../core/lab/lab.ts';
import { SPACE } from '../core/lab/spaces.ts';
import type { Store } from '../core/store.ts';
import { parseUrlState } from '../core/url_state.ts';
import type { LabEvent } from '../../workers/lab.worker.ts';
import { lab as workerSettings, LAB_DEFAULTS, type LabState } from './lab.svelte.ts';

/** What the race says when the Lab's own run (▶, a comparison or a check) holds the worker. */
export const LAB_BUSY =
  "The Lab's own run is using the worker: press ❚❚ Pause above (it stops after the cycle in flight), then play the race.";

/** The race's ladder: the climb (15 rungs, lengths 2–16). */
export const RACE_SPACE = SPACE.climb;

/** Where the class board is kept (core/spade/app_records.ts checks it on every read). */
const BOARD_KEY = 'classBoard';
/** The most curricula the board keeps. */
const MAX_BOARD_ROWS = 60;

/** One arm of the race on screen. */
export interface Lane {
  probe0: ProbeReport | null;
  /** The probe after each cycle (the race probes every cycle). */
  probes: ProbeReport[];
  /** The levels of its latest cycle, as the climb's letters. */
  lastLevels: string;
  plays: number;
  steps: number;
}

const emptyLane = (): Lane => ({ probe0: null, probes: [], lastLevels: '', plays: 0, steps: 0 });
const emptyLanes = (): Record<RaceArm, Lane> =>
  Object.fromEntries(RACE_ARMS.map((a) => [a, emptyLane()])) as Record<RaceArm, Lane>;

/** A lane's standing: its latest probe (the one before training while it has none). */
export function laneScore(l: Lane): RaceScore | null {
  const p = l.probes.at(-1) ?? l.probe0;
  return p ? { mean: p.mean, hardHalf: p.hardHalf, topRung: p.topRung, plays: l.plays, steps: l.steps } : null;
}

/** The settings of a race as a link carries them (the Lab's), checked: the seed, K, N, P and the curriculum. */
interface RaceLink {
  seed: number;
  levels: number;
  plays: number;
  probePlays: number;
  curriculum: string;
  who: string;
}

/** A race from a pasted link's hash: its settings, or the reason it is none. */
export function raceFromLink(link: string): { ok: true; race: RaceLink } | { ok: false; message: string } {
  const hash = link.includes('#') ? link.slice(link.indexOf('#')) : link;
  const f = { ...LAB_DEFAULTS, ...parseUrlState(hash).fields.lab };
  if (!f.curriculum) return { ok: false, message: 'the link has no hand-made curriculum (lab.hand)' };
  const problem = curriculumProblem(RACE_SPACE, f.curriculum, f.levels);
  if (problem) return { ok: false, message: problem };
  return {
    ok: true,
    race: {
      seed: f.seed,
      levels: f.levels,
      plays: f.plays,
      probePlays: f.probePlays,
      curriculum: f.curriculum,
      who: f.who,
    },
  };
}

export class HandRace {
  /** The rungs picked for the next cycle (indices into the climb's levels, easiest first). */
  picks = $state<number[]>([0]);
  /** The cycles played, each its K level letters. */
  played = $state<string[]>([]);
  /** A curriculum from a link not yet replayed (null: none). */
  recorded = $state<string[] | null>(null);
  lanes = $state<Record<RaceArm, Lane>>(emptyLanes());
  status = $state<'idle' | 'running' | 'paused' | 'done' | 'error'>('idle');
  error = $state<string | null>(null);
  /** The arm and cycle in flight. */
  running = $state<{ arm: RaceArm; cycle: number } | null>(null);
  board = $state<BoardRow[]>([]);
  boardNote = $state<string | null>(null);
  /** The seed and settings the race on screen was made with (a change starts a new race). */
  private made: string | null = null;

  constructor(
    private readonly lab: LabState,
    private readonly store: Store | null = null,
  ) {}

  /** The race's cycles: the Lab's cycle count. */
  get cycles(): number {
    return this.lab.settings.cycles;
  }

  /** The arms in standing order, each with its score. */
  standings = $derived(raceOrder(RACE_ARMS.map((arm) => ({ arm, score: laneScore(this.lanes[arm]) }))));

  /** The next cycle's levels as the climb's letters: the picks spread over the K slots. */
  nextGroup = $derived.by(() =>
    spreadPicks(RACE_SPACE, this.picks, Math.min(8, Math.max(1, Math.round(Number(this.lab.settings.levels)) || 1))),
  );

  /** The hand arm's latest win rate per rung (what a person picks from), null before its first probe. */
  rungWins = $derived((this.lanes.hand.probes.at(-1) ?? this.lanes.hand.probe0)?.byStage ?? null);

  /** Toggle a rung in the picks (at least one stays picked). */
  toggle(rung: number): void {
    if (rung < 0 || rung >= RACE_SPACE.stages.length) return;
    if (this.picks.includes(rung)) {
      if (this.picks.length > 1) this.picks = this.picks.filter((p) => p !== rung);
    } else this.picks = [...this.picks, rung];
  }

  private key(): string {
    const s = this.lab.settings;
    return JSON.stringify([s.seed, s.levels, s.plays, s.probePlays]);
  }

  /** Forget the race on screen (the board stays); the Lab's curriculum setting empties. */
  async reset(): Promise<void> {
    if (this.status === 'running') return;
    for (const a of RACE_ARMS) await this.lab.remote().reset(`race:${a}`);
    this.lanes = emptyLanes();
    this.played = [];
    this.recorded = null;
    this.made = null;
    this.status = 'idle';
    this.error = null;
    this.lab.settings.curriculum = '';
  }

  /** Stop after the cycle in flight (the worker's pause: the race's run or the board's replay). */
  pause(): void {
    if (this.status === 'running') void this.lab.remote().pause();
  }

  /**
   * Take the curriculum a link brought (handed over by state/wiring.svelte.ts, with the K it is
   * played at) as a recorded race to replay.
   */
  loadRecorded(curriculum: string, levels: number): void {
    if (!curriculum || this.status === 'running') return;
    const problem = curriculumProblem(RACE_SPACE, curriculum, levels);
    if (problem) {
      this.error = `The link's curriculum cannot be raced: ${problem}.`;
      return;
    }
    const cycles = curriculumCycles(curriculum);
    if (formatCurriculum(cycles) === formatCurriculum(this.played)) return; // the race on screen already
    this.recorded = cycles;
  }

  /** The person's next `n` cycles with the rungs picked, each followed by a cycle of every other arm. */
  async play(n = 1): Promise<void> {
    const group = spreadPicks(RACE_SPACE, this.picks, this.lab.settings.levels);
    const left = this.cycles - this.played.length;
    if (left <= 0) {
      this.error = `The race has its ${this.cycles} cycles; ↺ start a new one, or raise the Lab's cycles.`;
      return;
    }
    await this.runTo([...this.played, ...Array<string>(Math.min(n, left)).fill(group)]);
  }

  /** Replay the recorded curriculum (a link's): every arm through all of its cycles. */
  async replay(): Promise<void> {
    const rec = this.recorded;
    if (!rec) return;
    await this.reset();
    this.lab.settings.cycles = Math.max(1, rec.length);
    await this.runTo(rec);
    if (this.status === 'done') this.recorded = null;
  }

  /** Whether the Lab's own run holds the worker; if so the race says so instead of starting (one lab runs at a time). */
  private labBusy(): boolean {
    if (this.lab.busy) this.error = LAB_BUSY;
    return this.lab.busy;
  }

  /** Play the race up to the end of `curriculum`: a cycle of the hand arm, then one of each rival, in turn. */
  private async runTo(curriculum: string[]): Promise<void> {
    if (this.status === 'running' || this.labBusy()) return;
    const s = $state.snapshot(this.lab.settings);
    if (s.levels < 2) {
      this.error = "The race needs K ≥ 2 levels a cycle (SPADE's designer writes K − 1 and edits one).";
      return;
    }
    if (this.made !== this.key()) {
      if (this.played.length) await this.reset();
      this.made = this.key();
    }
    this.status = 'running';
    this.error = null;
    const api = this.lab.remote();
    try {
      await api.pause(false);
      for (let c = this.played.length + 1; c <= curriculum.length; c++) {
        const text = formatCurriculum(curriculum.slice(0, c));
        for (const arm of RACE_ARMS) {
          if (this.lanes[arm].probes.length >= c) continue;
          this.running = { arm, cycle: c };
          const settings = {
            ...workerSettings({ ...s, space: 'climb', designer: arm, curriculum: text }),
            plannedCycles: Math.max(s.cycles, curriculum.length),
            probeEvery: 1,
          };
          const r = await api.run(`race:${arm}`, settings, c, Comlink.proxy(this.onEvent));
          if (r.paused) return void (this.status = 'paused');
        }
        this.played = curriculum.slice(0, c);
        this.lab.settings.space = 'climb';
        this.lab.settings.curriculum = formatCurriculum(this.played);
      }
      this.status = this.played.length >= this.cycles ? 'done' : 'idle';
    } catch (err) {
      this.status = 'error';
      this.error = serializeError(err).message;
    } finally {
      this.running = null;
    }
  }

  private onEvent = (e: LabEvent) => {
    if (!e.key.startsWith('race:')) return;
    const lane = this.lanes[e.key.slice(5) as RaceArm];
    if (!lane) return;
    if (e.type === 'probe0') lane.probe0 = e.probe;
    else if (e.type === 'cycle') addCycle(lane, e.report);
  };

  /** Read the board (IndexedDB); a damaged record is set aside by the store with a notice. */
  async loadBoard(): Promise<void> {
    this.board = ((await this.store?.get<BoardRow[]>('settings', BOARD_KEY)) ?? []).slice(0, MAX_BOARD_ROWS);
  }

  private async saveBoard(): Promise<void> {
    await this.store?.put('settings', BOARD_KEY, $state.snapshot(this.board));
  }

  /** Add the race on screen to the board, scored, under `link` (the page's own). */
  async addOwn(link: string): Promise<void> {
    const s = this.lab.settings;
    if (!this.played.length) return;
    this.board = [
      ...this.board,
      {
        who: s.who,
        seed: s.seed,
        space: 'climb',
        levels: s.levels,
        plays: s.plays,
        probePlays: s.probePlays,
        cycles: this.played.length,
        curriculum: formatCurriculum(this.played),
        link,
        score: laneScore(this.lanes.hand),
      },
    ].slice(-MAX_BOARD_ROWS);
    await this.saveBoard();
  }

  /** Add every link in `text` (one per line or separated by spaces) to the board, unscored; says what was skipped. */
  async addLinks(text: string): Promise<void> {
    const links = text.split(/\s+/).filter(Boolean).slice(0, MAX_BOARD_ROWS);
    const skipped: string[] = [];
    const rows: BoardRow[] = [];
    for (const link of links) {
      const r = raceFromLink(link);
      if (!r.ok) {
        skipped.push(`${link.slice(0, 40)}${link.length > 40 ? '…' : ''}: ${r.message}`);
        continue;
      }
      const { race } = r;
      rows.push({
        ...race,
        space: 'climb',
        cycles: curriculumCycles(race.curriculum).length,
        link,
        score: null,
      });
    }
    this.board = [...this.board, ...rows].slice(-MAX_BOARD_ROWS);
    this.boardNote = `${rows.length} added${skipped.length ? `; skipped ${skipped.length}: ${skipped.join('; ')}` : ''}.`;
    await this.saveBoard();
  }

  /** Replay a board row's curriculum (its hand arm only) to score it. */
  async score(i: number): Promise<void> {
    const row = this.board[i];
    if (!row || this.status === 'running' || this.labBusy()) return;
    this.status = 'running';
    this.error = null;
    const lane = emptyLane();
    const onEvent = (e: LabEvent) => {
      if (e.type === 'probe0') lane.probe0 = e.probe;
      else if (e.type === 'cycle') addCycle(lane, e.report);
    };
    try {
      const api = this.lab.remote();
      await api.pause(false);
      await api.reset('board');
      this.running = { arm: 'hand', cycle: row.cycles };
      const settings = {
        ...workerSettings({
          ...LAB_DEFAULTS,
          seed: row.seed,
          levels: row.levels,
          plays: row.plays,
          probePlays: row.probePlays,
          cycles: row.cycles,
          space: 'climb',
          designer: 'hand',
          curriculum: row.curriculum,
        }),
        probeEvery: 1,
      };
      const r = await api.run('board', settings, row.cycles, Comlink.proxy(onEvent));
      if (r.paused) return void (this.status = 'paused');
      await api.reset('board');
      this.board[i] = { ...row, score: laneScore(lane) };
      await this.saveBoard();
      this.status = 'idle';
    } catch (err) {
      this.status = 'error';
      this.error = serializeError(err).message;
    } finally {
      this.running = null;
    }
  }

  async removeRow(i: number): Promise<void> {
    this.board = this.board.filter((_, j) => j !== i);
    await this.saveBoard();
  }
}

/** A cycle into a lane: its probe, its levels, its plays and agent steps. */
function addCycle(lane: Lane, r: CycleReport): void {
  if (r.probe) lane.probes = [...lane.probes, r.probe];
  lane.lastLevels = r.designs.map((d) => (d.level ? RACE_SPACE.reply(d.level) : '?')).join('');
  lane.plays += r.designs.reduce((a, d) => a + d.noHint.length, 0);
  lane.steps += r.steps.agent;
}
