/**
 * Run files: one versioned JSON format for a whole self-play run (spec, archive, rollouts,
 * metrics, memory, and the resume state), shared by `spade run export` and the app's Export /
 * Open / `#run=URL`. Optionally gzip-compressed (fflate; detected by its magic bytes).
 *
 * A run file is untrusted input: parsing caps the file's size (also while it is unpacked: no gzip
 * bombs), and scans its bytes for nesting depth, list lengths and value counts before JSON.parse
 * (RunFileScanner), stopping at the first limit; then checks every string's length, refuses
 * prototype-polluting keys ("__proto__", "constructor", "prototype"), and checks every field the
 * app reads, type and range (cycles and indices bounded whole numbers, returns, regrets and rewards
 * finite and in their ranges), and that no (cycle, index) or play repeats. It throws nothing but
 * RunFileError, whose message names the first problem's path and, for a limit, the limit. Nothing in a run file is ever
 * executed here: environment code runs only in the sandbox, when the user plays it.
 */
import { gzipSync, strFromU8, strToU8 } from 'fflate';
import { decompressCapped } from '../bytes.ts';
import { CONFIG_KEYS, CONFIG_SCHEMA, validateConfig } from '../config.ts';
import { RunFileError } from '../errors.ts';
import { addRecord, emptyMemory, exportMemory, type Memory, type SpadeMemoryEntry } from './memory.ts';
import type {
  ArchiveRecord,
  Attempt,
  MetricsRecord,
  RolloutRecord,
  RunSpec,
  RunState,
  TaskFailure,
} from './run_store.ts';
import type { CallBudget } from '../llm/budget.ts';
import type { Turn } from './agent.ts';

export const RUN_FILE_FORMAT = 'spade-run';
export const RUN_FILE_VERSION = 1;
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
/** Largest cycle number accepted (a run of 100 000 cycles is far past any real one). */
export const MAX_RUN_CYCLE = 100_000;
/** Largest task index and play number accepted (a cycle has at most 6 × 16 tasks of 16 plays). */
export const MAX_RUN_INDEX = 10_000;
/** Largest count (tokens, calls, milliseconds, …) accepted: beyond it a number is not a real measurement. */
export const MAX_RUN_COUNT = 2 ** 40;
/** Largest reward magnitude an environment's step may report in a run file. */
export const MAX_RUN_REWARD = 1e9;

export interface RunFile {
  format: typeof RUN_FILE_FORMAT;
  version: typeof RUN_FILE_VERSION;
  spec: RunSpec;
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  metrics: MetricsRecord[];
  /** SPADE's env_memory.json entries at the end of the run; null when none was saved. */
  memory: SpadeMemoryEntry[] | null;
  /** Where the run stood (a file can be reviewed without it). */
  state?: RunState | null;
}

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

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Field readers for one object at `path`; each throws a RunFileError naming the field. */
function fields(o: unknown, path: string) {
  if (!isObj(o)) throw new RunFileError(`${path} must be an object.`);
  const fail = (k: string, what: string): never => {
    throw new RunFileError(`${path}.${k} must be ${what}.`);
  };
  const f = {
    o,
    str(k: string): string {
      const v = o[k];
      return typeof v === 'string' ? v : fail(k, 'a string');
    },
    strOrNull(k: string): string | null {
      const v = o[k];
      return v === null || v === undefined ? null : typeof v === 'string' ? v : fail(k, 'a string or null');
    },
    /** A finite number in [lo, hi]. */
    num(k: string, lo: number, hi: number): number {
      const v = o[k];
      return typeof v === 'number' && v >= lo && v <= hi ? v : fail(k, `a number from ${lo} to ${hi}`);
    },
    /** A whole number in [0, max]. */
    int(k: string, max: number): number {
      const v = o[k];
      return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max
        ? v
        : fail(k, `a whole number from 0 to ${max}`);
    },
    numOrNull(k: string, lo: number, hi: number): number | null {
      const v = o[k];
      return v === null || v === undefined
        ? null
        : typeof v === 'number' && v >= lo && v <= hi
          ? v
          : fail(k, `a number from ${lo} to ${hi}, or null`);
    },
    bool(k: string): boolean {
      const v = o[k];
      return typeof v === 'boolean' ? v : fail(k, 'true or false');
    },
    optBool(k: string): boolean | undefined {
      const v = o[k];
      return v === undefined ? undefined : typeof v === 'boolean' ? v : fail(k, 'true or false');
    },
    strs(k: string, optional = false): string[] {
      const v = o[k];
      if (v === undefined && optional) return [];
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) return fail(k, 'a list of strings');
      return v as string[];
    },
    nums(k: string, lo: number, hi: number): number[] {
      const v = o[k];
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && x >= lo && x <= hi))
        return fail(k, `a list of numbers from ${lo} to ${hi}`);
      return v as number[];
    },
    list(k: string): unknown[] {
      const v = o[k];
      return Array.isArray(v) ? v : fail(k, 'a list');
    },
    oneOf<T extends string>(k: string, options: readonly T[]): T {
      const v = o[k];
      return typeof v === 'string' && (options as readonly string[]).includes(v)
        ? (v as T)
        : fail(k, `one of ${options.join(', ')}`);
    },
  };
  return f;
}

