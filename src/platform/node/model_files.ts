/**
 * A checkpoint directory on disk as ModelFiles (Node only): list() walks it, read() streams a
 * file with byte progress. Names are '/'-separated paths relative to the directory; a name that
 * would leave it ("../x", absolute paths) is rejected.
 */
import { createReadStream } from 'node:fs';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { ModelLoadError } from '../../core/errors.ts';
import {
  checkFileName,
  notFound,
  type FileProgressFn,
  type ModelFileInfo,
  type ModelFiles,
} from '../../engine/engine_api.ts';

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
    let size: number;
    try {
      const st = await stat(p);
      if (!st.isFile()) throw notFound(name, this.dir);
      size = st.size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw notFound(name, this.dir);
      throw err;
    }
    const buf = new Uint8Array(size);
    let loaded = 0;
    onProgress?.(0, size);
    const stream = createReadStream(p, { highWaterMark: 1 << 20, signal });
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (loaded + chunk.length > size)
        throw new ModelLoadError(`${name} grew while it was being read`, { code: 'changed', file: name });
      buf.set(chunk, loaded);
      loaded += chunk.length;
      onProgress?.(loaded, size);
    }
    if (loaded !== size)
      throw new ModelLoadError(`${name}: read ${loaded} of ${size} bytes (the file changed?)`, {
        code: 'truncated',
        file: name,
      });
    return buf;
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
