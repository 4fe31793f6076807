/**
 * On-device LoRA training, as a rune class: our engine in a worker (workers/engine.worker.ts, reached
 * through comlink as the front door's EngineApi; its chat model EngineChatModel), a checkpoint loaded
 * from the Hugging Face Hub, from local files (byte-level progress) or built fresh in memory ("start
 * from a tiny fresh model"), a LoRA adapter (new, or imported in PEFT format), and closed-loop
 * training: after every cycle of the run, the closed loop of core/train/closed_loop.ts (the same loop
 * as `spade run --train`, through the same EngineApi calls), with this class as its store — the
 * adapter, AdamW's state, the progress and the charts' records saved in the store (IndexedDB) after
 * every update and probe, so a reload that loads the same checkpoint trains on where it was.
 * `chatModel` is the `local` backend the Models panel offers for any role.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import { CONFIG_SCHEMA, type Config } from '../core/config.ts';
import { ModelLoadError, serializeError } from '../core/errors.ts';
import type { ChatModel } from '../core/llm/chat_model.ts';
import { formatSeconds } from '../core/spade/run_progress.ts';
import type { ArchiveRecord, RolloutRecord } from '../core/spade/run_store.ts';
import type { Store } from '../core/store.ts';
import type { StepRecord } from '../core/train/chart_series.ts';
import {
  ClosedLoop,
  type LoopProgress,
  type ProbeRecord,
  type RoundSummary,
  type TrainStore,
} from '../core/train/closed_loop.ts';
import { trainerOptions } from '../core/train/grpo_rounds.ts';
import { FRESH_MODEL_DEFAULTS, LORA_DEFAULTS } from '../core/defaults.ts';
import {
  EngineChatModel,
  engineCapabilities,
  type EngineApi,
  type FreshModel,
  type KvFormat,
  type LoadProgress,
  type LoraModule,
  type ModelSource,
  type ModelSummary,
  type WeightFormat,
} from '../engine/engine_api.ts';
import { sandboxPool } from './envs.svelte.ts';

export const LORA_TARGETS: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

export type { StepRecord } from '../core/train/chart_series.ts';
export type { ProbeRecord } from '../core/train/closed_loop.ts';

/** Where training stands: the run it follows, and the closed loop's progress on it. */
export interface TrainProgress extends LoopProgress {
  runId: string | null;
}

/** What the store keeps per model (settings/training.<model>): enough to continue after a reload. */
interface SavedTraining extends TrainProgress {
  version: 1;
  model: string;
  adapter: { configJson: string; weights: string } | null;
  optimizer: string | null;
  steps: StepRecord[];
  probes: ProbeRecord[];
}

/** What the run hands over after each cycle (RunState.afterCycle). */
export interface CycleDone {
  runId: string;
  config: Config;
  cycle: number;
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  /** An earlier cycle of this run from the store (after a reload the in-memory ones are gone). */
  read(cycle: number): Promise<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[] }>;
  /** The run's stop: it ends a training round between two optimiser steps. */
  signal?: AbortSignal;
}

/** A model made by "Start from a tiny fresh model" (engine_api.ts's freshModelName). */
export const isFreshModel = (name: string | null | undefined): boolean => !!name?.startsWith('fresh-');

/**
 * What a run does with a fresh random model in a role, said before it starts: its replies are random
 * bytes, so as designer it writes no valid environment and there is no training signal; and how long a
 * cycle takes (measured: 580 s for one cycle with the engine in every role on a software adapter).
 */
export function freshModelWarning(softwareAdapter: boolean): string {
  return (
    'This is a fresh model with random weights: it writes random bytes. As designer it will write no valid ' +
    'environment (every design fails the checker), so a cycle ends with no training signal; as agent it wins ' +
    'only by chance. ' +
    (softwareAdapter
      ? 'On this software adapter one cycle with it in every role took about 10 minutes (580 s measured). '
      : 'A cycle with it in every role takes minutes. ') +
    'What works instead: the first screen\'s "Watch a model learn a game (no download)" (a tiny model learns ' +
    'in seconds), the command npx spade train toy, or a real checkpoint here (e.g. HuggingFaceTB/SmolLM2-135M-Instruct) ' +
    'with a WebLLM or server model as designer.'
  );
}

type Remote = Comlink.Remote<EngineApi>;

/** Bytes ↔ base64 (the store keeps JSON). */
function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
function fromBase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

const storeKey = (model: string) => `training.${model.replace(/[^A-Za-z0-9._-]+/g, '_')}`.slice(0, 128);

