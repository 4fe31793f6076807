// A resume writes only to regular files inside its run directory, and trusts no offset it reads.
//
// Links: a run directory may come from anyone, so a .jsonl, a JSON file, a temp file's name or the
// train/ folder that is a symbolic link (or a file with a second hard link) is refused with a
// LinkedFileError naming it, before anything is cut or appended — and the file outside the run
// keeps its content and size byte for byte (a torn last line included, which the old repair cut).
//
// Offsets: .cycles.json says where each cycle's lines begin. An offset past a file's end once made
// the cycle truncate *extend* the file with NUL bytes (6 KB → 2 GiB); one mid-line cut a record in
// two; one from an earlier cycle deleted finished cycles. Every offset is now checked against the
// file's size, a line's start, the order of the cycles and the lines it would cut (each a record
// of that cycle or later); a bad one is rebuilt from the lines, with a warning naming the index.
import { execFileSync } from 'node:child_process';
import { link, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attachTraining } from '../../src/cli/run_training.ts';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import { LinkedFileError, SpecialFileError, StorageError } from '../../src/core/errors.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { emptyMemory } from '../../src/core/spade/memory.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { initialState, SpadeLoop } from '../../src/core/spade/loop.ts';
import type { RunSpec } from '../../src/core/spade/run_store.ts';
import { EngineChatModel, engineCapabilities } from '../../src/engine/engine_api.ts';
import { nodeEngine } from '../../src/platform/node/engine.ts';
import { DirRunStore, repairJsonlTail } from '../../src/platform/node/run_dir.ts';
import { runSubdir, writeFileAtomic } from '../../src/platform/node/safe_write.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { cycleRecords, line } from '../helpers/run_records.ts';

const newDir = (p = 'spade-resume-hostile-') => mkdtemp(join(tmpdir(), p));
const CONFIG: Config = { ...DEFAULTS, seed: 5, playsPerEnv: 2, maxTurns: 12, envsPerSkill: 1, skillsPerCycle: 2 };
const SPEC: RunSpec = {
  config: CONFIG,
  skills: [],
  models: { designer: 'test double', hint: 'test double', agent: 'test double' },
  corpus: 'test',
  createdAt: '2026-11-30T00:00:00Z',
};
const FILES = ['archive.jsonl', 'rollouts.jsonl', 'metrics.jsonl'] as const;

/** A file outside every run, with its exact bytes, to check that nothing reached it. */
async function outsideFile(text: string): Promise<{ path: string; text: string }> {
  const path = join(await newDir('spade-outside-'), 'victim.txt');
  await writeFile(path, text);
  return { path, text };
}
async function expectUntouched(f: { path: string; text: string }) {
  expect((await stat(f.path)).size).toBe(Buffer.byteLength(f.text));
  expect(await readFile(f.path, 'utf8')).toBe(f.text);
}

/** A run directory holding cycle 0 (two environments) as DirRunStore wrote it. */
async function runWithCycle0(): Promise<string> {
  const dir = await newDir();
  const store = new DirRunStore(dir);
  await store.writeSpec(SPEC);
  await store.writeCycle(0, cycleRecords(0, 2));
  return dir;
}

