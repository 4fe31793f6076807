/**
 * The closed training loop of self-play, the one both callers run: `spade run --train`
 * (cli/run_training.ts, a run directory's train/ files) and the Training panel
 * (state/training.svelte.ts, the browser's store). After each cycle of a run, every cycle not
 * trained yet is trained, in order:
 *
 *   window     the cycles a round reads: k (the agent's plays) and k − designerLag (the designer's
 *              designs, scored over their window: that cycle's plays and its envReuse replays),
 *              kept in memory and read back through the store after a restart
 *   round 0    the decode KV cache freed (stale after a step, and the step needs the memory), π_old
 *              recomputed by the current adapter (TIS), then the clipped-GRPO steps of
 *              `cycleBatch`, in an order drawn from (seed, k)
 *   rounds 1…  envReuse − 1 times: cycle k's environments replayed unhinted by the updated agent,
 *              the replays joining k's window, then a round on them (agent only)
 *   update     counted when the cycle took at least one step; the progress saved
 *   probe      before the first update and every probeEvery updates
 *
 * The engine sits behind `TrainerPort`, persistence and reporting behind `TrainStore`. The signal
 * is checked before every optimiser step and reaches the replays and probes: a stopped round saves
 * nothing, so a resume trains that cycle again from the last save.
 */
import type { Config } from '../config.ts';
import { throwIfAborted, type ChatModel } from '../llm/chat_model.ts';
import { createRng, hashSeed } from '../rng.ts';
import type { CheckingRunner } from '../spade/phases.ts';
import { evaluateProbe, type PlaysProgress, type ProbeResult } from '../spade/probe.ts';
import { replayUnhinted } from '../spade/unhinted_replays.ts';
import type { ArchiveRecord, RolloutRecord } from '../spade/run_store.ts';
import type { StepRecord } from './chart_series.ts';
import { mergeTisStats, roundLearnerLogprobs, type TisStats, type TokenSample } from './grpo.ts';
import { cycleBatch, trainerSample, trainRound, type CycleData, type UpdateStats } from './grpo_rounds.ts';

/** A sample as the engine's trainer takes it, with the learner's π_old of its tokens when TIS computed them. */
export type TrainerSample = ReturnType<typeof trainerSample> & { learnerLogprobs?: number[] };

/** What one optimiser step reports: the schedule's figures and the TIS figures of its tokens. */
type StepResult = Omit<UpdateStats, 'role'> & Partial<TisStats>;

/** The engine: the adapter being trained. */
export interface TrainerPort {
  /** Give the idle decode KV cache back before a round's forward passes. */
  releaseDecodeMemory(): void | Promise<void>;
  /** log π_old of each sample's trained tokens under the current adapter (no gradient). */
  learnerLogprobs(samples: TrainerSample[]): Promise<number[][]>;
  /** One clipped-GRPO optimiser step on a minibatch. */
  step(minibatch: TrainerSample[]): Promise<StepResult>;
}

/** Where training stands: updates with at least one optimiser step, and the last cycle trained (−1: none). */
export interface LoopProgress {
  updates: number;
  trainedThrough: number;
}

/** The probe set's result after `updates` updates (0: before training). */
export interface ProbeRecord {
  updates: number;
  label: string;
  meanReturn: number;
  winRate: number;
}

/** One optimiser step as the loop reports it: round 0 is the cycle's own samples, 1… its replays. */
export interface LoopStep extends StepRecord {
  round: number;
}

/** What a cycle's training did (the CLI logs it, the panel shows it). */
export interface RoundSummary {
  cycle: number;
  agentSamples: number;
  designerSamples: number;
  steps: UpdateStats[];
  /** The TIS figures of every round of the cycle (null: TIS off or nothing trained). */
  tis: TisStats | null;
}

/** What the loop is starting now (the panel's activity line). */
type LoopPhase =
  | { phase: 'round'; cycle: number; round: number; agent: number; designer: number }
  | { phase: 'replay'; cycle: number; round: number }
  | { phase: 'probe'; label: string };

/** Persistence and reporting: the run directory's files, or the browser's store. */
export interface TrainStore {
  /** A cycle's records from the run (the window after a restart). */
  read(cycle: number): Promise<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[] }>;
  phase?(p: LoopPhase): void;
  /** The plays of the phase under way (a probe, a replay round): every turn and every finished play. */
  plays?(p: PlaysProgress): void;
  /** Each optimiser step as it ends: `done` of the round's `total`. */
  step(s: LoopStep, done: number, total: number): void;
  /** A cycle's training is over: keep the adapter, the optimiser and `progress`. */
  save(progress: LoopProgress, summary: RoundSummary): Promise<void>;
  probe(r: ProbeRecord & ProbeResult): Promise<void>;
}

export interface ClosedLoopDeps {
  cfg: Config;
  trainer: TrainerPort;
  store: TrainStore;
  /** The sandbox the replays and the probe play in. */
  runner: CheckingRunner;
  /** The model being trained, as the agent of the replays and the probe. */
  model: ChatModel;
  signal?: AbortSignal;
}

type Batch = { agent: TokenSample[]; designer: TokenSample[] };

export class ClosedLoop {
  private readonly window = new Map<number, CycleData>();
  private readonly progress: LoopProgress;
  private probed: boolean;

