// Hostile run files (core/spade/run_file.ts): every limit — size while unpacking, list length,
// value count, nesting — is met as the bytes are unpacked and scanned, so a small gzip that unpacks
// to millions of values is refused after unpacking a few MB of it; numbers are range-checked field by field; and
// records that repeat a (cycle, index) or a play are refused, naming both.
import { gzipSync, strToU8 } from 'fflate';
import { describe, expect, it, vi } from 'vitest';
import { DEFAULTS } from '../../src/core/config.ts';
import { RunFileError } from '../../src/core/errors.ts';
import {
  makeRunFile,
  MAX_RUN_CONTAINERS,
  MAX_RUN_DEPTH,
  MAX_RUN_FILE_BYTES,
  MAX_RUN_LIST,
  MAX_RUN_VALUES,
  parseRunFile,
  parseRunFileBytes,
  parseRunFileJson,
  RunFileScanner,
  runFileToJson,
} from '../../src/core/spade/run_file.ts';
import type { ArchiveRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';

const ARCHIVE: ArchiveRecord = {
  cycle: 0,
  index: 0,
  skill: 'planning',
  setting: 'games',
  difficulty: 'medium',
  envId: 'e0',
  title: 'Lock',
  code: 'export default {}',
  hint: 'turn left',
  source: null,
  valid: true,
  firstAttemptValid: true,
  attempts: [],
  validator: null,
  stats: {
    noHint: [0, 1],
    withHint: [1, 1],
    winRate: 0.5,
    winRateHinted: 1,
    regret: 0.5,
    raw: 0.5,
    designerReward: 0,
    timedOut: false,
    blacklisted: false,
  },
  leak: null,
  error: null,
  rawReward: 0.5,
  designerAdvantage: 0,
};
const ROLLOUT: RolloutRecord = {
  cycle: 0,
  index: 0,
  skill: 'planning',
  envId: 'e0',
  play: 0,
  seed: 7,
  hinted: false,
  firstObservation: 'a door',
  turns: [{ action: 'open', observation: 'open', reward: 1, terminated: true, truncated: false, formatError: false }],
  return: 1,
  end: 'terminated',
  tokens: 12,
};
const FILE = makeRunFile({
  spec: {
    config: DEFAULTS,
    skills: [],
    models: { designer: 'd', hint: 'h', agent: 'a' },
    corpus: 'test',
    createdAt: '2026-01-01T00:00:00Z',
  },
  archive: [ARCHIVE],
  rollouts: [ROLLOUT, { ...ROLLOUT, hinted: true }],
  metrics: [],
  memory: null,
});
const TEXT = runFileToJson(FILE);

function refusal(run: () => unknown): RunFileError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(RunFileError);
    return err as RunFileError;
  }
  throw new Error('the run file was accepted');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reaches into arbitrary JSON paths
type Json = Record<string, any>;
const mutated = (fn: (d: Json) => void): string => {
  const d = JSON.parse(TEXT);
  fn(d);
  return JSON.stringify(d);
};

/** `{"format":…,"archive":[0,0,…],…}` with `n` zeros: built as bytes, no giant JS string. */
function zerosFile(n: number): Uint8Array {
  const head = strToU8(TEXT.slice(0, TEXT.indexOf('"archive":[') + '"archive":['.length));
  const tail = strToU8(`0],"rollouts"${TEXT.slice(TEXT.indexOf('"rollouts"') + '"rollouts"'.length)}`);
  const out = new Uint8Array(head.length + 2 * (n - 1) + tail.length);
  out.set(head);
  for (let i = 0, at = head.length; i < n - 1; i++, at += 2) {
    out[at] = 0x30;
    out[at + 1] = 0x2c;
  }
  out.set(tail, head.length + 2 * (n - 1));
  return out;
}