const SETTINGS = ['games', 'tool_use'] as const;
/** Episode returns are clipped to [-1, 1]; a regret (hinted − unhinted mean) is in [-2, 2]. */
const RETURN = [-1, 1] as const;
const REGRET = [-2, 2] as const;
/** Raw designer rewards (every estimator, the time-out penalty) lie in [-2, 2]. */
const RAW = [-2, 2] as const;
/** The env-reward scale: fixed, or computed and capped (the cap is at most 1000). */
const SCALE = [0, 1000] as const;
/** Centred designer rewards: a raw difference (≤ 4) times the env-reward scale. */
const ADVANTAGE = [-4 * SCALE[1], 4 * SCALE[1]] as const;
const SHARE = [0, 1] as const;
const COUNT = [0, MAX_RUN_COUNT] as const;
const SEED = 2 ** 32;

export function parseRunSpec(data: unknown, path = 'spec'): RunSpec {
  const f = fields(data, path);
  if (!isObj(f.o.config)) throw new RunFileError(`${path}.config must be an object of settings.`);
  // only the settings this app knows are read; a newer app's extra settings are left out
  const known = Object.fromEntries(
    Object.entries(f.o.config).filter(([k]) => (CONFIG_KEYS as readonly string[]).includes(k)),
  );
  const r = validateConfig(known);
  if (!r.ok) throw new RunFileError(`${path}.config is invalid: ${r.issues.slice(0, 3).join('; ')}`);
  const m = fields(f.o.models, `${path}.models`);
  return {
    config: r.config,
    skills: f.strs('skills'),
    models: { designer: m.str('designer'), hint: m.str('hint'), agent: m.str('agent') },
    corpus: f.str('corpus'),
    createdAt: f.str('createdAt'),
  };
}

function parseAttempt(data: unknown, path: string): Attempt {
  const f = fields(data, path);
  return {
    reply: f.str('reply'),
    code: f.strOrNull('code'),
    ok: f.bool('ok'),
    failures: f.strs('failures'),
    ...(f.o.soft !== undefined ? { soft: f.strs('soft') } : {}),
    // sampled token ids train a local model; a reviewed run never trains, so they are left out
  };
}

function parseFailure(data: unknown, path: string): TaskFailure | null {
  if (data === null || data === undefined) return null;
  const f = fields(data, path);
  return {
    phase: f.oneOf('phase', ['design', 'validate', 'check', 'hint', 'play'] as const),
    name: f.str('name'),
    message: f.str('message'),
  };
}

const ROLES = ['designer', 'repair', 'validator', 'hint'] as const;

function parseCall(data: unknown, path: string): CallBudget {
  const f = fields(data, path);
  return {
    role: f.oneOf('role', ROLES),
    promptTokens: f.num('promptTokens', ...COUNT),
    exact: f.bool('exact'),
    window: f.num('window', ...COUNT),
    maxTokens: f.num('maxTokens', ...COUNT),
    clamped: f.bool('clamped'),
    shrunk: f.strs('shrunk'),
    skipped: f.bool('skipped'),
  };
}