  /** `from`: the saved progress, and whether a probe was recorded already. */
  constructor(
    private readonly d: ClosedLoopDeps,
    from: LoopProgress & { probed: boolean },
  ) {
    this.progress = { updates: from.updates, trainedThrough: from.trainedThrough };
    this.probed = from.probed;
  }

  get trained(): Readonly<LoopProgress> {
    return this.progress;
  }

  /** The probe before the first update, once. */
  async probeBeforeTraining(): Promise<void> {
    if (!this.probed && this.progress.updates === 0) await this.probe('before training');
  }

  /** A cycle's records: kept for the window, then every cycle through it not trained yet is trained. */
  async afterCycle(c: { cycle: number; archive: ArchiveRecord[]; rollouts: RolloutRecord[] }): Promise<void> {
    this.window.set(c.cycle, { cycle: c.cycle, archive: c.archive, rollouts: c.rollouts });
    await this.trainThrough(c.cycle);
  }

  /** Train the cycles after the last one trained, through `last` (a restart catches up here). */
  async trainThrough(last: number): Promise<void> {
    if (last <= this.progress.trainedThrough) return;
    await this.probeBeforeTraining();
    for (let k = this.progress.trainedThrough + 1; k <= last; k++) await this.trainCycle(k);
  }

  /** The window of cycle k's training (k and k − designerLag), read from the store where not in memory. */
  private async windowOf(k: number): Promise<CycleData[]> {
    const out: CycleData[] = [];
    for (const at of new Set([k, k - this.d.cfg.designerLag])) {
      if (at < 0) continue;
      let d = this.window.get(at);
      if (!d) {
        d = { cycle: at, ...(await this.d.store.read(at)) };
        this.window.set(at, d);
      }
      out.push(d);
    }
    return out;
  }

  private async trainCycle(k: number): Promise<void> {
    const { cfg, store, signal } = this.d;
    const batch = cycleBatch(await this.windowOf(k), k, cfg.designerLag, cfg);
    const update = this.progress.updates + 1;
    const first = await this.round(batch, k, 0, update);
    const steps = [...first.steps];
    const tis = [first.tis];
    const own = this.window.get(k)!;
    for (let round = 1; round < cfg.envReuse; round++) {
      throwIfAborted(signal);
      store.phase?.({ phase: 'replay', cycle: k, round });
      const replayed = await replayUnhinted(this.d.runner, this.d.model, own.archive, cfg, round, signal, (p) =>
        store.plays?.(p),
      );
      // the replays join the designer's window of cycle k (its lagged reward reads them)
      own.reuse = [...(own.reuse ?? []), ...replayed];
      const more = cycleBatch([{ cycle: k, archive: [], rollouts: replayed }], k, 0).agent;
      const r = await this.round({ agent: more, designer: [] }, k, round, update);
      steps.push(...r.steps);
      tis.push(r.tis);
    }
    throwIfAborted(signal);
    if (steps.length) this.progress.updates = update;
    this.progress.trainedThrough = k;
    for (const at of this.window.keys()) if (at < k - cfg.designerLag) this.window.delete(at);
    await store.save(
      { ...this.progress },
      {
        cycle: k,
        agentSamples: batch.agent.length,
        designerSamples: batch.designer.length,
        steps,
        tis: steps.length ? mergeTisStats(tis) : null,
      },
    );
    if (steps.length && cfg.probeEvery > 0 && update % cfg.probeEvery === 0) await this.probe(`after update ${update}`);
  }

  /**
   * One training round: decode memory freed, π_old recomputed for every sample by the current
   * adapter (before the round's first step), then the round's steps with those log-probs, in an
   * order drawn from (seed, cycle, round) — so a resumed round repeats it.
   */
  private async round(
    batch: Batch,
    cycle: number,
    round: number,
    update: number,
  ): Promise<{ steps: UpdateStats[]; tis: TisStats | null }> {
    const { cfg, trainer, store, signal } = this.d;
    throwIfAborted(signal);
    store.phase?.({ phase: 'round', cycle, round, agent: batch.agent.length, designer: batch.designer.length });
    await trainer.releaseDecodeMemory();
    const { learner, tis } = await roundLearnerLogprobs([...batch.agent, ...batch.designer], cfg.tisCap, (ss) =>
      trainer.learnerLogprobs(ss.map((s) => trainerSample(s, cfg))),
    );
    const rng = createRng(hashSeed(round ? `${cfg.seed}:train:${cycle}:${round}` : `${cfg.seed}:train:${cycle}`));
    const step = async (mb: TokenSample[]) => {
      throwIfAborted(signal);
      return trainer.step(mb.map((s) => ({ ...trainerSample(s, cfg), learnerLogprobs: learner.get(s) })));
    };
    const steps = await trainRound({ step }, batch, cfg, rng, (s, done, total) =>
      store.step({ ...s, cycle, round, update }, done, total),
    );
    return { steps, tis };
  }

  private async probe(label: string): Promise<void> {
    this.d.store.phase?.({ phase: 'probe', label });
    const r = await evaluateProbe(this.d.runner, this.d.model, this.d.cfg, this.d.signal, (p) =>
      this.d.store.plays?.(p),
    );
    throwIfAborted(this.d.signal);
    this.probed = true;
    await this.d.store.probe({ updates: this.progress.updates, label, ...r });
  }
}
