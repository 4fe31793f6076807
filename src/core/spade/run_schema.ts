/**
 * The run record's one description: a schema per record (spec, archive record, rollout, metrics,
 * memory entry) from which both the TypeScript types (run_store.ts re-exports `Infer<typeof …>`)
 * and the run file's validator (run_file.ts) come. Every number has its range (counts, cycles and
 * indices are whole numbers from 0), every closed set of strings is an enum (setting, difficulty,
 * phase, role, end), and the lists keyed by (cycle, index[, play]) refuse a repeated key.
 * Fields that only the training loop keeps (token ids and traces) are `transient`: typed here,
 * never read from a file. The types defined elsewhere (Turn, Episode, CallBudget,
 * SpadeMemoryEntry, MemoryRecord) are asserted equal to their schemas at the bottom, so neither can drift.
 */
import { DIFFICULTIES, SETTINGS, CONFIG_KEYS, validateConfig, type Config } from '../config.ts';
import type { CallBudget } from '../llm/budget.ts';
import {
  bool,
  custom,
  dflt,
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
  transient,
  type Equal,
  type Infer,
} from '../schema.ts';
import type { SampledTokens, TokenTrace } from '../llm/token_trace.ts';
import type { Episode, Turn } from './agent.ts';
import type { MemoryRecord, SpadeMemoryEntry } from './memory.ts';

/** Largest cycle number accepted (a run of 100 000 cycles is far past any real one). */
export const MAX_RUN_CYCLE = 100_000;
/** Largest task index and play number accepted (a cycle has at most 6 × 16 tasks of 16 plays). */
const MAX_RUN_INDEX = 10_000;
/** Largest count (tokens, calls, milliseconds, …) accepted: beyond it a number is not a real measurement. */
export const MAX_RUN_COUNT = 2 ** 40;
/** Largest reward magnitude an environment's step may report in a run file. */
const MAX_RUN_REWARD = 1e9;

/** Episode returns are clipped to [-1, 1]. */
const RETURN = num(-1, 1);
/** A regret (hinted − unhinted mean return) is in [-2, 2]. */
const REGRET = num(-2, 2);
/** Raw designer rewards (every estimator, the time-out penalty) lie in [-2, 2]. */
export const RAW = num(-2, 2);
/** The env-reward scale: fixed, or computed and capped (the cap is at most 1000). */
const SCALE_MAX = 1000;
/** Centred designer rewards: a raw difference (≤ 4) times the env-reward scale. */
const ADVANTAGE = num(-4 * SCALE_MAX, 4 * SCALE_MAX);
export const SHARE = num(0, 1);
/** Tokens, calls, records: whole numbers. */
const COUNT = int(0, MAX_RUN_COUNT);
/** Milliseconds (fractional: performance.now()). */
const DURATION = num(0, MAX_RUN_COUNT);
export const CYCLE = int(0, MAX_RUN_CYCLE);
const INDEX = int(0, MAX_RUN_INDEX);
const STRINGS = list(str());

/** The run's settings: only the keys this app knows are read (a newer app's extras are left out). */
const CONFIG = custom<Config>('an object of settings', (v, at, r) => {
  if (!isObject(v)) return r.fail(`${shown(at, r)} must be an object of settings.`, at);
  const known = Object.fromEntries(Object.entries(v).filter(([k]) => (CONFIG_KEYS as readonly string[]).includes(k)));
  const checked = validateConfig(known);
  if (!checked.ok) return r.fail(`${shown(at, r)} is invalid: ${checked.issues.slice(0, 3).join('; ')}`, at);
  return checked.config;
});

export const RUN_SPEC = object({
  config: CONFIG,
  /** Skills to rotate over (default: all six of the setting). */
  skills: STRINGS,
  models: object({ designer: str(), hint: str(), agent: str() }),
  corpus: str(),
  createdAt: str(),
  /** The cycles asked for when the run started: `--resume` without `--iterations` goes on to it. */
  iterations: opt(int(0, MAX_RUN_CYCLE)),
});

const ATTEMPT = object({
  reply: str(),
  code: orNull(str()),
  ok: bool(),
  failures: STRINGS,
  /** Findings of the strict checks that did not fail the design under `checks: paper`. */
  soft: opt(STRINGS),
  /** The reply's ids and sampling log-probs (local backend; kept for the first attempt, which trains). */
  tokens: transient<SampledTokens>(),
});

/** Why a task ended early: a model call (design, validate, hint, play) or the checker failed. */
const TASK_FAILURE = object({
  phase: oneOf(['design', 'validate', 'check', 'hint', 'play']),
  name: str(),
  message: str(),
});

