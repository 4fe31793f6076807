/**
 * Run files: one versioned JSON format for a whole self-play run (spec, archive, rollouts,
 * metrics, memory, and the resume state), shared by `spade run export` and the app's Export /
 * Open / `#run=URL`. Optionally gzip-compressed (fflate; detected by its magic bytes).
 *
 * A run file is untrusted input: parsing caps the file's size (also while it is unpacked: no gzip
 * bombs), and scans its bytes for nesting depth, list lengths and value counts before JSON.parse
 * (RunFileScanner), stopping at the first limit; then checks every string's length and refuses
 * prototype-polluting keys ("__proto__", "constructor", "prototype"); then reads the records with
 * their schemas (run_schema.ts, the same tables their types come from): every field's type, range
 * and enum, and that no (cycle, index), play or cycle repeats. It throws nothing but RunFileError,
 * whose message names the first problem's path and, for a limit, the limit. Nothing in a run file
 * is ever executed here: environment code runs only in the sandbox, when the user plays it.
 */
import { gzipSync, strFromU8, strToU8 } from 'fflate';
import { decompressCapped } from '../capped_decompress.ts';
import { CONFIG_SCHEMA } from '../config.ts';
import { RunFileError } from '../errors.ts';
import {
  custom,
  decode,
  isObject,
  int,
  list,
  literal,
  map,
  num,
  object,
  opt,
  orNull,
  record,
  str,
  type Infer,
  type Reader,
  type Schema,
} from '../schema.ts';
import { addRecord, emptyMemory, exportMemory, type Memory, type SpadeMemoryEntry } from './memory.ts';
import {
  ARCHIVE_LIST,
  ARCHIVE_RECORD,
  CYCLE,
  MAX_RUN_COUNT,
  MEMORY_ENTRY,
  MEMORY_RECORD,
  METRICS_LIST,
  METRICS_RECORD,
  RAW,
  ROLLOUT_LIST,
  ROLLOUT_RECORD,
  RUN_SPEC,
  RUN_STATE as RUN_STATE_FILE,
  SHARE,
  type RunSpec,
} from './run_schema.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord, RunState } from './run_store.ts';

const RUN_FILE_FORMAT = 'spade-run';
const RUN_FILE_VERSION = 1;
/**
 * Largest run file accepted (UTF-8 bytes of its JSON, after gunzip): a 50-cycle run of 3
 * environments × 16 plays of 12 turns with 2 KB observations is ≈ 60 MB of rollouts; 64 MiB leaves
 * room for that and stops a browser tab from being asked to parse gigabytes.
 */
export const MAX_RUN_FILE_BYTES = 64 * 2 ** 20;
/** Longest string accepted anywhere in a run file: a 1 MiB program is the env-set cap for code too. */
export const MAX_RUN_STRING = 2 ** 20;
/** Deepest nesting accepted: the format itself is at most 6 levels deep; 32 leaves room for reports. */
export const MAX_RUN_DEPTH = 32;
/**
 * Most items in one list (or keys in one object): the largest legitimate list is the rollouts, and
 * 64 MiB holds at most ~300 000 of them (a rollout is ≥ 200 bytes).
 */
export const MAX_RUN_LIST = 1_000_000;
/**
 * Most JSON values (objects, lists, strings, numbers, literals) in a whole run file: a real run
 * spends ≥ 16 bytes a value, so 64 MiB is ≤ 4 M; the cap bounds what parsing may allocate.
 */
export const MAX_RUN_VALUES = 4_000_000;
/**
 * Most objects and lists in a whole run file (the costly values to build): a real run has one per
 * ≥ 5 values (a turn is an object of 6), so ≤ 800 000 within MAX_RUN_VALUES.
 */
export const MAX_RUN_CONTAINERS = 1_000_000;
export function makeRunFile(parts: {
  spec: RunSpec;
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  metrics: MetricsRecord[];
  memory: Memory | SpadeMemoryEntry[] | null;
  state?: RunState | null;
}): RunFile {
  const memory = parts.memory === null ? null : Array.isArray(parts.memory) ? parts.memory : exportMemory(parts.memory);
  return {
    format: RUN_FILE_FORMAT,
    version: RUN_FILE_VERSION,
    spec: parts.spec,
    archive: parts.archive,
    rollouts: parts.rollouts,
    metrics: parts.metrics,
    memory,
    ...(parts.state ? { state: parts.state } : {}),
  };
}

