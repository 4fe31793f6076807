/**
 * A self-play run in the browser, as a rune class: configure, start, pause,
 * resume, stop; the current cycle live (document, designer output as it streams,
 * checks, hint, rollouts, regret); metrics across cycles; the environments made.
 * Progress is saved in IndexedDB after every environment: after a reload the Run panel offers
 * "Resume" (the user presses it), and the run loses at most the environment in flight. Every model
 * call is counted (answered, failed by kind, the last failure) for the Run view.
 *
 * Review and sharing: any run — the current one after a reload, or a run file opened from disk or
 * from a `#run=URL` link (run_review.svelte.ts, which this owns as `review`) — is reviewable cycle by
 * cycle (core/spade/run_review.ts); the run file on screen replaces this browser's run until it is
 * closed. Export writes the same run file format as `spade run export`. Watching: loop events reach
 * the view through a pacer (core/spade/pacer.ts) that can slow them to a chosen tokens/s, pause and step.
 */
import { concurrencySizes, DEFAULTS, type Config } from '../core/config.ts';
import { ContextBudgetError, ModelCallError, serializeError } from '../core/errors.ts';
import { WrappedChatModel, type ChatModel, type ModelRole } from '../core/llm/chat_model.ts';
import { defaultSkills, SpadeLoop, type LoopEvent } from '../core/spade/loop.ts';
import { applyEvent, type RunView, type TaskView } from '../core/spade/run_events.ts';
import { importMemory, type Memory } from '../core/spade/memory.ts';
import { Pacer, type StepKind } from '../core/spade/pacer.ts';
import { makeRunFile, runFileToJson, type RunFile } from '../core/spade/run_file.ts';
import {
  StoreRunStore,
  type ArchiveRecord,
  type MetricsRecord,
  type RolloutRecord,
  type RunSpec,
} from '../core/spade/run_store.ts';
import type { Store } from '../core/store.ts';
import type { CorpusDoc } from '../core/spade/corpus.ts';
import { sandboxPool } from './envs.svelte.ts';
import { RunReviewState } from './run_review.svelte.ts';

/** The run's model calls: answered, failed (by kind), and the last failure's message. */
export interface CallTally {
  done: number;
  failed: number;
  byKind: Record<string, number>;
  last: string | null;
}

/** What kind of failure a model call ended in, in a word: timeout, connection, http, server, … */
function failureKind(err: unknown): string {
  if ((err as Error)?.name === 'AbortError') return 'cancelled';
  if (err instanceof ContextBudgetError) return 'too long for the context';
  if (err instanceof ModelCallError) return String((err.data as { kind?: string } | undefined)?.kind ?? 'model error');
  return (err as Error)?.name ?? 'error';
}

/**
 * `m` with each call's outcome counted into `tally` (a rune proxy, so the Run view follows). A call
 * the loop cancels (the run stopped, a reply cut at its cap) counts as "cancelled".
 */
export function tallied(m: ChatModel, tally: CallTally): ChatModel {
  return new WrappedChatModel(m, async (messages, options) => {
    try {
      const r = await m.chat(messages, options);
      tally.done++;
      return r;
    } catch (err) {
      const kind = failureKind(err);
      tally.failed++;
      tally.byKind[kind] = (tally.byKind[kind] ?? 0) + 1;
      tally.last = serializeError(err).message.slice(0, 300);
      throw err;
    }
  });
}

interface ActiveRun {
  runId: string;
  iterations: number;
}

