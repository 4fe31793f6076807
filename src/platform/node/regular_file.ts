/**
 * Reading a file that may come from anyone (a run directory, an env set, an environment, a
 * transcript): regular files only, and never more than a bound of bytes actually read.
 *
 * The file is opened without blocking (O_NONBLOCK: opening a FIFO for reading returns at once
 * instead of waiting for a writer) and checked on the open descriptor (fstat), so a FIFO, a
 * device (`/dev/zero`), a socket or a directory is refused with a SpecialFileError before one byte
 * is read, and a file swapped for one between a check and the read is still caught. The bound is
 * counted on the bytes read, not on stat's size, which a growing file (or a device) does not keep.
 */
import { constants } from 'node:buffer';
import { constants as fs, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { FileTooLargeError, SpecialFileError, StorageError, UsageError } from '../../core/errors.ts';

/** The most bytes any read here returns: the longest string V8 can make from them (about 512 MiB). */
export const MAX_TEXT_BYTES = constants.MAX_STRING_LENGTH;

/** Bytes asked for per read once the file's stat size is passed (a file still being written). */
const CHUNK = 1 << 20;

/** What a non-regular file is, in words. */
export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** Bytes in MiB as messages show them: `64.0 MiB` (a bound: `64 MiB` when whole). */
const mib = (n: number) => `${(n / 2 ** 20).toFixed(n % 2 ** 20 === 0 ? 0 : n < 2 ** 20 ? 2 : 1)} MiB`;

/**
 * The regular file at `path` opened for reading, with its stat; null when nothing is there. The file
 * is opened without blocking and checked on the descriptor: a FIFO, device, socket or directory is
 * a SpecialFileError before any read, and a file swapped for one after a check is caught too. For
 * readers that stream (a checkpoint's weights, past a string's size); the caller closes it.
 */
export async function openRegularFile(path: string): Promise<{ fh: FileHandle; st: Stats } | null> {
  let fh: FileHandle;
  try {
    fh = await open(path, fs.O_RDONLY | fs.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    // a socket cannot be opened at all (ENXIO); say what it is rather than the errno
    if (code === 'ENXIO' || code === 'EOPNOTSUPP')
      throw new SpecialFileError(
        `${path} is a socket or device without a reader, not a regular file; it was not read.`,
        {
          path,
        },
      );
    throw new StorageError(`cannot read ${path}: ${(err as Error).message}`, { path });
  }
  try {
    const st = await fh.stat();
    if (!st.isFile())
      throw new SpecialFileError(
        `${path} is ${kindOf(st)}, not a regular file; it was not read. Name a regular file (a copy of the data, not a pipe or a device).`,
        { path, kind: kindOf(st) },
      );
    return { fh, st };
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The bytes of the regular file at `path`, at most `limit` of them; null when nothing is there.
 * A FIFO, device, socket or directory is a SpecialFileError (before any read); a file over
 * `limit` bytes a FileTooLargeError once limit + 1 bytes were read; other failures a StorageError.
 */
export async function readRegularBytes(
  path: string,
  limit: number = MAX_TEXT_BYTES,
  advice = 'Check that it is the file meant, or trim it.',
): Promise<Buffer | null> {
  const opened = await openRegularFile(path);
  if (!opened) return null;
  const { fh, st } = opened;
  try {
    const cap = Math.min(limit, MAX_TEXT_BYTES);
    const tooBig = (what: string) =>
      new FileTooLargeError(`${path} ${what}; at most ${mib(cap)} of it is read. ${advice}`, { path, limit: cap });
    // what stat says is enough to refuse a regular file unread; the count below catches one that grows
    if (st.size > cap) throw tooBig(`is ${mib(st.size)}`);
    const chunks: Buffer[] = [];
    let total = 0;
    // first read sized by stat (one allocation for a file that is what stat says); then chunks
    let want = Math.min(cap + 1, Math.max(st.size + 1, 64 * 1024));
    for (;;) {
      const buf = Buffer.allocUnsafe(want);
      let filled = 0;
      while (filled < want) {
        const { bytesRead } = await fh.read(buf, filled, want - filled, null);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      total += filled;
      chunks.push(filled === want ? buf : buf.subarray(0, filled));
      if (total > cap) throw tooBig(`holds more than ${mib(cap)} (it grew while it was read)`);
      if (filled < want) break; // end of file
      want = Math.min(cap + 1 - total, CHUNK);
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** readRegularBytes as UTF-8 text. */
export async function readRegularText(path: string, limit?: number, advice?: string): Promise<string | null> {
  const bytes = await readRegularBytes(path, limit, advice);
  return bytes === null ? null : bytes.toString('utf8');
}

/**
 * A file a person named on the command line (`--config`, `--memory`, `--replay`, a corpus,
 * `--combine`): its text, read as readRegularText reads it (at most `limit` bytes); a file that is
 * not there is a UsageError naming the flag.
 */
export async function readUserFile(path: string, what: string, limit?: number): Promise<string> {
  const text = await readRegularText(path, limit);
  if (text === null) throw new UsageError(`${what} ${path}: no such file`, { path });
  return text;
}