describe('resume writes only to regular files inside the run directory', () => {
  // (file, what the outside file holds): a torn last line (the repair would cut it), whole lines
  // (the appends), and a file that an index entry would cut (the cycle truncate)
  const cases = [
    ['metrics.jsonl', 'keep me\nthis line has no newline'],
    ['archive.jsonl', '{"cycle":0}\n{"cycle":1}\n'],
    ['rollouts.jsonl', 'x'.repeat(6000) + '\n'],
  ] as const;

  for (const [file, text] of cases)
    it(`refuses a ${file} that is a symbolic link out of the run, leaving its target as it was`, async () => {
      const dir = await runWithCycle0();
      const victim = await outsideFile(text);
      await writeFile(join(dir, '.cycles.json'), JSON.stringify({ 0: {}, 1: { [file]: 3 } }));
      await rm(join(dir, file));
      await symlink(victim.path, join(dir, file));
      const store = new DirRunStore(dir);
      const e = await store.writeCycle(1, cycleRecords(1, 1)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(LinkedFileError);
      expect(e).toBeInstanceOf(StorageError);
      expect((e as LinkedFileError).data).toMatchObject({ path: join(dir, file), kind: 'symbolic link' });
      expect((e as Error).message).toContain(join(dir, file));
      await expectUntouched(victim);
      // the repair alone (what a resume runs first) refuses it too
      await expect(repairJsonlTail(join(dir, file))).rejects.toBeInstanceOf(LinkedFileError);
      await expectUntouched(victim);
    });

  it('refuses a .jsonl with a second hard link (a file shared with another place)', async () => {
    const dir = await runWithCycle0();
    const victim = await outsideFile('{"cycle":0}\nhalf a li');
    await rm(join(dir, 'metrics.jsonl'));
    await link(victim.path, join(dir, 'metrics.jsonl'));
    const e = await new DirRunStore(dir).writeCycle(1, cycleRecords(1, 1)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LinkedFileError);
    expect((e as LinkedFileError).data).toMatchObject({ path: join(dir, 'metrics.jsonl'), kind: 'hard link' });
    await expectUntouched(victim);
  });

  it('refuses a state.json, config.json, memory.json or .cycles.json that is a link, leaving its target', async () => {
    for (const file of ['state.json', 'config.json', 'memory.json', '.cycles.json'] as const) {
      const dir = await runWithCycle0();
      const victim = await outsideFile(`{"mine": "${file}"}\n`);
      await rm(join(dir, file), { force: true });
      await symlink(victim.path, join(dir, file));
      const store = new DirRunStore(dir);
      const write = {
        'state.json': () => store.writeState({ ...initialState(SPEC), cycle: 1 }),
        'config.json': () => store.writeSpec(SPEC),
        'memory.json': () => store.writeMemory(emptyMemory(10)),
        '.cycles.json': () => store.writeCycle(1, cycleRecords(1, 1)),
      }[file];
      const e = await write().catch((x: unknown) => x);
      expect(e, file).toBeInstanceOf(LinkedFileError);
      expect((e as Error).message, file).toContain(join(dir, file));
      expect((await lstat(join(dir, file))).isSymbolicLink(), file).toBe(true);
      await expectUntouched(victim);
    }
  });

  it('never writes through a link planted where a temp file goes', async () => {
    const dir = await runWithCycle0();
    const victim = await outsideFile('precious\n');
    await symlink(victim.path, join(dir, `state.json.${process.pid}.tmp`));
    const store = new DirRunStore(dir);
    await store.writeState({ ...initialState(SPEC), cycle: 1 });
    await expectUntouched(victim);
    expect((await lstat(join(dir, 'state.json'))).isFile()).toBe(true);
    expect((await store.readState())!.cycle).toBe(1);
    // the helper itself, with any temp name
    await symlink(victim.path, join(dir, 'x.json.tmp'));
    await writeFileAtomic(join(dir, 'x.json'), 'new\n', join(dir, 'x.json.tmp'));
    expect(await readFile(join(dir, 'x.json'), 'utf8')).toBe('new\n');
    await expectUntouched(victim);
  });

  it('a resumed loop refuses a linked run file before it plays anything, with the file named', async () => {
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
    const dir = await newDir();
    await loop(new DirRunStore(dir)).run(1);
    const victim = await outsideFile('{"cycle":0}\ntorn');
    await rm(join(dir, 'metrics.jsonl'));
    await symlink(victim.path, join(dir, 'metrics.jsonl'));
    const events: string[] = [];
    const model = scriptedTrio();
    const resumed = new SpadeLoop({
      spec: SPEC,
      models: { designer: model, hint: model, agent: model },
      runner: inProcessRunner(),
      corpus,
      store: new DirRunStore(dir),
      onEvent: (e) => events.push(e.type),
    });
    const e = await resumed.run(2).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LinkedFileError);
    expect((e as Error).message).toContain(join(dir, 'metrics.jsonl'));
    expect(events).not.toContain('designer_output'); // refused before the first design
    await expectUntouched(victim);
  });

  it('refuses a train/ folder that is a link out of the run, or a file where it goes', async () => {
    const dir = await newDir();
    const outside = await newDir('spade-outside-train-');
    await symlink(outside, join(dir, 'train'));
    const e = await runSubdir(dir, 'train').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LinkedFileError);
    expect((e as LinkedFileError).data).toMatchObject({ path: join(dir, 'train'), kind: 'symbolic link' });
    const d2 = await newDir();
    await writeFile(join(d2, 'train'), 'x');
    await expect(runSubdir(d2, 'train')).rejects.toThrow(/train is not a folder/);
    // a real folder (made, or already there) is fine
    const d3 = await newDir();
    expect(await runSubdir(d3, 'train')).toBe(join(d3, 'train'));
    expect(await runSubdir(d3, 'train')).toBe(join(d3, 'train'));
    await mkdir(join(d3, 'sub'));
  });
});

