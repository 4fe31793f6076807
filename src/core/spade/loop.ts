/**
 * The SPADE loop (one "regeneration" cycle after another), the same code in the
 * browser and in Node. Each cycle picks skillsPerCycle of the setting's six skills
 * (rotated) and runs envsPerSkill tasks per skill; each task runs the phases of
 * phases.ts (brief → design/check/repair → hint → plays → leak probe → score). At the
 * end of a cycle the designer rewards are centred per skill, and memory and metrics
 * are written. This class keeps only scheduling: pause/resume/stop gating, the run's one
 * concurrency budget, persistence after every task, and the error policy — one failed task
 * never stops the run; maxConsecutiveErrors failed tasks in a row do, with the cause.
 * Deterministic given the seed and a deterministic model: every random choice derives
 * from (seed, cycle, task), and all tasks of a cycle read the memory as it was when
 * the cycle began.
 */
import { DEFAULTS, type Config, type Setting } from '../config.ts';
import { GAME_SKILLS, TOOL_SKILLS } from '../env/contract.ts';
import { abortError, ModelCallError, serializeError } from '../errors.ts';
import { Limiter } from '../limiter.ts';
import { MeteredChatModel, type ChatModel } from '../llm/chat_model.ts';
import { createRng, hashSeed } from '../rng.ts';
import { limitsFromConfig } from '../env/limits.ts';
import { SEED_ENVS } from '../env/seeds/index.ts';
import type { CorpusDoc } from './corpus.ts';
import { cycleEnvRewardScale, designerAdvantages, rawDesignReward, updateEma } from './estimators.ts';
import { addRecord, emptyMemory, type Memory } from './memory.ts';
import { cycleMetrics, runTask, type CheckingRunner, type TaskContext } from './phases.ts';
import type { LoopEvent } from './run_events.ts';
import type {
  ArchiveRecord,
  MetricsRecord,
  PendingTask,
  RolloutRecord,
  RunSpec,
  RunState,
  RunStore,
} from './run_store.ts';

export type { LoopEvent } from './run_events.ts';

export interface LoopDeps {
  spec: RunSpec;
  models: { designer: ChatModel; hint: ChatModel; agent: ChatModel };
  runner: CheckingRunner;
  corpus: CorpusDoc[];
  store: RunStore;
  onEvent?: (e: LoopEvent) => void;
  signal?: AbortSignal;
  /** The memory a new run starts from (e.g. an imported env_memory.json); default: the seed library. */
  initialMemory?: Memory;
  /**
   * Runs after each cycle is written and before the next starts (no model samples meanwhile):
   * training the policy on what the cycle produced. A failure stops the run (resumable).
   */
  afterCycle?: (c: {
    cycle: number;
    archive: ArchiveRecord[];
    rollouts: RolloutRecord[];
    metrics: MetricsRecord;
  }) => Promise<void>;
}

/** The skills of cycle `c`: `k` consecutive skills of the list, rotating by k each cycle. */
export function skillsForCycle(skills: readonly string[], c: number, k: number): string[] {
  const n = skills.length;
  const take = Math.min(k, n);
  return Array.from({ length: take }, (_, j) => skills[(c * take + j) % n]!);
}

