/**
 * Where a run keeps its progress. The loop saves state after every environment
 * and writes each finished cycle once (writeCycle is idempotent per cycle), so a
 * reload or a crash loses at most the environment in flight. Backends: StoreRunStore
 * (here: over the generic Store — IndexedDB in the browser, memory in tests) and
 * DirRunStore (Node run directory: config.json, archive.jsonl, rollouts.jsonl,
 * metrics.jsonl, memory.json).
 */
import { StorageError } from '../errors.ts';
import type { Equal, Infer } from '../schema.ts';
import type { Store } from '../store.ts';
import type { Memory } from './memory.ts';
import type { ArchiveRecord, CYCLE_RECORD, MetricsRecord, RolloutRecord, RUN_STATE, RunSpec } from './run_schema.ts';

// The records' types come from their schemas (run_schema.ts), which also validate run files.
export type { ArchiveRecord, Attempt, MetricsRecord, RolloutRecord, RunSpec, TaskFailure } from './run_schema.ts';

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

/**
 * Compile-time: the saved state and a stored cycle are exactly their schemas (run_schema.ts).
 * @public (knip: a compile-time check, imported by nothing; exported so that it is not an unused name)
 */
export type StateMatchesSchema = [
  Assert<Equal<Infer<typeof RUN_STATE>, RunState>>,
  Assert<Equal<Infer<typeof CYCLE_RECORD>, CycleRecord>>,
];
type Assert<T extends true> = T;

/** One finished cycle as StoreRunStore keeps it. */
export interface CycleRecord {
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  metrics: MetricsRecord;
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
  /**
   * Called once before a run's first cycle: check that the store can be written, so that a resume
   * refuses before any work (a run directory refuses files that are links and cuts torn lines).
   */
  prepare?(): Promise<void>;
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
  async writeCycle(cycle: number, data: CycleRecord) {
    await this.store.put('runs', this.key(`c${String(cycle).padStart(6, '0')}`), data);
  }
  writeMemory(memory: Memory) {
    return this.store.put('runs', this.key('memory'), memory);
  }
  /** The stored cycles in order; one its store set aside as damaged (read as undefined) is left out. */
  private async cycles(): Promise<CycleRecord[]> {
    const keys = (await this.store.keys('runs')).filter((k) => k.startsWith(`${this.runId}.c`)).sort();
    const out: CycleRecord[] = [];
    for (const k of keys) {
      const c = await this.store.get<CycleRecord>('runs', k);
      if (c) out.push(c);
    }
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
