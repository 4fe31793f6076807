/**
 * Run files: one versioned JSON format for a whole self-play run (spec, archive, rollouts,
 * metrics, memory, and the resume state), shared by `spade run export` and the app's Export /
 * Open / `#run=URL`. Optionally gzip-compressed (fflate; detected by its magic bytes).
 *
 * A run file is untrusted input: parsing checks every field the app reads, type by type, caps the
 * file's size (also after gunzip: no gzip bombs), every string's length and the nesting depth, and
 * refuses prototype-polluting keys ("__proto__", "constructor", "prototype"). It throws nothing
 * but RunFileError, whose message names the first problem's path. Nothing in a run file is ever
 * executed here: environment code runs only in the sandbox, when the user plays it.
 */
import { gzipSync, strFromU8, strToU8 } from 'fflate';
import { decompressCapped } from '../bytes.ts';
import { CONFIG_KEYS, validateConfig } from '../config.ts';
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

function gunzipCapped(data: Uint8Array): Uint8Array {
  return decompressCapped('gzip', data, MAX_RUN_FILE_BYTES, {
    tooBig: (n) => tooBig(n, 'The run file, unpacked,'),
    damaged: () => new RunFileError('The run file is damaged: it starts like gzip but does not decompress.'),
  });
}

/** Parse a run file's bytes (JSON, or gzip-compressed JSON). */
export function parseRunFileBytes(bytes: Uint8Array): RunFile {
  checkRunFileSize(bytes.length);
  const raw = isGzip(bytes) ? gunzipCapped(bytes) : bytes;
  return parseRunFileJson(strFromU8(raw));
}

/** Parse a run file's JSON text. */
export function parseRunFileJson(text: string): RunFile {
  // a JS string's length never exceeds its UTF-8 size by more than 3×; check the cheap bound first
  if (text.length > MAX_RUN_FILE_BYTES) throw tooBig(text.length);
  checkRunFileSize(new TextEncoder().encode(text).length);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    // a hostile nesting depth can overflow the parser's stack: a RangeError, reported the same way
    throw new RunFileError(`The run file is not valid JSON (${(err as Error).message.slice(0, 120)}).`);
  }
  return parseRunFile(data);
}

/**
 * Walk untrusted JSON data without recursion: refuse depth past MAX_RUN_DEPTH, strings past
 * MAX_RUN_STRING and prototype-polluting keys, before any field is read.
 */
function screen(data: unknown): void {
  const stack: [unknown, number, string][] = [[data, 0, '$']];
  while (stack.length) {
    const [v, depth, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (v.length > MAX_RUN_STRING)
        throw new RunFileError(`${path} is a string of ${v.length} characters; the limit is ${MAX_RUN_STRING}.`);
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= MAX_RUN_DEPTH)
      throw new RunFileError(`The run file nests deeper than ${MAX_RUN_DEPTH} levels (at ${path}); it was rejected.`);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push([v[i], depth + 1, `${path}[${i}]`]);
    } else {
      for (const k of Object.keys(v)) {
        if (FORBIDDEN_KEYS.has(k))
          throw new RunFileError(`${path} has a key "${k}", which a run file never has; it was rejected.`);
        stack.push([(v as Record<string, unknown>)[k], depth + 1, `${path}.${k}`]);
      }
    }
  }
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
    num(k: string): number {
      const v = o[k];
      return typeof v === 'number' && Number.isFinite(v) ? v : fail(k, 'a finite number');
    },
    int(k: string): number {
      const v = o[k];
      return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : fail(k, 'a whole number ≥ 0');
    },
    numOrNull(k: string): number | null {
      const v = o[k];
      return v === null || v === undefined
        ? null
        : typeof v === 'number' && Number.isFinite(v)
          ? v
          : fail(k, 'a finite number or null');
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
    nums(k: string): number[] {
      const v = o[k];
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isFinite(x)))
        return fail(k, 'a list of finite numbers');
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
    promptTokens: f.num('promptTokens'),
    exact: f.bool('exact'),
    window: f.num('window'),
    maxTokens: f.num('maxTokens'),
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
      noHint: s.nums('noHint'),
      withHint: s.nums('withHint'),
      winRate: s.num('winRate'),
      winRateHinted: s.num('winRateHinted'),
      regret: s.num('regret'),
      raw: s.numOrNull('raw'),
      designerReward: s.numOrNull('designerReward'),
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
    cycle: f.int('cycle'),
    index: f.int('index'),
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
    rawReward: f.numOrNull('rawReward'),
    designerAdvantage: f.numOrNull('designerAdvantage'),
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
    reward: f.num('reward'),
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
    cycle: f.int('cycle'),
    index: f.int('index'),
    skill: f.str('skill'),
    envId: f.str('envId'),
    play: f.int('play'),
    seed: f.num('seed'),
    hinted: f.bool('hinted'),
    firstObservation: f.str('firstObservation'),
    turns: f.list('turns').map((t, i) => parseTurn(t, `${path}.turns[${i}]`)),
    return: f.num('return'),
    end: f.oneOf('end', ENDS),
    ...(error ? { error } : {}),
    tokens: f.num('tokens'),
    ...(f.o.maxPromptTokens !== undefined ? { maxPromptTokens: f.num('maxPromptTokens') } : {}),
    ...(f.o.droppedTurns !== undefined ? { droppedTurns: f.num('droppedTurns') } : {}),
    // token traces train a local model; a reviewed run never trains, so they are left out
  };
}

