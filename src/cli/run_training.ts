/**
 * `spade run --train`: closed-loop self-play on our engine. After every cycle the policy (a LoRA
 * adapter on the local checkpoint, shared by both roles as in the paper) takes the clipped-GRPO
 * updates of `core/train/schedule.ts` on the exact token ids it sampled; then the run directory
 * gets, under `train/`:
 *
 *   adapter_config.json, adapter_model.safetensors   the adapter (PEFT format)
 *   optimizer.safetensors                            AdamW's moments and step
 *   state.json                                       updates done, the last cycle trained
 *   updates.jsonl                                    one line per optimiser step (loss, clip fraction, KL, grad norm, tokens/s,
 *                                                    and the TIS figures tisMean, tisMax, tisTruncated of its tokens)
 *   probe.jsonl                                      the probe set's return before training and every probeEvery updates
 *
 * Each training round first recomputes π_old with the current adapter (one no-grad forward over the
 * round's samples, before its first step); the ratio is taken against it and truncated importance
 * sampling weighs each token by min(π_old / π_sampler, tisCap) (docs/training.md).
 *
 * The training order of a cycle derives from (seed, cycle), so `--resume` — which reloads the
 * adapter and the optimiser — continues with the same losses as a run that never stopped.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { appendFile, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../core/config.ts';
import { UsageError } from '../core/errors.ts';
import type { ChatModel } from '../core/llm/chat_model.ts';
import { createRng, hashSeed, type Rng } from '../core/rng.ts';
import type { CheckingRunner } from '../core/spade/phases.ts';
import { evaluateProbe, type ProbeResult } from '../core/spade/probe.ts';
import { replayUnhinted } from '../core/spade/reuse.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from '../core/spade/run_store.ts';
import { mergeTisStats, roundLearnerLogprobs, type TisStats, type TokenSample } from '../core/train/grpo.ts';
import {
  closedLoopProblems,
  cycleBatch,
  trainerOptions,
  trainerSample,
  trainRound,
  type UpdateStats,
} from '../core/train/schedule.ts';
import { exportPeft, importPeft, type LoraModule } from '../engine/io/peft.ts';
import { LocalChatModel, releaseDecodeMemory } from '../engine/model/local_model.ts';
import { decodeTrainerState, encodeTrainerState, LoraTrainer } from '../engine/train/train.ts';
import type { Io } from './args.ts';

/** A fresh adapter's shape when none is given: rank 8 on the attention's q and v, as PEFT's defaults do. */
export const DEFAULT_LORA = { r: 8, alpha: 16, targets: ['q_proj', 'v_proj'] as LoraModule[] };

interface TrainMeta {
  /** Training rounds that took at least one optimiser step. */
  updates: number;
  /** The last cycle whose samples were trained on (−1: none). */
  trainedThrough: number;
}

export interface RunTraining {
  afterCycle(c: {
    cycle: number;
    archive: ArchiveRecord[];
    rollouts: RolloutRecord[];
    metrics: MetricsRecord;
  }): Promise<void>;
  /** Probe before the first update (once per run directory). */
  probeAtStart(): Promise<void>;
  /** Cycles written but not trained (a crash between the two): train them now, in order. */
  catchUp(
    cycles: number,
    read: (c: number) => Promise<{ archive: ArchiveRecord[]; rollouts: RolloutRecord[] }>,
  ): Promise<void>;
}

async function writeAtomic(path: string, data: string | Uint8Array): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}