describe('.cycles.json offsets are checked against the lines before a cycle is rewritten', () => {
  /**
   * A run directory with cycle 0 written and cycle 1 half-written (a crash between the appends and
   * the state update), and the sizes a correct rewrite of cycle 1 leaves.
   */
  async function crashedRun() {
    const dir = await runWithCycle0();
    const sizes0 = Object.fromEntries(
      await Promise.all(FILES.map(async (f) => [f, (await stat(join(dir, f))).size] as const)),
    ) as Record<(typeof FILES)[number], number>;
    const text0 = Object.fromEntries(
      await Promise.all(FILES.map(async (f) => [f, await readFile(join(dir, f), 'utf8')] as const)),
    ) as Record<(typeof FILES)[number], string>;
    const one = cycleRecords(1, 1);
    // the crash: cycle 1's archive line and part of its rollouts are on disk, the index says where
    await writeFile(join(dir, 'archive.jsonl'), text0['archive.jsonl'] + one.archive.map(line).join(''));
    await writeFile(join(dir, 'rollouts.jsonl'), text0['rollouts.jsonl'] + one.rollouts.map(line).join(''));
    const expected = {
      'archive.jsonl': text0['archive.jsonl'] + one.archive.map(line).join(''),
      'rollouts.jsonl': text0['rollouts.jsonl'] + one.rollouts.map(line).join(''),
      'metrics.jsonl': text0['metrics.jsonl'] + line(one.metrics),
    };
    return { dir, sizes0, text0, one, expected };
  }

  /** Rewrites cycle 1 under `index` and checks every file is cycle 0's lines then cycle 1's, once. */
  async function rewriteUnder(index: unknown, raw?: string) {
    const run = await crashedRun();
    await writeFile(join(run.dir, '.cycles.json'), raw ?? JSON.stringify(index));
    const warnings: string[] = [];
    const store = new DirRunStore(run.dir, { onWarning: (w) => warnings.push(w) });
    await store.writeCycle(1, run.one);
    for (const f of FILES) {
      const bytes = await readFile(join(run.dir, f));
      expect(bytes.includes(0), f).toBe(false); // never extended with NUL bytes
      expect(bytes.length, f).toBe(Buffer.byteLength(run.expected[f]));
      expect(bytes.toString('utf8'), f).toBe(run.expected[f]);
    }
    // the index now holds the offsets the lines give, and reads back the same next time
    const rebuilt = JSON.parse(await readFile(join(run.dir, '.cycles.json'), 'utf8')) as Record<
      string,
      Record<string, number>
    >;
    expect(rebuilt['1']).toEqual(run.sizes0);
    return { ...run, warnings, store };
  }

  it('a good index is used as it is, without a warning', async () => {
    const run = await crashedRun();
    const r = await rewriteUnder({ 0: { 'archive.jsonl': 0, 'rollouts.jsonl': 0, 'metrics.jsonl': 0 }, 1: run.sizes0 });
    expect(r.warnings).toEqual([]);
  });

  it('an offset past the end of the file (6 KB file, offsets to 2 GiB) is rebuilt, never extends the file', async () => {
    for (const past of [1, 6000, 2 ** 31]) {
      const run = await crashedRun();
      const at = { ...run.sizes0, 'archive.jsonl': (await stat(join(run.dir, 'archive.jsonl'))).size + past };
      const r = await rewriteUnder({ 1: at });
      expect(
        r.warnings.some((w) => /\.cycles\.json: .*archive\.jsonl.*past its end/.test(w)),
        String(past),
      ).toBe(true);
    }
  });

  it('a negative, fractional, non-numeric, huge or missing offset is rebuilt from the lines', async () => {
    for (const [name, bad] of [
      ['negative', -5],
      ['fractional', 10.5],
      ['text', '"12"'],
      ['null', null],
      ['huge', 2 ** 60],
      ['1e400 (Infinity)', '1e400'],
      ['an object', { n: 1 }],
    ] as const) {
      const run = await crashedRun();
      const value = typeof bad === 'string' ? bad : JSON.stringify(bad);
      const raw = `{"1": {"archive.jsonl": ${run.sizes0['archive.jsonl']}, "rollouts.jsonl": ${value}, "metrics.jsonl": ${run.sizes0['metrics.jsonl']}}}`;
      const r = await rewriteUnder(null, raw);
      expect(
        r.warnings.some((w) => w.includes(join(r.dir, '.cycles.json'))),
        name,
      ).toBe(true);
    }
  });

  it('an offset in the middle of a line is rebuilt (no record is cut in two)', async () => {
    const run = await crashedRun();
    for (const f of FILES) {
      const at = { ...run.sizes0, [f]: run.sizes0[f] - 7 }; // inside cycle 0's last line
      const r = await rewriteUnder({ 1: at });
      expect(
        r.warnings.some((w) => w.includes(f) && /not at the start of a line/.test(w)),
        f,
      ).toBe(true);
    }
  });

  it("an offset at a line's start that would delete finished cycles (0, or an earlier cycle's) is rebuilt", async () => {
    const run = await crashedRun();
    const firstLine = run.text0['archive.jsonl'].indexOf('\n') + 1;
    for (const at of [0, firstLine]) {
      const r = await rewriteUnder({ 1: { ...run.sizes0, 'archive.jsonl': at } });
      expect(
        r.warnings.some((w) => /archive\.jsonl.*cycle 0/.test(w)),
        String(at),
      ).toBe(true);
    }
  });

  it('offsets that do not increase from cycle to cycle are rebuilt', async () => {
    const run = await crashedRun();
    const r = await rewriteUnder({
      0: { 'archive.jsonl': run.sizes0['archive.jsonl'], 'rollouts.jsonl': 0, 'metrics.jsonl': 0 },
      1: { ...run.sizes0, 'archive.jsonl': 0 },
    });
    expect(r.warnings.some((w) => /archive\.jsonl/.test(w))).toBe(true);
  });

  it('an index that is not JSON, not an object or has keys that are not cycles is rebuilt, not fatal', async () => {
    for (const raw of ['{not json', '[1,2]', '42', '{"__proto__": {"1": {}}}', '{"1": {"bogus.jsonl": 0}}']) {
      const r = await rewriteUnder(null, raw);
      expect(
        r.warnings.some((w) => w.includes(join(r.dir, '.cycles.json'))),
        raw,
      ).toBe(true);
    }
  });
});

