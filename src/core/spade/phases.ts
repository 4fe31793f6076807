/**
 * One SPADE task as pure phase functions over a task context:
 *
 *   brief → checkAndRepair (design + check, repair turns) → writeHint → play → probeLeaks → score
 *
 * and, per cycle, `cycleMetrics`. Each phase takes the context, returns its part of the
 * archive record and emits its own events; none touches run state or storage (that is
 * SpadeLoop's job: gating, persistence). Model chats and plays draw on the run's one budget
 * (`ctx.budget`, `concurrency` slots): a designer, validator or hint call holds a slot for the
 * call, a play one for its episode, and nothing that holds a slot waits for another, so the
 * budget cannot deadlock and chats in flight never exceed it. A failed model call or a failed
 * checker is caught here and becomes a `TaskFailure` on the record: one bad reply ends one
 * task, never the run. A stop (AbortError) is the only error that escapes.
 */
import type { Config } from '../config.ts';
import type { CheckName, CheckOptions, CheckReport, EnvRunner } from '../env/checker.ts';
import { envId as codeId } from '../env/envset.ts';
import { ContextBudgetError, serializeError, SpadeError } from '../errors.ts';
import { callBudget, planCall, type CallBudget, type CallPlan } from '../llm/budget.ts';
import type { Limiter } from '../limiter.ts';
import {
  ROLE_PRESETS,
  roleOptions,
  type ChatMessage,
  type ChatResult,
  type MeteredChatModel,
} from '../llm/chat_model.ts';
import { hashSeed, type Rng } from '../rng.ts';
import type { SandboxLimits } from '../env/limits.ts';
import { playFresh, type Episode } from './agent.ts';
import { excerpt as cutExcerpt, sampleDoc, type CorpusDoc } from './corpus.ts';
import { estimate, FAILED_PLAY_RETURN, mean, playFailed, regret, winRate } from './estimators.ts';
import { extractCode, extractHint, leakedValues, parseVerdict } from './extract.ts';
import { selectExamples, type Memory, type MemoryRecord } from './memory.ts';
import { COMPACT_GAME, COMPACT_TOOL } from './compact_examples.ts';
import { envTitle } from '../env/contract.ts';
import {
  designerMessages,
  hintMessages,
  HINT_PREFIX,
  repairMessages,
  validatorMessages,
  type DesignerBrief,
} from './prompts.ts';
import type { LoopEvent } from './run_events.ts';
import type { ArchiveRecord, Attempt, MetricsRecord, PendingTask, RolloutRecord, TaskFailure } from './run_store.ts';

export type CheckingRunner = EnvRunner & { check(code: string, opts?: CheckOptions): Promise<CheckReport> };

/** Everything one task reads. Built by the loop; phases never change it. */
export interface TaskContext {
  cfg: Config;
  cycle: number;
  index: number;
  skill: string;
  /** The memory as it was when the cycle began (every task of a cycle reads the same one). */
  memory: Memory;
  /** Code ids of designs that hung or broke the sandbox earlier. */
  blacklist: readonly string[];
  /** The skill's slow EMA of win rate (learning-potential estimator). */
  emaWinRate: number | undefined;
  runner: CheckingRunner;
  models: { designer: MeteredChatModel; hint: MeteredChatModel; agent: MeteredChatModel };
  /**
   * The run's budget of model chats in flight (`cfg.concurrency` slots), shared by every task:
   * each designer, validator and hint call takes a slot for the call, each play one for its
   * episode (its agent chats, one at a time, take none). A task itself holds none.
   */
  budget: Limiter;
  corpus: CorpusDoc[];
  rng: Rng;
  limits: SandboxLimits;
  signal?: AbortSignal;
  emit: (e: LoopEvent) => void;
  /** Waits while paused; throws AbortError once stopped. */
  gate: () => Promise<void>;
}

/**
 * The checks that fail a design under `checks: paper` — SPADE's own validator: it loads, the
 * class is found, reset/step have the right shapes, the probe actions and garbage input are
 * survived, and the same seed gives the same episode. Solvability is left to the regret signal.
 * Under `strict` every check counts; under `paper` the others are kept as soft facts.
 */
