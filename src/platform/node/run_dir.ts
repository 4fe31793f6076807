/**
 * A run directory (Node): config.json (the run spec), archive.jsonl (environments
 * with statistics), rollouts.jsonl, metrics.jsonl, memory.json (SPADE's
 * env_memory.json fields) and state.json (for --resume). JSON files are written
 * atomically (temp + rename). writeCycle is idempotent: before appending cycle c it
 * truncates each .jsonl back to where cycle c began (recorded in .cycles.json), so
 * a crash between the appends and the state update never duplicates lines.
 *
 * Every read trusts nothing (a run directory may come from anyone, and `spade serve --watch` reads
 * one while it is written): files are read only if they are regular files, within their bound
 * counted on the bytes read (regular_file.ts; options.maxBytes, else the longest string V8 makes);
 * each .jsonl line is read against the run-record schema (run_file.ts's parseRunLine, the schema a
 * run file's lists use), and a line that is not JSON, not a valid record or a repeat is skipped
 * with a warning naming the file and line — never fatal; config.json, state.json and .cycles.json
 * are read against their schemas too (a StorageError naming the file when they fail). This holds
 * for serve, --watch, --resume and export alike.
 *
 * Torn writes: a crash (or a full disk) can leave a .jsonl ending in a line cut mid-write. Before
 * its first append a store checks every .jsonl (repair()): a torn last line is cut off (the
 * complete lines stay; a warning names the file and line) so nothing is ever appended to a torn
 * line. Reads skip a torn last line with the same warning.
 */
import { constants as fsc } from 'node:fs';
import { appendFile, mkdir, open, rename, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RunFileError, StorageError } from '../../core/errors.ts';
import { exportMemory, type Memory } from '../../core/spade/memory.ts';
import { parseRunJsonl, parseRunSpec, parseRunState, type RunLineFile } from '../../core/spade/run_file.ts';
import type {
  ArchiveRecord,
  MetricsRecord,
  RolloutRecord,
  RunSpec,
  RunState,
  RunStore,
} from '../../core/spade/run_store.ts';
import { checkRegular, MAX_TEXT_BYTES, readRegularText } from './regular_file.ts';

const FILES = ['archive.jsonl', 'rollouts.jsonl', 'metrics.jsonl'] as const;

async function writeJson(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, path);
}

/** What the reader of a run directory's file over its bound should do. */
const TRIM = "Check that it is the run's own file, or trim the run (fewer cycles).";

/**
 * A file's text, or null when it is absent: regular files only, at most `limit` bytes (checked on
 * what is read); a SpecialFileError or FileTooLargeError (both StorageErrors) naming it otherwise.
 */
export function readBounded(path: string, limit = MAX_TEXT_BYTES): Promise<string | null> {
  return readRegularText(path, limit, TRIM);
}

/** JSON text read through `schema`; any failure is a StorageError naming the file. */
function parseJsonFile<T>(path: string, text: string, schema: (data: unknown) => T): T {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new StorageError(
      `${path} is unreadable (${(err as Error).message.slice(0, 120)}); fix or delete it to start over`,
      { path },
    );
  }
  try {
    return schema(data);
  } catch (err) {
    if (err instanceof RunFileError)
      throw new StorageError(`${path} is not what a run writes: ${err.message} Fix or delete it to start over.`, {
        path,
      });
    throw err;
  }
}

/** The .cycles.json index: cycle → file → the byte offset where that cycle's lines begin. */
function cycleIndex(data: unknown): Record<string, Record<string, number>> {
  const ok =
    typeof data === 'object' &&
    data !== null &&
    !Array.isArray(data) &&
    Object.entries(data).every(
      ([k, v]) =>
        /^\d{1,6}$/.test(k) &&
        typeof v === 'object' &&
        v !== null &&
        !Array.isArray(v) &&
        Object.entries(v as object).every(
          ([f, n]) => (FILES as readonly string[]).includes(f) && Number.isSafeInteger(n) && (n as number) >= 0,
        ),
    );
  if (!ok) throw new RunFileError('it must map each cycle to the byte offsets of its .jsonl files.');
  return data as Record<string, Record<string, number>>;
}

function tornMessage(path: string, line: number, size: string, action: string): string {
  return `${path}: line ${line} was cut off mid-write (${size} without a newline, e.g. a crash or a full disk); ${action}`;
}

