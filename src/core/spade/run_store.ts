/**
 * Where a run keeps its progress. The loop saves state after every environment
 * and writes each finished cycle once (writeCycle is idempotent per cycle), so a
 * reload or a crash loses at most the environment in flight. Backends: StoreRunStore
 * (here: over the generic Store — IndexedDB in the browser, memory in tests) and
 * DirRunStore (Node run directory: config.json, archive.jsonl, rollouts.jsonl,
 * metrics.jsonl, memory.json).
 */
import type { Config } from '../config.ts';
import { StorageError } from '../errors.ts';
import type { CallBudget } from '../llm/budget.ts';
import type { SampledTokens } from '../train/trace.ts';
import type { Store } from '../store.ts';
import type { Episode } from './agent.ts';
import type { Memory } from './memory.ts';

export interface RunSpec {
  config: Config;
  /** Skills to rotate over (default: all six of the setting). */
  skills: string[];
  models: { designer: string; hint: string; agent: string };
  corpus: string;
  createdAt: string;
  /** The cycles asked for when the run started: `--resume` without `--iterations` goes on to it. */
  iterations?: number;
}

export interface Attempt {
  reply: string;
  code: string | null;
  ok: boolean;
  failures: string[];
  /** Findings of the strict checks that did not fail the design under `checks: paper`. */
  soft?: string[];
  /** The reply's ids and sampling log-probs (local backend; kept for the first attempt, which trains). */
  tokens?: SampledTokens;
}

/** Why a task ended early: a model call (design, validate, hint, play) or the checker failed. */
export interface TaskFailure {
  phase: 'design' | 'validate' | 'check' | 'hint' | 'play';
  name: string;
  message: string;
}

export interface ArchiveRecord {
  cycle: number;
  index: number;
  skill: string;
  setting: 'games' | 'tool_use';
  difficulty: string;
  envId: string | null;
  title: string;
  code: string | null;
  hint: string | null;
  source: { title: string; ref: string } | null;
  valid: boolean;
  firstAttemptValid: boolean;
  /** The first attempt hung or broke the checker (blacklisted; rewarded like a time-out). */
  firstAttemptCrashed?: boolean;
  attempts: Attempt[];
  validator: { accept: boolean; reason: string } | null;
  stats: {
    noHint: number[];
    withHint: number[];
    winRate: number;
    winRateHinted: number;
    regret: number;
    raw: number | null;
    designerReward: number | null;
    timedOut: boolean;
    blacklisted: boolean;
  } | null;
  leak: { values: string[]; suspicious: boolean; reasons?: string[] } | null;
  /** Set when the task ended early; the run went on. */
  error?: TaskFailure | null;
  /** The hint call failed: only the unhinted plays ran and the regret scored 0 (the task went on). */
  hintError?: TaskFailure | null;
  /** The designer's raw reward entering the centring (estimator value, 0 invalid, −0.5 time-out); null: no part. */
  rawReward?: number | null;
  /** (raw − its skill's centre) × envRewardScale: what trains the designer's first attempt. */
  designerAdvantage?: number | null;
  /** The context budget of each designer, repair, validator and hint call. */
  calls?: CallBudget[];
}

export interface RolloutRecord extends Episode {
  cycle: number;
  index: number;
  skill: string;
  envId: string;
  play: number;
}

export interface MetricsRecord {
  cycle: number;
  skills: string[];
  envs: number;
  valid: number;
  validityRate: number;
  firstAttemptValidityRate: number;
  meanRegret: number | null;
  meanWinRate: number | null;
  meanWinRateHinted: number | null;
  /** Mean raw designer reward (before centring). */
  meanDesignerReward: number | null;
  /** Mean centred, scaled designer reward (what the designer is trained on). */
  meanDesignerAdvantage?: number | null;
  /** Share of scored environments whose win rate is in the plateau band [0.4, 0.6]. */
  inBandShare?: number | null;
  timeouts: number;
  leaks: number;
  /** Tasks ended by a failed model call or checker. */
  errors?: number;
  /** The context budget of the cycle's calls (designer, repair, validator, hint; agent prompts in maxPromptTokens). */
  budget?: {
    calls: number;
    maxPromptTokens: number;
    window: number | null;
    clamped: number;
    shrunk: number;
    skipped: number;
    agentTurnsDropped: number;
    contextFullPlays: number;
  };
  /** The scale the cycle's centred designer rewards were multiplied by (fixed, or computed as the reference does). */
  envRewardScale?: number;
  /**
   * The designer's window: the designs of cycle `designsOf` (this cycle − designerLag; null before
   * the first) train at this cycle, on a reward recomputed over `plays` unhinted plays of their
   * environments recorded so far (their cycle's; the envReuse rounds' replays join when training).
   */
  designerWindow?: { lag: number; designsOf: number | null; rounds: number; designs: number; plays: number };
  ms: number;
  modelMs: number;
}

