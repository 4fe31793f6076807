// Run directories and the files `spade serve` reads, as a hostile author would leave them: every
// line is read against the run-record schema (a bad one is skipped and named with its file and line,
// never fatal) on every read — serve, --watch, --resume and export; FIFOs, devices, sockets and
// directories are refused before any read; every size bound is counted on the bytes read.
import { execFileSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import { FileTooLargeError, SpecialFileError, StorageError } from '../../src/core/errors.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { SpadeLoop } from '../../src/core/spade/loop.ts';
import { parseRunFileJson, parseRunJsonl } from '../../src/core/spade/run_file.ts';
import type { RunSpec } from '../../src/core/spade/run_store.ts';
import { DirStore } from '../../src/platform/node/dir_store.ts';
import { readRegularText } from '../../src/platform/node/regular_file.ts';
import { DirRunStore } from '../../src/platform/node/run_dir.ts';
import { EnvCatalog, loadCatalog, readRunDir } from '../../src/platform/node/serve/env_catalog.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { archiveRecord, cycleRecords, line, metricsRecord } from '../helpers/run_records.ts';

const newDir = (p = 'spade-hostile-run-') => mkdtemp(join(tmpdir(), p));
const CONFIG: Config = { ...DEFAULTS, seed: 5, playsPerEnv: 2, maxTurns: 12, envsPerSkill: 1, skillsPerCycle: 2 };
const SPEC: RunSpec = {
  config: CONFIG,
  skills: [],
  models: { designer: 'test double', hint: 'test double', agent: 'test double' },
  corpus: 'test',
  createdAt: '2026-11-30T00:00:00Z',
};
const mkfifo = (path: string) => execFileSync('mkfifo', [path]);

/** Lines that parse as JSON but are not an archive record, each with what must be named. */
function badArchiveLines(): [string, string][] {
  const good = archiveRecord(0, 7);
  const without = (k: string) => {
    const r = JSON.parse(JSON.stringify(good)) as Record<string, Record<string, unknown>>;
    delete r.stats![k];
    return JSON.stringify(r);
  };
  const deep = '['.repeat(100_000) + ']'.repeat(100_000);
  return [
    [without('noHint'), 'stats.noHint'],
    [JSON.stringify({ ...good, stats: { ...good.stats, regret: 1e308 } }), 'stats.regret'],
    [JSON.stringify({ ...good, cycle: -1 }), 'cycle'],
    [JSON.stringify({ ...good, setting: 'poker' }), 'setting'],
    [JSON.stringify({ ...good, code: 42 }), 'code'],
    [JSON.stringify({ ...good, attempts: {} }), 'attempts'],
    [JSON.stringify({ ...good, hint: 'x'.repeat(2 ** 20 + 1) }), 'characters'],
    [`{"cycle":0,"index":7,"__proto__":{"valid":true}}`, '__proto__'],
    [`{"cycle":0,"index":7,"x":${deep}}`, 'nests deeper'],
    ['42', 'object'],
    ['null', 'object'],
    ['[]', 'object'],
    ['"archive"', 'object'],
    ['{"cycle": 0, oops}', 'not valid JSON'],
  ];
}

describe('run directory lines are read against the run-record schema', () => {
  it('skips every kind of bad line, naming the file and line, and keeps the good ones', () => {
    const bad = badArchiveLines();
    const text = [line(archiveRecord(0, 0)), ...bad.map(([l]) => `${l}\n`), line(archiveRecord(0, 1))].join('');
    const { records, skipped } = parseRunJsonl(text, 'archive.jsonl', 'runs/x/archive.jsonl');
    expect(records.map((r) => r.index)).toEqual([0, 1]);
    expect(skipped).toHaveLength(bad.length);
    bad.forEach(([, what], i) => {
      expect(skipped[i]).toContain(`runs/x/archive.jsonl line ${i + 2}:`);
      expect(skipped[i]).toContain(what);
      expect(skipped[i]).toMatch(/The line was skipped\.$/);
      expect(skipped[i]!.length).toBeLessThan(600);
    });
    expect(Object.prototype).not.toHaveProperty('valid');
  });

  it('skips a line that repeats an earlier key (the same cycle and task), keeping the first', () => {
    const text = line(archiveRecord(2, 3, { title: 'first' })) + line(archiveRecord(2, 3, { title: 'impostor' }));
    const { records, skipped } = parseRunJsonl(text, 'archive.jsonl');
    expect(records.map((r) => r.title)).toEqual(['first']);
    expect(skipped).toEqual(['archive.jsonl line 2 repeats line 1 (cycle 2, task 3); the line was skipped.']);
  });

  it('keeps well-formed training tokens and drops malformed ones without refusing the line', () => {
    const tokens = { prompt: [1, 2], completion: [3], logprobs: [-0.5] };
    const a = archiveRecord(0, 0, {
      attempts: [{ reply: 'r', code: null, ok: true, failures: [], tokens }],
    });
    const b = { ...archiveRecord(0, 1), attempts: [{ reply: 'r', code: null, ok: true, failures: [], tokens: 'x' }] };
    const { records, skipped } = parseRunJsonl(line(a) + line(b), 'archive.jsonl');
    expect(skipped).toEqual([]);
    expect(records[0]!.attempts[0]!.tokens).toEqual(tokens);
    expect(records[1]!.attempts[0]).not.toHaveProperty('tokens');
  });
});

describe('`spade serve` reading a hostile run directory', () => {
  it('serves the good environments of a run whose archive has bad lines, naming each bad line', async () => {
    const dir = await newDir();
    const bad = badArchiveLines();
    await writeFile(
      join(dir, 'archive.jsonl'),
      line(archiveRecord(0, 0)) + bad.map(([l]) => `${l}\n`).join('') + line(archiveRecord(0, 1)),
    );
    const read = await readRunDir(dir, 'r');
    expect(read.entries.map((e) => e.rec.id)).toEqual(['r:c0:0', 'r:c0:1']);
    expect(read.warnings).toHaveLength(bad.length);
    expect(read.warnings[0]).toContain(`${join(dir, 'archive.jsonl')} line 2:`);
    expect(read.entries[0]!.from).toBe(`${join(dir, 'archive.jsonl')} (cycle 0, task 0)`);
  });

  it('--watch: reports a bad line once, goes on serving the new environments, survives a FIFO swapped in', async () => {
    const dir = await newDir();
    const archive = join(dir, 'archive.jsonl');
    await writeFile(archive, line(archiveRecord(0, 0)));
    const catalog = new EnvCatalog(
      'w',
      (await readRunDir(dir)).entries.map((e) => e.rec),
    );
    const logs: string[] = [];
    const errors: string[] = [];
    catalog.logTo((l) => logs.push(l));
    let added = 0;
    const waitFor = async (cond: () => boolean) => {
      for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(cond()).toBe(true);
    };
    catalog.watch(
      dir,
      20,
      (n) => (added += n),
      (e) => errors.push(e.message),
    );
    try {
      await appendFile(archive, `${badArchiveLines()[0]![0]}\n` + line(archiveRecord(1, 0)));
      await waitFor(() => added === 1);
      expect(catalog.size).toBe(2);
      // the bad line is named once, however many times the directory is read again
      await new Promise((r) => setTimeout(r, 150));
      expect(logs.filter((l) => l.includes('line 2'))).toHaveLength(1);
      // a FIFO in the archive's place: one error, no hang; the watcher goes on once it is a file again
      const saved = await readFile(archive, 'utf8');
      await rm(archive);
      mkfifo(archive);
      await waitFor(() => errors.length > 0);
      await new Promise((r) => setTimeout(r, 150));
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/archive\.jsonl is a FIFO \(named pipe\), not a regular file/);
      await rm(archive);
      await writeFile(archive, saved + line(archiveRecord(2, 0)));
      await waitFor(() => added === 2);
      expect(catalog.list().map((e) => e.id)).toEqual([
        `${dir.split('/').pop()}:c0:0`,
        `${dir.split('/').pop()}:c1:0`,
        `${dir.split('/').pop()}:c2:0`,
      ]);
    } finally {
      catalog.stop();
    }
  });

  it('gives two run directories with the same base name distinct ids, and serves all their environments', async () => {
    const [a, b] = [await newDir(), await newDir()];
    for (const d of [a, b]) {
      await mkdir(join(d, 'run'));
      await writeFile(
        join(d, 'run', 'archive.jsonl'),
        line(archiveRecord(0, 0, { title: `${d} 0` })) +
          line(archiveRecord(0, 1, { code: `// ${d}\n${archiveRecord(0, 1).code}` })),
      );
    }
    const catalog = await loadCatalog([join(a, 'run'), join(b, 'run')]);
    expect(catalog.size).toBe(4);
    expect(catalog.list().map((e) => e.id)).toEqual(['run:c0:0', 'run:c0:1', 'run~2:c0:0', 'run~2:c0:1']);
    // a third and a watched one with the same name too
    const c = await newDir();
    await mkdir(join(c, 'run'));
    await writeFile(join(c, 'run', 'archive.jsonl'), line(archiveRecord(0, 0)));
    const three = await loadCatalog([join(a, 'run'), join(b, 'run')], () => undefined, join(c, 'run'));
    expect(three.list().map((e) => e.id)).toContain('run~3:c0:0');
  });
});