const PAPER_CHECKS: readonly CheckName[] = ['loads', 'reset', 'step', 'garbage_input', 'deterministic', 'closes'];

/** An error is a stop (not a task failure) when the run's signal fired or it is an AbortError. */
function isStop(err: unknown, signal?: AbortSignal): boolean {
  return Boolean(signal?.aborted) || (err as Error)?.name === 'AbortError';
}

function failure(phase: TaskFailure['phase'], err: unknown): TaskFailure {
  const e = serializeError(err);
  return { phase, name: e.name, message: e.message };
}

// --- brief ---------------------------------------------------------------------------------

/** The fewest reply tokens worth asking for, per call (a program, a verdict line, a hint, a move). */
const MIN_REPLY = { designer: 256, validator: 32, hint: 32, agent: 32 } as const;

export interface Brief {
  doc: CorpusDoc | null;
  excerpt: string | null;
  messages: ChatMessage[];
  /** The first designer call's budget: prompt tokens, window, max_tokens, what was dropped to fit. */
  budget: CallBudget;
}

/** The positive example when the memory has no complete in-band one for the skill. */
function compactExample(setting: Config['setting']): MemoryRecord {
  const code = setting === 'games' ? COMPACT_GAME : COMPACT_TOOL;
  return {
    id: `compact-${setting}`,
    skill: setting === 'games' ? 'logical_deduction' : 'data_retrieval',
    setting,
    title: envTitle(code),
    code,
    winRate: null,
    regret: null,
    cycle: -1,
  };
}

const words = (text: string, n: number) => text.split(/\s+/).slice(0, Math.max(0, n)).join(' ');

/**
 * The steps that make a designer prompt fit a small window, in this fixed order: halve the
 * excerpt, quarter it, drop it; drop the example; drop the negative line; use the contract's
 * short form. Each step keeps the ones before it.
 */
export const SHRINK_ORDER = ['excerpt 1/2', 'excerpt 1/4', 'excerpt', 'examples', 'negative', 'contract'] as const;

function shrunkBrief(b: DesignerBrief, step: (typeof SHRINK_ORDER)[number], full: number): DesignerBrief {
  switch (step) {
    case 'excerpt 1/2':
      return { ...b, excerpt: b.excerpt ? words(b.excerpt, Math.floor(full / 2)) : null };
    case 'excerpt 1/4':
      return { ...b, excerpt: b.excerpt ? words(b.excerpt, Math.floor(full / 4)) : null };
    case 'excerpt':
      return { ...b, excerpt: null, source: null };
    case 'examples':
      return { ...b, positive: [] };
    case 'negative':
      return { ...b, negative: null };
    case 'contract':
      return { ...b, shortContract: true };
  }
}

/**
 * Grounding document and memory examples → the designer's first-attempt messages, shrunk in
 * SHRINK_ORDER until prompt + a useful reply fit the designer's window. The budget says what
 * was dropped; `budget.skipped` means not even the smallest prompt fits (the call is never sent).
 */
export async function brief(ctx: TaskContext): Promise<Brief> {
  const { cfg } = ctx;
  const doc = sampleDoc(ctx.corpus, ctx.rng);
  const ex = doc ? cutExcerpt(doc, cfg.excerptWords) : null;
  if (doc && ex)
    ctx.emit({
      type: 'document',
      cycle: ctx.cycle,
      index: ctx.index,
      skill: ctx.skill,
      source: doc.source,
      excerpt: ex,
    });
  // one complete example (never a program cut mid-way), else the compact example of the setting
  const { positive, negative } = selectExamples(ctx.memory, ctx.skill, cfg.setting, ctx.rng, 1, { completeOnly: true });
  let b: DesignerBrief = {
    setting: cfg.setting,
    skill: ctx.skill,
    difficulty: cfg.difficulty,
    excerpt: ex,
    source: doc?.source ?? null,
    positive: positive.length ? positive : [compactExample(cfg.setting)],
    negative,
  };
  const fullWords = ex ? ex.split(/\s+/).length : 0;
  const shrunk: string[] = [];
  let messages = designerMessages(b);
  let plan = await planCall(ctx.models.designer, messages, cfg.designerMaxTokens, MIN_REPLY.designer);
  for (const step of SHRINK_ORDER) {
    if (plan.fits) break;
    b = shrunkBrief(b, step, fullWords);
    shrunk.push(step);
    messages = designerMessages(b);
    plan = await planCall(ctx.models.designer, messages, cfg.designerMaxTokens, MIN_REPLY.designer);
  }
  return { doc, excerpt: b.excerpt, messages, budget: callBudget('designer', plan, shrunk) };
}

