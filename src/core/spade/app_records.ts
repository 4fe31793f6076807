/**
 * Every record the app keeps in its Store (IndexedDB in the browser), with the schema it is read
 * through. An older version of the app, another tab's bug or a hostile page on the same origin can
 * leave anything there; `checkAppRecord` is what `CheckedStore` (core/store.ts) applies to each read,
 * so a record that does not match is set aside with a notice instead of breaking a panel.
 *
 * Run records (spec, resume state, finished cycles, memory) are decoded with the run schemas
 * (run_schema.ts): the value returned is the decoded one, so an older record's missing optional
 * fields read as their defaults. Token traces, which run files never carry (`transient`), are kept
 * when they are well formed, because training after a reload reads them from here. Settings records
 * owned by a state class are checked field by field and returned as stored, so a field a newer
 * version added is not dropped.
 */
import { CONFIG_KEYS } from '../config.ts';
import { StorageError } from '../errors.ts';
import { THEMES } from '../url_state.ts';
import {
  bool,
  custom,
  decode,
  int,
  isObject,
  list,
  literal,
  num,
  object,
  oneOf,
  opt,
  orNull,
  record,
  shown,
  str,
  type Reader,
  type Schema,
} from '../schema.ts';
import { checkKey, type Collection } from '../store.ts';
import type { TokenTrace } from '../llm/token_trace.ts';
import { CYCLE_RECORD, MAX_RUN_CYCLE, MAX_RUN_COUNT, MEMORY, RUN_SPEC, RUN_STATE } from './run_schema.ts';

/** The largest token id or trace length accepted from storage (no vocabulary or context is near it). */
const MAX_TOKEN = 2 ** 31 - 1;

/** A key-safe run id (it prefixes the run's store keys). */
const RUN_ID = custom<string>('a run id (letters, digits, ".", "_" or "-")', (v, at, r) => {
  const bad = (why: string) => r.fail(`${shown(at, r)} must be a run id ${why}.`, at);
  if (typeof v !== 'string' || v.length > 100) return bad('of at most 100 characters');
  try {
    checkKey(`${v}.spec`);
  } catch {
    return bad(`of letters, digits, ".", "_" or "-"; got ${JSON.stringify(v.slice(0, 40))}`);
  }
  return v;
});

/** A token trace as the local backend recorded it (llm/token_trace.ts), checked before training reads it. */
function checkTrace(v: unknown): TokenTrace | null {
  if (!isObject(v)) return null;
  const ints = (x: unknown, lo: number) =>
    Array.isArray(x) && x.length <= MAX_TOKEN && x.every((n) => Number.isInteger(n) && n >= lo && n <= MAX_TOKEN);
  const { ids, spans, logprobs } = v;
  if (!ints(ids, 0) || !Array.isArray(spans) || !Array.isArray(logprobs)) return null;
  const n = (ids as number[]).length;
  let inSpans = 0;
  for (const s of spans) {
    if (!Array.isArray(s) || s.length !== 2 || !ints(s, 0) || s[0] > s[1] || s[1] > n) return null;
    inSpans += s[1] - s[0];
  }
  if (logprobs.length !== inSpans || !logprobs.every((x) => typeof x === 'number' && Number.isFinite(x) && x <= 0))
    return null;
  return { ids: ids as number[], spans: spans as [number, number][], logprobs: logprobs as number[] };
}

/** Put back each rollout's well-formed trace (decoding drops transient fields). */
function keepTraces(decoded: { trace?: TokenTrace | null }[], raw: unknown): void {
  if (!Array.isArray(raw)) return;
  decoded.forEach((d, i) => {
    const t = isObject(raw[i]) ? checkTrace(raw[i].trace) : null;
    if (t) d.trace = t;
  });
}

/** A schema that checks a stored settings record but returns it as stored (see the header). */
function asStored(s: Schema<unknown>): Schema<unknown> {
  return custom(s.what, (v, at, r) => {
    s.decode(v, at, r);
    return v;
  });
}

const CYCLE_WITH_TRACES = custom('a finished cycle', (v, at, r) => {
  const c = CYCLE_RECORD.decode(v, at, r);
  if (isObject(v)) keepTraces(c.rollouts, v.rollouts);
  return c;
});

const STATE_WITH_TRACES = custom('a run state', (v, at, r) => {
  const s = RUN_STATE.decode(v, at, r);
  const pending: unknown = isObject(v) ? v.pending : null;
  if (Array.isArray(pending))
    s.pending.forEach((p, i) => keepTraces(p.rollouts, isObject(pending[i]) ? pending[i].rollouts : null));
  return s;
});

/** The Run panel's pointer to the run a reload resumes. */
const ACTIVE_RUN = object({ runId: RUN_ID, iterations: int(0, MAX_RUN_CYCLE) });

/** A JSON object of settings: AppState validates its fields itself (invalid ones are reset with a notice). */
const CONFIG_RECORD = custom<Record<string, unknown>>('an object of settings', (v, at, r) => {
  if (!isObject(v)) return r.fail(`${shown(at, r)} must be an object of settings.`, at);
  const known = Object.keys(v).filter((k) => (CONFIG_KEYS as readonly string[]).includes(k));
  if (Object.keys(v).length > 0 && known.length === 0)
    return r.fail(`${shown(at, r)} has no setting this app knows.`, at);
  return v;
});

