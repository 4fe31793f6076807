/**
 * A self-play run in the browser, as a rune class: configure, start, pause,
 * resume, stop; the current cycle live (document, designer output as it streams,
 * checks, hint, rollouts, regret); metrics across cycles; the environments made.
 * Progress is saved in IndexedDB after every environment: after a reload the Run panel offers
 * "Resume" (the user presses it), and the run loses at most the environment in flight. Every model
 * call is counted (answered, failed by kind, the last failure) for the Run view.
 *
 * Review and sharing: any run — the current one after a reload, or a run file opened from disk or
 * from a `#run=URL` link — is reviewable cycle by cycle (core/spade/run_review.ts). A run file is
 * parsed in a worker (workers/run_file.worker.ts), so a hostile one cannot freeze the page; a link
 * is fetched with a time-out, an idle time-out and a byte cap, and both can be cancelled. Export writes
 * the same run file format as `spade run export`. Watching: loop events reach the view through a
 * pacer (core/spade/pacer.ts) that can slow them to a chosen tokens/s, pause and step.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import type { RunFileWorkerApi } from '../../workers/run_file.worker.ts';
import { joinChunks } from '../core/capped_decompress.ts';
import { concurrencySizes, DEFAULTS, type Config } from '../core/config.ts';
import { abortError, ContextBudgetError, ModelCallError, RunFileError, serializeError } from '../core/errors.ts';
import type { ChatModel, ModelRole } from '../core/llm/chat_model.ts';
import { defaultSkills, SpadeLoop, type LoopEvent } from '../core/spade/loop.ts';
import { applyEvent, type RunView, type TaskView } from '../core/spade/run_events.ts';
import { importMemory, type Memory } from '../core/spade/memory.ts';
import { Pacer, type StepKind } from '../core/spade/pacer.ts';
import {
  checkRunFileSize,
  makeRunFile,
  parseRunFileBytes,
  runFileToJson,
  type RunFile,
} from '../core/spade/run_file.ts';
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
  return {
    get backend() {
      return m.backend;
    },
    get model() {
      return m.model;
    },
    get capabilities() {
      return m.capabilities;
    },
    ...(m.countTokens ? { countTokens: (messages) => m.countTokens!(messages) } : {}),
    async chat(messages, options) {
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
    },
  };
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
  /** Set while a run file (opened from disk or a link) is on screen instead of this browser's run. */
  opened = $state<{ name: string; from: 'file' | 'link' } | null>(null);
  /** Why the last run file or link could not be opened. */
  openError = $state<string | null>(null);
  /** What is being opened (a file's name or a link) while it is fetched and checked; cancelOpen stops it. */
  opening = $state<string | null>(null);
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
  private openAbort: AbortController | null = null;
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
    if (this.opened) await this.closeOpened();
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
    for (const m of new Set(Object.values(models)))
      if ('setDecodeBatch' in m && typeof m.setDecodeBatch === 'function') await m.setDecodeBatch(decodeBatch);
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
    if (this.opened || !this.runId) {
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

  /**
   * Show a run file (its bytes: JSON or gzip) in review mode, in place of this browser's run (which
   * stays saved; closeOpened brings it back). It is parsed and checked off the page (parseRunFileOffThread);
   * nothing in it runs: its environments are played only from the Environments panel, on the user's
   * click, in the sandbox. A bad file, a cancel or a time-out becomes openError.
   */
  async openRunBytes(
    bytes: Uint8Array,
    name: string,
    from: 'file' | 'link',
    parse: RunFileParser = parseRunFileOffThread,
  ): Promise<boolean> {
    if (this.status === 'running' || this.status === 'paused') {
      this.openError = 'Stop the current run before opening another one.';
      return false;
    }
    const ac = this.beginOpen(name);
    try {
      const file = await parse(bytes, ac.signal);
      this.showFile(file, name, from);
      return true;
    } catch (err) {
      this.openError = `Could not open ${name}: ${serializeError(err).message}`;
      return false;
    } finally {
      this.endOpen(ac);
    }
  }

  /** Stop opening a run file or link (the Cancel button); what was on screen stays. */
  cancelOpen(): void {
    this.openAbort?.abort(new RunFileError('Cancelled: the run was not opened.'));
  }

  private beginOpen(what: string): AbortController {
    this.openAbort?.abort(new RunFileError('Cancelled: another run file was opened.'));
    const ac = new AbortController();
    this.openAbort = ac;
    this.opening = what;
    return ac;
  }

  private endOpen(ac: AbortController): void {
    if (this.openAbort !== ac) return;
    this.openAbort = null;
    this.opening = null;
  }

  private showFile(file: RunFile, name: string, from: 'file' | 'link'): void {
    this.openError = null;
    this.opened = { name, from };
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

  /**
   * Fetch a run file from a link (any CORS-enabled host) and show it. The body is read within the
   * run file size cap (a larger declared or streamed size stops the download), within LINK_TIMEOUT_MS
   * in all and LINK_IDLE_MS between pieces (a server that drips bytes is given up on), and cancelOpen
   * stops it. Every failure becomes openError, saying what happened and what to do.
   */
  /**
   * A fetch that failed before any answer: the browser gives the same TypeError for a host that is
   * down, an address that does not resolve, a refused connection and a CORS refusal.
   */
  static readonly UNREACHABLE_WHY =
    'No answer came back: the host may be down or unreachable from here, the address may be mistyped, or the host does not allow other sites to read its files (CORS); the browser does not say which. Open the link in a new tab to tell: if the file downloads there, it is CORS.';

  async openRunUrl(
    url: string,
    fetcher: typeof fetch = fetch,
    limits: { totalMs?: number; idleMs?: number } = {},
    parse: RunFileParser = parseRunFileOffThread,
  ): Promise<boolean> {
    if (this.status === 'running' || this.status === 'paused') {
      this.openError = 'Stop the current run before opening another one.';
      return false;
    }
    const shown = url.startsWith('data:') ? `${url.slice(0, 40)}…` : url.slice(0, 200);
    const name = url.startsWith('data:') ? 'linked run' : url.split('/').pop()?.split(/[?#]/)[0] || 'run';
    const totalMs = limits.totalMs ?? LINK_TIMEOUT_MS;
    const idleMs = limits.idleMs ?? LINK_IDLE_MS;
    const ac = this.beginOpen(shown);
    let received = 0;
    const got = () => (received ? ` after ${received} bytes` : ' before any data arrived');
    const total = setTimeout(
      () =>
        ac.abort(
          new RunFileError(
            `the download took longer than ${totalMs / 1000} s${got()}, so it was stopped. The server may be slow or stalled: try again later, or download the file and open it with "Open a run file".`,
          ),
        ),
      totalMs,
    );
    let idle: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(
        () =>
          ac.abort(
            new RunFileError(
              `the server sent nothing for ${idleMs / 1000} s${got()}, so the download was stopped. Check the link and try again, or download the file and open it with "Open a run file".`,
            ),
          ),
        idleMs,
      );
    };
    let bytes: Uint8Array;
    try {
      arm();
      const res = await untilAborted(fetcher(url, { signal: ac.signal }), ac.signal);
      if (!res.ok) throw new RunFileError(`the server answered HTTP ${res.status}; check the link.`);
      const declared = Number(res.headers.get('content-length') ?? 0);
      if (declared) checkRunFileSize(declared, 'The linked run file');
      bytes = await readCapped(res, ac.signal, (n) => {
        received = n;
        arm();
      });
      clearTimeout(idle);
    } catch (err) {
      const e = ac.signal.aborted ? abortError(ac.signal) : err;
      const m = serializeError(e).message;
      this.openError = `Could not open the run from ${shown}: ${
        !ac.signal.aborted && /fetch|network/i.test(m) ? `${m}. ${RunState.UNREACHABLE_WHY}` : m
      }`;
      this.endOpen(ac);
      return false;
    } finally {
      clearTimeout(total);
      clearTimeout(idle);
    }
    this.endOpen(ac);
    return this.openRunBytes(bytes, name, 'link', parse);
  }

  /** Leave the opened run file and bring this browser's own run back. */
  async closeOpened(): Promise<void> {
    this.opened = null;
    this.openError = null;
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

  /** The rollouts of one finished cycle (from the store). */
  async rolloutsOf(cycle: number): Promise<RolloutRecord[]> {
    if (!this.runId) return [];
    return (await new StoreRunStore(this.store, this.runId).readRollouts()).filter((r) => r.cycle === cycle);
  }

  /** The whole run as one run file (JSON text), or null when there is no run. */
  async exportJson(): Promise<string | null> {
    const file = await this.runFile();
    return file ? runFileToJson(file) : null;
  }
}

/** Parses and checks a run file's bytes; rejects when `signal` aborts. */
export type RunFileParser = (bytes: Uint8Array, signal: AbortSignal) => Promise<RunFile>;

/** The most a `#run=URL` download may take in all, and between two pieces of its body. */
export const LINK_TIMEOUT_MS = 120_000;
export const LINK_IDLE_MS = 30_000;
/** The most parsing one run file in the worker may take (a 64 MiB file takes a few seconds). */
const PARSE_TIMEOUT_MS = 60_000;

/** `p`, or the signal's reason as soon as it aborts (a fetch double may ignore its signal). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Parse a run file in a worker of its own, ended when done, on abort or after PARSE_TIMEOUT_MS —
 * the page never runs the parse; where there are no workers (Node), the bounded parse runs here.
 */
export async function parseRunFileOffThread(bytes: Uint8Array, signal: AbortSignal): Promise<RunFile> {
  if (typeof Worker === 'undefined')
    return untilAborted(
      Promise.resolve().then(() => parseRunFileBytes(bytes)),
      signal,
    );
  const worker = new Worker(new URL('../../workers/run_file.worker.ts', import.meta.url), {
    type: 'module',
    name: 'spade-run-file',
  });
  const failed = new Promise<never>((_, reject) =>
    worker.addEventListener('error', (e) =>
      reject(
        new RunFileError(`The run file reader failed to start (${e.message || 'no reason given'}); reload the page.`),
      ),
    ),
  );
  const timeout = new AbortController();
  const timer = setTimeout(
    () =>
      timeout.abort(
        new RunFileError(
          `Checking the run file took longer than ${PARSE_TIMEOUT_MS / 1000} s, so it was stopped; open a smaller run file.`,
        ),
      ),
    PARSE_TIMEOUT_MS,
  );
  try {
    const api = Comlink.wrap<RunFileWorkerApi>(worker);
    const parsed = Promise.race([api.parse(Comlink.transfer(bytes, [bytes.buffer])), failed]);
    return await untilAborted(untilAborted(parsed, signal), timeout.signal);
  } finally {
    clearTimeout(timer);
    worker.terminate();
  }
}

/** A response body, read chunk by chunk and abandoned past the run file size cap or on abort. */
async function readCapped(
  res: Response,
  signal: AbortSignal,
  onProgress: (bytes: number) => void,
): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array(await untilAborted(res.arrayBuffer(), signal));
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await untilAborted(reader.read(), signal);
      if (done) break;
      total += value.length;
      checkRunFileSize(total, 'The linked run file');
      onProgress(total);
      chunks.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    throw err;
  }
  return joinChunks(chunks, total);
}