/** The error recorded for a call that cannot fit: what it needed and what the window holds. */
function overBudget(
  role: string,
  plan: Pick<CallPlan, 'promptTokens' | 'exact' | 'window' | 'maxTokens'>,
  min: number,
): ContextBudgetError {
  return new ContextBudgetError(
    `The ${role} prompt takes ${plan.promptTokens} tokens${plan.exact ? '' : ' (estimated)'} of the model's ${plan.window}-token window, leaving ${plan.maxTokens} for the reply; at least ${min} are needed. Use a model with a larger window (or raise its context size), or shorten the excerpt (excerptWords).`,
    { role, promptTokens: plan.promptTokens, window: plan.window },
  );
}

// --- design and check --------------------------------------------------------------------

export interface CheckOutcome {
  failures: string[];
  soft: string[];
  report: CheckReport | null;
  /** The checker itself failed (time-out, memory, sandbox restart): the design is blacklisted. */
  crashed: TaskFailure | null;
}

/** Check one program: blacklist, the checker at the configured level, the setting. Never throws. */
/** An environment lost because its worker was replaced, without a watchdog stopping this environment's own call. */
const lostWithItsWorker = (err: unknown): boolean =>
  err instanceof SpadeError && err.data.lost === true && err.data.killed !== true;

export async function checkDesign(ctx: TaskContext, code: string | null): Promise<CheckOutcome> {
  const { cfg } = ctx;
  if (!code)
    return {
      failures: ['no program found: reply with one ```javascript block containing a class whose name ends in "Env"'],
      soft: [],
      report: null,
      crashed: null,
    };
  if (ctx.blacklist.includes(codeId(code)))
    return {
      failures: ['this exact program was blacklisted earlier (it hung or broke the sandbox); write a different one'],
      soft: [],
      report: null,
      crashed: null,
    };
  let report: CheckReport;
  const check = () => ctx.runner.check(code, { maxTurns: cfg.maxTurns, limits: ctx.limits });
  try {
    report = await check().catch((err: unknown) => {
      // its environment went down with a worker that a neighbour's program broke: check it once
      // more on a live worker before blaming it (a program that breaks its worker breaks it again)
      if (isStop(err, ctx.signal) || !lostWithItsWorker(err)) throw err;
      return check();
    });
  } catch (err) {
    if (isStop(err, ctx.signal)) throw err;
    const f = failure('check', err);
    return { failures: [`checker: ${f.name}: ${f.message}`], soft: [], report: null, crashed: f };
  }
  const counts = (name: CheckName) => cfg.checks === 'strict' || PAPER_CHECKS.includes(name);
  const failed = report.checks.filter((c) => !c.ok);
  const failures = failed.filter((c) => counts(c.name)).map((c) => `${c.name}: ${c.message}`);
  const soft = failed.filter((c) => !counts(c.name)).map((c) => `${c.name}: ${c.message}`);
  const loaded = report.checks.find((c) => c.name === 'loads')?.ok ?? false;
  if (loaded && cfg.setting === 'tool_use' && !report.setting?.startsWith('tool'))
    failures.push('setting: the class must extend ToolUseEnv');
  if (loaded && cfg.setting === 'games' && report.setting === 'tool_use')
    failures.push('setting: a game must not extend ToolUseEnv');
  return { failures, soft, report, crashed: null };
}