/** Any JSON object (its fields are checked by the module that uses it). */
const AN_OBJECT = custom<Record<string, unknown>>('an object', (v, at, r) =>
  isObject(v) ? v : r.fail(`${shown(at, r)} must be an object.`, at),
);

/** The Models panel's choices (state/models.svelte.ts): known fields typed, others kept. */
const MODELS_RECORD = asStored(
  object({
    roles: opt(record(str())),
    openai: opt(AN_OBJECT),
    /** The API key in `openai` is saved only when this is true ("remember" ticked). */
    rememberKey: opt(bool()),
    webllmId: opt(orNull(str())),
    webllmChosen: opt(bool()),
    customModels: opt(list(AN_OBJECT)),
    vramBudgetMB: opt(orNull(num(0, 1e9))),
  }),
);

/** The Training panel's saved progress per model (state/training.svelte.ts's SavedTraining). */
const TRAINING_RECORD = asStored(
  object({
    version: literal(1),
    model: str(),
    adapter: orNull(object({ configJson: str(), weights: str() })),
    optimizer: orNull(str()),
    steps: opt(list(AN_OBJECT)),
    probes: opt(list(AN_OBJECT)),
    updates: opt(int(0, MAX_RUN_COUNT)),
  }),
);

/**
 * A row of the Lab's class board (core/lab/hand.ts): a hand-made curriculum from a link, its settings
 * and, once replayed, its score. Every text is shown as text; the link is never followed by itself.
 */
const BOARD_ROW = object({
  who: str(),
  seed: int(0, 2 ** 31 - 1),
  space: str(),
  levels: int(1, 8),
  plays: int(1, 16),
  probePlays: int(1, 32),
  cycles: int(0, 400),
  curriculum: str(),
  link: str(),
  score: orNull(
    object({
      mean: num(0, 1),
      hardHalf: num(0, 1),
      topRung: int(-1, 64),
      plays: int(0, MAX_RUN_COUNT),
      steps: int(0, MAX_RUN_COUNT),
    }),
  ),
});

interface Entry {
  collection: Collection;
  /** The key, or a test on it. */
  key: string | RegExp;
  /** What the record is, in words, for the notice. */
  what: string;
  schema: Schema<unknown>;
}

/** The table: every record the app reads from its store. Envsets are read by saved_sets.ts (damaged ones listed there). */
const APP_RECORDS: readonly Entry[] = [
  { collection: 'settings', key: 'config', what: 'settings', schema: CONFIG_RECORD },
  { collection: 'settings', key: 'theme', what: 'theme', schema: oneOf(THEMES) },
  { collection: 'settings', key: 'activeRun', what: 'the run to resume', schema: ACTIVE_RUN },
  { collection: 'settings', key: 'models', what: 'model choices', schema: MODELS_RECORD },
  {
    collection: 'settings',
    key: 'replay',
    what: 'the recorded transcript',
    schema: object({ name: str(), text: str() }),
  },
  {
    collection: 'settings',
    key: 'corpusChoice',
    what: 'the corpus choice',
    schema: oneOf(['default', 'mine', 'both', 'none'] as const),
  },
  { collection: 'settings', key: /^training\./, what: 'training progress', schema: TRAINING_RECORD },
  { collection: 'settings', key: 'classBoard', what: "the Lab's class board", schema: list(BOARD_ROW) },
  {
    collection: 'corpus',
    key: 'user',
    what: 'your documents',
    schema: list(object({ text: str(), source: str() })),
  },
  { collection: 'memory', key: 'imported', what: 'the imported memory', schema: MEMORY },
  { collection: 'runs', key: /\.spec$/, what: "a run's settings", schema: RUN_SPEC },
  { collection: 'runs', key: /\.state$/, what: "a run's resume state", schema: STATE_WITH_TRACES },
  { collection: 'runs', key: /\.c\d{6}$/, what: "a run's finished cycle", schema: CYCLE_WITH_TRACES },
  { collection: 'runs', key: /\.memory$/, what: "a run's memory", schema: MEMORY },
];

/** The entry for a record, or undefined for records this table does not list (read as stored). */
function appRecordEntry(collection: Collection, key: string): Entry | undefined {
  return APP_RECORDS.find(
    (e) => e.collection === collection && (typeof e.key === 'string' ? e.key === key : e.key.test(key)),
  );
}

/**
 * Read a stored value through its table entry: the decoded value, or a StorageError that says what
 * was wrong (the first bad field). Values with no entry are returned as they are.
 */
export function checkAppRecord(collection: Collection, key: string, value: unknown): unknown {
  const entry = appRecordEntry(collection, key);
  if (!entry) return value;
  const reader: Reader = {
    fail: (message) => {
      throw new StorageError(`Saved ${entry.what} (${collection}/${key}) is damaged: ${message}`, { collection, key });
    },
    document: `saved ${entry.what}`,
  };
  return decode(entry.schema, value, { ...reader, root: 'record' });
}
