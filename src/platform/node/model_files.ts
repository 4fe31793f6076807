/**
 * A checkpoint directory on disk as ModelFiles (Node only): list() walks it, read() streams a
 * file with byte progress. Names are '/'-separated paths relative to the directory; a name that
 * would leave it ("../x", absolute paths) is rejected.
 */
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { abortError, ModelLoadError, SpecialFileError } from '../../core/errors.ts';
import {
  checkFileName,
  notFound,
  type FileProgressFn,
  type ModelFileInfo,
  type ModelFiles,
} from '../../engine/engine_api.ts';
import { openRegularFile } from './regular_file.ts';

export class DirModelFiles implements ModelFiles {
  readonly label: string;
  readonly dir: string;

  constructor(dir: string) {
    this.dir = resolve(dir);
    this.label = this.dir;
  }

  private path(name: string): string {
    checkFileName(name);
    const p = resolve(this.dir, ...name.split('/'));
    if (!p.startsWith(this.dir + sep))
      throw new ModelLoadError(`"${name}" is outside ${this.dir}`, { code: 'bad-name' });
    return p;
  }

  async list(): Promise<ModelFileInfo[]> {
    const out: ModelFileInfo[] = [];
    const walk = async (d: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(d, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw notFound('the directory', this.dir);
        throw new ModelLoadError(`cannot list ${d}: ${(err as Error).message}`);
      }
      for (const e of entries) {
        if (e.name.startsWith('.')) continue; // .git, .cache, ...
        const p = join(d, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.isFile()) out.push({ name: relative(this.dir, p).split(sep).join('/'), size: (await stat(p)).size });
      }
    };
    await walk(this.dir);
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  async read(name: string, onProgress?: FileProgressFn, signal?: AbortSignal): Promise<Uint8Array> {
    const p = this.path(name);
    // opened without blocking and checked on the descriptor (regular_file.ts): a FIFO or a device
    // (or a link to one) is refused before any read, as is one swapped in after the listing
    let opened;
    try {
      opened = await openRegularFile(p);
    } catch (err) {
      if (err instanceof SpecialFileError) throw notFound(name, this.dir);
      throw err;
    }
    if (!opened) throw notFound(name, this.dir);
    const { fh, st } = opened;
    try {
      const size = st.size;
      const buf = new Uint8Array(size);
      let loaded = 0;
      onProgress?.(0, size);
      while (loaded < size) {
        if (signal?.aborted) throw abortError(signal);
        const { bytesRead } = await fh.read(buf, loaded, Math.min(1 << 20, size - loaded), loaded);
        if (bytesRead === 0) break;
        loaded += bytesRead;
        onProgress?.(loaded, size);
      }
      if (loaded !== size)
        throw new ModelLoadError(`${name}: read ${loaded} of ${size} bytes (the file changed?)`, {
          code: 'truncated',
          file: name,
        });
      // the bound is stat's size: a file that holds more (it grew, or stat says 0) is refused
      const { bytesRead: more } = await fh.read(new Uint8Array(1), 0, 1, size);
      if (more > 0) throw new ModelLoadError(`${name} grew while it was being read`, { code: 'changed', file: name });
      return buf;
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
}

/** Write files (name → bytes or text) under a directory, creating folders as needed. */
export async function writeModelFiles(dir: string, files: Map<string, Uint8Array | string>): Promise<void> {
  const root = resolve(dir);
  for (const [name, data] of files) {
    checkFileName(name);
    const p = resolve(root, ...name.split('/'));
    await mkdir(dirname(p), { recursive: true });
    await writeFile(p, data);
  }
}
