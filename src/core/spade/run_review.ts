/**
 * Review mode's view model: a finished (or opened) run as cycles → environments → plays, from
 * what the run store keeps (archive, rollouts, metrics), so every environment of every cycle can
 * be read after a reload or from a run file. Pure: the Run panel's RunReview component renders it.
 * The score line labels raw and centred designer reward apart, the leak flag appears only when a
 * leak is suspected (with what triggered it), and an environment that cannot train the designer
 * says why.
 */
import type { MetricsRecord, ArchiveRecord, RolloutRecord } from './run_store.ts';
import { runEnvId } from './run_envs.ts';

interface ReviewTurn {
  action: string;
  observation: string;
  reward: number;
  formatError: boolean;
}

interface ReviewPlay {
  /** Unique among its environment's plays (the view's key). */
  key: string;
  play: number;
  hinted: boolean;
  seed: number;
  firstObservation: string;
  turns: ReviewTurn[];
  /** The episode return R. */
  result: number;
  end: string;
  error: string | null;
}

interface ReviewAttempt {
  /** 1-based: attempt 1 is the designer's first program, later ones are repair turns. */
  n: number;
  ok: boolean;
  failures: string[];
  soft: string[];
  reply: string;
  code: string | null;
}

export interface ScoreLine {
  winRate: number;
  winRateHinted: number;
  regret: number;
  /** The designer's reward before centring (estimator value; 0 invalid, −0.5 time-out). */
  rawReward: number | null;
  /** (raw − its skill's centre) × scale: what trains the designer. */
  designerAdvantage: number | null;
  timedOut: boolean;
}

interface ReviewEnv {
  /** "c{cycle}:{index}", with "#2", "#3", … on records that repeat one: unique within a run. */
  key: string;
  cycle: number;
  index: number;
  skill: string;
  title: string;
  setting: 'games' | 'tool_use';
  difficulty: string;
  valid: boolean;
  /** The id of its playable record in the Environments panel (runEnvRecords); null if not playable. */
  playId: string | null;
  source: { title: string; ref: string } | null;
  code: string | null;
  attempts: ReviewAttempt[];
  validator: { accept: boolean; reason: string } | null;
  hint: string | null;
  plays: ReviewPlay[];
  score: ScoreLine | null;
  /** Set only when a leak of the answer into the hint is suspected: what triggered the flag. */
  leak: { reasons: string[]; values: string[] } | null;
  error: string | null;
  /** Why this environment gives the designer no learning signal, in words; null when it does. */
  noSignal: string | null;
}

export interface ReviewCycle {
  cycle: number;
  metrics: MetricsRecord | null;
  envs: ReviewEnv[];
}

const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

/** Why an environment's plays cannot teach the designer anything, or null. */
export function noSignalReason(a: ArchiveRecord): string | null {
  if (a.error) return `the task ended early (${a.error.phase} failed), so nothing was played`;
  if (!a.valid) return 'the design never passed the checks, so it was not played (the designer gets reward 0)';
  const s = a.stats;
  if (!s) return 'it was not played';
  if (s.timedOut)
    return 'a play hung the environment (time-out: the designer gets −0.5 and the program is blacklisted)';
  const all = [...s.noHint, ...s.withHint];
  if (all.length && all.every((v) => v === all[0]))
    return `every play scored the same (R = ${fmt(all[0]!)} with and without the hint), so the plays cannot tell a good attempt from a bad one`;
  return null;
}

/**
 * `key`, or `key#2`, `key#3`, … when it was given before: the view keys lists by these, and a
 * record repeated in a store or a file must not break it (Svelte refuses duplicate keys).
 */
function uniqueKeys(): (key: string) => string {
  const seen = new Map<string, number>();
  return (key) => {
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    return n === 1 ? key : `${key}#${n}`;
  };
}

function playsOf(rollouts: readonly RolloutRecord[]): ReviewPlay[] {
  const keyOf = uniqueKeys();
  return [...rollouts]
    .sort((a, b) => Number(a.hinted) - Number(b.hinted) || a.play - b.play)
    .map((r) => ({
      key: keyOf(`${r.hinted ? 'h' : 'u'}${r.play}`),
      play: r.play,
      hinted: r.hinted,
      seed: r.seed,
      firstObservation: r.firstObservation,
      turns: r.turns.map((t) => ({
        action: t.action,
        observation: t.observation,
        reward: t.reward,
        formatError: t.formatError,
      })),
      result: r.return,
      end: r.end,
      error: r.error ? `${r.error.name}: ${r.error.message}` : null,
    }));
}

