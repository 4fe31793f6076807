/**
 * A run directory (Node): config.json (the run spec), archive.jsonl (environments
 * with statistics), rollouts.jsonl, metrics.jsonl, memory.json (SPADE's
 * env_memory.json fields) and state.json (for --resume). JSON files are written
 * atomically (temp + rename). writeCycle is idempotent: before appending cycle c it
 * truncates each .jsonl back to where cycle c began (recorded in .cycles.json), so
 * a crash between the appends and the state update never duplicates lines.
 *
 * Torn writes: a crash (or a full disk) can leave a .jsonl ending in a line cut mid-write. Before
 * its first append a store checks every .jsonl (repair()): a torn last line is cut off (the complete
 * lines stay; a warning names the file and line) so nothing is ever appended to a torn line; any
 * other line that is not JSON fails with a StorageError naming the file and line. Reads skip a torn
 * last line with the same warning.
 *
 * Reads can be bounded per file (options.maxBytes; `spade run export` bounds every file): a file
 * over its bound is refused before it is read, with a StorageError naming the file and the bound.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, open, readFile, rename, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StorageError } from '../../core/errors.ts';
import { exportMemory, type Memory } from '../../core/spade/memory.ts';
import type {
  ArchiveRecord,
  MetricsRecord,
  RolloutRecord,
  RunSpec,
  RunState,
  RunStore,
} from '../../core/spade/run_store.ts';
import { parseJsonl } from '../../core/spade/run_store.ts';

const FILES = ['archive.jsonl', 'rollouts.jsonl', 'metrics.jsonl'] as const;

async function writeJson(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, path);
}

/**
 * A file's text, or null when it is absent; a file over `limit` bytes is refused unread with a
 * StorageError naming it and the limit (a run directory may come from anyone).
 */
export async function readBounded(path: string, limit = Infinity): Promise<string | null> {
  if (!existsSync(path)) return null;
  const bytes = (await stat(path)).size;
  if (bytes > limit)
    throw new StorageError(
      `${path} is ${(bytes / 2 ** 20).toFixed(1)} MiB; at most ${(limit / 2 ** 20).toFixed(0)} MiB of it is read. Check that it is the run's own file, or trim the run (fewer cycles).`,
      { path, bytes, limit },
    );
  return readFile(path, 'utf8');
}

async function readJson<T>(path: string, limit?: number): Promise<T | null> {
  const text = await readBounded(path, limit);
  if (text === null) return null;
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new StorageError(`${path} is unreadable (${(err as Error).message}); fix or delete it to start over`, {
      path,
    });
  }
}