export class RunState implements RunView {
  status = $state<'idle' | 'running' | 'paused' | 'done' | 'stopped' | 'error'>('idle');
  error = $state<string | null>(null);
  /** This run's model calls since Start: the Run view shows failures as they happen. */
  calls = $state<CallTally>({ done: 0, failed: 0, byKind: {}, last: null });
  runId = $state<string | null>(null);
  iterations = $state(3);
  skills = $state<string[]>([]);
  cycle = $state(0);
  tasks = $state<TaskView[]>([]);
  metrics = $state<MetricsRecord[]>([]);
  archive = $state<ArchiveRecord[]>([]);
  memory = $state<Memory | null>(null);
  resumable = $state<ActiveRun | null>(null);
  /** An env_memory.json the user imported: the next new run starts from it instead of the seed library. */
  importedMemory = $state<Memory | null>(null);
  /** Every play of every finished cycle (from the store, or from an opened run file). */
  rollouts = $state<RolloutRecord[]>([]);
  /** The settings of the run on screen (null before any run). */
  spec = $state<RunSpec | null>(null);
  /** Set when the running replay took its settings from the recording (what it took, in words). */
  fromRecording = $state<string | null>(null);
  /** "Play it yourself": the environment (its id in the Environments panel) and the seed to play it on. */
  playRequest = $state<{ id: string; seed: number } | null>(null);
  /** Watching: tokens per second (0 = as fast as the run goes), held or not, events not yet shown. */
  paceTps = $state(0);
  pacePaused = $state(false);
  paceQueued = $state(0);