/** An open regular file, or null when absent; anything else is a SpecialFileError (checkRegular). */
async function openRegular(path: string) {
  await checkRegular(path);
  try {
    const fh = await open(path, fsc.O_RDONLY | fsc.O_NONBLOCK);
    if ((await fh.stat()).isFile()) return fh;
    await fh.close();
    await checkRegular(path); // swapped since the check: say what it is now
    return null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * If the .jsonl at `path` ends in a line without its newline (a torn write), cut that line off,
 * keeping every complete line. Returns a warning, or null if the file was whole (or absent). For
 * any append-only .jsonl (a run's files, a --record transcript); anything but a regular file is a
 * SpecialFileError and is left alone.
 */
export async function repairJsonlTail(path: string): Promise<string | null> {
  const fh = await openRegular(path);
  if (!fh) return null;
  let total: number;
  let keep = 0;
  let lines = 0;
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
    if (keep === total) return null; // empty, or ends in a newline: whole
    // count the complete lines kept, a chunk at a time
    for (let at = 0; at < keep;) {
      const { bytesRead } = await fh.read(chunk, 0, Math.min(chunk.length, keep - at), at);
      if (bytesRead === 0) break;
      for (let i = chunk.indexOf(10); i >= 0 && i < bytesRead; i = chunk.indexOf(10, i + 1)) lines++;
      at += bytesRead;
    }
  } finally {
    await fh.close();
  }
  await truncate(path, keep);
  return tornMessage(path, lines + 1, `${total - keep} bytes`, 'dropped it and kept the complete lines before it');
}

/** The files a run directory's reads may be bounded for. */
export type RunDirFile = 'config.json' | 'state.json' | (typeof FILES)[number];

export interface DirRunStoreOptions {
  /** Told about repaired or skipped lines (they are also kept in `warnings`). */
  onWarning?: (message: string) => void;
  /** The most bytes read of each file (a larger one is a FileTooLargeError). The longest string V8 makes when unset. */
  maxBytes?: Partial<Record<RunDirFile, number>>;
}

export class DirRunStore implements RunStore {
  /** Every warning so far (torn or bad lines repaired or skipped). */
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
   * Check every .jsonl before appending: cut off a torn last line (with a warning), so that nothing
   * is appended to it; a FIFO, device or directory in a file's place is a SpecialFileError (and
   * nothing is appended). Other bad lines stay where they are: reads skip each, with a warning.
   * Runs once per store, before its first writeCycle; call it on resume to hear about repairs
   * early. Returns the warnings.
   */
  async repair(): Promise<string[]> {
    const found: string[] = [];
    for (const f of FILES) {
      const w = await repairJsonlTail(this.p(f));
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

  /** A .jsonl's records, each line read against its schema; skipped lines and a torn last line are warned about. */
  private async lines<F extends RunLineFile>(file: F) {
    const path = this.p(file);
    const text = await readBounded(path, this.options.maxBytes?.[file]);
    if (text === null) return [];
    const { records, skipped, torn } = parseRunJsonl(text, file, path);
    for (const w of skipped) this.warn(w);
    if (torn) this.warn(tornMessage(path, torn.line, `${torn.chars} characters`, 'skipped it'));
    return records;
  }

  private async json<T>(file: 'config.json' | 'state.json', schema: (data: unknown) => T): Promise<T | null> {
    const path = this.p(file);
    const text = await readBounded(path, this.options.maxBytes?.[file]);
    return text === null ? null : parseJsonFile(path, text, schema);
  }

  /** A .jsonl's size in bytes (null when absent); anything but a regular file is a SpecialFileError. */
  private async size(f: (typeof FILES)[number]): Promise<number | null> {
    const fh = await openRegular(this.p(f));
    if (!fh) return null;
    try {
      return (await fh.stat()).size;
    } finally {
      await fh.close();
    }
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  readSpec(): Promise<RunSpec | null> {
    return this.json('config.json', (d) => parseRunSpec(d, 'config.json'));
  }
  async writeSpec(spec: RunSpec) {
    await this.init();
    await writeJson(this.p('config.json'), spec);
  }
  readState(): Promise<RunState | null> {
    return this.json('state.json', parseRunState);
  }
  writeState(state: RunState) {
    return writeJson(this.p('state.json'), state);
  }
  async writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ) {
    if (!this.checked) await this.repair();
    const indexPath = this.p('.cycles.json');
    const indexText = await readBounded(indexPath, 2 ** 20);
    const index = indexText === null ? {} : parseJsonFile(indexPath, indexText, cycleIndex);
    const key = String(cycle);
    const at = index[key];
    if (at) {
      for (const f of FILES) if ((await this.size(f)) !== null) await truncate(this.p(f), at[f] ?? 0);
    } else {
      const sizes: Record<string, number> = {};
      for (const f of FILES) sizes[f] = (await this.size(f)) ?? 0;
      index[key] = sizes;
      await writeJson(indexPath, index);
    }
    const lines = (xs: unknown[]) => xs.map((x) => `${JSON.stringify(x)}\n`).join('');
    await appendFile(this.p('archive.jsonl'), lines(data.archive));
    await appendFile(this.p('rollouts.jsonl'), lines(data.rollouts));
    await appendFile(this.p('metrics.jsonl'), lines([data.metrics]));
  }
  writeMemory(memory: Memory) {
    return writeJson(this.p('memory.json'), exportMemory(memory));
  }
  readArchive(): Promise<ArchiveRecord[]> {
    return this.lines('archive.jsonl');
  }
  readMetrics(): Promise<MetricsRecord[]> {
    return this.lines('metrics.jsonl');
  }
  readRollouts(): Promise<RolloutRecord[]> {
    return this.lines('rollouts.jsonl');
  }
}