export interface DesignResult {
  attempts: Attempt[];
  validator: ArchiveRecord['validator'];
  /** The final valid program, or null. */
  code: string | null;
  /** A design whose first attempt crashed the checker (counts as a time-out for the reward). */
  firstAttemptCrashed: boolean;
  /** Code ids to blacklist (programs that crashed the checker). */
  blacklist: string[];
  /** Every designer-side call's budget (designer, repair, validator), in order. */
  calls: CallBudget[];
  error: TaskFailure | null;
}

/** The designer writes, the checker judges, failures are fed back for `repairTurns` more tries. */
export async function checkAndRepair(ctx: TaskContext, b: Brief): Promise<DesignResult> {
  const { cfg, cycle, index } = ctx;
  const out: DesignResult = {
    attempts: [],
    validator: null,
    code: null,
    firstAttemptCrashed: false,
    blacklist: [],
    calls: [b.budget],
    error: null,
  };
  if (b.budget.skipped) {
    out.error = failure('design', overBudget('designer', b.budget, MIN_REPLY.designer));
    return out;
  }
  let messages = b.messages;
  let maxTokens = b.budget.maxTokens;
  for (let a = 0; a <= cfg.repairTurns; a++) {
    await ctx.gate();
    let text: string;
    let tokens: ChatResult['tokens'];
    try {
      const reply = await ctx.budget.run(() =>
        ctx.models.designer.chat(
          messages,
          roleOptions('designer', {
            temperature: cfg.designerTemperature,
            max_tokens: maxTokens,
            seed: hashSeed(`${cfg.seed}:d:${cycle}:${index}:${a}`),
            signal: ctx.signal,
            onToken: (delta) => ctx.emit({ type: 'designer_token', cycle, index, attempt: a, delta }),
          }),
        ),
      );
      text = reply.text;
      tokens = a === 0 ? reply.tokens : undefined; // only the first attempt is trained on
    } catch (err) {
      if (isStop(err, ctx.signal)) throw err;
      out.error = failure('design', err);
      return out;
    }
    const code = extractCode(text);
    ctx.emit({ type: 'designer_output', cycle, index, attempt: a, text, code, messages });
    const c = await checkDesign(ctx, code);
    if (c.crashed && code) {
      out.blacklist.push(codeId(code));
      if (a === 0) out.firstAttemptCrashed = true;
    }
    if (c.failures.length === 0 && code && cfg.llmValidator === 'on') {
      const vm = validatorMessages(cfg.setting, code);
      const plan = await planCall(ctx.models.designer, vm, ROLE_PRESETS.hint.max_tokens!, MIN_REPLY.validator);
      out.calls.push(callBudget('validator', plan));
      if (!plan.fits)
        out.validator = { accept: true, reason: 'validator skipped: the program fills the context window' };
      else {
        try {
          const v = await ctx.budget.run(() =>
            ctx.models.designer.chat(
              vm,
              roleOptions('hint', {
                temperature: 0,
                max_tokens: plan.maxTokens,
                seed: hashSeed(`${cfg.seed}:v:${cycle}:${index}:${a}`),
                signal: ctx.signal,
              }),
            ),
          );
          out.validator = parseVerdict(v.text);
          if (!out.validator.accept) c.failures.push(`validator: ${out.validator.reason}`);
        } catch (err) {
          if (isStop(err, ctx.signal)) throw err;
          out.error = failure('validate', err);
          out.attempts.push({
            reply: text,
            code,
            ok: false,
            failures: ['validator: the model call failed'],
            soft: c.soft,
          });
          return out;
        }
      }
    }
    const ok = c.failures.length === 0;
    ctx.emit({ type: 'checks', cycle, index, attempt: a, ok, failures: c.failures, soft: c.soft, report: c.report });
    out.attempts.push({ reply: text, code, ok, failures: c.failures, soft: c.soft, ...(tokens ? { tokens } : {}) });
    if (ok) {
      out.code = code;
      break;
    }
    if (a === cfg.repairTurns) break;
    const next = repairMessages(messages, text, c.failures);
    const plan = await planCall(ctx.models.designer, next, cfg.designerMaxTokens, MIN_REPLY.designer);
    out.calls.push(callBudget('repair', plan));
    if (!plan.fits) break; // the conversation no longer fits: no repair turn is sent (recorded in calls)
    messages = next;
    maxTokens = plan.maxTokens;
  }
  return out;
}

