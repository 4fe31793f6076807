/**
 * The SPADE loop (one "regeneration" cycle after another), the same code in the
 * browser and in Node:
 *   1. pick skills (skillsPerCycle of the setting's six, rotated);
 *   2. per skill: sample a grounding excerpt and memory examples;
 *   3. the Designer writes an environment; 4. it is checked, with repair turns;
 *   5. a hint is written from the source; 6. the Agent plays N times without and
 *   N times with the hint; 7. regret; 8. designer reward (estimator, per-skill
 *   centring, penalties); 9. memory and metrics at the end of the cycle.
 * Async, cancellable (AbortSignal), pausable, concurrency-limited, emitting typed
 * events. Deterministic given the seed and a deterministic model: every random
 * choice derives from (seed, cycle, task), and all tasks of a cycle read the memory
 * as it was when the cycle began. State is saved after every environment.
 */
import type { Config, Setting } from '../config.ts';
import type { CheckOptions, CheckReport, EnvRunner } from '../env/checker.ts';
import { GAME_SKILLS, TOOL_SKILLS } from '../env/contract.ts';
import { envId as codeId } from '../env/envset.ts';
import { SEED_ENVS } from '../env/seeds/index.ts';
import { serializeError } from '../errors.ts';
import { Limiter } from '../limiter.ts';
import { MeteredChatModel, roleOptions, type ChatMessage, type ChatModel } from '../llm/chat_model.ts';
import { createRng, hashSeed, type Rng } from '../rng.ts';
import { limitsFromConfig } from '../sandbox/limits.ts';
import { failedEpisode, playEpisode, type Episode, type Turn } from './agent.ts';
import { excerpt, sampleDoc, type CorpusDoc } from './corpus.ts';
import { designerRewards, estimate, mean, updateEma, winRate } from './estimators.ts';
import { extractCode, extractHint, leakedValues, parseVerdict } from './extract.ts';
import { addRecord, emptyMemory, selectExamples, type Memory } from './memory.ts';
import { designerMessages, hintMessages, repairMessages, validatorMessages } from './prompts.ts';
import type {
  ArchiveRecord,
  Attempt,
  MetricsRecord,
  PendingTask,
  RolloutRecord,
  RunSpec,
  RunState,
  RunStore,
} from './run_store.ts';

export type LoopEvent =
  | { type: 'cycle_start'; cycle: number; skills: string[] }
  | { type: 'document'; cycle: number; index: number; skill: string; source: string; excerpt: string }
  | { type: 'designer_token'; cycle: number; index: number; attempt: number; delta: string }
  | {
      type: 'designer_output';
      cycle: number;
      index: number;
      attempt: number;
      text: string;
      code: string | null;
      messages: ChatMessage[];
    }
  | {
      type: 'checks';
      cycle: number;
      index: number;
      attempt: number;
      ok: boolean;
      failures: string[];
      report: CheckReport | null;
    }
  | { type: 'hint'; cycle: number; index: number; hint: string }
  | { type: 'rollout_turn'; cycle: number; index: number; play: number; hinted: boolean; turn: number; data: Turn }
  | {
      type: 'rollout_end';
      cycle: number;
      index: number;
      play: number;
      hinted: boolean;
      return: number;
      end: Episode['end'];
    }
  | { type: 'env_scored'; cycle: number; index: number; record: ArchiveRecord }
  | { type: 'memory'; cycle: number; size: number; added: string[] }
  | { type: 'cycle_end'; cycle: number; metrics: MetricsRecord; archive: ArchiveRecord[]; rollouts: RolloutRecord[] }
  | { type: 'error'; cycle: number; index?: number; message: string }
  | { type: 'paused' | 'resumed' | 'stopped' | 'done'; cycle: number };

export interface LoopDeps {
  spec: RunSpec;
  models: { designer: ChatModel; hint: ChatModel; agent: ChatModel };
  runner: EnvRunner & { check(code: string, opts?: CheckOptions): Promise<CheckReport> };
  corpus: CorpusDoc[];
  store: RunStore;
  onEvent?: (e: LoopEvent) => void;
  signal?: AbortSignal;
  /** The memory a new run starts from (e.g. an imported env_memory.json); default: the seed library. */
  initialMemory?: Memory;
}