export class TrainingState {
  status = $state<'empty' | 'loading' | 'ready' | 'training' | 'error'>('empty');
  progress = $state<LoadProgress | null>(null);
  summary = $state<ModelSummary | null>(null);
  error = $state<string | null>(null);
  repo = $state('HuggingFaceTB/SmolLM2-135M-Instruct');
  lora = $state({
    ...LORA_DEFAULTS,
    targets: [...LORA_DEFAULTS.targets] as LoraModule[],
    lr: CONFIG_SCHEMA.trainLr.default, // the loop's training rate (one source)
    seed: 0,
  });
  autoTrain = $state(false);
  /** Every optimiser step of this adapter (charts). */
  steps = $state<StepRecord[]>([]);
  probes = $state<ProbeRecord[]>([]);
  trained = $state<TrainProgress>({ runId: null, updates: 0, trainedThrough: -1 });
  /** What the last training round did, in words. */
  lastRound = $state<string | null>(null);
  /** What training is doing now, in words, and since when (performance.now()); null when idle. */
  activity = $state<{ what: string; since: number } | null>(null);
  /** The tiny fresh model's shape and seed (the panel's form). */
  // the tiny fresh model's shape: core/defaults.ts (each value with its reason), changeable in the panel
  fresh = $state<FreshModel>({ ...FRESH_MODEL_DEFAULTS });
  chatModel = $state<ChatModel | null>(null);
  /**
   * How the engine stores the frozen base on the GPU (engine/io/pack.ts). bf16 by default: half of
   * f32's memory and lossless for the bf16 checkpoints on the Hub; q4 takes ~0.56 B per parameter.
   */
  weights = $state<WeightFormat>('bf16');
  /** The decode KV cache's storage: f32 (the reference) or f16 (half the memory; logits move by ~1e-4). */
  kvFormat = $state<KvFormat>('f32');
  /** GPU bytes per weight format, from config.json alone (read before the weights download). */
  plan = $state<{ bytes: Record<WeightFormat, number>; params: number } | null>(null);

  private api: Remote | null = null;
  private worker: Worker | null = null;
  /** The closed loop of the run being trained (its window of recent cycles), for that run and stop signal. */
  private closed: { runId: string; signal?: AbortSignal; loop: ClosedLoop } | null = null;

  constructor(private readonly store: Store | null = null) {}

  private remote(): Remote {
    if (!this.api) {
      this.worker = new Worker(new URL('../../workers/engine.worker.ts', import.meta.url), {
        type: 'module',
        name: 'spade-engine',
      });
      this.api = Comlink.wrap<EngineApi>(this.worker);
    }
    return this.api;
  }

  /** Load a checkpoint into the worker; `weights` is the base's storage (default: the panel's choice). */
  async load(source: ModelSource, weights: WeightFormat = this.weights): Promise<void> {
    this.status = 'loading';
    this.error = null;
    this.progress = null;
    this.steps = [];
    this.probes = [];
    this.trained = { runId: null, updates: 0, trainedThrough: -1 };
    this.lastRound = null;
    this.closed = null;
    this.plan = null;
    try {
      // config.json first, so the memory each format needs shows while the weights download (a fresh
      // model has no download: its size would show next to the repository field as if it were that one's)
      if (source.kind !== 'fresh') await this.planFor(source);
      const s = await this.remote().load(
        source,
        Comlink.proxy((p: LoadProgress) => (this.progress = p)),
        { weights, kvFormat: this.kvFormat },
      );
      this.summary = s;
      this.chatModel = new EngineChatModel(this.remote(), s.name, engineCapabilities(s), { proxy: Comlink.proxy });
      await this.restore(s.name);
      this.status = 'ready';
    } catch (err) {
      this.status = 'error';
      const e = serializeError(err);
      this.error =
        e.name === 'WebGpuUnavailableError'
          ? e.message
          : `${e.message}${err instanceof ModelLoadError ? '' : ' — check the repository name or the files you picked (config.json, tokenizer.json and *.safetensors).'}`;
    }
  }

  /**
   * "Start from a tiny fresh model": a random-initialised checkpoint built in the worker (no
   * download), with a new adapter unless this model's training was saved before (then that).
   */
  async startFresh(): Promise<void> {
    // f32: the reference storage, and a tiny model's weights take well under a megabyte anyway
    await this.load({ kind: 'fresh', ...$state.snapshot(this.fresh) }, 'f32');
    if (this.status === 'ready' && !this.summary?.adapter) await this.newAdapter();
  }