// --- hint ----------------------------------------------------------------------------------

/**
 * A separate call of the model reads the source and writes a short strategy hint. Throws a
 * ContextBudgetError, never sent, when the source leaves no room for a hint in the window.
 */
export async function writeHint(ctx: TaskContext, code: string): Promise<{ hint: string; budget: CallBudget }> {
  const { cfg } = ctx;
  const messages = hintMessages(cfg.setting, code);
  const plan = await planCall(ctx.models.hint, messages, ROLE_PRESETS.hint.max_tokens!, MIN_REPLY.hint);
  const budget = callBudget('hint', plan);
  if (!plan.fits) throw Object.assign(overBudget('hint', plan, MIN_REPLY.hint), { budget });
  const reply = await ctx.budget.run(() =>
    ctx.models.hint.chat(
      messages,
      roleOptions('hint', {
        temperature: cfg.hintTemperature,
        max_tokens: plan.maxTokens,
        seed: hashSeed(`${cfg.seed}:h:${ctx.cycle}:${ctx.index}`),
        signal: ctx.signal,
      }),
    ),
  );
  const hint = extractHint(reply.text);
  ctx.emit({ type: 'hint', cycle: ctx.cycle, index: ctx.index, hint });
  return { hint, budget };
}

// --- plays ---------------------------------------------------------------------------------

export interface Play {
  seed: number;
  play: number;
  hinted: boolean;
  ep: Episode;
}

/**
 * N plays without and N with the hint, on the same seeds ("matched timing"); without a hint (its
 * call failed) only the N unhinted plays. A failed play scores FAILED_PLAY_RETURN (−1) and stays
 * in its group, as the reference scores it.
 */
export async function play(
  ctx: TaskContext,
  code: string,
  hint: string | null,
): Promise<{ seeds: number[]; plays: Play[] }> {
  const { cfg, cycle, index, runner } = ctx;
  const seeds = Array.from({ length: cfg.playsPerEnv }, () => ctx.rng.int(2 ** 31));
  const arms = hint === null ? [false] : [false, true];
  const todo = seeds.flatMap((seed, p) => arms.map((hinted) => ({ seed, play: p, hinted })));
  const end = (p: (typeof todo)[number], ep: Episode): Play => {
    if (playFailed(ep)) ep.return = FAILED_PLAY_RETURN;
    ctx.emit({ type: 'rollout_end', cycle, index, play: p.play, hinted: p.hinted, return: ep.return, end: ep.end });
    return { ...p, ep };
  };
  // every play takes a slot of the run's budget for its whole episode (ctx.budget)
  const plays = await ctx.budget.map(todo, async (p) => {
    await ctx.gate();
    const ep = await playFresh(
      code,
      {
        runner,
        setting: cfg.setting,
        model: ctx.models.agent,
        seed: p.seed,
        hint: p.hinted ? hint! : null,
        maxTurns: cfg.maxTurns,
        tokenBudget: cfg.agentTokenBudget,
        temperature: cfg.agentTemperature,
        sampleSeed: hashSeed(`${cfg.seed}:a:${cycle}:${index}:${p.play}:${p.hinted ? 1 : 0}`),
        signal: ctx.signal,
        onTurn: (data, turn) =>
          ctx.emit({ type: 'rollout_turn', cycle, index, play: p.play, hinted: p.hinted, turn, data }),
      },
      ctx.limits,
    );
    return end(p, ep);
  });
  return { seeds, plays };
}

// --- leak probe ----------------------------------------------------------------------------

