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
 *
 * Writes trust nothing either (safe_write.ts): every cut and append goes to a regular file that is
 * the run's own, opened without following a link and checked on its descriptor; a file (or the
 * temp name of one) that is a symbolic link, has a second hard link, or is a FIFO or device is a
 * LinkedFileError or SpecialFileError naming it, before anything is written — a resume refuses it
 * before its first cycle (prepare()). And no offset read from .cycles.json is used unchecked: it must
 * be a whole number within the file, at a line's start, not before an earlier cycle's offset, and
 * every line it would cut must be a record of that cycle or later; otherwise the offset is rebuilt
 * from the lines (where the file's last run of lines of that cycle or later begins), with a warning
 * naming the index. The file is never extended and no finished cycle is cut.
 */
import type { FileHandle } from 'node:fs/promises';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FileTooLargeError, RunFileError, StorageError } from '../../core/errors.ts';
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
import { MAX_TEXT_BYTES, readRegularText } from './regular_file.ts';
import { checkWritable, openForWrite, writeFileAtomic } from './safe_write.ts';

const FILES = ['archive.jsonl', 'rollouts.jsonl', 'metrics.jsonl'] as const;
type JsonlFile = (typeof FILES)[number];
/** The JSON files a run writes whole (temp file + rename). */
const JSON_FILES = ['config.json', 'state.json', 'memory.json', '.cycles.json'] as const;

/** Written whole: a temp file created exclusively (never through a link), renamed over the file. */
function writeJson(path: string, value: unknown): Promise<void> {
  return writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
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

/** The .cycles.json index: cycle → file → the byte offset where that cycle's lines begin (each checked at use). */
type CycleIndex = Record<string, Record<string, unknown>>;

/** The index's shape (cycles to objects of .jsonl names); the offsets themselves are checked where used. */
function isCycleIndex(data: unknown): data is CycleIndex {
  return (
    typeof data === 'object' &&
    data !== null &&
    !Array.isArray(data) &&
    Object.entries(data).every(
      ([k, v]) =>
        /^\d{1,6}$/.test(k) &&
        typeof v === 'object' &&
        v !== null &&
        !Array.isArray(v) &&
        Object.keys(v as object).every((f) => (FILES as readonly string[]).includes(f)),
    )
  );
}

function tornMessage(path: string, line: number, size: string, action: string): string {
  return `${path}: line ${line} was cut off mid-write (${size} without a newline, e.g. a crash or a full disk); ${action}`;
}

/** The longest line read to learn its cycle (a record line is far shorter; a longer one counts as no record). */
const MAX_LINE_BYTES = 64 * 2 ** 20;
const CHUNK = 64 * 1024;

/** A complete line's cycle when it is a record (a JSON object with a whole `cycle` of its own), else null. */
function cycleOf(line: Buffer): number | null {
  try {
    const v: unknown = JSON.parse(line.toString('utf8'));
    if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, 'cycle')) return null;
    const c = (v as { cycle: unknown }).cycle;
    return Number.isSafeInteger(c) ? (c as number) : null;
  } catch {
    return null;
  }
}

/** The byte at `at`. */
async function byteAt(fh: FileHandle, at: number): Promise<number> {
  const b = Buffer.alloc(1);
  const { bytesRead } = await fh.read(b, 0, 1, at);
  return bytesRead === 1 ? b[0]! : -1;
}

/** The line starting at `start` (through its newline) and where the next begins; null when it has no newline or is too long. */
async function lineFrom(fh: FileHandle, start: number, size: number): Promise<{ bytes: Buffer; next: number } | null> {
  const parts: Buffer[] = [];
  for (let at = start; at < size && at - start <= MAX_LINE_BYTES;) {
    const buf = Buffer.alloc(Math.min(CHUNK, size - at));
    const { bytesRead } = await fh.read(buf, 0, buf.length, at);
    if (bytesRead === 0) break;
    const nl = buf.subarray(0, bytesRead).indexOf(10);
    if (nl >= 0) {
      parts.push(buf.subarray(0, nl));
      return { bytes: Buffer.concat(parts), next: at + nl + 1 };
    }
    parts.push(buf.subarray(0, bytesRead));
    at += bytesRead;
  }
  return null;
}