/** The skills of cycle `c`: `k` consecutive skills of the list, rotating by k each cycle. */
export function skillsForCycle(skills: readonly string[], c: number, k: number): string[] {
  const n = skills.length;
  const take = Math.min(k, n);
  return Array.from({ length: take }, (_, j) => skills[(c * take + j) % n]!);
}

export function defaultSkills(setting: Setting): string[] {
  return [...(setting === 'games' ? GAME_SKILLS : TOOL_SKILLS)];
}

/** The starting memory: the seed library of the run's setting (no statistics yet). */
export function initialMemory(setting: Setting, capacity: number): Memory {
  let mem = emptyMemory(capacity);
  for (const s of SEED_ENVS.filter((e) => e.setting === setting)) {
    mem = addRecord(mem, {
      id: s.id,
      skill: s.skill,
      setting: s.setting,
      title: s.title,
      code: s.code,
      winRate: null,
      regret: null,
      cycle: -1,
    });
  }
  return mem;
}

export function initialState(spec: RunSpec): RunState {
  return {
    version: 1,
    cycle: 0,
    memory: initialMemory(spec.config.setting, spec.config.memoryCapacity),
    ema: {},
    blacklist: [],
    pending: [],
  };
}

export class SpadeLoop {
  private state: RunState | null = null;
  private paused: { promise: Promise<void>; resolve: () => void } | null = null;
  private saving: Promise<void> = Promise.resolve();
  /** Set when run() has returned: pause/resume then change nothing the UI should see. */
  private finished = false;
  private readonly cfg: Config;

  constructor(private readonly d: LoopDeps) {
    this.cfg = d.spec.config;
  }

  private emit(e: LoopEvent) {
    try {
      this.d.onEvent?.(e);
    } catch {
      /* a listener's failure must not stop the run */
    }
  }

  pause(): void {
    if (this.paused || this.finished) return;
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.paused = { promise, resolve };
    this.emit({ type: 'paused', cycle: this.state?.cycle ?? 0 });
  }

  resume(): void {
    const p = this.paused;
    this.paused = null;
    p?.resolve();
    if (p && !this.finished) this.emit({ type: 'resumed', cycle: this.state?.cycle ?? 0 });
  }

  get isPaused(): boolean {
    return this.paused !== null;
  }

  /** Run (or resume) until `iterations` cycles are complete. */
  async run(iterations: number): Promise<RunState> {
    try {
      return await this.runCycles(iterations);
    } finally {
      this.finished = true;
    }
  }

  private async runCycles(iterations: number): Promise<RunState> {
    const { store } = this.d;
    if (!(await store.readSpec())) await store.writeSpec(this.d.spec);
    this.state = (await store.readState()) ?? {
      ...initialState(this.d.spec),
      ...(this.d.initialMemory ? { memory: this.d.initialMemory } : {}),
    };
    const state = this.state;
    const skills = this.d.spec.skills.length ? this.d.spec.skills : defaultSkills(this.cfg.setting);
    const limiter = new Limiter(this.cfg.concurrency);
    try {
      while (state.cycle < iterations) {
        const cycle = state.cycle;
        const cycleSkills = skillsForCycle(skills, cycle, this.cfg.skillsPerCycle);
        this.emit({ type: 'cycle_start', cycle, skills: cycleSkills });
        const memory = state.memory; // the snapshot every task of this cycle reads
        const todo = cycleSkills
          .map((skill, index) => ({ skill, index }))
          .filter((t) => !state.pending.some((p) => p.archive.index === t.index));
        await limiter.map(todo, async (t) => {
          await this.gate();
          const done = await this.runTask(cycle, t.index, t.skill, memory, state);
          state.pending.push(done);
          state.pending.sort((a, b) => a.archive.index - b.archive.index);
          await this.save(state);
        });
        await this.finishCycle(state, cycleSkills);
      }
      this.emit({ type: 'done', cycle: state.cycle });
    } catch (err) {
      if (this.d.signal?.aborted || (err as Error)?.name === 'AbortError') {
        await this.saving;
        this.emit({ type: 'stopped', cycle: state.cycle });
        return state;
      }
      this.emit({ type: 'error', cycle: state.cycle, message: serializeError(err).message });
      throw err;
    }
    return state;
  }