  /** The saved adapter, optimiser state and progress of `model`, if any, back into the worker. */
  private async restore(model: string): Promise<void> {
    const saved = await this.store?.get<SavedTraining>('settings', storeKey(model)).catch(() => undefined);
    if (!saved || saved.version !== 1 || saved.model !== model) return;
    const api = this.remote();
    if (saved.adapter) {
      const w = fromBase64(saved.adapter.weights);
      this.summary = await api.importAdapter(saved.adapter.configJson, Comlink.transfer(w, [w.buffer]));
      if (saved.optimizer) {
        const o = fromBase64(saved.optimizer);
        await api.importState(Comlink.transfer(o, [o.buffer]));
      }
    }
    this.trained = { runId: saved.runId, updates: saved.updates, trainedThrough: saved.trainedThrough };
    this.steps = saved.steps ?? [];
    this.probes = saved.probes ?? [];
  }

  /** After every update: adapter (PEFT), optimiser, progress and the charts' records to the store. */
  private async save(): Promise<void> {
    if (!this.store || !this.summary) return;
    const api = this.remote();
    const adapter = this.summary.adapter ? await api.exportAdapter() : null;
    const optimizer = await api.exportState();
    const saved: SavedTraining = {
      version: 1,
      model: this.summary.name,
      ...$state.snapshot(this.trained),
      adapter: adapter ? { configJson: adapter.configJson, weights: toBase64(adapter.weights) } : null,
      optimizer: optimizer ? toBase64(optimizer) : null,
      steps: $state.snapshot(this.steps),
      probes: $state.snapshot(this.probes),
    };
    await this.store.put('settings', storeKey(this.summary.name), saved);
  }

  /** Forget this model's saved training (a new adapter starts over). */
  private async forget(): Promise<void> {
    if (this.store && this.summary) await this.store.delete('settings', storeKey(this.summary.name));
  }

  /** Read a checkpoint's config.json only and show the GPU memory each weight format would take. */
  async planFor(source: ModelSource): Promise<void> {
    this.plan = await this.remote()
      .plan(source)
      .catch(() => null);
  }

  /** Stop the worker (and free its GPU memory). */
  unload(): void {
    this.worker?.terminate();
    this.worker = null;
    this.api = null;
    this.summary = null;
    this.chatModel = null;
    this.closed = null;
    this.status = 'empty';
  }

  async newAdapter(): Promise<void> {
    await this.guard(async () => {
      this.summary = await this.remote().initLora(
        this.lora.r,
        this.lora.alpha,
        $state.snapshot(this.lora.targets),
        this.lora.seed,
      );
      this.steps = [];
      this.probes = [];
      this.trained = { runId: null, updates: 0, trainedThrough: -1 };
      this.lastRound = null;
      this.closed = null;
      await this.forget();
    });
  }

  async importAdapter(configFile: File, weightsFile: File): Promise<void> {
    await this.guard(async () => {
      const weights = new Uint8Array(await weightsFile.arrayBuffer());
      this.summary = await this.remote().importAdapter(
        await configFile.text(),
        Comlink.transfer(weights, [weights.buffer]),
      );
    });
  }

  async exportAdapter(): Promise<{ configJson: string; weights: Uint8Array } | null> {
    let out: { configJson: string; weights: Uint8Array } | null = null;
    await this.guard(async () => {
      out = await this.remote().exportAdapter();
    });
    return out;
  }

  /**
   * The run's hook after each cycle: the closed loop (core/train/closed_loop.ts) trains every cycle
   * not trained yet (a reload between a cycle and its round trains it now), the probe before the
   * first update and every probeEvery updates, with this store saving after each. Errors propagate
   * (the loop stops the run, resumable, with the cause); a round that failed or was stopped is
   * undone: the adapter, optimiser and records go back to the last save.
   */
  async afterCycle(c: CycleDone): Promise<void> {
    if (!this.chatModel || !this.summary)
      throw new Error('No model is loaded in the engine; load one in the Training panel.');
    const prev = this.status;
    this.status = 'training';
    try {
      if (!this.summary.adapter) await this.newAdapter();
      if (this.closed?.runId !== c.runId || this.closed.signal !== c.signal) {
        // the run started (or resumed, with a new stop signal): the loop starts from the saved progress;
        // a new run keeps the adapter and the optimiser, and its cycles start from here
        if (this.trained.runId !== c.runId)
          this.trained = { ...this.trained, runId: c.runId, trainedThrough: c.cycle - 1 };
        this.closed = { runId: c.runId, signal: c.signal, loop: this.openLoop(c, this.chatModel) };
      }
      await this.closed.loop.afterCycle(c);
    } catch (err) {
      this.closed = null;
      if (this.summary) await this.restore(this.summary.name).catch(() => undefined);
      throw err;
    } finally {
      this.status = prev === 'training' ? 'ready' : prev;
      this.activity = null;
    }
  }

