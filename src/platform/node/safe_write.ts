/**
 * Writing inside a folder that may come from anyone (a run directory and its train/ folder): only
 * to regular files that are the folder's own, never through a link — the write-side counterpart of
 * regular_file.ts.
 *
 * Every file is opened without following a link (O_NOFOLLOW: a symbolic link in the file's place
 * fails the open itself) and without blocking (O_NONBLOCK), then checked on the open descriptor
 * (fstat): anything but a regular file is a SpecialFileError, a regular file with a second hard link
 * (the same bytes under another name, perhaps outside the run) a LinkedFileError — so there is no
 * window between a check and the write in which the file could be swapped. Cuts and appends go
 * through that descriptor. Whole files are written to a temp file created exclusively (O_EXCL:
 * never an existing file or link) and renamed over the target, which replaces a directory entry and
 * never writes through it; a target that is a link is refused all the same, so that the run says so
 * instead of quietly replacing a link someone made. A subfolder (train/) must be a real folder.
 */
import { constants as fs } from 'node:fs';
import { lstat, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { LinkedFileError, SpecialFileError, StorageError } from '../../core/errors.ts';
import { kindOf } from './regular_file.ts';

/** What to do with a link found where a run writes. */
const ADVICE = 'Replace it with a copy of the file (or folder), or continue in a new --out.';

function symlinkRefused(path: string): LinkedFileError {
  return new LinkedFileError(
    `${path} is a symbolic link; a run directory is written only in its own files, never through a link (it may point anywhere). ${ADVICE}`,
    { path, kind: 'symbolic link' },
  );
}

function hardLinkRefused(path: string, links: number): LinkedFileError {
  return new LinkedFileError(
    `${path} has ${links} hard links (the same file under other names, perhaps outside the run); a run directory is written only in files that are its own. ${ADVICE}`,
    { path, kind: 'hard link', links },
  );
}

/**
 * `path` opened for reading and writing, without following a link: a regular file with one link,
 * or null when absent (unless `create`). `append`: every write goes to the end (a cut by
 * `truncate` still works). A link is a LinkedFileError; a FIFO, device, socket or directory a
 * SpecialFileError; both name the file, and neither is opened for writing.
 */
export async function openForWrite(
  path: string,
  opts: { create?: boolean; append?: boolean } = {},
): Promise<FileHandle | null> {
  const flags =
    fs.O_RDWR | fs.O_NOFOLLOW | fs.O_NONBLOCK | (opts.create ? fs.O_CREAT : 0) | (opts.append ? fs.O_APPEND : 0);
  let fh: FileHandle;
  try {
    fh = await open(path, flags, 0o666);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !opts.create) return null;
    if (code === 'ELOOP' || code === 'EMLINK') throw symlinkRefused(path);
    if (code === 'EISDIR')
      throw new SpecialFileError(`${path} is a directory, not a regular file; nothing was written to it.`, {
        path,
        kind: 'a directory',
      });
    if (code === 'ENXIO' || code === 'EOPNOTSUPP')
      throw new SpecialFileError(`${path} is a socket or device, not a regular file; nothing was written to it.`, {
        path,
      });
    throw new StorageError(`cannot write ${path}: ${(err as Error).message}`, { path });
  }
  try {
    const st = await fh.stat();
    if (!st.isFile())
      throw new SpecialFileError(`${path} is ${kindOf(st)}, not a regular file; nothing was written to it.`, {
        path,
        kind: kindOf(st),
      });
    if (st.nlink > 1) throw hardLinkRefused(path, st.nlink);
    return fh;
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}

/** Append `text` to the file at `path` (created when absent), through openForWrite's checks. */
export async function appendToFile(path: string, text: string): Promise<void> {
  const fh = (await openForWrite(path, { create: true, append: true }))!;
  try {
    await fh.writeFile(text);
  } finally {
    await fh.close();
  }
}

/**
 * Write `data` as the whole of `path`: into `tmp` (created exclusively, without following a link;
 * one left over by a crash, or planted, is removed first — unlink removes a link, not its target),
 * then renamed over `path`. A `path` that is a link is a LinkedFileError, one that is a folder a
 * SpecialFileError.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  tmp = `${path}.${process.pid}.tmp`,
): Promise<void> {
  await checkWritable(path);
  const flags = fs.O_WRONLY | fs.O_CREAT | fs.O_EXCL | fs.O_NOFOLLOW | fs.O_NONBLOCK;
  let fh: FileHandle;
  try {
    fh = await open(tmp, flags, 0o666);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new StorageError(`cannot write ${tmp}: ${(err as Error).message}`, { path: tmp });
    await unlink(tmp).catch((e: NodeJS.ErrnoException) => {
      throw new StorageError(`cannot replace ${tmp}: ${e.message}`, { path: tmp });
    });
    fh = await open(tmp, flags, 0o666);
  }
  try {
    await fh.writeFile(data);
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}

/** Refuse a file written whole (or cut and appended) that is a link or a folder; absent is fine. */
export async function checkWritable(path: string): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new StorageError(`cannot write ${path}: ${(err as Error).message}`, { path });
  }
  if (st.isSymbolicLink()) throw symlinkRefused(path);
  if (st.isDirectory())
    throw new SpecialFileError(`${path} is a directory, not a regular file; nothing was written to it.`, {
      path,
      kind: 'a directory',
    });
}

/**
 * The folder `name` inside `dir` (made when absent): a real folder, not a link out of the run
 * (LinkedFileError) nor a file (StorageError). Returns its path.
 */
export async function runSubdir(dir: string, name: string): Promise<string> {
  const path = join(dir, name);
  await mkdir(dir, { recursive: true }); // the run directory itself: the one the user named
  try {
    await mkdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new StorageError(`cannot make ${path}: ${(err as Error).message}`, { path });
  }
  const st = await lstat(path);
  if (st.isSymbolicLink()) throw symlinkRefused(path);
  if (!st.isDirectory())
    throw new StorageError(`${path} is not a folder (a run keeps its ${name} files in one). ${ADVICE}`, { path });
  return path;
}