/** The run file as JSON text (one line per top-level field's value would not help diffing; compact). */
export function runFileToJson(file: RunFile): string {
  return `${JSON.stringify(file)}\n`;
}

/** The run file gzip-compressed (`.spade-run.json.gz`). */
export function runFileToGzip(file: RunFile): Uint8Array {
  return gzipSync(strToU8(runFileToJson(file)), { level: 6 });
}

// --- reading ---------------------------------------------------------------------------------

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function tooBig(bytes: number, what = 'The run file'): RunFileError {
  return new RunFileError(
    `${what} is ${(bytes / 2 ** 20).toFixed(1)} MiB; a run file may be at most ${MAX_RUN_FILE_BYTES / 2 ** 20} MiB. Export fewer cycles, or review the run directory with the CLI.`,
    { bytes, limit: MAX_RUN_FILE_BYTES },
  );
}

/** Throws RunFileError when `bytes` is over MAX_RUN_FILE_BYTES; call it before reading or downloading a file. */
export function checkRunFileSize(bytes: number, what?: string): void {
  if (bytes > MAX_RUN_FILE_BYTES) throw tooBig(bytes, what);
}

const isGzip = (b: Uint8Array) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

const ARRAY = 1;
const OBJECT = 2;
const KEY_DECODER = new TextDecoder();

function tooManyContainers(path: string): RunFileError {
  return new RunFileError(
    `The run file holds more than ${MAX_RUN_CONTAINERS} objects and lists (the limit was reached at ${path}); it was rejected. Export fewer cycles.`,
    { limit: MAX_RUN_CONTAINERS, path },
  );
}

/**
 * A single pass over a run file's JSON bytes, fed in pieces (as they are unpacked), that stops at
 * the first limit passed — nesting past MAX_RUN_DEPTH, a list or object past MAX_RUN_LIST items,
 * more than MAX_RUN_VALUES values or MAX_RUN_CONTAINERS objects and lists in all — before
 * JSON.parse allocates anything. It reads only the
 * structure (brackets, commas, quotes, keys) and leaves syntax errors to JSON.parse.
 */
export class RunFileScanner {
  private depth = 0;
  private readonly kinds = new Uint8Array(MAX_RUN_DEPTH + 1);
  private readonly counts: number[] = [];
  /** The current key's first bytes at each depth, decoded only for a message. */
  private readonly keys: number[][] = [];
  private values = 0;
  private containers = 0;
  private inString = false;
  private escaped = false;
  private isKey = false;
  private keyBytes: number[] = [];
  private inScalar = false;
  private expectKey = false;

  /** Where the scan stands, as a path like `$.rollouts[12].turns`. */
  private path(levels = this.depth): string {
    let p = '$';
    for (let d = 1; d <= levels; d++)
      p +=
        this.kinds[d] === ARRAY
          ? `[${Math.max(0, this.counts[d]! - 1)}]`
          : `.${KEY_DECODER.decode(new Uint8Array(this.keys[d] ?? []))}`;
    return p;
  }

  private value(): void {
    if (++this.values > MAX_RUN_VALUES)
      throw new RunFileError(
        `The run file holds more than ${MAX_RUN_VALUES} values (the limit was reached at ${this.path()}); it was rejected. Export fewer cycles.`,
        { limit: MAX_RUN_VALUES, path: this.path() },
      );
    if (this.kinds[this.depth] === ARRAY) this.item();
  }