/** Hidden values of the played seeds that the hint spells out; r_hint ≈ 1 with r_no_hint ≈ 0 is suspicious too. */
export async function probeLeaks(
  ctx: TaskContext,
  code: string,
  seeds: number[],
  hint: string,
  plays: Play[],
): Promise<NonNullable<ArchiveRecord['leak']>> {
  const solutions: string[][] = [];
  let probe: { id: string } | null = null;
  try {
    probe = await ctx.runner.load(code, ctx.cfg.maxTurns, ctx.limits);
    for (const s of seeds) {
      await ctx.runner.reset(probe.id, s);
      solutions.push(await ctx.runner.solution(probe.id));
    }
  } catch {
    /* a seed the checker never tried failed: leak detection works with what it got */
  } finally {
    if (probe) await Promise.resolve(ctx.runner.dispose(probe.id)).catch(() => undefined);
  }
  const values = leakedValues(
    hint,
    solutions,
    plays.map((p) => p.ep.firstObservation.split(HINT_PREFIX)[0]!),
  );
  const noHint = plays.filter((p) => !p.hinted).map((p) => p.ep.return);
  const withHint = plays.filter((p) => p.hinted).map((p) => p.ep.return);
  const reasons: string[] = [];
  if (values.length) reasons.push(`the hint names hidden values (${values.slice(0, 5).join(', ')})`);
  if (mean(withHint) >= 0.9 && mean(noHint) <= 0.1)
    reasons.push('won almost always with the hint and almost never without');
  return { values, suspicious: reasons.length > 0, reasons };
}

// --- score ---------------------------------------------------------------------------------

/** Regret and the raw designer reward of the chosen estimator; the centred reward comes at cycle end. */
export function score(cfg: Config, plays: Play[], emaWinRate: number | undefined): NonNullable<ArchiveRecord['stats']> {
  const noHint = plays.filter((p) => !p.hinted).map((p) => p.ep.return);
  const withHint = plays.filter((p) => p.hinted).map((p) => p.ep.return);
  const timedOut = plays.some((p) => p.ep.error?.name === 'SandboxTimeoutError');
  return {
    noHint,
    withHint,
    winRate: winRate(noHint),
    winRateHinted: winRate(withHint),
    regret: regret({ noHint, withHint }),
    raw: estimate(cfg.estimator, { noHint, withHint, emaWinRate }),
    designerReward: null,
    timedOut,
    blacklisted: timedOut,
  };
}

// --- one task, all phases -------------------------------------------------------------------

/** A task from its brief to its score. Returns the archive record and rollouts; never throws but for a stop. */
export async function runTask(ctx: TaskContext): Promise<PendingTask> {
  const t0 = performance.now();
  const { cfg, cycle, index, skill } = ctx;
  const b = await brief(ctx);
  const d = await checkAndRepair(ctx, b);
  const final = d.attempts[d.attempts.length - 1];
  const code = d.code;
  const record: ArchiveRecord = {
    cycle,
    index,
    skill,
    setting: cfg.setting,
    difficulty: cfg.difficulty,
    envId: code ? codeId(code) : null,
    title: code ? envTitle(code) : `invalid ${skill} environment`,
    code: code ?? final?.code ?? null,
    hint: null,
    source: b.doc ? { title: b.doc.source, ref: b.doc.source } : null,
    valid: Boolean(code),
    firstAttemptValid: d.attempts[0]?.ok ?? false,
    firstAttemptCrashed: d.firstAttemptCrashed,
    attempts: d.attempts,
    validator: d.validator,
    stats: null,
    leak: null,
    error: d.error,
    rawReward: null,
    designerAdvantage: null,
    calls: d.calls,
  };
  const modelMs = () => ctx.models.designer.ms + ctx.models.hint.ms + ctx.models.agent.ms;
  const finish = (rollouts: RolloutRecord[]) => {
    if (record.error)
      ctx.emit({
        type: 'task_error',
        cycle,
        index,
        phase: record.error.phase,
        message: `${record.error.name}: ${record.error.message}`,
      });
    ctx.emit({ type: 'env_scored', cycle, index, record });
    return { archive: record, rollouts, ms: performance.now() - t0, modelMs: modelMs(), blacklist: d.blacklist };
  };
  if (!code || record.error) return finish([]);

  await ctx.gate();
  // a failed hint does not end the task: the unhinted plays still run and the regret scores 0
  let hint: string | null = null;
  try {
    const h = await writeHint(ctx, code);
    hint = h.hint;
    record.calls!.push(h.budget);
  } catch (err) {
    if (isStop(err, ctx.signal)) throw err;
    const budget = (err as { budget?: CallBudget }).budget;
    if (budget) record.calls!.push(budget);
    record.hintError = failure('hint', err);
  }
  record.hint = hint;

  const { seeds, plays } = await play(ctx, code, hint);
  const rollouts = plays.map((p): RolloutRecord => ({
    ...p.ep,
    cycle,
    index,
    skill,
    envId: record.envId!,
    play: p.play,
  }));
  const modelFailed = plays.find((p) => p.ep.end === 'model_error');
  if (modelFailed && plays.every((p) => p.ep.end === 'model_error')) {
    // every agent call failed: the model or server is down, not the environment's doing — no score
    record.error = {
      phase: 'play',
      name: modelFailed.ep.error?.name ?? 'Error',
      message: modelFailed.ep.error?.message ?? '',
    };
    return finish(rollouts);
  }
  record.leak = hint === null ? null : await probeLeaks(ctx, code, seeds, hint, plays);
  record.stats = score(cfg, plays, ctx.emaWinRate);
  return finish(rollouts);
}