  /** The closed loop over the worker's engine, with this store, from the progress saved for this run. */
  private openLoop(c: CycleDone, model: ChatModel): ClosedLoop {
    const cfg = c.config;
    const api = this.remote();
    const opts = { ...trainerOptions(cfg), tisCap: cfg.tisCap };
    return new ClosedLoop(
      {
        cfg,
        trainer: {
          releaseDecodeMemory: () => api.releaseDecodeMemory(),
          learnerLogprobs: (ss) => api.learnerLogprobs(ss, opts),
          step: (mb) => api.trainGrpo(mb, opts),
        },
        store: this.loopStore(c),
        runner: sandboxPool(),
        model,
        signal: c.signal,
      },
      { updates: this.trained.updates, trainedThrough: this.trained.trainedThrough, probed: this.probes.length > 0 },
    );
  }

  /** The loop's store: the run's records, the panel's activity line and charts, and a save after each update and probe. */
  private loopStore(c: CycleDone): TrainStore {
    let since = performance.now();
    let samples = '';
    /** The probe's or the replays' activity, before its count of plays. */
    let playing = '';
    return {
      read: (cycle) => c.read(cycle),
      phase: (p) => {
        since = performance.now();
        if (p.phase === 'probe') {
          playing = `probe set (${p.label})`;
          this.activity = { what: playing, since };
          return;
        }
        if (p.phase === 'replay') {
          playing = `cycle ${p.cycle + 1}: replaying its environments unhinted (round ${p.round})`;
          this.activity = { what: playing, since };
          return;
        }
        samples = `cycle ${p.cycle + 1}: ${p.agent} agent and ${p.designer} designer samples`;
        this.activity = { what: `${samples}, recomputing π_old (TIS)`, since };
      },
      // a probe of a slow model takes minutes: plays done of total, the play under way, an estimate
      plays: (p) => {
        const left = ((performance.now() - since) / 1000 / p.done) * (p.total - p.done);
        const eta = p.done && p.done < p.total ? `, about ${formatSeconds(left)} left` : '';
        const now = `${p.title}, seed ${p.seed}${p.turn === null ? '' : `, turn ${p.turn}`}`;
        this.activity = { what: `${playing}: ${p.done} of ${p.total} plays done${eta} (${now})`, since };
      },
      step: (s, done, total) => {
        this.steps = [...this.steps, s];
        const left = ((performance.now() - since) / 1000 / done) * (total - done);
        const eta = done < total ? `, about ${formatSeconds(left)} left in this round` : '';
        this.activity = { what: `${samples}, optimiser step ${done} of ${total} done${eta}`, since };
      },
      save: async (progress, summary) => {
        this.trained = { ...this.trained, ...progress };
        this.lastRound = roundWords(summary, c.config.tisCap);
        await this.save();
      },
      probe: async (r) => {
        const record: ProbeRecord = {
          updates: r.updates,
          label: r.label,
          meanReturn: r.meanReturn,
          winRate: r.winRate,
        };
        this.probes = [...this.probes, record];
        await this.save();
      },
    };
  }

  private async guard(fn: () => Promise<void>): Promise<void> {
    try {
      this.error = null;
      await fn();
    } catch (err) {
      this.error = serializeError(err).message;
    }
  }
}

/** What a cycle's training did, in words (the panel's last round). */
function roundWords(r: RoundSummary, tisCap: number): string {
  if (!r.steps.length)
    return `cycle ${r.cycle + 1}: no training signal (every play of each environment scored the same, and every design of a skill earned the same reward)`;
  return (
    `cycle ${r.cycle + 1}: ${r.agentSamples} agent and ${r.designerSamples} designer samples, ${r.steps.length} optimiser steps` +
    (r.tis
      ? `; π_old/π_sampler ratio mean ${r.tis.tisMean.toFixed(3)}, max ${r.tis.tisMax.toFixed(3)}, ${(100 * r.tis.tisTruncated).toFixed(1)}% truncated at ${tisCap}`
      : '')
  );
}