function parseArchiveRecord(data: unknown, path: string): ArchiveRecord {
  const f = fields(data, path);
  let source: ArchiveRecord['source'] = null;
  if (f.o.source !== null && f.o.source !== undefined) {
    const s = fields(f.o.source, `${path}.source`);
    source = { title: s.str('title'), ref: s.str('ref') };
  }
  let validator: ArchiveRecord['validator'] = null;
  if (f.o.validator !== null && f.o.validator !== undefined) {
    const v = fields(f.o.validator, `${path}.validator`);
    validator = { accept: v.bool('accept'), reason: v.str('reason') };
  }
  let stats: ArchiveRecord['stats'] = null;
  if (f.o.stats !== null && f.o.stats !== undefined) {
    const s = fields(f.o.stats, `${path}.stats`);
    stats = {
      noHint: s.nums('noHint', ...RETURN),
      withHint: s.nums('withHint', ...RETURN),
      winRate: s.num('winRate', ...SHARE),
      winRateHinted: s.num('winRateHinted', ...SHARE),
      regret: s.num('regret', ...REGRET),
      raw: s.numOrNull('raw', ...RAW),
      designerReward: s.numOrNull('designerReward', ...ADVANTAGE),
      timedOut: s.bool('timedOut'),
      blacklisted: s.bool('blacklisted'),
    };
  }
  let leak: ArchiveRecord['leak'] = null;
  if (f.o.leak !== null && f.o.leak !== undefined) {
    const l = fields(f.o.leak, `${path}.leak`);
    leak = { values: l.strs('values'), suspicious: l.bool('suspicious'), reasons: l.strs('reasons', true) };
  }
  const crashed = f.optBool('firstAttemptCrashed');
  return {
    cycle: f.int('cycle', MAX_RUN_CYCLE),
    index: f.int('index', MAX_RUN_INDEX),
    skill: f.str('skill'),
    setting: f.oneOf('setting', SETTINGS),
    difficulty: f.str('difficulty'),
    envId: f.strOrNull('envId'),
    title: f.str('title'),
    code: f.strOrNull('code'),
    hint: f.strOrNull('hint'),
    source,
    valid: f.bool('valid'),
    firstAttemptValid: f.bool('firstAttemptValid'),
    ...(crashed !== undefined ? { firstAttemptCrashed: crashed } : {}),
    attempts: f.list('attempts').map((a, i) => parseAttempt(a, `${path}.attempts[${i}]`)),
    validator,
    stats,
    leak,
    error: parseFailure(f.o.error, `${path}.error`),
    ...(f.o.hintError !== undefined ? { hintError: parseFailure(f.o.hintError, `${path}.hintError`) } : {}),
    rawReward: f.numOrNull('rawReward', ...RAW),
    designerAdvantage: f.numOrNull('designerAdvantage', ...ADVANTAGE),
    ...(f.o.calls !== undefined ? { calls: f.list('calls').map((c, i) => parseCall(c, `${path}.calls[${i}]`)) } : {}),
  };
}

const ENDS = [
  'terminated',
  'truncated',
  'turn_limit',
  'token_budget',
  'context_full',
  'env_error',
  'model_error',
] as const;

function parseTurn(data: unknown, path: string): Turn {
  const f = fields(data, path);
  return {
    action: f.str('action'),
    observation: f.str('observation'),
    reward: f.num('reward', -MAX_RUN_REWARD, MAX_RUN_REWARD),
    terminated: f.bool('terminated'),
    truncated: f.bool('truncated'),
    formatError: f.optBool('formatError') ?? false,
  };
}