function parseBudget(data: unknown, path: string): MetricsRecord['budget'] {
  if (data === undefined || data === null) return undefined;
  const f = fields(data, path);
  return {
    calls: f.num('calls'),
    maxPromptTokens: f.num('maxPromptTokens'),
    window: f.numOrNull('window'),
    clamped: f.num('clamped'),
    shrunk: f.num('shrunk'),
    skipped: f.num('skipped'),
    agentTurnsDropped: f.num('agentTurnsDropped'),
    contextFullPlays: f.num('contextFullPlays'),
  };
}

function parseMetrics(data: unknown, path: string): MetricsRecord {
  const f = fields(data, path);
  const budget = parseBudget(f.o.budget, `${path}.budget`);
  return {
    cycle: f.int('cycle'),
    skills: f.strs('skills'),
    envs: f.num('envs'),
    valid: f.num('valid'),
    validityRate: f.num('validityRate'),
    firstAttemptValidityRate: f.num('firstAttemptValidityRate'),
    meanRegret: f.numOrNull('meanRegret'),
    meanWinRate: f.numOrNull('meanWinRate'),
    meanWinRateHinted: f.numOrNull('meanWinRateHinted'),
    meanDesignerReward: f.numOrNull('meanDesignerReward'),
    meanDesignerAdvantage: f.numOrNull('meanDesignerAdvantage'),
    inBandShare: f.numOrNull('inBandShare'),
    timeouts: f.num('timeouts'),
    leaks: f.num('leaks'),
    errors: f.o.errors === undefined ? 0 : f.num('errors'),
    ...(budget ? { budget } : {}),
    ms: f.num('ms'),
    modelMs: f.num('modelMs'),
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
      win_rate: f.numOrNull('win_rate'),
      regret: f.numOrNull('regret'),
      ...(title !== null ? { title } : {}),
      ...(setting !== null ? { setting } : {}),
    };
  });
}

function parseState(data: unknown, path: string): RunState {
  const f = fields(data, path);
  if (f.o.version !== 1) throw new RunFileError(`${path}.version must be 1.`);
  const m = fields(f.o.memory, `${path}.memory`);
  let memory: Memory = emptyMemory(m.int('capacity') || 1);
  m.list('records').forEach((r, i) => {
    const g = fields(r, `${path}.memory.records[${i}]`);
    memory = addRecord(memory, {
      id: g.str('id'),
      skill: g.str('skill'),
      setting: g.oneOf('setting', SETTINGS),
      title: g.str('title'),
      code: g.str('code'),
      winRate: g.numOrNull('winRate'),
      regret: g.numOrNull('regret'),
      cycle: typeof g.o.cycle === 'number' && Number.isInteger(g.o.cycle) ? g.o.cycle : -1,
      ...(g.optBool('cut') ? { cut: true } : {}),
    });
  });
  const numRecord = (k: string): Record<string, number> => {
    const v = f.o[k];
    if (v === undefined) return {};
    const r = fields(v, `${path}.${k}`);
    return Object.fromEntries(Object.keys(r.o).map((key) => [key, r.num(key)]));
  };
  return {
    version: 1,
    cycle: f.int('cycle'),
    memory,
    ema: numRecord('ema'),
    blacklist: f.strs('blacklist', true),
    // a half-finished cycle's tasks are not carried: a run resumed from a file restarts that cycle
    pending: [],
    rewardBaseline: numRecord('rewardBaseline'),
    consecutiveErrors: typeof f.o.consecutiveErrors === 'number' ? f.int('consecutiveErrors') : 0,
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
  return file;
}