describe("spade run --train's train/ folder is the run's own", () => {
  /** The CPU engine on the tiny checkpoint, as the `local` chat model `spade run --train` samples from. */
  async function localModel(): Promise<EngineChatModel> {
    const engine = await nodeEngine('cpu');
    const s = await engine.load({ kind: 'memory', files: tinyCheckpointFiles('qwen2', 'f32', 3).files });
    return new EngineChatModel(engine, 'tiny', engineCapabilities(s));
  }
  const attach = async (out: string) =>
    attachTraining({
      model: await localModel(),
      cfg: { ...DEFAULTS, probeEvery: 0 },
      out,
      runner: inProcessRunner(),
      io: { out: () => undefined, err: () => undefined },
    });

  it('refuses a train/ that is a link out of the run, writing nothing there', async () => {
    const out = await newDir();
    const outside = await newDir('spade-outside-train-');
    await symlink(outside, join(out, 'train'));
    const e = await attach(out).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LinkedFileError);
    expect((e as Error).message).toContain(join(out, 'train'));
    expect(await readdir(outside)).toEqual([]);
  });

  it('refuses a train/ file that is a link, before training, leaving its target as it was', async () => {
    for (const file of ['updates.jsonl', 'probe.jsonl', 'state.json', 'optimizer.safetensors']) {
      const out = await newDir();
      await mkdir(join(out, 'train'));
      const victim = await outsideFile('{"updates": 0, "trainedThrough": -1}\n');
      await symlink(victim.path, join(out, 'train', file));
      const e = await attach(out).catch((x: unknown) => x);
      expect(e, file).toBeInstanceOf(LinkedFileError);
      expect((e as Error).message, file).toContain(join(out, 'train', file));
      await expectUntouched(victim);
    }
  });

  it('reads train/ files as regular files within a bound, and its state.json through its schema', async () => {
    const out = await newDir();
    await mkdir(join(out, 'train'));
    execFileSync('mkfifo', [join(out, 'train', 'state.json')]);
    const fifo = await attach(out).catch((x: unknown) => x);
    expect(fifo).toBeInstanceOf(SpecialFileError);
    expect((fifo as Error).message).toContain(join(out, 'train', 'state.json'));
    for (const bad of ['{"updates": "three"}', '[]', '{"updates": -1, "trainedThrough": 0}', 'not json']) {
      await rm(join(out, 'train', 'state.json'));
      await writeFile(join(out, 'train', 'state.json'), bad);
      const e = await attach(out).catch((x: unknown) => x);
      expect(e, bad).toBeInstanceOf(StorageError);
      expect((e as Error).message, bad).toMatch(/train\/state\.json is not what a run writes/);
    }
    // an adapter config without its weights is named, not an ENOENT from deep inside
    await rm(join(out, 'train', 'state.json'));
    await writeFile(join(out, 'train', 'adapter_config.json'), '{}');
    await expect(attach(out)).rejects.toThrow(/adapter_model\.safetensors/);
  });
});