// --- per cycle -------------------------------------------------------------------------------

/** The context budget across a cycle's calls: the largest prompt, and how many calls were clamped, shrunk or skipped. */
function budgetMetrics(pending: PendingTask[]): Pick<MetricsRecord, 'budget'> {
  const calls = pending.flatMap((p) => p.archive.calls ?? []);
  const eps = pending.flatMap((p) => p.rollouts);
  return {
    budget: {
      calls: calls.length,
      maxPromptTokens: Math.max(0, ...calls.map((c) => c.promptTokens), ...eps.map((e) => e.maxPromptTokens ?? 0)),
      window: calls[0]?.window ?? null,
      clamped: calls.filter((c) => c.clamped && !c.skipped).length,
      shrunk: calls.filter((c) => c.shrunk.length > 0).length,
      skipped: calls.filter((c) => c.skipped).length,
      agentTurnsDropped: eps.reduce((n, e) => n + (e.droppedTurns ?? 0), 0),
      contextFullPlays: eps.filter((e) => e.end === 'context_full').length,
    },
  };
}

/** The metrics line of one finished cycle. */
export function cycleMetrics(cycle: number, skills: string[], pending: PendingTask[]): MetricsRecord {
  const scored = pending.filter((p) => p.archive.stats);
  const n = pending.length;
  const avg = (xs: number[]) => (xs.length ? mean(xs) : null);
  const raws = pending.map((p) => p.archive.rawReward).filter((r): r is number => r != null);
  const advs = pending.map((p) => p.archive.designerAdvantage).filter((r): r is number => r != null);
  return {
    cycle,
    skills,
    envs: n,
    valid: pending.filter((p) => p.archive.valid).length,
    validityRate: n ? pending.filter((p) => p.archive.valid).length / n : 0,
    firstAttemptValidityRate: n ? pending.filter((p) => p.archive.firstAttemptValid).length / n : 0,
    meanRegret: avg(scored.map((p) => p.archive.stats!.regret)),
    meanWinRate: avg(scored.map((p) => p.archive.stats!.winRate)),
    meanWinRateHinted: avg(scored.map((p) => p.archive.stats!.winRateHinted)),
    meanDesignerReward: avg(raws),
    meanDesignerAdvantage: avg(advs),
    inBandShare: scored.length
      ? scored.filter((p) => p.archive.stats!.winRate >= 0.4 && p.archive.stats!.winRate <= 0.6).length / scored.length
      : null,
    timeouts: pending.filter((p) => p.archive.stats?.timedOut || p.archive.firstAttemptCrashed).length,
    leaks: scored.filter((p) => p.archive.leak?.suspicious).length,
    errors: pending.filter((p) => p.archive.error).length,
    ...budgetMetrics(pending),
    ms: pending.reduce((s, p) => s + p.ms, 0),
    modelMs: pending.reduce((s, p) => s + p.modelMs, 0),
  };
}
