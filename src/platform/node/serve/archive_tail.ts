/**
 * A watched run directory's archive.jsonl, read as the loop appends to it: each read() reads only
 * the bytes that are new since the last one, so an idle `spade serve --watch` reads nothing and a
 * step's latency does not depend on the archive's size.
 *
 * What it keeps between reads: the file's identity (device and inode), its size and mtime at the
 * last read, the offset just past the last complete line it parsed, the last CHECK_BYTES bytes
 * before that offset, the number of lines parsed and the keys seen (for repeats). Then:
 *
 * - the same file, the same size and mtime: nothing is read (mode 'unchanged', 0 bytes);
 * - the same file, not shorter than the offset: the bytes from the offset to the size stat gave,
 *   plus the CHECK_BYTES before the offset, which must be the ones kept (mode 'appended'); if they
 *   are not, the file was rewritten in place (a resumed cycle cut and written again) and is read
 *   whole;
 * - another file at the path (a new device or inode: replaced, e.g. renamed over), or one shorter
 *   than the offset (truncated): read whole (mode 'full'), its lines counted again from 1;
 * - nothing at the path: mode 'missing', and the next file there is read whole.
 *
 * Reads go through openRegularFile (regular files only, checked on the descriptor; a FIFO or device
 * is a SpecialFileError before any read) and stop at the size stat gave, which must be within the
 * archive's bound (a FileTooLargeError otherwise); what is appended while a read runs is read the
 * next time. Only complete lines are parsed: a last line without its newline (the loop mid-write)
 * is left for the next read, not skipped. Each line is read against the run-record schema
 * (parseRunLine); a bad line or a repeat is skipped and named (`FILE line N: …`) as
 * DirRunStore does. A whole read yields to the event loop every MiB parsed, so even the first read
 * of a large archive does not hold up the sessions' steps.
 */