function parseRollout(data: unknown, path: string): RolloutRecord {
  const f = fields(data, path);
  let error: RolloutRecord['error'];
  if (f.o.error !== undefined && f.o.error !== null) {
    const e = fields(f.o.error, `${path}.error`);
    error = { name: e.str('name'), message: e.str('message') };
  }
  return {
    cycle: f.int('cycle', MAX_RUN_CYCLE),
    index: f.int('index', MAX_RUN_INDEX),
    skill: f.str('skill'),
    envId: f.str('envId'),
    play: f.int('play', MAX_RUN_INDEX),
    seed: f.int('seed', SEED),
    hinted: f.bool('hinted'),
    firstObservation: f.str('firstObservation'),
    turns: f.list('turns').map((t, i) => parseTurn(t, `${path}.turns[${i}]`)),
    return: f.num('return', ...RETURN),
    end: f.oneOf('end', ENDS),
    ...(error ? { error } : {}),
    tokens: f.num('tokens', ...COUNT),
    ...(f.o.maxPromptTokens !== undefined ? { maxPromptTokens: f.num('maxPromptTokens', ...COUNT) } : {}),
    ...(f.o.droppedTurns !== undefined ? { droppedTurns: f.num('droppedTurns', ...COUNT) } : {}),
    // token traces train a local model; a reviewed run never trains, so they are left out
  };
}

function parseBudget(data: unknown, path: string): MetricsRecord['budget'] {
  if (data === undefined || data === null) return undefined;
  const f = fields(data, path);
  return {
    calls: f.num('calls', ...COUNT),
    maxPromptTokens: f.num('maxPromptTokens', ...COUNT),
    window: f.numOrNull('window', ...COUNT),
    clamped: f.num('clamped', ...COUNT),
    shrunk: f.num('shrunk', ...COUNT),
    skipped: f.num('skipped', ...COUNT),
    agentTurnsDropped: f.num('agentTurnsDropped', ...COUNT),
    contextFullPlays: f.num('contextFullPlays', ...COUNT),
  };
}

function parseDesignerWindow(data: unknown, path: string): MetricsRecord['designerWindow'] {
  if (data === undefined || data === null) return undefined;
  const f = fields(data, path);
  return {
    lag: f.int('lag', MAX_RUN_CYCLE),
    designsOf: f.o.designsOf === null ? null : f.int('designsOf', MAX_RUN_CYCLE),
    rounds: f.int('rounds', MAX_RUN_COUNT),
    designs: f.int('designs', MAX_RUN_COUNT),
    plays: f.int('plays', MAX_RUN_COUNT),
  };
}

function parseMetrics(data: unknown, path: string): MetricsRecord {
  const f = fields(data, path);
  const budget = parseBudget(f.o.budget, `${path}.budget`);
  const designerWindow = parseDesignerWindow(f.o.designerWindow, `${path}.designerWindow`);
  return {
    cycle: f.int('cycle', MAX_RUN_CYCLE),
    skills: f.strs('skills'),
    envs: f.num('envs', ...COUNT),
    valid: f.num('valid', ...COUNT),
    validityRate: f.num('validityRate', ...SHARE),
    firstAttemptValidityRate: f.num('firstAttemptValidityRate', ...SHARE),
    meanRegret: f.numOrNull('meanRegret', ...REGRET),
    meanWinRate: f.numOrNull('meanWinRate', ...SHARE),
    meanWinRateHinted: f.numOrNull('meanWinRateHinted', ...SHARE),
    meanDesignerReward: f.numOrNull('meanDesignerReward', ...RAW),
    meanDesignerAdvantage: f.numOrNull('meanDesignerAdvantage', ...ADVANTAGE),
    inBandShare: f.numOrNull('inBandShare', ...SHARE),
    timeouts: f.num('timeouts', ...COUNT),
    leaks: f.num('leaks', ...COUNT),
    errors: f.o.errors === undefined ? 0 : f.num('errors', ...COUNT),
    ...(budget ? { budget } : {}),
    ...(f.o.envRewardScale !== undefined ? { envRewardScale: f.num('envRewardScale', ...SCALE) } : {}),
    ...(designerWindow ? { designerWindow } : {}),
    ms: f.num('ms', ...COUNT),
    modelMs: f.num('modelMs', ...COUNT),
  };
}

function parseMemoryEntries(data: unknown, path: string): SpadeMemoryEntry[] {
  if (!Array.isArray(data)) throw new RunFileError(`${path} must be a list of {skill, code, win_rate, regret}.`);
  return data.map((e, i) => {
    const f = fields(e, `${path}[${i}]`);
    const title = f.strOrNull('title');
    const setting = f.strOrNull('setting');
    return {
      skill: f.str('skill'),
      code: f.str('code'),
      win_rate: f.numOrNull('win_rate', ...SHARE),
      regret: f.numOrNull('regret', ...REGRET),
      ...(title !== null ? { title } : {}),
      ...(setting !== null ? { setting } : {}),
    };
  });
}