describe('resume and export read a run directory the same way', () => {
  const corpus = chunkText('Binary search halves an interval.\n\nEach probe tells which half holds it.', 'doc', 50);
  const loop = (store: DirRunStore) => {
    const model = scriptedTrio();
    return new SpadeLoop({
      spec: SPEC,
      models: { designer: model, hint: model, agent: model },
      runner: inProcessRunner(),
      corpus,
      store,
    });
  };
  let dir: string;
  beforeAll(async () => {
    dir = await newDir('spade-hostile-resume-');
    await loop(new DirRunStore(dir)).run(1);
    // a hostile (or older, or damaged) line in each file: valid JSON that is not a record
    await appendFile(join(dir, 'archive.jsonl'), `${badArchiveLines()[0]![0]}\n`);
    await appendFile(join(dir, 'rollouts.jsonl'), '{"cycle":0,"index":0,"play":"first"}\n');
    await appendFile(join(dir, 'metrics.jsonl'), '{"cycle":0}\n');
  });

  it('--resume skips the bad lines (each named once per read) and finishes the run', async () => {
    const warnings: string[] = [];
    const store = new DirRunStore(dir, { onWarning: (w) => warnings.push(w) });
    const state = await loop(store).run(2);
    expect(state.cycle).toBe(2);
    expect((await store.readMetrics()).map((m) => m.cycle)).toEqual([0, 1]);
    expect(warnings.some((w) => /metrics\.jsonl line 2: /.test(w))).toBe(true);
    expect((await store.readArchive()).map((a) => a.cycle)).toEqual([0, 0, 1, 1]);
    expect((await store.readRollouts()).length).toBeGreaterThan(0);
    expect(warnings.some((w) => /archive\.jsonl line \d+: .*stats\.noHint/.test(w))).toBe(true);
    expect(warnings.some((w) => /rollouts\.jsonl line \d+: .*The line was skipped/.test(w))).toBe(true);
  });

  it('`spade run export` writes a valid run file without the bad lines and names them on stderr', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const file = join(dir, 'export.json');
    const code = await main(['run', 'export', dir, '--out', file, '--json'], {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
    });
    expect(code, err.join('\n')).toBe(0);
    const run = parseRunFileJson(await readFile(file, 'utf8'));
    expect(run.metrics.map((m) => m.cycle)).toEqual([0, 1]);
    expect(err.some((l) => /warning: .*archive\.jsonl line \d+: .*The line was skipped/.test(l))).toBe(true);
  });

  it('a config.json or state.json that is not what a run writes is a StorageError naming the file', async () => {
    const d = await newDir();
    await writeFile(join(d, 'state.json'), JSON.stringify({ version: 1, cycle: 'three' }));
    await expect(new DirRunStore(d).readState()).rejects.toThrow(/state\.json is not what a run writes: .*cycle/);
    await writeFile(join(d, 'config.json'), JSON.stringify({ config: { seed: -5 } }));
    const e = await new DirRunStore(d).readSpec().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(StorageError);
    expect((e as Error).message).toMatch(/config\.json is not what a run writes/);
    // a bad index is rebuilt from the lines (resume_hostile.test.ts has the variants), never fatal
    await writeFile(join(d, '.cycles.json'), JSON.stringify({ 0: { 'archive.jsonl': 'x' } }));
    const warnings: string[] = [];
    await new DirRunStore(d, { onWarning: (w) => warnings.push(w) }).writeCycle(0, cycleRecords(0, 1));
    expect(warnings.join('\n')).toMatch(
      /\.cycles\.json: cycle 0's offset in archive\.jsonl \("x"\) is not a byte offset/,
    );
  });
});

