// The persistence interface: the same behaviour from MemoryStore and DirStore; the Node run
// directory's .jsonl files after a torn write (repaired before any append) or a corrupt line (skipped).
import { appendFile, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StorageError } from '../../src/core/errors.ts';
import { MemoryStore, type Store } from '../../src/core/store.ts';
import { parseJsonl } from '../../src/core/spade/run_store.ts';
import { DirStore } from '../../src/platform/node/dir_store.ts';
import { DirRunStore, repairJsonlTail } from '../../src/platform/node/run_dir.ts';
import { cycleRecords } from '../helpers/run_records.ts';

const backends: [string, () => Promise<Store>][] = [
  ['MemoryStore', async () => new MemoryStore()],
  ['DirStore', async () => new DirStore(await mkdtemp(join(tmpdir(), 'spade-store-')))],
];

describe.each(backends)('%s', (_name, make) => {
  it('puts, gets, lists and deletes JSON values per collection', async () => {
    const s = await make();
    expect(await s.get('runs', 'a')).toBeUndefined();
    await s.put('runs', 'b', { x: [1, 2], y: 'z' });
    await s.put('runs', 'a', 3);
    await s.put('memory', 'a', 'other');
    expect(await s.get('runs', 'b')).toEqual({ x: [1, 2], y: 'z' });
    expect(await s.keys('runs')).toEqual(['a', 'b']);
    await s.delete('runs', 'a');
    expect(await s.keys('runs')).toEqual(['b']);
    expect(await s.get('memory', 'a')).toBe('other');
  });
  it('rejects unsafe keys, unknown collections and unstorable values with StorageError', async () => {
    const s = await make();
    await expect(s.put('runs', '../escape', 1)).rejects.toThrow(StorageError);
    await expect(s.put('runs', '', 1)).rejects.toThrow(/invalid storage key ""/);
    await expect(s.get('nope' as never, 'a')).rejects.toThrow(
      'unknown collection "nope"; expected one of runs, memory, envsets, settings, corpus',
    );
    await expect(s.put('runs', 'f', () => 1)).rejects.toThrow(
      'value cannot be stored as JSON (undefined or a function)',
    );
  });
});

describe('DirStore on disk', () => {
  it('writes atomically (no temp files left) and reports corrupt files clearly', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-store-'));
    const s = new DirStore(dir);
    await s.put('runs', 'r1', { ok: true });
    expect(await readdir(join(dir, 'runs'))).toEqual(['r1.json']);
    await writeFile(join(dir, 'runs', 'bad.json'), '{oops');
    await expect(s.get('runs', 'bad')).rejects.toThrow(/bad\.json is not valid JSON; delete or fix it/);
  });
});

describe('run directory .jsonl files after a torn write', () => {
  // Small records that pass the run-record schema (every read checks each line against it).
  const cycle = cycleRecords;
  const newDir = () => mkdtemp(join(tmpdir(), 'spade-torn-'));

  it('parses complete lines, skips blank ones and returns a last line without newline apart', () => {
    expect(parseJsonl('{"a":1}\n\n{"a":2}\n', 'x.jsonl')).toEqual({ records: [{ a: 1 }, { a: 2 }], torn: null });
    expect(parseJsonl('{"a":1}\n{"a":', 'x.jsonl')).toEqual({ records: [{ a: 1 }], torn: { line: 2, chars: 5 } });
    expect(parseJsonl('', 'x.jsonl')).toEqual({ records: [], torn: null });
    expect(() => parseJsonl('{"a":1}\n{oops}\n{"a":3}\n', 'dir/x.jsonl')).toThrow(
      /^dir\/x\.jsonl line 2 is not valid JSON/,
    );
  });

  it('on resume, cuts a torn last line off before appending, keeping every complete line', async () => {
    const dir = await newDir();
    await new DirRunStore(dir).writeCycle(0, cycle(0, 2));
    // a crash mid-append of cycle 1: its first line is cut short, no newline
    await appendFile(join(dir, 'archive.jsonl'), '{"cycle":1,"index":0,"title":"env 1.');
    const warnings: string[] = [];
    const resumed = new DirRunStore(dir, { onWarning: (m) => warnings.push(m) });
    // reading skips the torn line (with a warning) instead of throwing a bare SyntaxError
    expect((await resumed.readArchive()).map((a) => (a as { title: string }).title)).toEqual(['env 0.0', 'env 0.1']);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /archive\.jsonl: line 3 was cut off mid-write \(36 characters without a newline.*skipped it/,
    );
    // appending repairs first: the new lines never join the torn one
    await resumed.writeCycle(1, cycle(1, 2));
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatch(/archive\.jsonl: line 3 was cut off mid-write.*dropped it and kept the complete lines/);
    const text = await readFile(join(dir, 'archive.jsonl'), 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(parseJsonl(text, 'archive.jsonl').torn).toBeNull();
    expect((await resumed.readArchive()).map((a) => (a as { title: string }).title)).toEqual([
      'env 0.0',
      'env 0.1',
      'env 1.0',
      'env 1.1',
    ]);
    expect(await resumed.readMetrics()).toEqual([cycle(0, 2).metrics, cycle(1, 2).metrics]);
    expect(warnings).toHaveLength(2); // the repaired file reads clean
  });

  it('skips any other bad line with a warning naming the file and line, and still appends after it', async () => {
    const dir = await newDir();
    await new DirRunStore(dir).writeCycle(0, cycle(0, 1));
    await appendFile(join(dir, 'metrics.jsonl'), '{"cycle": 1, oops}\n');
    await appendFile(join(dir, 'metrics.jsonl'), `${JSON.stringify(cycle(2, 1).metrics)}\n`);
    const warnings: string[] = [];
    const store = new DirRunStore(dir, { onWarning: (m) => warnings.push(m) });
    expect((await store.readMetrics()).map((m) => m.cycle)).toEqual([0, 2]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/metrics\.jsonl line 2: not valid JSON .*The line was skipped\./);
    await store.writeCycle(3, cycle(3, 1));
    expect((await store.readMetrics()).map((m) => m.cycle)).toEqual([0, 2, 3]);
    expect((await store.readArchive()).map((a) => a.cycle)).toEqual([0, 3]);
  });

  it('repairs a torn line longer than one read chunk, and a file that is one torn line', async () => {
    const dir = await newDir();
    const path = join(dir, 'big.jsonl');
    const whole = `${JSON.stringify({ a: 'x'.repeat(100_000) })}\n${JSON.stringify({ b: 'é' })}\n`;
    await writeFile(path, whole + JSON.stringify({ c: 'y'.repeat(150_000) }).slice(0, 140_000));
    expect(await repairJsonlTail(path)).toMatch(/big\.jsonl: line 3 was cut off mid-write \(140000 bytes/);
    expect(await readFile(path, 'utf8')).toBe(whole);
    expect(await repairJsonlTail(path)).toBeNull(); // whole now
    await writeFile(path, '{"only": "torn');
    expect(await repairJsonlTail(path)).toMatch(/line 1 was cut off/);
    expect(await readFile(path, 'utf8')).toBe('');
    expect(await repairJsonlTail(join(dir, 'absent.jsonl'))).toBeNull();
  });
});