function reviewEnv(runId: string, a: ArchiveRecord, rollouts: readonly RolloutRecord[]): ReviewEnv {
  return {
    key: `c${a.cycle}:${a.index}`,
    cycle: a.cycle,
    index: a.index,
    skill: a.skill,
    title: a.title,
    setting: a.setting,
    difficulty: a.difficulty,
    valid: a.valid,
    playId: a.valid && a.code ? runEnvId(runId, a.cycle, a.index) : null,
    source: a.source,
    code: a.code,
    attempts: a.attempts.map((t, i) => ({
      n: i + 1,
      ok: t.ok,
      failures: t.failures,
      soft: t.soft ?? [],
      reply: t.reply,
      code: t.code,
    })),
    validator: a.validator,
    hint: a.hint,
    plays: playsOf(rollouts),
    score: a.stats
      ? {
          winRate: a.stats.winRate,
          winRateHinted: a.stats.winRateHinted,
          regret: a.stats.regret,
          rawReward: a.rawReward ?? a.stats.raw ?? null,
          designerAdvantage: a.designerAdvantage ?? null,
          timedOut: a.stats.timedOut,
        }
      : null,
    leak: a.leak?.suspicious ? { reasons: a.leak.reasons ?? [], values: a.leak.values } : null,
    error: a.error ? `${a.error.phase} (${a.error.name}): ${a.error.message}` : null,
    noSignal: noSignalReason(a),
  };
}

/** The run as cycles (ascending) of environments (by task index), each with its plays. */
export function buildReview(
  runId: string,
  archive: readonly ArchiveRecord[],
  rollouts: readonly RolloutRecord[],
  metrics: readonly MetricsRecord[],
): ReviewCycle[] {
  const byTask = new Map<string, RolloutRecord[]>();
  for (const r of rollouts) {
    const k = `${r.cycle}:${r.index}`;
    const list = byTask.get(k);
    if (list) list.push(r);
    else byTask.set(k, [r]);
  }
  const cycles = new Map<number, ReviewCycle>();
  const cycleOf = (c: number) => {
    let rc = cycles.get(c);
    if (!rc) cycles.set(c, (rc = { cycle: c, metrics: null, envs: [] }));
    return rc;
  };
  for (const m of metrics) cycleOf(m.cycle).metrics = m;
  const keyOf = uniqueKeys();
  for (const a of archive) {
    const env = reviewEnv(runId, a, byTask.get(`${a.cycle}:${a.index}`) ?? []);
    env.key = keyOf(env.key);
    cycleOf(a.cycle).envs.push(env);
  }
  const out = [...cycles.values()].sort((a, b) => a.cycle - b.cycle);
  for (const c of out) c.envs.sort((a, b) => a.index - b.index);
  return out;
}

/** The score line in words, every reward labelled: raw is what the estimator gave, centred is what trains. */
export function scoreText(s: ScoreLine): string {
  const pct = (v: number) => `${Math.round(v * 100)}%`;
  const parts = [
    `win ${pct(s.winRate)} without hint → ${pct(s.winRateHinted)} with hint`,
    `regret ${s.regret.toFixed(2)}`,
    `designer reward ${s.rawReward === null ? '–' : s.rawReward.toFixed(2)} raw`,
    `${s.designerAdvantage === null ? '–' : s.designerAdvantage.toFixed(2)} centred`,
  ];
  if (s.timedOut) parts.push('timed out (blacklisted)');
  return parts.join(' · ');
}

/** The cycle index after a step of `delta` (clamped), or the first/last one. */
export function stepCycle(cycles: readonly ReviewCycle[], current: number, delta: number): number {
  if (!cycles.length) return 0;
  const at = cycles.findIndex((c) => c.cycle === current);
  const i = Math.min(cycles.length - 1, Math.max(0, (at < 0 ? 0 : at) + delta));
  return cycles[i]!.cycle;
}