describe('hostile run files', () => {
  it('the plain file parses (the cases below change one thing each)', () => {
    expect(parseRunFileJson(TEXT).archive).toHaveLength(1);
  });

  it('a 64 KB gzip whose archive is 33 M zeros is refused at the list limit, having unpacked a few MB of it', () => {
    const bytes = zerosFile(33_000_000);
    expect(bytes.length).toBeLessThan(MAX_RUN_FILE_BYTES);
    const gz = gzipSync(bytes, { level: 9 });
    expect(gz.length).toBeLessThan(100_000);
    // the containment, counted: the bytes unpacked and handed to the scanner before it stopped
    let scanned = 0;
    const push = RunFileScanner.prototype.push;
    const spy = vi.spyOn(RunFileScanner.prototype, 'push').mockImplementation(function (this: RunFileScanner, b) {
      scanned += b.length;
      push.call(this, b);
    });
    let err: RunFileError;
    try {
      err = refusal(() => parseRunFileBytes(gz));
    } finally {
      spy.mockRestore();
    }
    // the limit falls ~2 MB in (a million "0,"); unpacking stops within one piece (≤ ~4 MiB) after it
    expect(scanned).toBeGreaterThan(2 * MAX_RUN_LIST);
    expect(scanned).toBeLessThan(2 * MAX_RUN_LIST + 8 * 2 ** 20);
    expect(scanned).toBeLessThan(bytes.length / 8);
    expect(err.message).toBe(
      `$.archive is a list of more than ${MAX_RUN_LIST} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
    );
    expect(err.data).toMatchObject({ limit: MAX_RUN_LIST, path: '$.archive' });
    // the same bytes unpacked, and already-parsed data, meet the same limit
    expect(refusal(() => parseRunFileBytes(zerosFile(MAX_RUN_LIST + 1))).message).toMatch(/^\$\.archive is a list/);
    expect(refusal(() => parseRunFile({ archive: new Array(MAX_RUN_LIST + 1).fill(0) })).message).toMatch(
      /^\$\.archive is a list of 1000001 items/,
    );
  });

  it('counts every value in the file, stopping at the limit', () => {
    const per = Math.floor(MAX_RUN_LIST * 0.9);
    const lists = Math.ceil(MAX_RUN_VALUES / per) + 1;
    const text = `{"memory":[${Array.from({ length: lists }, () => `[${'0,'.repeat(per - 1)}0]`).join(',')}]}`;
    const err = refusal(() => parseRunFileJson(text));
    expect(err.message).toMatch(
      new RegExp(
        `^The run file holds more than ${MAX_RUN_VALUES} values \\(the limit was reached at \\$\\.memory\\[4\\]\\[`,
      ),
    );
  });

  it('counts objects and lists (the costly values) apart, stopping at their limit', () => {
    const half = `[${'{},'.repeat(MAX_RUN_CONTAINERS / 2)}{}]`;
    const err = refusal(() => parseRunFileJson(`{"memory":[${half},${half}]}`));
    expect(err.message).toBe(
      `The run file holds more than ${MAX_RUN_CONTAINERS} objects and lists (the limit was reached at $.memory[1][499995]); it was rejected. Export fewer cycles.`,
    );
  });

  it('a gzip bomb is stopped while it unpacks, never allocated whole', () => {
    // 96 MiB of spaces (valid JSON padding, so only the byte cap can stop it) in ~100 KB of gzip
    const gz = gzipSync(new Uint8Array(96 * 2 ** 20).fill(0x20), { level: 9 });
    const err = refusal(() => parseRunFileBytes(gz));
    expect(err.message).toMatch(/unpacked, is .* a run file may be at most 64 MiB/);
    // it stopped within one piece (≤ ~4 MiB of output) past the cap, not after unpacking all 96 MiB
    expect(err.data.bytes as number).toBeLessThan(MAX_RUN_FILE_BYTES + 8 * 2 ** 20);
  });

  it('the scanner reads strings and keys exactly, however the bytes are split', () => {
    const nest = (depth: number) => {
      let s = '"x\\"]}\\\\"';
      for (let d = 0; d < depth; d++) s = d % 2 ? `["[{\\"",${s}]` : `{"k\\"{${d}":${s}}`;
      return strToU8(s);
    };
    const ok = nest(MAX_RUN_DEPTH);
    const deep = nest(MAX_RUN_DEPTH + 1);
    for (let cut = 0; cut <= deep.length; cut++) {
      const scan = new RunFileScanner();
      expect(() => {
        scan.push(deep.subarray(0, cut));
        scan.push(deep.subarray(cut));
      }).toThrow(/nests deeper than 32 levels \(at \$\.k"\{32\[1\]\.k"\{30\[1\]/);
      if (cut <= ok.length) {
        const fine = new RunFileScanner();
        fine.push(ok.subarray(0, cut));
        fine.push(ok.subarray(cut));
      }
    }
  });

  it('range-checks every number, naming the field', () => {
    const cases: [(d: Json) => void, string][] = [
      [(d) => (d.archive[0].cycle = 1e308), 'archive[0].cycle must be a whole number from 0 to 100000.'],
      [(d) => (d.archive[0].index = -1), 'archive[0].index must be a whole number from 0 to 10000.'],
      [(d) => (d.archive[0].index = 1.5), 'archive[0].index must be a whole number from 0 to 10000.'],
      [(d) => (d.archive[0].stats.regret = 1e308), 'archive[0].stats.regret must be a number from -2 to 2.'],
      [(d) => (d.archive[0].stats.winRate = 1.5), 'archive[0].stats.winRate must be a number from 0 to 1.'],
      [(d) => (d.archive[0].stats.noHint = [0, 7]), 'archive[0].stats.noHint must be a list of numbers from -1 to 1.'],
      [(d) => (d.archive[0].rawReward = -1e308), 'archive[0].rawReward must be a number from -2 to 2, or null.'],
      [(d) => (d.rollouts[1].play = 1e308), 'rollouts[1].play must be a whole number from 0 to 10000.'],
      [(d) => (d.rollouts[0].return = 3), 'rollouts[0].return must be a number from -1 to 1.'],
      [
        (d) => (d.rollouts[0].turns[0].reward = 1e308),
        'rollouts[0].turns[0].reward must be a number from -1000000000 to 1000000000.',
      ],
      [(d) => (d.rollouts[0].tokens = -5), `rollouts[0].tokens must be a whole number from 0 to ${2 ** 40}.`],
      [(d) => (d.metrics = [{ cycle: 1e308 }]), 'metrics[0].cycle must be a whole number from 0 to 100000.'],
    ];
    for (const [fn, message] of cases) expect(refusal(() => parseRunFileJson(mutated(fn))).message).toBe(message);
    // 1e999 is Infinity once parsed: refused the same way
    const inf = TEXT.replace('"regret":0.5', '"regret":1e999');
    expect(refusal(() => parseRunFileJson(inf)).message).toBe('archive[0].stats.regret must be a number from -2 to 2.');
  });

  it('refuses records that repeat a (cycle, index) or a play, naming both', () => {
    expect(refusal(() => parseRunFileJson(mutated((d) => d.archive.push(d.archive[0])))).message).toBe(
      'archive[1] repeats archive[0] (cycle 0, task 0); each appears once in a run file. It was rejected.',
    );
    expect(refusal(() => parseRunFileJson(mutated((d) => d.rollouts.push(d.rollouts[1])))).message).toBe(
      'rollouts[2] repeats rollouts[1] (cycle 0, task 0, play 0 with the hint); each appears once in a run file. It was rejected.',
    );
  });
});