describe('regular files only, bounds counted on the bytes read', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await newDir('spade-special-');
  });

  it('refuses a FIFO, a device, a directory and a socket before reading, with what it is', async () => {
    mkfifo(join(dir, 'fifo'));
    await symlink('/dev/zero', join(dir, 'zero'));
    await symlink('/dev/null', join(dir, 'null'));
    await mkdir(join(dir, 'folder'));
    const sock = join(dir, 'sock');
    const server = createServer().listen(sock);
    await new Promise((r) => server.once('listening', r));
    try {
      const cases: [string, RegExp][] = [
        ['fifo', /is a FIFO \(named pipe\), not a regular file/],
        ['zero', /is a character device, not a regular file/],
        ['null', /is a character device, not a regular file/],
        ['folder', /is a directory, not a regular file/],
        ['sock', /socket/],
      ];
      for (const [name, msg] of cases) {
        const e = await readRegularText(join(dir, name)).catch((x: unknown) => x);
        expect(e, name).toBeInstanceOf(SpecialFileError);
        expect((e as Error).message).toMatch(msg);
      }
    } finally {
      server.close();
    }
    expect(await readRegularText(join(dir, 'absent'))).toBeNull();
  });

  it('counts the bound on the bytes read: a file whose stat size is 0 but holds more is refused', async () => {
    // /proc files report size 0 and hold text: only counting what is read catches them
    const e = await readRegularText('/proc/self/status', 16).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(FileTooLargeError);
    expect((e as Error).message).toMatch(/holds more than/);
    expect((await readRegularText('/proc/self/status', 2 ** 20))!.length).toBeGreaterThan(16);
  });

  it('a FIFO or /dev/zero as a run file: serve, resume and export refuse it with the file named', async () => {
    for (const [file, make] of [
      ['archive.jsonl', (p: string) => symlink('/dev/zero', p)],
      ['archive.jsonl', async (p: string) => mkfifo(p)],
      ['config.json', async (p: string) => mkfifo(p)],
      ['state.json', (p: string) => symlink('/dev/zero', p)],
      ['rollouts.jsonl', async (p: string) => mkfifo(p)],
    ] as const) {
      const d = await newDir();
      await writeFile(join(d, 'metrics.jsonl'), line(metricsRecord(0, 1)));
      if (file !== 'config.json') await writeFile(join(d, 'config.json'), JSON.stringify(SPEC));
      await make(join(d, file));
      const store = new DirRunStore(d);
      const reads = {
        'archive.jsonl': () => store.readArchive(),
        'rollouts.jsonl': () => store.readRollouts(),
        'config.json': () => store.readSpec(),
        'state.json': () => store.readState(),
      };
      const e = await reads[file]().catch((x: unknown) => x);
      expect(e, file).toBeInstanceOf(SpecialFileError);
      expect((e as Error).message).toContain(join(d, file));
      // appending is refused too: nothing is written to (or through) a special file — a FIFO as
      // such, a link to /dev/zero as a link (a run writes through no link: resume_hostile.test.ts)
      if (file.endsWith('.jsonl')) {
        const w = await store.writeCycle(1, cycleRecords(1, 1)).catch((x: unknown) => x);
        expect(w, file).toBeInstanceOf(StorageError);
        expect((w as Error).message).toContain(join(d, file));
        expect((w as Error).message).toMatch(/not a regular file|symbolic link/);
      }
      const err: string[] = [];
      const code = await main(['run', 'export', d, '--out', join(d, 'out.json')], {
        out: () => undefined,
        err: (l) => err.push(l),
      });
      expect(code).toBe(1);
      expect(err.at(-1)).toMatch(/SpecialFileError: .*not a regular file/);
    }
  });

  it('`spade validate`, `play` and `share encode` refuse a FIFO or a device instead of hanging on it', async () => {
    const d = await newDir();
    mkfifo(join(d, 'pipe.js'));
    await symlink('/dev/zero', join(d, 'zero.json'));
    await mkdir(join(d, 'dir.js'));
    for (const argv of [
      ['validate', join(d, 'pipe.js')],
      ['play', join(d, 'pipe.js'), '--solution'],
      ['validate', join(d, 'dir.js')],
      ['share', 'encode', join(d, 'zero.json')],
      ['share', 'encode', join(d, 'pipe.js')],
    ]) {
      const err: string[] = [];
      const code = await main(argv, { out: () => undefined, err: (l) => err.push(l) });
      expect(code, argv.join(' ')).not.toBe(0);
      expect(err.join('\n'), argv.join(' ')).toMatch(
        /is a (FIFO \(named pipe\)|character device|directory), not a regular file/,
      );
    }
    // the Node store backend too
    await mkdir(join(d, 'store', 'runs'), { recursive: true });
    mkfifo(join(d, 'store', 'runs', 'r1.json'));
    await expect(new DirStore(join(d, 'store')).get('runs', 'r1')).rejects.toBeInstanceOf(SpecialFileError);
  });

  it('`spade run` refuses a FIFO or a device named by --config, --memory, --replay or --corpus, before reading', async () => {
    const d = await newDir('spade-flags-');
    mkfifo(join(d, 'fifo'));
    await symlink('/dev/zero', join(d, 'zero'));
    // a transcript with its header only: enough to get past --replay to the file under test
    await writeFile(join(d, 'transcript.jsonl'), '{"format":"spade-replay","version":1,"backend":"x","model":"m"}\n');
    for (const [flagName, file] of [
      ['--config', 'fifo'],
      ['--memory', 'zero'],
      ['--replay', 'fifo'],
      ['--corpus', 'zero'],
    ] as const) {
      const special = join(d, file);
      const argv = ['run', '--backend', 'replay', '--out', join(d, `out${flagName}`), flagName, special];
      if (flagName !== '--replay') argv.push('--replay', join(d, 'transcript.jsonl'));
      const err: string[] = [];
      const code = await main(argv, { out: () => undefined, err: (l) => err.push(l) });
      expect(code, argv.join(' ')).not.toBe(0);
      expect(err.join('\n'), argv.join(' ')).toContain(`${special} is a`);
      expect(err.join('\n'), argv.join(' ')).toMatch(/(FIFO \(named pipe\)|character device), not a regular file/);
    }
  });

  it('`spade serve` refuses a FIFO or a device named as an environment or an env set, saying what it is', async () => {
    mkfifo(join(dir, 'env.js'));
    await symlink('/dev/zero', join(dir, 'set.json'));
    await expect(loadCatalog([join(dir, 'env.js')])).rejects.toThrow(/env\.js is a FIFO/);
    await expect(loadCatalog([join(dir, 'set.json')])).rejects.toThrow(/set\.json is a character device/);
    // a run directory that is a file, and one that does not exist
    await writeFile(join(dir, 'plain'), 'x');
    await expect(loadCatalog([join(dir, 'plain')])).rejects.toThrow(/is not a run directory/);
    await expect(loadCatalog([join(dir, 'nowhere')])).rejects.toThrow(/does not exist/);
  });
});