export async function attachTraining(o: {
  model: ChatModel;
  cfg: Config;
  out: string;
  runner: CheckingRunner;
  io: Io;
  signal?: AbortSignal;
}): Promise<RunTraining> {
  const { cfg, io } = o;
  const problems = closedLoopProblems({ designer: o.model, hint: o.model, agent: o.model });
  if (problems.length || !(o.model instanceof LocalChatModel))
    throw new UsageError(
      `--train needs --backend local (our engine samples and trains the same adapter). ${problems.join(' ')}`.trim(),
    );
  const local = o.model as LocalChatModel<unknown>;
  const llm = local.llm;
  const dir = join(o.out, 'train');
  mkdirSync(dir, { recursive: true });
  const file = (f: string) => join(dir, f);

  // the adapter: the run's own (resume), else the one given with --adapter, else a fresh one
  if (existsSync(file('adapter_config.json'))) {
    llm.setLora(
      importPeft(
        await readFile(file('adapter_config.json'), 'utf8'),
        await readFile(file('adapter_model.safetensors')),
        llm.cfg,
      ),
    );
  } else if (!llm.lora) llm.initLora(DEFAULT_LORA.r, DEFAULT_LORA.alpha, DEFAULT_LORA.targets, cfg.seed);
  const trainer = new LoraTrainer(llm, { ...trainerOptions(cfg), tisCap: cfg.tisCap });
  if (existsSync(file('optimizer.safetensors')))
    trainer.importState(decodeTrainerState(await readFile(file('optimizer.safetensors'))));
  const meta: TrainMeta = existsSync(file('state.json'))
    ? (JSON.parse(await readFile(file('state.json'), 'utf8')) as TrainMeta)
    : { updates: 0, trainedThrough: -1 };
  const history = new Map<number, { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; reuse: RolloutRecord[] }>();

  const probe = async (label: string): Promise<ProbeResult> => {
    const r = await evaluateProbe(o.runner, local, cfg, o.signal);
    await appendFile(file('probe.jsonl'), `${JSON.stringify({ updates: meta.updates, label, ...r })}\n`);
    io.err(`probe (${label}): mean return ${r.meanReturn.toFixed(3)}, win rate ${r.winRate.toFixed(2)}`);
    return r;
  };

  const save = async () => {
    const adapter = await llm.getLora();
    if (adapter) {
      const peft = exportPeft(adapter, { baseModel: local.model });
      await writeAtomic(file('adapter_model.safetensors'), peft.weights);
      await writeAtomic(file('adapter_config.json'), peft.adapterConfigJson);
    }
    await writeAtomic(file('optimizer.safetensors'), encodeTrainerState(await trainer.exportState()));
    await writeAtomic(file('state.json'), JSON.stringify(meta));
  };

  /** Step lines are written in order, one after another; a failed write surfaces at the end of the round. */
  let logged: Promise<void> = Promise.resolve();
  const logStep = (line: object) => {
    logged = logged.then(() => appendFile(file('updates.jsonl'), `${JSON.stringify(line)}\n`));
  };
  const perSecond = (s: UpdateStats) => (s.ms > 0 ? (s.tokens / s.ms) * 1000 : 0);

  /**
   * One training round: π_old recomputed by the current adapter for every sample (before the
   * round's first step), then the round's steps on the samples with those log-probs. Returns the
   * steps and the round's TIS figures (null: TIS off or nothing to train).
   */
  const roundOf = async (
    batch: { agent: TokenSample[]; designer: TokenSample[] },
    rng: Rng,
    line: object,
  ): Promise<{ steps: UpdateStats[]; tis: TisStats | null }> => {
    const { learner, tis } = await roundLearnerLogprobs([...batch.agent, ...batch.designer], cfg.tisCap, (ss) =>
      trainer.learnerLogprobs(ss.map((s) => trainerSample(s, cfg))),
    );
    const steps = await trainRound(
      {
        step: (mb) => trainer.trainStep(mb.map((s) => ({ ...trainerSample(s, cfg), learnerLogprobs: learner.get(s) }))),
      },
      batch,
      cfg,
      rng,
      (s) => logStep({ ...line, update: meta.updates, ...s, tokensPerSecond: perSecond(s) }),
    );
    return { steps, tis };
  };

  const trainCycle = async (cycle: number) => {
    const batch = cycleBatch(
      [...history].map(([c, d]) => ({ cycle: c, ...d })),
      cycle,
      cfg.designerLag,
      cfg,
    );
    releaseDecodeMemory(llm); // the KV cache is stale after the step, and the step needs the memory
    const first = await roundOf(batch, createRng(hashSeed(`${cfg.seed}:train:${cycle}`)), { cycle });
    const steps = first.steps;
    const tisRounds = [first.tis];
    // envReuse: the same environments, replayed unhinted by the updated agent, for more agent updates
    const cycleArchive = history.get(cycle)?.archive ?? [];
    for (let round = 1; round < cfg.envReuse; round++) {
      const replayed = await replayUnhinted(o.runner, local, cycleArchive, cfg, round, o.signal);
      // the replays join the designer's window of this cycle (its lagged reward reads them)
      history.get(cycle)?.reuse.push(...replayed);
      const more = cycleBatch([{ cycle, archive: [], rollouts: replayed }], cycle, 0).agent;
      const rng = createRng(hashSeed(`${cfg.seed}:train:${cycle}:${round}`));
      const r = await roundOf({ agent: more, designer: [] }, rng, { cycle, round });
      steps.push(...r.steps);
      tisRounds.push(r.tis);
    }
    await logged;
    const tis = steps.length ? mergeTisStats(tisRounds) : null;
    if (steps.length) meta.updates++;
    meta.trainedThrough = cycle;
    await save();
    const agent = steps.filter((s) => s.role === 'agent');
    io.err(
      `trained after cycle ${cycle + 1}: ${batch.agent.length} agent and ${batch.designer.length} designer samples, ${steps.length} steps` +
        (agent.length ? `, agent loss ${agent[agent.length - 1]!.loss.toFixed(4)}` : '') +
        (tis
          ? `, TIS ratio mean ${tis.tisMean.toFixed(3)} max ${tis.tisMax.toFixed(3)}, ${(100 * tis.tisTruncated).toFixed(1)}% truncated at ${cfg.tisCap}`
          : '') +
        (steps.length === 0 ? ' (no training signal: every play of each environment scored the same)' : ''),
    );
    for (const c of history.keys()) if (c < cycle - cfg.designerLag) history.delete(c);
    if (steps.length && cfg.probeEvery > 0 && meta.updates % cfg.probeEvery === 0)
      await probe(`after update ${meta.updates}`);
  };

  return {
    async probeAtStart() {
      if (meta.updates === 0 && !existsSync(file('probe.jsonl'))) await probe('before training');
    },
    async catchUp(cycles, read) {
      for (let c = Math.max(0, meta.trainedThrough + 1 - cfg.designerLag); c < cycles; c++)
        history.set(c, { ...(await read(c)), reuse: [] });
      for (let c = meta.trainedThrough + 1; c < cycles; c++) await trainCycle(c);
    },
    async afterCycle(c) {
      history.set(c.cycle, { archive: c.archive, rollouts: c.rollouts, reuse: [] });
      if (c.cycle > meta.trainedThrough) await trainCycle(c.cycle);
    },
  };
}