  private async gate(): Promise<void> {
    if (this.d.signal?.aborted) throw new DOMException('The run was stopped.', 'AbortError');
    while (this.paused) await this.paused.promise;
    if (this.d.signal?.aborted) throw new DOMException('The run was stopped.', 'AbortError');
  }

  /** Serialise state writes (tasks finish concurrently). */
  private save(state: RunState): Promise<void> {
    const snapshot = structuredClone(state);
    const write = this.saving.catch(() => undefined).then(() => this.d.store.writeState(snapshot));
    this.saving = write;
    return write;
  }

  private taskRng(cycle: number, index: number, skill: string): Rng {
    return createRng(hashSeed(`${this.cfg.seed}:${cycle}:${index}:${skill}`));
  }

  private async runTask(
    cycle: number,
    index: number,
    skill: string,
    memory: Memory,
    state: RunState,
  ): Promise<PendingTask> {
    const t0 = performance.now();
    const cfg = this.cfg;
    const { runner, signal } = this.d;
    const designer = new MeteredChatModel(this.d.models.designer);
    const hinter = new MeteredChatModel(this.d.models.hint);
    const agent = new MeteredChatModel(this.d.models.agent);
    const rng = this.taskRng(cycle, index, skill);
    const limits = limitsFromConfig(cfg);
    const setting = cfg.setting;

    // 2. grounding and memory
    const doc = sampleDoc(this.d.corpus, rng);
    const ex = doc ? excerpt(doc, cfg.excerptWords) : null;
    if (doc && ex) this.emit({ type: 'document', cycle, index, skill, source: doc.source, excerpt: ex });
    const { positive, negative } = selectExamples(memory, skill, setting, rng, 2);

    // 3-4. design, check, repair
    let messages = designerMessages({
      setting,
      skill,
      difficulty: cfg.difficulty,
      excerpt: ex,
      source: doc?.source ?? null,
      positive,
      negative,
    });
    const attempts: Attempt[] = [];
    let validator: ArchiveRecord['validator'] = null;
    for (let a = 0; a <= cfg.repairTurns; a++) {
      await this.gate();
      const reply = await designer.chat(
        messages,
        roleOptions('designer', {
          temperature: cfg.designerTemperature,
          max_tokens: cfg.designerMaxTokens,
          seed: hashSeed(`${cfg.seed}:d:${cycle}:${index}:${a}`),
          signal,
          onToken: (delta) => this.emit({ type: 'designer_token', cycle, index, attempt: a, delta }),
        }),
      );
      const code = extractCode(reply.text);
      this.emit({ type: 'designer_output', cycle, index, attempt: a, text: reply.text, code, messages });
      let failures: string[];
      let report: CheckReport | null = null;
      if (!code)
        failures = ['no program found: reply with one ```javascript block containing a class whose name ends in "Env"'];
      else if (state.blacklist.includes(codeId(code)))
        failures = ['this exact program was blacklisted earlier (its step() timed out); write a different one'];
      else {
        report = await runner.check(code, { maxTurns: cfg.maxTurns, limits });
        failures = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.message}`);
        if (report.ok && setting === 'tool_use' && !report.setting?.startsWith('tool'))
          failures.push('setting: the class must extend ToolUseEnv');
        if (report.ok && setting === 'games' && report.setting === 'tool_use')
          failures.push('setting: a game must not extend ToolUseEnv');
      }
      if (failures.length === 0 && code && cfg.llmValidator === 'on') {
        const v = await designer.chat(
          validatorMessages(setting, code),
          roleOptions('hint', { temperature: 0, seed: hashSeed(`${cfg.seed}:v:${cycle}:${index}:${a}`), signal }),
        );
        validator = parseVerdict(v.text);
        if (!validator.accept) failures.push(`validator: ${validator.reason}`);
      }
      this.emit({ type: 'checks', cycle, index, attempt: a, ok: failures.length === 0, failures, report });
      attempts.push({ reply: reply.text, code, ok: failures.length === 0, failures });
      if (failures.length === 0) break;
      messages = repairMessages(messages, reply.text, failures);
    }
    const final = attempts[attempts.length - 1]!;
    const code = final.ok ? final.code : null;
    const header = code ? /@title\s+(.+)/.exec(code)?.[1]?.trim() : null;
    const record: ArchiveRecord = {
      cycle,
      index,
      skill,
      setting,
      difficulty: cfg.difficulty,
      envId: code ? codeId(code) : null,
      title: header ?? (code ? (/class\s+(\w+Env)\b/.exec(code)?.[1] ?? 'Untitled') : `invalid ${skill} environment`),
      code: code ?? final.code,
      hint: null,
      source: doc ? { title: doc.source, ref: doc.source } : null,
      valid: Boolean(code),
      firstAttemptValid: attempts[0]!.ok,
      attempts,
      validator,
      stats: null,
      leak: null,
    };
    const rollouts: RolloutRecord[] = [];
    if (!code) {
      this.emit({ type: 'env_scored', cycle, index, record });
      return { archive: record, rollouts, ms: performance.now() - t0, modelMs: designer.ms };
    }

    // 5. hint
    await this.gate();
    const hintReply = await hinter.chat(
      hintMessages(setting, code),
      roleOptions('hint', {
        temperature: cfg.hintTemperature,
        seed: hashSeed(`${cfg.seed}:h:${cycle}:${index}`),
        signal,
      }),
    );
    const hint = extractHint(hintReply.text);
    record.hint = hint;
    this.emit({ type: 'hint', cycle, index, hint });

    // 6. plays: the same seeds with and without the hint
    const seeds = Array.from({ length: cfg.playsPerEnv }, () => rng.int(2 ** 31));
    const plays = seeds.flatMap((seed, play) => [false, true].map((hinted) => ({ seed, play, hinted })));
    const playLimiter = new Limiter(cfg.concurrency);
    const episodes = await playLimiter.map(plays, async (p) => {
      await this.gate();
      let env;
      try {
        env = await runner.load(code, cfg.maxTurns, limits);
      } catch (err) {
        const ep = failedEpisode(p.seed, p.hinted, err);
        this.emit({ type: 'rollout_end', cycle, index, play: p.play, hinted: p.hinted, return: 0, end: ep.end });
        return { ...p, ep };
      }
      try {
        const ep = await playEpisode({
          runner,
          envId: env.id,
          setting,
          model: agent,
          seed: p.seed,
          hint: p.hinted ? hint : null,
          maxTurns: cfg.maxTurns,
          tokenBudget: cfg.agentTokenBudget,
          temperature: cfg.agentTemperature,
          sampleSeed: hashSeed(`${cfg.seed}:a:${cycle}:${index}:${p.play}:${p.hinted ? 1 : 0}`),
          signal,
          onTurn: (data, turn) =>
            this.emit({ type: 'rollout_turn', cycle, index, play: p.play, hinted: p.hinted, turn, data }),
        });
        this.emit({
          type: 'rollout_end',
          cycle,
          index,
          play: p.play,
          hinted: p.hinted,
          return: ep.return,
          end: ep.end,
        });
        return { ...p, ep };
      } finally {
        await runner.dispose(env.id);
      }
    });
    for (const e of episodes) rollouts.push({ ...e.ep, cycle, index, skill, envId: record.envId!, play: e.play });

    // leak detection: hidden values of the played seeds that the hint spells out
    const solutions: string[][] = [];
    let probe: { id: string } | null = null;
    try {
      probe = await runner.load(code, cfg.maxTurns, limits);
      for (const s of seeds) {
        await runner.reset(probe.id, s);
        solutions.push(await runner.solution(probe.id));
      }
    } catch {
      /* a seed the checker never tried failed: leak detection works with what it got */
    } finally {
      if (probe) await Promise.resolve(runner.dispose(probe.id)).catch(() => undefined);
    }

    // 7-8. regret and the raw designer reward
    const noHint = episodes.filter((e) => !e.hinted).map((e) => e.ep.return);
    const withHint = episodes.filter((e) => e.hinted).map((e) => e.ep.return);
    const timedOut = episodes.some((e) => e.ep.error?.name === 'SandboxTimeoutError');
    const values = leakedValues(
      hint,
      solutions,
      episodes.map((e) => e.ep.firstObservation.split('\n\nHINT: ')[0]!),
    );
    record.leak = { values, suspicious: values.length > 0 || (mean(withHint) >= 0.9 && mean(noHint) <= 0.1) };
    record.stats = {
      noHint,
      withHint,
      winRate: winRate(noHint),
      winRateHinted: winRate(withHint),
      regret: mean(withHint) - mean(noHint),
      raw: estimate(cfg.estimator, { noHint, withHint, emaWinRate: state.ema[skill] }),
      designerReward: null,
      timedOut,
      blacklisted: timedOut,
    };
    this.emit({ type: 'env_scored', cycle, index, record });
    return { archive: record, rollouts, ms: performance.now() - t0, modelMs: designer.ms + hinter.ms + agent.ms };
  }

  private async finishCycle(state: RunState, skills: string[]): Promise<void> {
    const cycle = state.cycle;
    const pending = state.pending;
    const rewards = designerRewards(
      pending.map((p) => ({
        skill: p.archive.skill,
        raw: p.archive.firstAttemptValid && p.archive.stats ? p.archive.stats.raw : null,
        timedOut: p.archive.stats?.timedOut ?? false,
      })),
    );
    const added: string[] = [];
    let memory = state.memory;
    pending.forEach((p, i) => {
      const a = p.archive;
      if (a.stats) a.stats.designerReward = rewards[i]!;
      if (a.stats?.timedOut && a.envId) state.blacklist.push(a.envId);
      if (a.valid && a.code && a.stats && !a.stats.timedOut) {
        memory = addRecord(memory, {
          id: a.envId!,
          skill: a.skill,
          setting: a.setting,
          title: a.title,
          code: a.code,
          winRate: a.stats.winRate,
          regret: a.stats.regret,
          cycle,
        });
        state.ema[a.skill] = updateEma(state.ema[a.skill], a.stats.winRate);
        added.push(a.title);
      }
    });
    const scored = pending.filter((p) => p.archive.stats);
    const avg = (xs: number[]) => (xs.length ? mean(xs) : null);
    const metrics: MetricsRecord = {
      cycle,
      skills,
      envs: pending.length,
      valid: pending.filter((p) => p.archive.valid).length,
      validityRate: pending.length ? pending.filter((p) => p.archive.valid).length / pending.length : 0,
      firstAttemptValidityRate: pending.length
        ? pending.filter((p) => p.archive.firstAttemptValid).length / pending.length
        : 0,
      meanRegret: avg(scored.map((p) => p.archive.stats!.regret)),
      meanWinRate: avg(scored.map((p) => p.archive.stats!.winRate)),
      meanWinRateHinted: avg(scored.map((p) => p.archive.stats!.winRateHinted)),
      meanDesignerReward: avg(pending.filter((p) => p.archive.stats).map((p) => p.archive.stats!.designerReward!)),
      timeouts: scored.filter((p) => p.archive.stats!.timedOut).length,
      leaks: scored.filter((p) => p.archive.leak?.suspicious).length,
      ms: pending.reduce((s, p) => s + p.ms, 0),
      modelMs: pending.reduce((s, p) => s + p.modelMs, 0),
    };
    await this.d.store.writeCycle(cycle, {
      archive: pending.map((p) => p.archive),
      rollouts: pending.flatMap((p) => p.rollouts),
      metrics,
    });
    await this.d.store.writeMemory(memory);
    state.memory = memory;
    state.pending = [];
    state.cycle = cycle + 1;
    await this.save(state);
    this.emit({ type: 'memory', cycle, size: memory.records.length, added });
    this.emit({
      type: 'cycle_end',
      cycle,
      metrics,
      archive: pending.map((p) => p.archive),
      rollouts: pending.flatMap((p) => p.rollouts),
    });
  }
}