/** The tasks of one cycle: envsPerSkill per skill, indexed skill-major (k = 1 keeps one task per skill). */
function tasksForCycle(skills: readonly string[], k: number): { index: number; skill: string }[] {
  return skills.flatMap((skill, j) => Array.from({ length: k }, (_, r) => ({ index: j * k + r, skill })));
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
  /** Set when too many tasks failed in a row: no new task starts. */
  private halted: Error | null = null;
  private readonly cfg: Config;

  constructor(private readonly d: LoopDeps) {
    // a run saved before a knob existed reads that knob's default
    this.cfg = { ...DEFAULTS, ...d.spec.config };
  }

  private emit = (e: LoopEvent): void => {
    try {
      this.d.onEvent?.(e);
    } catch {
      /* a listener's failure must not stop the run */
    }
  };

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
    await store.prepare?.(); // a store that cannot be written refuses now, before any task runs
    const state = this.state;
    // A resumed run gets a fresh error count, and tasks cut short by a failed model call run
    // again (the cause — a server down, a model not loaded — is usually fixed before resuming).
    state.consecutiveErrors = 0;
    state.pending = state.pending.filter((p) => !p.archive.error || p.archive.error.phase === 'check');
    const skills = this.d.spec.skills.length ? this.d.spec.skills : defaultSkills(this.cfg.setting);
    // One budget of `concurrency` model chats in flight, shared by every task through its context:
    // chats and plays take its slots (phases.ts). Tasks hold none; they start at most `concurrency`
    // at a time, so the checks they run share the sandbox pool as the chats share the model.
    const budget = new Limiter(this.cfg.concurrency);
    const tasks = new Limiter(this.cfg.concurrency);
    try {
      while (state.cycle < iterations) {
        const cycle = state.cycle;
        const cycleSkills = skillsForCycle(skills, cycle, this.cfg.skillsPerCycle);
        const cycleTasks = tasksForCycle(cycleSkills, this.cfg.envsPerSkill);
        this.emit({ type: 'cycle_start', cycle, skills: cycleTasks.map((t) => t.skill) });
        const memory = state.memory; // the snapshot every task of this cycle reads
        // so is the blacklist: what a task adds joins it at the end of the cycle, so with concurrent
        // tasks (or after a resume) no task's checks depend on which task finished first
        const cycleBlacklist = [...state.blacklist];
        const todo = cycleTasks.filter((t) => !state.pending.some((p) => p.archive.index === t.index));
        await tasks.map(todo, async (t) => {
          await this.gate();
          const done = await runTask(this.taskContext(cycle, t.index, t.skill, memory, cycleBlacklist, state, budget));
          state.pending.push(done);
          state.pending.sort((a, b) => a.archive.index - b.archive.index);
          this.countErrors(state, done);
          await this.save(state);
        });
        if (this.halted) throw this.halted;
        // a stop that lands after the last task finished leaves the cycle to the resume (its tasks
        // are saved): no cycle is written and no training round starts after a stop
        if (this.d.signal?.aborted) throw abortError(this.d.signal, 'The run was stopped.');
        await this.finishCycle(state, cycleSkills);
      }
      this.emit({ type: 'done', cycle: state.cycle });
    } catch (err) {
      if (this.d.signal?.aborted || (err as Error)?.name === 'AbortError') {
        await this.saving;
        this.emit({ type: 'stopped', cycle: state.cycle });
        return state;
      }
      await this.saving.catch(() => undefined);
      this.emit({ type: 'error', cycle: state.cycle, message: serializeError(err).message });
      throw err;
    }
    return state;
  }

  private taskContext(
    cycle: number,
    index: number,
    skill: string,
    memory: Memory,
    blacklist: readonly string[],
    state: RunState,
    budget: Limiter,
  ): TaskContext {
    return {
      cfg: this.cfg,
      cycle,
      index,
      skill,
      memory,
      blacklist,
      emaWinRate: state.ema[skill],
      runner: this.d.runner,
      models: {
        designer: new MeteredChatModel(this.d.models.designer),
        hint: new MeteredChatModel(this.d.models.hint),
        agent: new MeteredChatModel(this.d.models.agent),
      },
      budget,
      corpus: this.d.corpus,
      rng: createRng(hashSeed(`${this.cfg.seed}:${cycle}:${index}:${skill}`)),
      limits: limitsFromConfig(this.cfg),
      signal: this.d.signal,
      emit: this.emit,
      gate: () => this.gate(),
    };
  }

  /** One failed task is recorded and the run goes on; maxConsecutiveErrors in a row stop it. */
  private countErrors(state: RunState, done: PendingTask): void {
    const err = done.archive.error;
    state.consecutiveErrors = err ? (state.consecutiveErrors ?? 0) + 1 : 0;
    if (err && state.consecutiveErrors >= this.cfg.maxConsecutiveErrors && !this.halted) {
      this.halted = new ModelCallError(
        `Stopped after ${state.consecutiveErrors} tasks in a row failed; the last failed in its ${err.phase} phase with ${err.name}: ${err.message} Fix the cause (is the model loaded and the server up? does the prompt fit its context window?) and resume the run: finished tasks are kept.`,
        { phase: err.phase, consecutive: state.consecutiveErrors },
      );
    }
  }

  private async gate(): Promise<void> {
    if (this.d.signal?.aborted) throw abortError(this.d.signal, 'The run was stopped.');
    if (this.halted) throw this.halted;
    while (this.paused) await this.paused.promise;
    if (this.d.signal?.aborted) throw abortError(this.d.signal, 'The run was stopped.');
    if (this.halted) throw this.halted;
  }

  /** Serialise state writes (tasks finish concurrently). */
  private save(state: RunState): Promise<void> {
    const snapshot = structuredClone(state);
    const write = this.saving.catch(() => undefined).then(() => this.d.store.writeState(snapshot));
    this.saving = write;
    return write;
  }

  /**
   * The designs that train at this cycle (designerLag back) and the unhinted plays of their
   * environments recorded by the loop (their cycle's; envReuse replays join them when training).
   */
  private async designerWindow(cycle: number, pending: PendingTask[]): Promise<MetricsRecord['designerWindow']> {
    const lag = this.cfg.designerLag;
    const rounds = this.cfg.envReuse;
    const from = cycle - lag;
    if (from < 0) return { lag, designsOf: null, rounds, designs: 0, plays: 0 };
    const archive =
      lag === 0 ? pending.map((p) => p.archive) : (await this.d.store.readArchive()).filter((a) => a.cycle === from);
    return {
      lag,
      designsOf: from,
      rounds,
      designs: archive.filter((a) => a.rawReward != null).length,
      plays: archive.reduce((n, a) => n + (a.stats?.noHint.length ?? 0), 0),
    };
  }

  /** Designer rewards centred per skill, memory, metrics; then the cycle is written once. */
  private async finishCycle(state: RunState, skills: string[]): Promise<void> {
    const cycle = state.cycle;
    const pending = state.pending;
    const raws = pending.map((p) =>
      rawDesignReward({
        firstAttemptValid: p.archive.firstAttemptValid,
        timedOut: Boolean(p.archive.stats?.timedOut || p.archive.firstAttemptCrashed),
        scoredRaw: p.archive.stats?.raw ?? null,
        modelFailed: Boolean(p.archive.error && p.archive.error.phase !== 'check'),
      }),
    );
    const scale = cycleEnvRewardScale(
      this.cfg,
      pending.flatMap((p) => p.rollouts),
      raws.filter((r) => r !== null).length,
    );
    const { advantages, baseline } = designerAdvantages(
      pending.map((p, i) => ({ skill: p.archive.skill, raw: raws[i]! })),
      scale,
      state.rewardBaseline ?? {},
    );
    state.rewardBaseline = baseline;
    const added: string[] = [];
    let memory = state.memory;
    pending.forEach((p, i) => {
      const a = p.archive;
      a.rawReward = raws[i]!;
      a.designerAdvantage = advantages[i]!;
      if (a.stats) a.stats.designerReward = advantages[i]!;
      for (const id of p.blacklist ?? []) if (!state.blacklist.includes(id)) state.blacklist.push(id);
      if (a.stats?.timedOut && a.envId && !state.blacklist.includes(a.envId)) state.blacklist.push(a.envId);
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
    const metrics: MetricsRecord = {
      ...cycleMetrics(cycle, skills, pending),
      envRewardScale: scale,
      designerWindow: await this.designerWindow(cycle, pending),
    };
    const archive = pending.map((p) => p.archive);
    const rollouts = pending.flatMap((p) => p.rollouts);
    await this.d.store.writeCycle(cycle, { archive, rollouts, metrics });
    await this.d.store.writeMemory(memory);
    state.memory = memory;
    state.pending = [];
    state.cycle = cycle + 1;
    await this.save(state);
    this.emit({ type: 'memory', cycle, size: memory.records.length, added });
    this.emit({ type: 'cycle_end', cycle, metrics, archive, rollouts });
    await this.d.afterCycle?.({ cycle, archive, rollouts, metrics });
  }
}