  private loop: SpadeLoop | null = null;
  private readonly pacer = new Pacer((e) => this.show(e), {
    onChange: () => {
      this.paceQueued = this.pacer.queued;
      this.pacePaused = this.pacer.paused;
    },
  });
  private abort: AbortController | null = null;
  /** The run file on screen in place of this run, if any, and the opening of one. */
  readonly review = new RunReviewState({
    busy: () => this.status === 'running' || this.status === 'paused',
    show: (file, name, from) => this.showFile(file, name, from),
  });
  /**
   * Called after each cycle with what it produced (training the LoRA adapter: TrainingState.afterCycle);
   * the loop awaits it before the next cycle, so training and self-play never share the GPU at once,
   * and a failure stops the run (resumable) with the cause. `read` gives an earlier cycle from the
   * store. Set while "train after every cycle" is on (the Run panel then checks the loop is closed).
   */
  afterCycle = $state<
    | ((d: {
        runId: string;
        config: Config;
        cycle: number;
        archive: ArchiveRecord[];
        rollouts: RolloutRecord[];
        read: (cycle: number) => Promise<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[] }>;
        /** The run's stop: training ends its round between two optimiser steps. */
        signal?: AbortSignal;
      }) => Promise<void>)
    | null
  >(null);

  constructor(private readonly store: Store) {}

  /** Look for an unfinished run saved before a reload. */
  async importMemoryText(text: string, capacity: number): Promise<string | null> {
    try {
      this.importedMemory = importMemory(JSON.parse(text), capacity);
      await this.store.put('memory', 'imported', $state.snapshot(this.importedMemory));
      return null;
    } catch (err) {
      return `Could not import the memory: ${serializeError(err).message}`;
    }
  }

  async clearImportedMemory(): Promise<void> {
    this.importedMemory = null;
    await this.store.delete('memory', 'imported');
  }

  async load(): Promise<void> {
    this.importedMemory = (await this.store.get<Memory>('memory', 'imported').catch(() => undefined)) ?? null;
    const active = await this.store.get<ActiveRun>('settings', 'activeRun').catch(() => undefined);
    if (!active) return;
    const rs = new StoreRunStore(this.store, active.runId);
    // read everything first, then show it at once: a view between two awaits would show a run with
    // an archive but no metrics (the Run panel's "No run yet" beside a review of cycle 2)
    const [state, archive, metrics, rollouts, spec] = await Promise.all([
      rs.readState(),
      rs.readArchive(),
      rs.readMetrics(),
      rs.readRollouts(),
      rs.readSpec(),
    ]);
    this.runId = active.runId;
    this.iterations = active.iterations;
    this.archive = archive;
    this.metrics = metrics;
    this.rollouts = rollouts;
    this.spec = spec;
    this.memory = state?.memory ?? null;
    this.cycle = state?.cycle ?? 0;
    if (state && state.cycle < active.iterations) {
      this.resumable = active;
      this.status = 'stopped';
    } else this.status = this.archive.length ? 'done' : 'idle';
  }

  /** An event reaches the view (through the pacer). */
  private show(e: LoopEvent): void {
    applyEvent(this, e); // the one reducer (core/spade/run_events.ts) the CLI and tests use too
    if (e.type === 'cycle_end') this.rollouts = [...this.rollouts, ...e.rollouts];
  }

  private onEvent = (e: LoopEvent) => {
    if (e.type === 'stopped' || e.type === 'done') return; // start() sets the final status itself
    this.pacer.push(e);
  };

  /** The loop's afterCycle: hands the cycle to this.afterCycle (read when each cycle ends, so a toggle applies). */
  private trainAfter(runId: string, config: Config, store: StoreRunStore) {
    return async (c: { cycle: number; archive: ArchiveRecord[]; rollouts: RolloutRecord[] }) => {
      const hook = this.afterCycle;
      if (!hook) return;
      const read = async (cycle: number) => ({
        archive: (await store.readArchive()).filter((a) => a.cycle === cycle),
        rollouts: (await store.readRollouts()).filter((r) => r.cycle === cycle),
      });
      try {
        const signal = this.abort?.signal;
        await hook({ runId, config, cycle: c.cycle, archive: c.archive, rollouts: c.rollouts, read, signal });
      } catch (err) {
        const e = serializeError(err);
        throw new Error(`Training after cycle ${c.cycle + 1} failed: ${e.message}`, { cause: err });
      }
    };
  }

  async start(
    config: Config,
    skills: string[],
    models: Record<ModelRole, ChatModel>,
    describe: Record<ModelRole, string>,
    corpus: CorpusDoc[],
    corpusName: string,
    resume = false,
    /** A replay's recorded settings: they replace the form's (a replay only answers the recorded requests). */
    recorded: { spec: RunSpec; cycles: number; says: string } | null = null,
  ): Promise<void> {
    if (this.status === 'running' || this.status === 'paused') return;
    if (this.review.opened) await this.closeOpened();
    this.error = null;
    this.fromRecording = recorded?.says ?? null;
    if (recorded && !resume) this.iterations = recorded.cycles;
    let runId = this.runId;
    if (!resume || !runId) {
      runId = `run-${Date.now().toString(36)}`;
      this.archive = [];
      this.metrics = [];
      this.rollouts = [];
      this.tasks = [];
    }
    this.runId = runId;
    await this.store.put('settings', 'activeRun', { runId, iterations: this.iterations });
    const store = new StoreRunStore(this.store, runId);
    const spec: RunSpec = (await store.readSpec()) ??
      (recorded ? { ...recorded.spec, models: describe } : null) ?? {
        config: { ...DEFAULTS, ...config },
        skills: skills.length ? skills : defaultSkills(config.setting),
        models: describe,
        corpus: corpusName,
        createdAt: new Date().toISOString(),
      };
    this.spec = spec;
    this.abort = new AbortController();
    this.calls = { done: 0, failed: 0, byKind: {}, last: null };
    // the engine worker decodes as many chats in one step as the run keeps in flight
    const { decodeBatch } = concurrencySizes({ ...DEFAULTS, ...spec.config }.concurrency);
    for (const m of new Set(Object.values(models))) await m.setDecodeBatch?.(decodeBatch); // a capability the model declares (the local engine's)
    // the loop reads missing knobs as their defaults; so must training
    const afterCycle = this.trainAfter(runId, { ...DEFAULTS, ...spec.config }, store);
    // each distinct model counted once (roles that share a model keep sharing it)
    const counted = new Map<ChatModel, ChatModel>();
    for (const m of Object.values(models)) if (!counted.has(m)) counted.set(m, tallied(m, this.calls));
    this.loop = new SpadeLoop({
      spec,
      models: {
        designer: counted.get(models.designer)!,
        hint: counted.get(models.hint)!,
        agent: counted.get(models.agent)!,
      },
      runner: sandboxPool(spec.config.concurrency),
      corpus,
      store,
      onEvent: this.onEvent,
      signal: this.abort.signal,
      afterCycle,
      initialMemory: this.importedMemory ? $state.snapshot(this.importedMemory) : undefined,
    });
    this.status = 'running';
    this.resumable = null;
    try {
      // a resumed run first trains any finished cycle that was not trained (a reload in between),
      // so the next cycle samples from the updated policy — as `spade run --resume` does
      const done = resume ? ((await store.readState())?.cycle ?? 0) : 0;
      if (done > 0 && this.afterCycle) {
        const last = done - 1;
        await afterCycle({
          cycle: last,
          archive: (await store.readArchive()).filter((x) => x.cycle === last),
          rollouts: (await store.readRollouts()).filter((x) => x.cycle === last),
        });
      }
      const state = await this.loop.run(this.iterations);
      await this.pacer.whenDrained(); // the run is over when the watcher has seen it all
      this.memory = state.memory;
      this.status = this.abort.signal.aborted ? 'stopped' : 'done';
      if (this.status === 'stopped') this.resumable = { runId, iterations: this.iterations };
    } catch (err) {
      this.pacer.flush();
      this.status = 'error';
      this.error = serializeError(err).message;
      this.resumable = { runId, iterations: this.iterations };
    } finally {
      this.loop = null;
    }
  }

  pause(): void {
    this.loop?.pause();
  }
  resume(): void {
    this.loop?.resume();
  }
  stop(): void {
    this.loop?.resume();
    this.abort?.abort();
    this.pacer.flush();
  }

  // --- watching: pacing ---------------------------------------------------------------------

  setPace(tokensPerSecond: number): void {
    this.paceTps = tokensPerSecond;
    this.pacer.setSpeed(tokensPerSecond);
  }
  holdView(): void {
    this.pacer.pause();
  }
  playView(): void {
    this.pacer.play();
  }
  stepView(kind: StepKind): void {
    this.pacer.step(kind);
  }

  // --- run files ----------------------------------------------------------------------------

  /** The run on screen as a run file (the format of `spade run export`). */
  async runFile(): Promise<RunFile | null> {
    if (this.review.opened || !this.runId) {
      if (!this.spec) return null;
      return makeRunFile({
        spec: $state.snapshot(this.spec) as RunSpec,
        archive: $state.snapshot(this.archive) as ArchiveRecord[],
        rollouts: $state.snapshot(this.rollouts) as RolloutRecord[],
        metrics: $state.snapshot(this.metrics) as MetricsRecord[],
        memory: this.memory ? ($state.snapshot(this.memory) as Memory) : null,
      });
    }
    const rs = new StoreRunStore(this.store, this.runId);
    const spec = await rs.readSpec();
    if (!spec) return null;
    const state = await rs.readState();
    return makeRunFile({
      spec,
      archive: await rs.readArchive(),
      rollouts: await rs.readRollouts(),
      metrics: await rs.readMetrics(),
      memory: state?.memory ?? null,
      state,
    });
  }

  /** Put a run file on screen (the review opened it), in place of this browser's run, which stays saved. */
  private showFile(file: RunFile, name: string, from: 'file' | 'link'): void {
    this.runId = `${from}-${name.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 40)}`;
    this.spec = file.spec;
    this.archive = file.archive;
    this.rollouts = file.rollouts;
    this.metrics = file.metrics;
    this.memory = file.state?.memory ?? null;
    this.tasks = [];
    this.cycle = file.metrics.at(-1)?.cycle ?? 0;
    this.iterations = file.metrics.length;
    this.resumable = null;
    this.fromRecording = null;
    this.error = null;
    this.status = 'done';
  }

  /** Leave the opened run file and bring this browser's own run back. */
  async closeOpened(): Promise<void> {
    this.review.close();
    this.runId = null;
    this.spec = null;
    this.archive = [];
    this.rollouts = [];
    this.metrics = [];
    this.tasks = [];
    this.memory = null;
    this.cycle = 0;
    this.status = 'idle';
    this.resumable = null;
    await this.load();
  }

  /** The whole run as one run file (JSON text), or null when there is no run. */
  async exportJson(): Promise<string | null> {
    const file = await this.runFile();
    return file ? runFileToJson(file) : null;
  }
}
