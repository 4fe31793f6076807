// Run files (core/spade/run_file.ts): a real run round-trips through JSON and gzip unchanged (minus
// training tokens); hostile files — wrong types, prototype-polluting keys, huge strings, deep nesting,
// gzip bombs, unknown versions — are refused with a RunFileError naming the problem; and
// `spade run export DIR --out FILE` writes the same format from a run directory, reading each file
// within a bound and creating FILE's folder.
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync, strToU8 } from 'fflate';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { EXPORT_READ_LIMITS } from '../../src/cli/cmd_run.ts';
import { main } from '../../src/cli/spade.ts';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import { RunFileError } from '../../src/core/errors.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { SpadeLoop } from '../../src/core/spade/loop.ts';
import {
  makeRunFile,
  MAX_RUN_DEPTH,
  MAX_RUN_FILE_BYTES,
  MAX_RUN_LIST,
  MAX_RUN_STRING,
  parseRunFile,
  parseRunFileBytes,
  parseRunFileJson,
  runFileToGzip,
  runFileToJson,
  type RunFile,
} from '../../src/core/spade/run_file.ts';
import type { RunSpec } from '../../src/core/spade/run_store.ts';
import { DirRunStore } from '../../src/platform/node/run_dir.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';

const CONFIG: Config = { ...DEFAULTS, seed: 3, playsPerEnv: 2, maxTurns: 12, envsPerSkill: 1 };
const SPEC: RunSpec = {
  config: CONFIG,
  skills: [],
  models: { designer: 'test double', hint: 'test double', agent: 'test double' },
  corpus: 'test',
  createdAt: '2026-11-30T00:00:00Z',
};

let dir: string;
let file: RunFile;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spade-runfile-'));
  const store = new DirRunStore(dir);
  const model = scriptedTrio();
  const state = await new SpadeLoop({
    spec: SPEC,
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus: chunkText('Binary search halves an interval.\n\nEach probe tells which half holds it.', 'doc', 50),
    store,
  }).run(2);
  file = makeRunFile({
    spec: (await store.readSpec())!,
    archive: await store.readArchive(),
    rollouts: await store.readRollouts(),
    metrics: await store.readMetrics(),
    memory: state.memory,
    state,
  });
}, 60_000);