  /** One more item in the list (or key in the object) open at this depth. */
  private item(): void {
    const n = (this.counts[this.depth] = this.counts[this.depth]! + 1);
    if (n > MAX_RUN_LIST) {
      const where = this.path(this.depth - 1);
      throw new RunFileError(
        `${where} is ${this.kinds[this.depth] === ARRAY ? 'a list' : 'an object'} of more than ${MAX_RUN_LIST} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
        { limit: MAX_RUN_LIST, path: where },
      );
    }
  }

  private endKey(): void {
    this.keys[this.depth] = this.keyBytes;
    this.item();
  }

  /** Scan the next piece of the file; throws RunFileError at the first limit passed. */
  push(b: Uint8Array): void {
    const n = b.length;
    let backslash = -2; // the next backslash at or after i in this piece (-1: none, -2: not looked for)
    let i = 0;
    while (i < n) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          if (this.isKey && this.keyBytes.length < 64) this.keyBytes.push(b[i]!);
          i++;
          continue;
        }
        const q = b.indexOf(0x22, i);
        if (backslash !== -1 && backslash < i) backslash = b.indexOf(0x5c, i);
        const stop = backslash >= 0 && (q < 0 || backslash < q) ? backslash : q;
        const to = stop < 0 ? n : stop;
        if (this.isKey) for (let k = i; k < to && this.keyBytes.length < 64; k++) this.keyBytes.push(b[k]!);
        if (stop < 0) return;
        if (stop === backslash) this.escaped = true;
        else {
          this.inString = false;
          if (this.isKey) this.endKey();
        }
        i = stop + 1;
        continue;
      }
      const c = b[i++]!;
      switch (c) {
        case 0x20:
        case 0x09:
        case 0x0a:
        case 0x0d:
        case 0x3a: // :
          this.inScalar = false;
          break;
        case 0x2c: // ,
          this.inScalar = false;
          this.expectKey = this.kinds[this.depth] === OBJECT;
          break;
        case 0x22: // "
          this.inScalar = false;
          this.inString = true;
          this.isKey = this.expectKey && this.kinds[this.depth] === OBJECT;
          this.expectKey = false;
          if (this.isKey) this.keyBytes = [];
          else this.value();
          break;
        case 0x5b: // [
        case 0x7b: // {
          this.inScalar = false;
          this.value();
          if (++this.containers > MAX_RUN_CONTAINERS) throw tooManyContainers(this.path());
          if (this.depth >= MAX_RUN_DEPTH)
            throw new RunFileError(
              `The run file nests deeper than ${MAX_RUN_DEPTH} levels (at ${this.path()}); it was rejected.`,
              { limit: MAX_RUN_DEPTH, path: this.path() },
            );
          this.depth++;
          this.kinds[this.depth] = c === 0x5b ? ARRAY : OBJECT;
          this.counts[this.depth] = 0;
          this.keys[this.depth] = [];
          this.expectKey = c === 0x7b;
          break;
        case 0x5d: // ]
        case 0x7d: // }
          this.inScalar = false;
          this.expectKey = false;
          if (this.depth > 0) this.depth--;
          break;
        default:
          if (!this.inScalar) {
            this.inScalar = true;
            this.value();
          }
      }
    }
  }
}
function gunzipScanned(data: Uint8Array, scan: RunFileScanner): Uint8Array {
  return decompressCapped(
    'gzip',
    data,
    MAX_RUN_FILE_BYTES,
    {
      tooBig: (n) => tooBig(n, 'The run file, unpacked,'),
      damaged: () => new RunFileError('The run file is damaged: it starts like gzip but does not decompress.'),
    },
    (chunk) => scan.push(chunk),
  );
}

/**
 * Parse a run file's bytes (JSON, or gzip-compressed JSON): size, nesting and counts are checked
 * while the bytes are unpacked and scanned, so a hostile file stops at its first limit.
 */
export function parseRunFileBytes(bytes: Uint8Array): RunFile {
  checkRunFileSize(bytes.length);
  const scan = new RunFileScanner();
  let raw = bytes;
  if (isGzip(bytes)) raw = gunzipScanned(bytes, scan);
  else scan.push(bytes);
  return parseScanned(strFromU8(raw));
}

/** Parse a run file's JSON text. */
export function parseRunFileJson(text: string): RunFile {
  // a JS string's length never exceeds its UTF-8 size by more than 3×; check the cheap bound first
  if (text.length > MAX_RUN_FILE_BYTES) throw tooBig(text.length);
  const bytes = new TextEncoder().encode(text);
  checkRunFileSize(bytes.length);
  new RunFileScanner().push(bytes);
  return parseScanned(text);
}

/** JSON.parse of text that passed the scanner's limits, then the field checks. */
function parseScanned(text: string): RunFile {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new RunFileError(`The run file is not valid JSON (${(err as Error).message.slice(0, 120)}).`);
  }
  return parseRunFile(data);
}

/**
 * Walk untrusted JSON data (recursion bounded by MAX_RUN_DEPTH) and refuse, at the first one met:
 * nesting past MAX_RUN_DEPTH, lists past MAX_RUN_LIST, more than MAX_RUN_VALUES values or
 * MAX_RUN_CONTAINERS objects and lists, strings
 * past MAX_RUN_STRING and prototype-polluting keys — before any field is read. The path is built
 * only for the message.
 */
function screen(data: unknown): void {
  const at: (string | number)[] = [];
  const path = () => '$' + at.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('');
  let values = 0;
  let containers = 0;
  const walk = (v: unknown): void => {
    if (++values > MAX_RUN_VALUES)
      throw new RunFileError(
        `The run file holds more than ${MAX_RUN_VALUES} values (the limit was reached at ${path()}); it was rejected. Export fewer cycles.`,
        { limit: MAX_RUN_VALUES, path: path() },
      );
    if (typeof v === 'string') {
      if (v.length > MAX_RUN_STRING)
        throw new RunFileError(`${path()} is a string of ${v.length} characters; the limit is ${MAX_RUN_STRING}.`, {
          limit: MAX_RUN_STRING,
          path: path(),
        });
      return;
    }
    if (typeof v !== 'object' || v === null) return;
    if (++containers > MAX_RUN_CONTAINERS) throw tooManyContainers(path());
    if (at.length >= MAX_RUN_DEPTH)
      throw new RunFileError(
        `The run file nests deeper than ${MAX_RUN_DEPTH} levels (at ${path()}); it was rejected.`,
        {
          limit: MAX_RUN_DEPTH,
          path: path(),
        },
      );
    const keys = Array.isArray(v) ? null : Object.keys(v);
    const n = keys ? keys.length : (v as unknown[]).length;
    if (n > MAX_RUN_LIST)
      throw new RunFileError(
        `${path()} is ${keys ? 'an object' : 'a list'} of ${n} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
        { limit: MAX_RUN_LIST, path: path() },
      );
    if (!keys) {
      const list = v as unknown[];
      for (let i = 0; i < n; i++) {
        at.push(i);
        walk(list[i]);
        at.pop();
      }
      return;
    }
    for (const k of keys) {
      if (FORBIDDEN_KEYS.has(k))
        throw new RunFileError(`${path()} has a key "${k}", which a run file never has; it was rejected.`);
      at.push(k);
      walk((v as Record<string, unknown>)[k]);
      at.pop();
    }
  };
  walk(data);
}

const FILE: Reader = {
  fail: (message, path) => {
    throw new RunFileError(message, { path });
  },
  root: 'run',
  document: 'a run file',
};

/** Where the run stood; a half-finished cycle's tasks are not carried (a resumed run restarts that cycle). */
const RUN_STATE = map(
  object({
    version: literal(1),
    cycle: CYCLE,
    memory: object({ capacity: int(0, CONFIG_SCHEMA.memoryCapacity.max), records: list(MEMORY_RECORD) }),
    /** Slow EMA of each skill's win rate. */
    ema: opt(record(SHARE), () => ({})),
    blacklist: opt(list(str()), () => []),
    rewardBaseline: opt(record(RAW), () => ({})),
    consecutiveErrors: opt(int(0, MAX_RUN_COUNT), () => 0),
  }),
  (s): RunState => {
    let memory: Memory = emptyMemory(s.memory.capacity || 1);
    for (const { cut, ...rec } of s.memory.records) memory = addRecord(memory, { ...rec, ...(cut ? { cut } : {}) });
    return {
      version: 1,
      cycle: s.cycle,
      memory,
      ema: s.ema ?? {},
      blacklist: s.blacklist ?? [],
      pending: [],
      rewardBaseline: s.rewardBaseline ?? {},
      consecutiveErrors: s.consecutiveErrors ?? 0,
    };
  },
);

const RUN_FILE = object({
  format: literal(RUN_FILE_FORMAT),
  version: literal(RUN_FILE_VERSION),
  spec: RUN_SPEC,
  archive: ARCHIVE_LIST,
  rollouts: ROLLOUT_LIST,
  metrics: METRICS_LIST,
  /** SPADE's env_memory.json entries at the end of the run; null when none was saved. */
  memory: orNull(list(MEMORY_ENTRY, { what: 'a list of {skill, code, win_rate, regret}' })),
  /** Where the run stood (a file can be reviewed without it). */
  state: opt(orNull(RUN_STATE)),
});

export type RunFile = Infer<typeof RUN_FILE>;

// --- a run directory's lines ----------------------------------------------------------------

/** Token ids and old log-probs as the training loop keeps them (`transient` in the schema; never in a run file). */
const TOKEN_IDS = list(int(0, 2 ** 31));
const LOGPROBS = list(num(-MAX_RUN_COUNT, MAX_RUN_COUNT));
const SAMPLED_TOKENS = object({ prompt: TOKEN_IDS, completion: TOKEN_IDS, logprobs: LOGPROBS });
const SPAN = custom<[number, number]>('a [start, end) pair of whole numbers', (v, at, r) =>
  Array.isArray(v) && v.length === 2 && v.every((x) => Number.isInteger(x) && (x as number) >= 0)
    ? [v[0] as number, v[1] as number]
    : r.fail(`${at} must be a [start, end) pair of whole numbers.`, at),
);
const TOKEN_TRACE = object({ ids: TOKEN_IDS, spans: list(SPAN), logprobs: LOGPROBS });

/** The kinds of line a run directory's .jsonl files hold, by file. */
export const RUN_LINES = {
  'archive.jsonl': {
    schema: ARCHIVE_RECORD,
    key: (a: ArchiveRecord) => `cycle ${a.cycle}, task ${a.index}`,
  },
  'rollouts.jsonl': {
    schema: ROLLOUT_RECORD,
    key: (r: RolloutRecord) =>
      `cycle ${r.cycle}, task ${r.index}, play ${r.play} ${r.hinted ? 'with' : 'without'} the hint`,
  },
  'metrics.jsonl': { schema: METRICS_RECORD, key: (m: MetricsRecord) => `cycle ${m.cycle}` },
} as const;
export type RunLineFile = keyof typeof RUN_LINES;
type LineRecord<F extends RunLineFile> = F extends 'archive.jsonl'
  ? ArchiveRecord
  : F extends 'rollouts.jsonl'
    ? RolloutRecord
    : MetricsRecord;

const LINE: Reader = { fail: FILE.fail, document: 'a run directory' };

/** A transient field's value read from a file when it has the right shape, else left out (that record does not train). */
function training<T>(s: Schema<T>, v: unknown): T | undefined {
  if (v === undefined || v === null) return undefined;
  try {
    return decode(s, v, LINE);
  } catch {
    return undefined;
  }
}

/**
 * One line of a run directory's .jsonl (parsed JSON) read with its record's schema, the same one a
 * run file's lists use (after the same screen: nesting, sizes, prototype keys). The training
 * loop's own fields (the first attempt's sampled tokens, a rollout's trace) are kept when they are
 * well formed. Throws RunFileError naming the first problem.
 */
export function parseRunLine<F extends RunLineFile>(file: F, data: unknown): LineRecord<F> {
  screen(data);
  const rec = decode(RUN_LINES[file].schema as Schema<unknown>, data, LINE) as LineRecord<F>;
  if (file === 'archive.jsonl') keepTokens(rec as ArchiveRecord, data);
  if (file === 'rollouts.jsonl') keepTrace(rec as RolloutRecord, data);
  return rec;
}

/** The attempts' sampled tokens of the raw archive record `data`, put back on `rec` where well formed. */
function keepTokens(rec: ArchiveRecord, data: unknown): void {
  if (!isObject(data) || !Array.isArray(data.attempts)) return;
  data.attempts.forEach((a, i) => {
    const tokens = isObject(a) ? training(SAMPLED_TOKENS, a.tokens) : undefined;
    if (tokens && rec.attempts[i]) rec.attempts[i].tokens = tokens;
  });
}

/** The raw rollout's trace, put back on `rec` when well formed. */
function keepTrace(rec: RolloutRecord, data: unknown): void {
  const trace = isObject(data) ? training(TOKEN_TRACE, data.trace) : undefined;
  if (trace) rec.trace = trace;
}

/**
 * A run directory's state.json (what --resume continues from) read with the run-state schema,
 * the pending tasks' training fields kept where well formed. Throws RunFileError.
 */
export function parseRunState(data: unknown): RunState {
  screen(data);
  const state = decode(RUN_STATE_FILE, data, LINE) as RunState;
  if (isObject(data) && Array.isArray(data.pending))
    data.pending.forEach((raw, i) => {
      const p = state.pending[i];
      if (!p || !isObject(raw)) return;
      keepTokens(p.archive, raw.archive);
      if (Array.isArray(raw.rollouts)) raw.rollouts.forEach((r, j) => p.rollouts[j] && keepTrace(p.rollouts[j], r));
    });
  return state;
}

/** A run directory .jsonl read line by line: the good records, and what was skipped. */
export interface RunJsonl<T> {
  records: T[];
  /** One message per skipped line, naming the file and line number. */
  skipped: string[];
  /** A last line without its newline (a write cut short): not read. Its 1-based number and size. */
  torn: { line: number; chars: number } | null;
}

/**
 * The records of a run directory's .jsonl text, each line read with parseRunLine: a line that is
 * not JSON, not a valid record, or that repeats an earlier line's key (the same cycle and task) is
 * skipped and named (`file line N: …`), never fatal. Blank lines are skipped silently; a last line
 * without "\n" is torn (returned apart, never read).
 */
export function parseRunJsonl<F extends RunLineFile>(
  text: string,
  file: F,
  path: string = file,
): RunJsonl<LineRecord<F>> {
  const records: LineRecord<F>[] = [];
  const skipped: string[] = [];
  const seen = new Map<string, number>();
  const key = RUN_LINES[file].key as (r: LineRecord<F>) => string;
  let line = 0;
  let pos = 0;
  while (pos < text.length) {
    line++;
    const nl = text.indexOf('\n', pos);
    if (nl < 0) return { records, skipped, torn: { line, chars: text.length - pos } };
    const raw = text.slice(pos, nl);
    pos = nl + 1;
    if (!raw.trim()) continue;
    let rec: LineRecord<F>;
    try {
      rec = parseRunLine(file, JSON.parse(raw));
    } catch (err) {
      const why = err instanceof SyntaxError ? `not valid JSON (${err.message.slice(0, 120)})` : (err as Error).message;
      skipped.push(`${path} line ${line}: ${why.slice(0, 300)} The line was skipped.`);
      continue;
    }
    const k = key(rec);
    const first = seen.get(k);
    if (first !== undefined) {
      skipped.push(`${path} line ${line} repeats line ${first} (${k}); the line was skipped.`);
      continue;
    }
    seen.set(k, line);
    records.push(rec);
  }
  return { records, skipped, torn: null };
}

/** Validate untrusted data as a RunSpec; `path` names it in messages. */
export function parseRunSpec(data: unknown, path = 'spec'): RunSpec {
  return decode(RUN_SPEC, data, { ...FILE, root: undefined }, path);
}

/** Validate untrusted data as a RunFile. Throws RunFileError naming the first problem's path. */
export function parseRunFile(data: unknown): RunFile {
  screen(data);
  if (!isObject(data))
    throw new RunFileError(
      'A run file must be a JSON object with "format": "spade-run", "version", "spec", "archive", …',
    );
  if (data.format !== RUN_FILE_FORMAT)
    throw new RunFileError(
      `This is not a SPADE run file: "format" must be "${RUN_FILE_FORMAT}", got ${JSON.stringify(data.format)?.slice(0, 40) ?? 'nothing'}. (An env set opens in the Environments panel; a replay transcript in Models.)`,
    );
  if (data.version !== RUN_FILE_VERSION)
    throw new RunFileError(
      `Unsupported run file version ${JSON.stringify(data.version)?.slice(0, 20) ?? 'none'}; this app reads version ${RUN_FILE_VERSION}. Update the app, or export the run again.`,
    );
  return decode(RUN_FILE, data, FILE);
}
