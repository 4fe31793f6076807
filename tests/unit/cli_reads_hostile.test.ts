// Every file the CLI reads goes through one bounded, regular-files-only reader
// (platform/node/regular_file.ts): a FIFO, a device (or a symlink to one, under an innocent name), a
// directory or a socket is refused with a SpecialFileError naming the file before any byte is read,
// and a file past its bound is refused with a FileTooLargeError once the bound is passed — never a
// hang, never gigabytes read. Containment is asserted by cause: the typed error and its data.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, open, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { isNotFound } from '../../src/engine/io/model_files.ts';
import { DirModelFiles } from '../../src/platform/node/model_files.ts';

const newDir = (p = 'spade-cli-reads-') => mkdtemp(join(tmpdir(), p));
const mkfifo = (path: string) => execFileSync('mkfifo', [path]);

async function cli(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err: err.join('\n') };
}

/** A sparse file of `bytes` bytes (no disk used): a file past a bound without writing it. */
async function sparse(path: string, bytes: number): Promise<void> {
  const fh = await open(path, 'w');
  await fh.truncate(bytes);
  await fh.close();
}

describe('`spade lab compare --combine` reads regular files within a bound', () => {
  it('refuses a FIFO, /dev/zero, a .txt symlink to /dev/zero and a directory, naming the file', async () => {
    const d = await newDir();
    mkfifo(join(d, 'pipe.txt'));
    await symlink('/dev/zero', join(d, 'zero.txt'));
    await mkdir(join(d, 'folder.txt'));
    for (const [file, kind] of [
      ['pipe.txt', /FIFO \(named pipe\)/],
      ['/dev/zero', /character device/],
      ['zero.txt', /character device/],
      ['folder.txt', /directory/],
    ] as const) {
      const path = file.startsWith('/') ? file : join(d, file);
      const r = await cli(['lab', 'compare', '--combine', path, '--json']);
      expect(r.code, file).toBe(1);
      expect(r.err, file).toContain(`${path} is`);
      expect(r.err, file).toMatch(kind);
      expect(r.err, file).toMatch(/SpecialFileError/);
    }
  });

  it('refuses a file past the bound of a compare output (64 MiB) before reading it whole', async () => {
    const d = await newDir();
    await sparse(join(d, 'big.txt'), 64 * 2 ** 20 + 1);
    const r = await cli(['lab', 'compare', '--combine', join(d, 'big.txt'), '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/FileTooLargeError: .*big\.txt is 64\.0 MiB; at most 64 MiB of it is read/);
  });

  it('a missing file is a usage error naming the flag; a good one still combines', async () => {
    const d = await newDir();
    const r = await cli(['lab', 'compare', '--combine', join(d, 'absent.txt'), '--json']);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`--combine ${join(d, 'absent.txt')}: no such file`);
    const run = {
      seed: 4,
      designer: 'fixed',
      curve: [0.1, 0.2],
      medianRegret: [0, 0],
      distinctLevels: [1, 1],
      seconds: 1,
    };
    await writeFile(join(d, 'a.txt'), `run ${JSON.stringify(run)}\n`);
    const ok = await cli([
      'lab',
      'compare',
      '--arms',
      'fixed,random',
      '--spade',
      'fixed',
      '--combine',
      join(d, 'a.txt'),
      '--json',
    ]);
    expect(ok.code, ok.err).toBe(0);
    expect((JSON.parse(ok.out.at(-1)!) as { runs: unknown[] }).runs).toHaveLength(1);
  });
});

describe('a checkpoint directory is read as regular files, within the size stat gave', () => {
  it('a FIFO, a link to /dev/zero or a directory named as a weights file reads as not found, unread', async () => {
    const d = await newDir('spade-model-dir-');
    mkfifo(join(d, 'model.safetensors'));
    await symlink('/dev/zero', join(d, 'adapter_model.safetensors'));
    await mkdir(join(d, 'config.json'));
    const files = new DirModelFiles(d);
    for (const name of ['model.safetensors', 'adapter_model.safetensors', 'config.json']) {
      const e = await files.read(name).catch((x: unknown) => x);
      expect(isNotFound(e), name).toBe(true);
    }
    // listing shows none of them as a file to load
    expect((await files.list()).map((f) => f.name)).toEqual([]);
  });

  it('reads a file whole with byte progress, and refuses one that holds more than stat said', async () => {
    const d = await newDir('spade-model-dir-');
    await writeFile(join(d, 'a.bin'), Buffer.alloc(3 * 2 ** 20 + 5, 7));
    const seen: number[] = [];
    const bytes = await new DirModelFiles(d).read('a.bin', (n) => seen.push(n));
    expect(bytes.length).toBe(3 * 2 ** 20 + 5);
    expect(seen).toEqual([0, 2 ** 20, 2 * 2 ** 20, 3 * 2 ** 20, 3 * 2 ** 20 + 5]);
    // a /proc file says size 0 and holds text: refused, not read past its stat size
    await symlink('/proc/self/status', join(d, 'status'));
    await expect(new DirModelFiles(d).read('status')).rejects.toThrow(/status grew while it was being read/);
  });
});