/** The context budget of one designer, repair, validator or hint call (llm/budget.ts). */
const CALL_BUDGET = object({
  role: oneOf(['designer', 'repair', 'validator', 'hint']),
  promptTokens: COUNT,
  exact: bool(),
  window: COUNT,
  maxTokens: COUNT,
  clamped: bool(),
  shrunk: STRINGS,
  skipped: bool(),
});

export const ARCHIVE_RECORD = object({
  cycle: CYCLE,
  index: INDEX,
  skill: str(),
  setting: oneOf(SETTINGS),
  difficulty: oneOf(DIFFICULTIES),
  envId: orNull(str()),
  title: str(),
  code: orNull(str()),
  hint: orNull(str()),
  source: orNull(object({ title: str(), ref: str() })),
  valid: bool(),
  firstAttemptValid: bool(),
  /** The first attempt hung or broke the checker (blacklisted; rewarded like a time-out). */
  firstAttemptCrashed: opt(bool()),
  attempts: list(ATTEMPT),
  validator: orNull(object({ accept: bool(), reason: str() })),
  stats: orNull(
    object({
      noHint: list(RETURN),
      withHint: list(RETURN),
      winRate: SHARE,
      winRateHinted: SHARE,
      regret: REGRET,
      raw: orNull(RAW),
      designerReward: orNull(ADVANTAGE),
      timedOut: bool(),
      blacklisted: bool(),
    }),
  ),
  leak: orNull(object({ values: STRINGS, suspicious: bool(), reasons: opt(STRINGS, () => []) })),
  /** Set when the task ended early; the run went on. */
  error: opt(orNull(TASK_FAILURE), () => null),
  /** The hint call failed: only the unhinted plays ran and the regret scored 0 (the task went on). */
  hintError: opt(orNull(TASK_FAILURE)),
  /** The designer's raw reward entering the centring (estimator value, 0 invalid, −0.5 time-out); null: no part. */
  rawReward: opt(orNull(RAW), () => null),
  /** (raw − its skill's centre) × envRewardScale: what trains the designer's first attempt. */
  designerAdvantage: opt(orNull(ADVANTAGE), () => null),
  /** The context budget of each designer, repair, validator and hint call. */
  calls: opt(list(CALL_BUDGET)),
});

export const TURN = object({
  action: str(),
  observation: str(),
  reward: num(-MAX_RUN_REWARD, MAX_RUN_REWARD),
  terminated: bool(),
  truncated: bool(),
  /** The reply had no \boxed{} (games) or no <tool_call>/<answer> (tool use). */
  formatError: dflt(bool(), false),
});

/** One play of an environment (agent.ts's Episode) and where it sits in the run. */
export const ROLLOUT_RECORD = object({
  cycle: CYCLE,
  index: INDEX,
  skill: str(),
  envId: str(),
  play: INDEX,
  seed: int(0, 2 ** 32),
  hinted: bool(),
  firstObservation: str(),
  turns: list(TURN),
  /** R: last reward clipped to [-1, 1] if terminated, else 0. */
  return: RETURN,
  /** How it ended: terminated, truncated by the env, turn limit, token budget, or an env error. */
  end: oneOf(['terminated', 'truncated', 'turn_limit', 'token_budget', 'context_full', 'env_error', 'model_error']),
  error: opt(object({ name: str(), message: str() })),
  tokens: COUNT,
  /** The largest prompt sent in this episode, in tokens (estimated unless the model counts). */
  maxPromptTokens: opt(COUNT),
  /** Earlier turns left out of the prompt to fit the context window (at the last call). */
  droppedTurns: opt(COUNT),
  /** The episode as one token sequence (local engine; trains the agent); null: not trainable. */
  trace: transient<TokenTrace | null>(),
});

export const METRICS_RECORD = object({
  cycle: CYCLE,
  skills: STRINGS,
  envs: COUNT,
  valid: COUNT,
  validityRate: SHARE,
  firstAttemptValidityRate: SHARE,
  meanRegret: orNull(REGRET),
  meanWinRate: orNull(SHARE),
  meanWinRateHinted: orNull(SHARE),
  /** Mean raw designer reward (before centring). */
  meanDesignerReward: orNull(RAW),
  /** Mean centred, scaled designer reward (what the designer is trained on). */
  meanDesignerAdvantage: opt(orNull(ADVANTAGE)),
  /** Share of scored environments whose win rate is in the plateau band [0.4, 0.6]. */
  inBandShare: opt(orNull(SHARE)),
  timeouts: COUNT,
  leaks: COUNT,
  /** Tasks ended by a failed model call or checker. */
  errors: opt(COUNT, () => 0),
  /** The context budget of the cycle's calls (designer, repair, validator, hint; agent prompts in maxPromptTokens). */
  budget: opt(
    object({
      calls: COUNT,
      maxPromptTokens: COUNT,
      window: orNull(COUNT),
      clamped: COUNT,
      shrunk: COUNT,
      skipped: COUNT,
      agentTurnsDropped: COUNT,
      contextFullPlays: COUNT,
    }),
  ),
  /** The scale the cycle's centred designer rewards were multiplied by (fixed, or computed as the reference does). */
  envRewardScale: opt(num(0, SCALE_MAX)),
  /**
   * The designer's window: the designs of cycle `designsOf` (this cycle − designerLag; null before
   * the first) train at this cycle, on a reward recomputed over `plays` unhinted plays of their
   * environments recorded so far (their cycle's; the envReuse rounds' replays join when training).
   */
  designerWindow: opt(object({ lag: CYCLE, designsOf: orNull(CYCLE), rounds: COUNT, designs: COUNT, plays: COUNT })),
  ms: DURATION,
  modelMs: DURATION,
});