/** The complete line ending at `end` (byte end − 1 is its newline) and where it starts; null when too long. */
async function lineBefore(fh: FileHandle, end: number): Promise<{ bytes: Buffer; start: number } | null> {
  const parts: Buffer[] = [];
  let at = end - 1; // the newline
  while (at > 0 && end - at <= MAX_LINE_BYTES) {
    const from = Math.max(0, at - CHUNK);
    const buf = Buffer.alloc(at - from);
    const { bytesRead } = await fh.read(buf, 0, buf.length, from);
    const got = buf.subarray(0, bytesRead);
    const nl = got.lastIndexOf(10);
    if (nl >= 0) {
      parts.unshift(got.subarray(nl + 1));
      return { bytes: Buffer.concat(parts), start: from + nl + 1 };
    }
    parts.unshift(got);
    at = from;
  }
  return at === 0 ? { bytes: Buffer.concat(parts), start: 0 } : null;
}

/**
 * Where cycle `c`'s lines begin, from the lines themselves: the start of the file's last run of
 * complete lines that are records of cycle `c` or later (the file's size when its last line is
 * not one). Reads only that run and the line before it.
 */
async function cycleStartFromLines(fh: FileHandle, size: number, c: number): Promise<number> {
  let end = size;
  if (end > 0 && (await byteAt(fh, end - 1)) !== 10) return end; // a torn tail (repair() cut it before)
  while (end > 0) {
    const line = await lineBefore(fh, end);
    if (!line) break;
    const k = cycleOf(line.bytes);
    if (k === null || k < c) break;
    end = line.start;
  }
  return end;
}

/**
 * Why `raw`, read from the index as cycle `c`'s offset in `f` (of `size` bytes), cannot be used; null
 * when it can: a whole number within the file, at a line's start, not before an earlier cycle's
 * offset, and cutting there drops only records of cycle `c` or later.
 */
async function offsetProblem(
  fh: FileHandle,
  size: number,
  raw: unknown,
  c: number,
  f: JsonlFile,
  index: CycleIndex,
): Promise<string | null> {
  if (raw === undefined) return 'is missing';
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 0)
    return 'is not a byte offset (a whole number from 0)';
  if (raw > size) return `is past its end (${size} bytes)`;
  if (raw > 0 && (await byteAt(fh, raw - 1)) !== 10) return 'is not at the start of a line';
  for (const [k, entry] of Object.entries(index)) {
    const before = Object.hasOwn(entry, f) ? entry[f] : undefined;
    if (Number(k) < c && typeof before === 'number' && before > raw)
      return `is before cycle ${k}'s (${before}): the offsets do not increase`;
  }
  for (let at = raw, n = 0; at < size; n++) {
    const line = await lineFrom(fh, at, size);
    if (!line) return `would cut the line at byte ${at}, which is not a complete record line`;
    const k = cycleOf(line.bytes);
    if (k === null) return `would cut the line at byte ${at}, which is not a record`;
    if (k < c) return `would cut a record of cycle ${k} (finished) at byte ${at}`;
    at = line.next;
  }
  return null;
}

/** `raw` as a message shows it (at most 40 characters). */
const shownOffset = (raw: unknown) => {
  const t = raw === undefined ? 'none' : (JSON.stringify(raw) ?? String(raw));
  return t.length > 40 ? `${t.slice(0, 40)}…` : t;
};

/**
 * If the .jsonl open at `fh` ends in a line without its newline (a torn write), cut that line off,
 * keeping every complete line; the warning, or null if the file was whole.
 */
async function repairOpen(fh: FileHandle, path: string): Promise<string | null> {
  const total = (await fh.stat()).size;
  let keep = 0;
  let lines = 0;
  const chunk = Buffer.alloc(CHUNK);
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
  await fh.truncate(keep);
  return tornMessage(path, lines + 1, `${total - keep} bytes`, 'dropped it and kept the complete lines before it');
}

/**
 * If the .jsonl at `path` ends in a line without its newline (a torn write), cut that line off,
 * keeping every complete line. Returns a warning, or null if the file was whole (or absent). For
 * any append-only .jsonl (a run's files, a --record transcript). The file is opened without
 * following a link and checked on its descriptor (safe_write.ts): a link is a LinkedFileError, a
 * FIFO, device or directory a SpecialFileError, and nothing is cut.
 */