import type { Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { FileTooLargeError } from '../../../core/errors.ts';
import { parseRunLine, RUN_LINES } from '../../../core/spade/run_file.ts';
import type { ArchiveRecord } from '../../../core/spade/run_store.ts';
import { openRegularFile } from '../regular_file.ts';

/** Bytes before the last parsed offset read again on an append, to tell an append from a rewrite. */
export const CHECK_BYTES = 64;
/** Bytes parsed between two yields to the event loop. */
const YIELD_BYTES = 2 ** 20;
/** Bytes asked for per read call. */
const CHUNK = 2 ** 20;

export type TailMode = 'unchanged' | 'appended' | 'full' | 'missing';

export interface TailRead {
  mode: TailMode;
  /** Bytes this read took from the file (the check bytes included). */
  bytes: number;
  /** The records in the lines that are new since the last read. */
  records: ArchiveRecord[];
  /** Lines skipped (not JSON, not a valid record, a repeat), each named with its file and line. */
  warnings: string[];
}

interface Kept {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  /** Just past the last complete line parsed. */
  offset: number;
  /** The CHECK_BYTES (or fewer) before `offset`. */
  check: Buffer;
  /** Lines parsed so far. */
  lines: number;
  /** Each record's key and the line it was on. */
  seen: Map<string, number>;
}

export class ArchiveTail {
  private kept: Kept | null = null;
  /** Bytes read from the file over every read(). */
  bytesRead = 0;
  /** read() calls finished. */
  reads = 0;
  /** The last read's mode and bytes. */
  last: { mode: TailMode; bytes: number } = { mode: 'missing', bytes: 0 };

  constructor(
    readonly path: string,
    private readonly maxBytes: number,
  ) {}

  async read(): Promise<TailRead> {
    const r = await this.readOnce();
    this.reads++;
    this.bytesRead += r.bytes;
    this.last = { mode: r.mode, bytes: r.bytes };
    return r;
  }

  private async readOnce(): Promise<TailRead> {
    const opened = await openRegularFile(this.path);
    if (!opened) {
      this.kept = null;
      return { mode: 'missing', bytes: 0, records: [], warnings: [] };
    }
    const { fh, st } = opened;
    try {
      if (st.size > this.maxBytes)
        throw new FileTooLargeError(
          `${this.path} is ${(st.size / 2 ** 20).toFixed(1)} MiB; at most ${this.maxBytes / 2 ** 20} MiB of it is read.`,
          { path: this.path, limit: this.maxBytes },
        );
      const k = this.kept;
      const same = k !== null && k.dev === st.dev && k.ino === st.ino;
      if (same && st.size === k.size && st.mtimeMs === k.mtimeMs)
        return { mode: 'unchanged', bytes: 0, records: [], warnings: [] };
      if (same && st.size >= k.offset) {
        const from = k.offset - k.check.length;
        const buf = await readRange(fh, from, st.size);
        if (buf.subarray(0, k.check.length).equals(k.check)) {
          const out = await this.parse(buf, k.check.length, from, st);
          return { mode: 'appended', bytes: buf.length, ...out };
        }
        // the bytes before the offset changed: rewritten in place, read whole
        const whole = await readRange(fh, 0, st.size);
        this.kept = null;
        const out = await this.parse(whole, 0, 0, st);
        return { mode: 'full', bytes: buf.length + whole.length, ...out };
      }
      const whole = await readRange(fh, 0, st.size);
      this.kept = null;
      const out = await this.parse(whole, 0, 0, st);
      return { mode: 'full', bytes: whole.length, ...out };
    } finally {
      await fh.close().catch(() => undefined);
    }
  }

  /**
   * Parse the complete lines of `buf` from `start` (`buf` begins at file offset `base`), and keep
   * where they end; a last line without its newline is left for the next read.
   */
  private async parse(
    buf: Buffer,
    start: number,
    base: number,
    st: Stats,
  ): Promise<{ records: ArchiveRecord[]; warnings: string[] }> {
    const k: Kept = this.kept ?? {
      dev: st.dev,
      ino: st.ino,
      size: 0,
      mtimeMs: 0,
      offset: 0,
      check: Buffer.alloc(0),
      lines: 0,
      seen: new Map(),
    };
    const records: ArchiveRecord[] = [];
    const warnings: string[] = [];
    const key = RUN_LINES['archive.jsonl'].key;
    let pos = start;
    let sinceYield = 0;
    for (let nl = buf.indexOf(10, pos); nl >= 0; nl = buf.indexOf(10, pos)) {
      const raw = buf.toString('utf8', pos, nl);
      sinceYield += nl + 1 - pos;
      pos = nl + 1;
      const line = ++k.lines;
      if (sinceYield >= YIELD_BYTES) {
        sinceYield = 0;
        await new Promise((r) => setImmediate(r));
      }
      if (!raw.trim()) continue;
      let rec: ArchiveRecord;
      try {
        rec = parseRunLine('archive.jsonl', JSON.parse(raw));
      } catch (err) {
        const why =
          err instanceof SyntaxError ? `not valid JSON (${err.message.slice(0, 120)})` : (err as Error).message;
        warnings.push(`${this.path} line ${line}: ${why.slice(0, 300)} The line was skipped.`);
        continue;
      }
      const kk = key(rec);
      const first = k.seen.get(kk);
      if (first !== undefined) {
        warnings.push(`${this.path} line ${line} repeats line ${first} (${kk}); the line was skipped.`);
        continue;
      }
      k.seen.set(kk, line);
      records.push(rec);
    }
    k.offset = base + pos;
    k.check = Buffer.from(buf.subarray(Math.max(0, pos - CHECK_BYTES), pos));
    k.size = st.size;
    k.mtimeMs = st.mtimeMs;
    this.kept = k;
    return { records, warnings };
  }
}

/** Bytes [from, to) of an open file (fewer when it ends sooner). */
async function readRange(fh: FileHandle, from: number, to: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(to - from);
  let filled = 0;
  while (filled < buf.length) {
    const { bytesRead } = await fh.read(buf, filled, Math.min(CHUNK, buf.length - filled), from + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled === buf.length ? buf : buf.subarray(0, filled);
}