/** SPADE's env_memory.json entry (memory.ts). */
export const MEMORY_ENTRY = object({
  skill: str(),
  code: str(),
  win_rate: orNull(SHARE),
  regret: orNull(REGRET),
  title: opt(str()),
  setting: opt(str()),
});

/** One record of the memory as the resume state saves it (memory.ts's MemoryRecord). */
export const MEMORY_RECORD = object({
  id: str(),
  skill: str(),
  setting: oneOf(SETTINGS),
  title: str(),
  code: str(),
  winRate: orNull(SHARE),
  regret: orNull(REGRET),
  // -1 marks a seed-library record; a record without a cycle is read as one
  cycle: dflt(int(-1, MAX_RUN_CYCLE), -1),
  cut: opt(bool()),
});

/** The designer's memory as the resume state and the browser store keep it (memory.ts's Memory). */
export const MEMORY = object({ capacity: int(1, 100_000), records: list(MEMORY_RECORD) });

/** A finished task of the cycle in progress (run_store.ts's PendingTask). */
const PENDING_TASK = object({
  archive: ARCHIVE_RECORD,
  rollouts: list(ROLLOUT_RECORD),
  ms: DURATION,
  modelMs: DURATION,
  blacklist: opt(STRINGS),
});

/** What a run saves after every environment to resume from (run_store.ts's RunState). */
export const RUN_STATE = object({
  version: literal(1),
  cycle: CYCLE,
  memory: MEMORY,
  /** Slow EMA of win rate per skill. */
  ema: record(SHARE),
  blacklist: STRINGS,
  pending: list(PENDING_TASK),
  rewardBaseline: opt(record(RAW)),
  consecutiveErrors: opt(COUNT),
});

/** One finished cycle as a store keeps it (StoreRunStore.writeCycle). */
export const CYCLE_RECORD = object({
  archive: list(ARCHIVE_RECORD),
  rollouts: list(ROLLOUT_RECORD),
  metrics: METRICS_RECORD,
});

/** The lists of a run keyed as the review keys them: each key appears once. */
export const ARCHIVE_LIST = list(ARCHIVE_RECORD, {
  unique: (a) => [`${a.cycle}:${a.index}`, `cycle ${a.cycle}, task ${a.index}`],
});
export const ROLLOUT_LIST = list(ROLLOUT_RECORD, {
  unique: (r) => [
    `${r.cycle}:${r.index}:${r.hinted}:${r.play}`,
    `cycle ${r.cycle}, task ${r.index}, play ${r.play} ${r.hinted ? 'with' : 'without'} the hint`,
  ],
});
export const METRICS_LIST = list(METRICS_RECORD, { unique: (m) => [String(m.cycle), `cycle ${m.cycle}`] });

export type RunSpec = Infer<typeof RUN_SPEC>;
export type Attempt = Infer<typeof ATTEMPT>;
export type TaskFailure = Infer<typeof TASK_FAILURE>;
export type ArchiveRecord = Infer<typeof ARCHIVE_RECORD>;
export type RolloutRecord = Infer<typeof ROLLOUT_RECORD>;
export type MetricsRecord = Infer<typeof METRICS_RECORD>;

/** A rollout's place in the run: the fields a RolloutRecord adds to an Episode. */
type Place = 'cycle' | 'index' | 'skill' | 'envId' | 'play';

/**
 * Compile-time: the records other modules define are exactly their schemas (a field added to one
 * and not the other fails `tsc`). Exported only so that the check is not an unused name.
 * @public (knip: a compile-time check, imported by nothing)
 */
export type SchemaMatchesTypes = [
  Assert<Equal<Infer<typeof TURN>, Turn>>,
  Assert<Equal<Omit<RolloutRecord, Place>, Omit<Episode, never>>>,
  Assert<Equal<Infer<typeof CALL_BUDGET>, CallBudget>>,
  Assert<Equal<Infer<typeof MEMORY_ENTRY>, SpadeMemoryEntry>>,
  Assert<Equal<Infer<typeof MEMORY_RECORD>, MemoryRecord>>,
];
type Assert<T extends true> = T;
