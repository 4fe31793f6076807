/**
 * A self-play run in the browser, as a rune class: configure, start, pause,
 * resume, stop; the current cycle live (document, designer output as it streams,
 * checks, hint, rollouts, regret); metrics across cycles; the environments made.
 * Progress is saved in IndexedDB after every environment, so a reload resumes the
 * run and loses at most the environment in flight.
 */
import { DEFAULTS, type Config } from '../core/config.ts';
import { serializeError } from '../core/errors.ts';
import type { ChatMessage, ChatModel, ModelRole } from '../core/llm/chat_model.ts';
import { defaultSkills, SpadeLoop, type LoopEvent } from '../core/spade/loop.ts';
import { applyEvent, type RunView, type TaskView } from '../core/spade/run_events.ts';
import { importMemory, type Memory } from '../core/spade/memory.ts';
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

interface ActiveRun {
  runId: string;
  iterations: number;
}

export class RunState implements RunView {
  status = $state<'idle' | 'running' | 'paused' | 'done' | 'stopped' | 'error'>('idle');
  error = $state<string | null>(null);
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

  private loop: SpadeLoop | null = null;
  private abort: AbortController | null = null;
  /** The designer's first-attempt messages per "cycle:index", for training the designer. */
  private readonly briefs = new Map<string, ChatMessage[]>();
  /**
   * Called after each cycle with what it produced (e.g. to train the LoRA adapter); the loop is
   * paused while it runs, so training and self-play never share the GPU at once.
   */
  afterCycle:
    | ((d: {
        archive: ArchiveRecord[];
        rollouts: RolloutRecord[];
        briefs: Map<string, ChatMessage[]>;
      }) => Promise<void>)
    | null = null;

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
    const state = await rs.readState();
    this.runId = active.runId;
    this.iterations = active.iterations;
    this.archive = await rs.readArchive();
    this.metrics = await rs.readMetrics();
    this.memory = state?.memory ?? null;
    this.cycle = state?.cycle ?? 0;
    if (state && state.cycle < active.iterations) {
      this.resumable = active;
      this.status = 'stopped';
    } else this.status = this.archive.length ? 'done' : 'idle';
  }

  private onEvent = (e: LoopEvent) => {
    if (e.type === 'stopped' || e.type === 'done') return; // start() sets the final status itself
    applyEvent(this, e); // the one reducer (core/spade/run_events.ts) the CLI and tests use too
    if (e.type === 'designer_output' && e.attempt === 0) this.briefs.set(`${e.cycle}:${e.index}`, e.messages);
    if (e.type === 'cycle_end' && this.afterCycle && this.loop) {
      const loop = this.loop;
      const hook = this.afterCycle;
      loop.pause();
      void hook({ archive: e.archive, rollouts: e.rollouts, briefs: this.briefs })
        .catch(
          (err: unknown) => (this.error = `Training after cycle ${e.cycle + 1} failed: ${serializeError(err).message}`),
        )
        .finally(() => loop.resume());
    }
  };

  async start(
    config: Config,
    skills: string[],
    models: Record<ModelRole, ChatModel>,
    describe: Record<ModelRole, string>,
    corpus: CorpusDoc[],
    corpusName: string,
    resume = false,
  ): Promise<void> {
    if (this.status === 'running' || this.status === 'paused') return;
    this.error = null;
    let runId = this.runId;
    if (!resume || !runId) {
      runId = `run-${Date.now().toString(36)}`;
      this.archive = [];
      this.metrics = [];
      this.tasks = [];
    }
    this.runId = runId;
    await this.store.put('settings', 'activeRun', { runId, iterations: this.iterations });
    const store = new StoreRunStore(this.store, runId);
    const spec: RunSpec = (await store.readSpec()) ?? {
      config: { ...DEFAULTS, ...config },
      skills: skills.length ? skills : defaultSkills(config.setting),
      models: describe,
      corpus: corpusName,
      createdAt: new Date().toISOString(),
    };
    this.abort = new AbortController();
    this.loop = new SpadeLoop({
      spec,
      models,
      runner: sandboxPool(),
      corpus,
      store,
      onEvent: this.onEvent,
      signal: this.abort.signal,
      initialMemory: this.importedMemory ? $state.snapshot(this.importedMemory) : undefined,
    });
    this.status = 'running';
    this.resumable = null;
    try {
      const state = await this.loop.run(this.iterations);
      this.memory = state.memory;
      this.status = this.abort.signal.aborted ? 'stopped' : 'done';
      if (this.status === 'stopped') this.resumable = { runId, iterations: this.iterations };
    } catch (err) {
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
  }

  briefsMap(): Map<string, ChatMessage[]> {
    return this.briefs;
  }

  /** The rollouts of one finished cycle (from the store). */
  async rolloutsOf(cycle: number): Promise<RolloutRecord[]> {
    if (!this.runId) return [];
    return (await new StoreRunStore(this.store, this.runId).readRollouts()).filter((r) => r.cycle === cycle);
  }

  /** The whole run as one JSON document. */
  async exportJson(): Promise<string> {
    if (!this.runId) return '{}';
    const rs = new StoreRunStore(this.store, this.runId);
    return JSON.stringify(
      {
        spec: await rs.readSpec(),
        archive: await rs.readArchive(),
        metrics: await rs.readMetrics(),
        rollouts: await rs.readRollouts(),
        state: await rs.readState(),
      },
      null,
      1,
    );
  }
}