/** The file with training-only fields removed (token ids and traces are not carried). */
function withoutTokens(f: RunFile): unknown {
  return JSON.parse(
    JSON.stringify(f, (k, v: unknown) =>
      k === 'tokens' && typeof v === 'object' ? undefined : k === 'trace' ? undefined : v,
    ),
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reaches into arbitrary JSON paths
const mutate = (fn: (d: Record<string, any>) => void): string => {
  const d = JSON.parse(runFileToJson(file));
  fn(d);
  return JSON.stringify(d);
};

function refusal(text: string): string {
  try {
    parseRunFileJson(text);
  } catch (err) {
    expect(err).toBeInstanceOf(RunFileError);
    return (err as Error).message;
  }
  throw new Error('the run file was accepted');
}

describe('run files', () => {
  it('a real run round-trips through JSON and gzip', () => {
    expect(file.archive.length).toBe(2 * CONFIG.skillsPerCycle);
    expect(file.rollouts.length).toBeGreaterThan(0);
    expect(file.metrics.map((m) => m.cycle)).toEqual([0, 1]);
    const back = parseRunFileJson(runFileToJson(file));
    expect(back).toEqual(withoutTokens(file));
    const gz = runFileToGzip(file);
    expect(gz.length).toBeLessThan(runFileToJson(file).length);
    expect(parseRunFileBytes(gz)).toEqual(back);
    expect(parseRunFileBytes(strToU8(runFileToJson(file)))).toEqual(back);
  });

  it('refuses other formats and versions, naming what to do', () => {
    expect(refusal('{"format":"spade-envset","version":1}')).toMatch(/not a SPADE run file.*Environments panel/);
    expect(refusal(mutate((d) => (d.version = 2)))).toMatch(/Unsupported run file version 2; this app reads version 1/);
    expect(refusal('[1,2]')).toMatch(/must be a JSON object/);
    expect(refusal('{"format": "spade-run",')).toMatch(/not valid JSON/);
  });

  it('checks field types, naming the path of the first wrong one', () => {
    expect(refusal(mutate((d) => (d.archive[1].stats.regret = 'high')))).toBe(
      'archive[1].stats.regret must be a number from -2 to 2.',
    );
    expect(refusal(mutate((d) => (d.rollouts[0].turns[0].action = { evil: 1 })))).toBe(
      'rollouts[0].turns[0].action must be a string.',
    );
    expect(refusal(mutate((d) => (d.archive[0].code = 42)))).toBe('archive[0].code must be a string or null.');
    expect(refusal(mutate((d) => (d.metrics = {})))).toBe('run.metrics must be a list.');
    expect(refusal(mutate((d) => (d.spec.config.seed = -1)))).toMatch(/^spec\.config is invalid: .*seed/);
    expect(refusal(mutate((d) => (d.rollouts[0].end = 'exploded')))).toMatch(
      /rollouts\[0\]\.end must be one of terminated/,
    );
  });

  it('refuses prototype-polluting keys and leaves Object.prototype alone', () => {
    const text = runFileToJson(file).replace('"archive":[{', '"archive":[{"__proto__":{"polluted":true},');
    expect(refusal(text)).toBe('$.archive[0] has a key "__proto__", which a run file never has; it was rejected.');
    expect(refusal(mutate((d) => (d.spec.config.constructor = { prototype: {} })))).toMatch(/key "constructor"/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses huge strings, deep nesting and oversized files', () => {
    const huge = 'x'.repeat(MAX_RUN_STRING + 1);
    expect(refusal(mutate((d) => (d.archive[0].hint = huge)))).toBe(
      `$.archive[0].hint is a string of ${MAX_RUN_STRING + 1} characters; the limit is ${MAX_RUN_STRING}.`,
    );
    const deep = '['.repeat(MAX_RUN_DEPTH + 5) + ']'.repeat(MAX_RUN_DEPTH + 5);
    expect(refusal(mutate((d) => (d.memory = '@DEEP@')).replace('"@DEEP@"', deep))).toMatch(
      new RegExp(`nests deeper than ${MAX_RUN_DEPTH} levels`),
    );
    // far deeper than any parser's stack: refused with a message, never a crash
    const abyss = '['.repeat(2_000_000) + ']'.repeat(2_000_000);
    expect(refusal(abyss)).toMatch(/not valid JSON|nests deeper/);
    expect(refusal(' '.repeat(MAX_RUN_FILE_BYTES + 1))).toMatch(/may be at most 64 MiB/);
    // a gzip bomb: a small file that unpacks past the cap is refused while unpacking
    const bomb = gzipSync(new Uint8Array(MAX_RUN_FILE_BYTES + 1024), { level: 9 });
    expect(bomb.length).toBeLessThan(1_000_000);
    expect(() => parseRunFileBytes(bomb)).toThrow(/unpacked, is .* a run file may be at most 64 MiB/);
    expect(() => parseRunFileBytes(new Uint8Array([0x1f, 0x8b, 1, 2, 3]))).toThrow(RunFileError);
  });

  it('never carries a half-finished cycle or training tokens', () => {
    const back = parseRunFile(
      JSON.parse(mutate((d) => (d.state.pending = [{ archive: {}, rollouts: [], ms: 0, modelMs: 0 }]))),
    );
    expect(back.state?.pending).toEqual([]);
  });
});

describe('spade run export', () => {
  it('writes the run directory as a run file the app reads, plain or gzip', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
    const plain = join(dir, 'run.json');
    expect(await main(['run', 'export', dir, '--out', plain, '--json'], io), err.join('\n')).toBe(0);
    expect(JSON.parse(out.at(-1)!)).toMatchObject({ ok: true, cycles: 2, environments: file.archive.length });
    const read = parseRunFileJson(await readFile(plain, 'utf8'));
    expect(read).toEqual(parseRunFileJson(runFileToJson(file)));
    const gz = join(dir, 'run.json.gz');
    expect(await main(['run', 'export', dir, '--out', gz, '--gzip'], io)).toBe(0);
    expect(parseRunFileBytes(new Uint8Array(await readFile(gz)))).toEqual(read);
    // usage errors exit 2 and say what is missing
    expect(await main(['run', 'export', dir], io)).toBe(2);
    expect(err.at(-1)).toContain('run export needs --out FILE');
    expect(await main(['run', 'export', join(dir, 'nowhere'), '--out', plain], io)).toBe(2);
    expect(err.at(-1)).toContain('holds no run');
  });

  it('creates the output folder, and bounds what it reads, naming the file and the limit', async () => {
    const io = { out: () => undefined, err: (l: string) => err.push(l) };
    const err: string[] = [];
    const nested = join(dir, 'new', 'folder', 'run.json');
    expect(await main(['run', 'export', dir, '--out', nested], io), err.join('\n')).toBe(0);
    expect(parseRunFileJson(await readFile(nested, 'utf8')).archive).toHaveLength(file.archive.length);

    const copy = await mkdtemp(join(tmpdir(), 'spade-export-'));
    await cp(dir, copy, { recursive: true });
    const out = join(copy, 'out.json');
    // a memory.json of 16 MB of tiny values: refused at the list limit before it is parsed
    await writeFile(join(copy, 'memory.json'), `[${'0,'.repeat(8_000_000)}0]`);
    // the containment, observed: JSON.parse never gets the 16 MB text (the scanner refused it first)
    const parse = JSON.parse;
    let longest = 0;
    const spy = vi.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: Parameters<typeof parse>[1]) => {
      longest = Math.max(longest, text.length);
      return parse(text, reviver) as unknown;
    });
    try {
      expect(await main(['run', 'export', copy, '--out', out], io)).toBe(1);
    } finally {
      spy.mockRestore();
    }
    expect(longest).toBeGreaterThan(0);
    expect(longest).toBeLessThan(2 ** 20);
    expect(err.at(-1)).toBe(
      `spade run: RunFileError: ${join(copy, 'memory.json')}: $ is a list of more than ${MAX_RUN_LIST} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
    );
    // files over their read limit are refused unread (sparse files: nothing is written or read)
    await truncate(join(copy, 'memory.json'), EXPORT_READ_LIMITS['memory.json'] + 1);
    expect(await main(['run', 'export', copy, '--out', out], io)).toBe(1);
    expect(err.at(-1)).toBe(
      `spade run: FileTooLargeError: ${join(copy, 'memory.json')} is 64.0 MiB; at most 64 MiB of it is read. Check that it is the run's own file, or trim the run (fewer cycles).`,
    );
    await rm(join(copy, 'memory.json'));
    await truncate(join(copy, 'rollouts.jsonl'), EXPORT_READ_LIMITS['rollouts.jsonl'] + 1);
    expect(await main(['run', 'export', copy, '--out', out], io)).toBe(1);
    expect(err.at(-1)).toMatch(/rollouts\.jsonl is 256\.0 MiB; at most 256 MiB of it is read/);
    expect(existsSync(out)).toBe(false);
  });
});