export async function repairJsonlTail(path: string): Promise<string | null> {
  const fh = await openForWrite(path);
  if (!fh) return null;
  try {
    return await repairOpen(fh, path);
  } finally {
    await fh.close();
  }
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
   * Check every file the run writes before the first write: each .jsonl must be a regular file that
   * is the run's own (not a link, not a FIFO or device: a LinkedFileError or SpecialFileError naming
   * it, and nothing is written), and a torn last line is cut off (with a warning) so that nothing
   * is appended to it; config.json, state.json, memory.json and .cycles.json must not be links.
   * Other bad lines stay where they are: reads skip each, with a warning. Runs once per store,
   * before its first writeCycle (a resumed loop calls it through prepare() before its first
   * cycle). Returns the warnings.
   */
  async repair(): Promise<string[]> {
    const found: string[] = [];
    for (const f of JSON_FILES) await checkWritable(this.p(f));
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

  /** Before a run's first cycle: repair() once (links and special files refused, torn lines cut). */
  async prepare(): Promise<void> {
    if (!this.checked) await this.repair();
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

  /**
   * The index, or an empty one (rebuilt from the lines) when it is not what a run writes: not JSON,
   * not cycles to offsets, over 1 MiB, or not a regular file — each said in a warning.
   */
  private async readIndex(path: string): Promise<CycleIndex> {
    let data: unknown;
    try {
      const text = await readBounded(path, 2 ** 20);
      if (text === null) return {};
      data = JSON.parse(text);
    } catch (err) {
      if (!(err instanceof SyntaxError) && !(err instanceof StorageError)) throw err;
      const why = err instanceof FileTooLargeError ? 'it is over 1 MiB' : (err as Error).message.slice(0, 120);
      this.warn(`${path} is unreadable (${why}); its offsets were rebuilt from the lines.`);
      return {};
    }
    if (isCycleIndex(data)) return data;
    this.warn(
      `${path} is not what a run writes (it must map each cycle to the byte offsets of its .jsonl files); its offsets were rebuilt from the lines.`,
    );
    return {};
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
  /**
   * Append cycle `cycle`'s lines, first cutting each .jsonl back to where that cycle began (a cycle
   * written again replaces its lines). Where it began comes from .cycles.json when the offset there
   * passes offsetProblem's checks, else from the lines (with a warning naming the index, which is
   * rewritten); a cycle first written records each file's start in the index before appending.
   */
  async writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ) {
    await this.prepare();
    const handles = new Map<JsonlFile, FileHandle>();
    try {
      // opened without following a link and checked on the descriptor: every cut and append goes there
      for (const f of FILES) handles.set(f, (await openForWrite(this.p(f), { create: true, append: true }))!);
      const indexPath = this.p('.cycles.json');
      const index = await this.readIndex(indexPath);
      const key = String(cycle);
      const entry = Object.hasOwn(index, key) ? index[key]! : undefined;
      const at = {} as Record<JsonlFile, number>;
      let rewrite = entry === undefined;
      for (const f of FILES) {
        const fh = handles.get(f)!;
        const size = (await fh.stat()).size;
        if (entry !== undefined) {
          const raw = Object.hasOwn(entry, f) ? entry[f] : undefined;
          const problem = await offsetProblem(fh, size, raw, cycle, f, index);
          if (problem === null) {
            at[f] = raw as number;
            continue;
          }
          at[f] = await cycleStartFromLines(fh, size, cycle);
          rewrite = true;
          this.warn(
            `${indexPath}: cycle ${cycle}'s offset in ${f} (${shownOffset(raw)}) ${problem}; rebuilt from the lines: ${at[f]}.`,
          );
          continue;
        }
        at[f] = await cycleStartFromLines(fh, size, cycle);
        if (at[f] < size)
          this.warn(
            `${this.p(f)} ends in ${size - at[f]} bytes of lines of cycle ${cycle} or later that ${indexPath} does not list (a crash before the index was written?); they were replaced.`,
          );
      }
      if (rewrite) {
        index[key] = at;
        await writeJson(indexPath, index);
      }
      const lines = (xs: unknown[]) => xs.map((x) => `${JSON.stringify(x)}\n`).join('');
      const text: Record<JsonlFile, string> = {
        'archive.jsonl': lines(data.archive),
        'rollouts.jsonl': lines(data.rollouts),
        'metrics.jsonl': lines([data.metrics]),
      };
      for (const f of FILES) {
        const fh = handles.get(f)!;
        if ((await fh.stat()).size > at[f]) await fh.truncate(at[f]);
        await fh.writeFile(text[f]);
      }
    } finally {
      for (const fh of handles.values()) await fh.close().catch(() => undefined);
    }
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