async function size(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

function tornMessage(path: string, line: number, size: string, action: string): string {
  return `${path}: line ${line} was cut off mid-write (${size} without a newline, e.g. a crash or a full disk); ${action}`;
}

/**
 * If the .jsonl at `path` ends in a line without its newline (a torn write), cut that line off,
 * keeping every complete line. Returns a warning, or null if the file was whole (or absent). For
 * any append-only .jsonl (a run's files, a --record transcript).
 */
export async function repairJsonlTail(path: string): Promise<string | null> {
  if (!existsSync(path)) return null;
  const fh = await open(path, 'r');
  let total: number;
  let keep = 0;
  try {
    total = (await fh.stat()).size;
    const chunk = Buffer.alloc(64 * 1024);
    // Scan back from the end for the last newline, a chunk at a time.
    for (let end = total; end > 0;) {
      const start = Math.max(0, end - chunk.length);
      const { bytesRead } = await fh.read(chunk, 0, end - start, start);
      const nl = chunk.subarray(0, bytesRead).lastIndexOf(10);
      if (nl >= 0) {
        keep = start + nl + 1;
        break;
      }
      end = start;
    }
  } finally {
    await fh.close();
  }
  if (keep === total) return null; // empty, or ends in a newline: whole
  const text = keep ? (await readFile(path)).subarray(0, keep).toString('utf8') : '';
  let lines = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++;
  await truncate(path, keep);
  return tornMessage(path, lines + 1, `${total - keep} bytes`, 'dropped it and kept the complete lines before it');
}

/** Every record of a .jsonl; a torn last line is skipped (and reported), a corrupt line throws a StorageError. */
async function readJsonl<T>(path: string, warn: (message: string) => void, limit?: number): Promise<T[]> {
  const text = await readBounded(path, limit);
  if (text === null) return [];
  const { records, torn } = parseJsonl<T>(text, path);
  if (torn) warn(tornMessage(path, torn.line, `${torn.chars} characters`, 'skipped it'));
  return records;
}

/** The files a run directory's reads may be bounded for. */
export type RunDirFile = 'config.json' | 'state.json' | (typeof FILES)[number];

export interface DirRunStoreOptions {
  /** Told about repaired or skipped torn lines (they are also kept in `warnings`). */
  onWarning?: (message: string) => void;
  /** The most bytes read of each file (checked before reading; a larger one is a StorageError). Unbounded when unset. */
  maxBytes?: Partial<Record<RunDirFile, number>>;
}

export class DirRunStore implements RunStore {
  /** Every warning so far (torn lines repaired or skipped). */
  readonly warnings: string[] = [];
  private checked = false;

  constructor(
    readonly dir: string,
    private readonly options: DirRunStoreOptions = {},
  ) {}

  private readonly warn = (message: string): void => {
    this.warnings.push(message);
    this.options.onWarning?.(message);
  };

  /**
   * Check every .jsonl before appending: cut off a torn last line (with a warning), and fail with a
   * StorageError naming the file and line on any other line that is not JSON. Runs once per store,
   * before its first writeCycle; call it on resume to hear about repairs early. Returns the warnings.
   */
  async repair(): Promise<string[]> {
    const found: string[] = [];
    for (const f of FILES) {
      const path = this.p(f);
      if (!existsSync(path)) continue;
      parseJsonl(await readFile(path, 'utf8'), path); // throws on a corrupt complete line
      const w = await repairJsonlTail(path);
      if (w) {
        found.push(w);
        this.warn(w);
      }
    }
    this.checked = true;
    return found;
  }

  private p(name: string): string {
    return join(this.dir, name);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  readSpec() {
    return readJson<RunSpec>(this.p('config.json'), this.options.maxBytes?.['config.json']);
  }
  async writeSpec(spec: RunSpec) {
    await this.init();
    await writeJson(this.p('config.json'), spec);
  }
  readState() {
    return readJson<RunState>(this.p('state.json'), this.options.maxBytes?.['state.json']);
  }
  writeState(state: RunState) {
    return writeJson(this.p('state.json'), state);
  }
  async writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ) {
    if (!this.checked) await this.repair();
    const index = (await readJson<Record<string, Record<string, number>>>(this.p('.cycles.json'))) ?? {};
    const key = String(cycle);
    if (index[key]) {
      for (const f of FILES) if (existsSync(this.p(f))) await truncate(this.p(f), index[key]![f] ?? 0);
    } else {
      index[key] = Object.fromEntries(await Promise.all(FILES.map(async (f) => [f, await size(this.p(f))] as const)));
      await writeJson(this.p('.cycles.json'), index);
    }
    const lines = (xs: unknown[]) => xs.map((x) => `${JSON.stringify(x)}\n`).join('');
    await appendFile(this.p('archive.jsonl'), lines(data.archive));
    await appendFile(this.p('rollouts.jsonl'), lines(data.rollouts));
    await appendFile(this.p('metrics.jsonl'), lines([data.metrics]));
  }
  writeMemory(memory: Memory) {
    return writeJson(this.p('memory.json'), exportMemory(memory));
  }
  readArchive() {
    return readJsonl<ArchiveRecord>(this.p('archive.jsonl'), this.warn, this.options.maxBytes?.['archive.jsonl']);
  }
  readMetrics() {
    return readJsonl<MetricsRecord>(this.p('metrics.jsonl'), this.warn, this.options.maxBytes?.['metrics.jsonl']);
  }
  readRollouts() {
    return readJsonl<RolloutRecord>(this.p('rollouts.jsonl'), this.warn, this.options.maxBytes?.['rollouts.jsonl']);
  }
}