function parseState(data: unknown, path: string): RunState {
  const f = fields(data, path);
  if (f.o.version !== 1) throw new RunFileError(`${path}.version must be 1.`);
  const m = fields(f.o.memory, `${path}.memory`);
  let memory: Memory = emptyMemory(m.int('capacity', CONFIG_SCHEMA.memoryCapacity.max) || 1);
  m.list('records').forEach((r, i) => {
    const g = fields(r, `${path}.memory.records[${i}]`);
    memory = addRecord(memory, {
      id: g.str('id'),
      skill: g.str('skill'),
      setting: g.oneOf('setting', SETTINGS),
      title: g.str('title'),
      code: g.str('code'),
      winRate: g.numOrNull('winRate', ...SHARE),
      regret: g.numOrNull('regret', ...REGRET),
      // -1 marks a seed-library record; a record without a cycle is read as one
      cycle: g.o.cycle === undefined || g.o.cycle === -1 ? -1 : g.int('cycle', MAX_RUN_CYCLE),
      ...(g.optBool('cut') ? { cut: true } : {}),
    });
  });
  const numRecord = (k: string): Record<string, number> => {
    const v = f.o[k];
    if (v === undefined) return {};
    const r = fields(v, `${path}.${k}`);
    return Object.fromEntries(Object.keys(r.o).map((key) => [key, r.num(key, ...RAW)]));
  };
  return {
    version: 1,
    cycle: f.int('cycle', MAX_RUN_CYCLE),
    memory,
    ema: numRecord('ema'),
    blacklist: f.strs('blacklist', true),
    // a half-finished cycle's tasks are not carried: a run resumed from a file restarts that cycle
    pending: [],
    rewardBaseline: numRecord('rewardBaseline'),
    consecutiveErrors: typeof f.o.consecutiveErrors === 'number' ? f.int('consecutiveErrors', MAX_RUN_COUNT) : 0,
  };
}

/** Validate untrusted data as a RunFile. Throws RunFileError naming the first problem's path. */
export function parseRunFile(data: unknown): RunFile {
  screen(data);
  if (!isObj(data))
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
  const f = fields(data, 'run');
  const file: RunFile = {
    format: RUN_FILE_FORMAT,
    version: RUN_FILE_VERSION,
    spec: parseRunSpec(data.spec),
    archive: f.list('archive').map((a, i) => parseArchiveRecord(a, `archive[${i}]`)),
    rollouts: f.list('rollouts').map((r, i) => parseRollout(r, `rollouts[${i}]`)),
    metrics: f.list('metrics').map((m, i) => parseMetrics(m, `metrics[${i}]`)),
    memory: data.memory === null || data.memory === undefined ? null : parseMemoryEntries(data.memory, 'memory'),
  };
  if (data.state !== undefined && data.state !== null) file.state = parseState(data.state, 'state');
  unique(file.archive, 'archive', (a) => [`${a.cycle}:${a.index}`, `cycle ${a.cycle}, task ${a.index}`]);
  unique(file.rollouts, 'rollouts', (r) => [
    `${r.cycle}:${r.index}:${r.hinted}:${r.play}`,
    `cycle ${r.cycle}, task ${r.index}, play ${r.play} ${r.hinted ? 'with' : 'without'} the hint`,
  ]);
  unique(file.metrics, 'metrics', (m) => [String(m.cycle), `cycle ${m.cycle}`]);
  return file;
}

/** Refuse a list in which two records say they are the same one (the review keys them by it). */
function unique<T>(list: readonly T[], name: string, keyOf: (x: T) => [key: string, words: string]): void {
  const seen = new Map<string, number>();
  list.forEach((x, i) => {
    const [key, words] = keyOf(x);
    const first = seen.get(key);
    if (first !== undefined)
      throw new RunFileError(
        `${name}[${i}] repeats ${name}[${first}] (${words}); each appears once in a run file. It was rejected.`,
        { path: `${name}[${i}]` },
      );
    seen.set(key, i);
  });
}