export interface PendingTask {
  archive: ArchiveRecord;
  rollouts: RolloutRecord[];
  ms: number;
  modelMs: number;
  /** Programs that broke the checker: blacklisted when the cycle ends. */
  blacklist?: string[];
}

export interface RunState {
  version: 1;
  cycle: number;
  memory: Memory;
  /** Slow EMA of win rate per skill (learning-potential estimator). */
  ema: Record<string, number>;
  /** Code ids of environments whose step() timed out. */
  blacklist: string[];
  /** Finished tasks of the current cycle, by task index. */
  pending: PendingTask[];
  /** Per-skill running baseline of raw designer rewards (centres a skill with one design per cycle). */
  rewardBaseline?: Record<string, number>;
  /** Tasks in a row that ended with an error; the run stops at maxConsecutiveErrors. */
  consecutiveErrors?: number;
}

export interface RunStore {
  readSpec(): Promise<RunSpec | null>;
  writeSpec(spec: RunSpec): Promise<void>;
  readState(): Promise<RunState | null>;
  writeState(state: RunState): Promise<void>;
  /** Write one finished cycle; writing the same cycle again replaces it. */
  writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ): Promise<void>;
  writeMemory(memory: Memory): Promise<void>;
  readArchive(): Promise<ArchiveRecord[]>;
  readMetrics(): Promise<MetricsRecord[]>;
}

/** A RunStore over the generic Store (collection "runs"), keys prefixed by the run id. */
export class StoreRunStore implements RunStore {
  constructor(
    private readonly store: Store,
    readonly runId: string,
  ) {}
  private key(k: string) {
    return `${this.runId}.${k}`;
  }
  readSpec() {
    return this.store.get<RunSpec>('runs', this.key('spec')).then((v) => v ?? null);
  }
  writeSpec(spec: RunSpec) {
    return this.store.put('runs', this.key('spec'), spec);
  }
  readState() {
    return this.store.get<RunState>('runs', this.key('state')).then((v) => v ?? null);
  }
  writeState(state: RunState) {
    return this.store.put('runs', this.key('state'), state);
  }
  async writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ) {
    await this.store.put('runs', this.key(`c${String(cycle).padStart(6, '0')}`), data);
  }
  writeMemory(memory: Memory) {
    return this.store.put('runs', this.key('memory'), memory);
  }
  private async cycles(): Promise<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord }[]> {
    const keys = (await this.store.keys('runs')).filter((k) => k.startsWith(`${this.runId}.c`)).sort();
    const out = [];
    for (const k of keys)
      out.push(
        (await this.store.get<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord }>(
          'runs',
          k,
        ))!,
      );
    return out;
  }
  async readArchive() {
    return (await this.cycles()).flatMap((c) => c.archive);
  }
  async readMetrics() {
    return (await this.cycles()).map((c) => c.metrics);
  }
  async readRollouts() {
    return (await this.cycles()).flatMap((c) => c.rollouts);
  }
}

/** A .jsonl text's records, and its torn last line if it has one. */
export interface ParsedJsonl<T> {
  records: T[];
  /** A last line without its newline: a write cut short (crash, full disk). Not parsed; its 1-based number and size. */
  torn: { line: number; chars: number } | null;
}

/**
 * Parse a .jsonl text (one JSON value per line; every write ends its line with "\n"). A last line
 * without "\n" is torn: returned apart, never parsed, so a caller can cut it off before appending.
 * Any other line that is not JSON is corruption: a StorageError naming `file` and the line number.
 * Blank lines are skipped. Linear: lines are found with indexOf.
 */
export function parseJsonl<T>(text: string, file: string): ParsedJsonl<T> {
  const records: T[] = [];
  let line = 0;
  let pos = 0;
  while (pos < text.length) {
    line++;
    const nl = text.indexOf('\n', pos);
    if (nl < 0) return { records, torn: { line, chars: text.length - pos } };
    const raw = text.slice(pos, nl);
    pos = nl + 1;
    if (!raw.trim()) continue;
    try {
      records.push(JSON.parse(raw) as T);
    } catch (err) {
      throw new StorageError(
        `${file} line ${line} is not valid JSON (${(err as Error).message}); the file is corrupt there. Fix or delete that line, or start a new run.`,
        { file, line },
      );
    }
  }
  return { records, torn: null };
}
