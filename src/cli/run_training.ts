/**
 * `spade run --train`: closed-loop self-play on our engine. After every cycle the policy (a LoRA
 * adapter on the local checkpoint, shared by both roles as in the paper) is trained by the closed
 * loop of `core/train/closed_loop.ts` — the clipped-GRPO rounds of `core/train/grpo_rounds.ts` on the
 * exact token ids it sampled — with the run directory as its store, under `train/`:
 *
 *   adapter_config.json, adapter_model.safetensors   the adapter (PEFT format)
 *   optimizer.safetensors                            AdamW's moments and step
 *   state.json                                       updates done, the last cycle trained
 *   updates.jsonl                                    one line per optimiser step (cycle, round, update, loss, clip
 *                                                    fraction, KL, grad norm, tokens/s, and the TIS figures
 *                                                    tisMean, tisMax, tisTruncated of its tokens)
 *   probe.jsonl                                      the probe set's return before training and every probeEvery updates
 *
 * A cycle's step lines are appended with its save, so a round that was stopped leaves none. The
 * training order of a cycle derives from (seed, cycle), so `--resume` — which reloads the adapter
 * and the optimiser — continues with the same losses as a run that never stopped.
 *
 * train/ is read and written as the rest of a run directory (which may come from anyone): it must
 * be a real folder and none of its files a link (LinkedFileError, before any training); files are
 * read as regular files within a bound (regular_file.ts), state.json through its shape, and written
 * without following a link (safe_write.ts).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../core/config.ts';
import { LORA_DEFAULTS } from '../core/defaults.ts';
import { StorageError, UsageError } from '../core/errors.ts';
import type { ChatModel } from '../core/llm/chat_model.ts';
import type { CheckingRunner } from '../core/spade/phases.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from '../core/spade/run_store.ts';
import { ClosedLoop, type LoopProgress, type RoundSummary, type TrainStore } from '../core/train/closed_loop.ts';
import { closedLoopProblems, trainerOptions } from '../core/train/grpo_rounds.ts';
import { EngineChatModel, type EngineApi, type LoraModule } from '../engine/engine_api.ts';
import { MAX_TEXT_BYTES, readRegularBytes, readRegularText } from '../platform/node/regular_file.ts';
import { appendToFile, checkWritable, openForWrite, runSubdir, writeFileAtomic } from '../platform/node/safe_write.ts';
import type { Io } from './args.ts';
import { startProgress, type Progress } from './progress.ts';

type CycleRecords = { archive: ArchiveRecord[]; rollouts: RolloutRecord[] };

export interface RunTraining {
  afterCycle(c: CycleRecords & { cycle: number; metrics: MetricsRecord }): Promise<void>;
  /** Stop the progress counter of the phase under way (Ctrl-C): its bar's line is ended, nothing more printed. */
  interrupt(): void;
  /** Probe before the first update (once per run directory). */
  probeAtStart(): Promise<void>;
  /** Cycles written but not trained (a crash between the two): train them now, in order. */
  catchUp(cycles: number, read: (c: number) => Promise<CycleRecords>): Promise<void>;
}

/** train/'s files: each is checked before training starts (none may be a link). */
const TRAIN_FILES = [
  'adapter_config.json',
  'adapter_model.safetensors',
  'optimizer.safetensors',
  'state.json',
  'updates.jsonl',
  'probe.jsonl',
] as const;
/** The most bytes of a JSON file of train/ read (they are a few hundred bytes). */
const MAX_TRAIN_JSON_BYTES = 2 ** 20;
const ADVICE = "Check that it is the run's own file, or move train/ aside to start the training over.";

const writeAtomic = (path: string, data: string | Uint8Array) => writeFileAtomic(path, data, `${path}.tmp`);

/** train/state.json's progress, read through its shape; a StorageError naming the file otherwise. */
async function readProgress(path: string): Promise<LoopProgress | null> {
  const text = await readRegularText(path, MAX_TRAIN_JSON_BYTES, ADVICE);
  if (text === null) return null;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    data = undefined;
  }
  const p = data as Partial<LoopProgress> | undefined;
  const whole = (v: unknown, min: number) => Number.isSafeInteger(v) && (v as number) >= min;
  if (typeof p !== 'object' || p === null || Array.isArray(p) || !whole(p.updates, 0) || !whole(p.trainedThrough, -1))
    throw new StorageError(
      `${path} is not what a run writes ({"updates": a whole number from 0, "trainedThrough": a whole number from -1}). ${ADVICE}`,
      { path },
    );
  return { updates: p.updates!, trainedThrough: p.trainedThrough! };
}

/** The round's line on stderr: samples, steps, the agent's last loss and the TIS figures. */
function roundLine(r: RoundSummary, tisCap: number): string {
  const agent = r.steps.filter((s) => s.role === 'agent');
  return (
    `trained after cycle ${r.cycle + 1}: ${r.agentSamples} agent and ${r.designerSamples} designer samples, ${r.steps.length} steps` +
    (agent.length ? `, agent loss ${agent[agent.length - 1]!.loss.toFixed(4)}` : '') +
    (r.tis
      ? `, TIS ratio mean ${r.tis.tisMean.toFixed(3)} max ${r.tis.tisMax.toFixed(3)}, ${(100 * r.tis.tisTruncated).toFixed(1)}% truncated at ${tisCap}`
      : '') +
    (r.steps.length === 0 ? ' (no training signal: every play of each environment scored the same)' : '')
  );
}

/**
 * The adapter and optimiser the run trains, put in the engine: the run's own (resume), else the
 * --adapter one already loaded, else a fresh one.
 */
async function openTrainer(engine: EngineApi, cfg: Config, file: (f: string) => string): Promise<void> {
  const config = await readRegularText(file('adapter_config.json'), MAX_TRAIN_JSON_BYTES, ADVICE);
  if (config !== null) {
    const weights = await readRegularBytes(file('adapter_model.safetensors'), MAX_TEXT_BYTES, ADVICE);
    if (weights === null)
      throw new StorageError(
        `${file('adapter_config.json')} has no adapter_model.safetensors beside it (a copy cut short?). ${ADVICE}`,
        { path: file('adapter_model.safetensors') },
      );
    await engine.importAdapter(config, weights);
  } else if (!(await engine.summary())?.adapter)
    await engine.initLora(LORA_DEFAULTS.r, LORA_DEFAULTS.alpha, [...LORA_DEFAULTS.targets] as LoraModule[], cfg.seed);
  const optimizer = await readRegularBytes(file('optimizer.safetensors'), MAX_TEXT_BYTES, ADVICE);
  if (optimizer !== null) await engine.importState(optimizer, trainOptions(cfg));
}

/** What every training call of the run passes the engine: the schedule's options and the TIS cap. */
const trainOptions = (cfg: Config) => ({ ...trainerOptions(cfg), tisCap: cfg.tisCap });

/**
 * The run directory's train/ files as the closed loop's store; `read` is the run's cycle records.
 * Reports on stderr: a line as each phase starts, then a progress counter of its plays (probe,
 * replays: one line per play off a terminal, a bar on one) or its optimiser steps, so a long probe
 * or round is never silence.
 */
function fileStore(o: {
  engine: EngineApi;
  cfg: Config;
  io: Io;
  file: (f: string) => string;
  read: (c: number) => Promise<CycleRecords>;
}): TrainStore & { interrupt(): void } {
  const { file, io } = o;
  let lines: string[] = [];
  /** The counter of the phase under way, made at its first item (when its total is known). */
  let counter: Progress | null = null;
  let label = '';
  const next = (l: string) => {
    counter?.finish();
    counter = null;
    label = l;
  };
  return {
    read: (c) => o.read(c),
    phase(p) {
      if (p.phase === 'probe') {
        next(`probe (${p.label})`);
        io.err(`probe (${p.label}): the agent plays the probe environments at temperature 0…`);
      } else if (p.phase === 'round') {
        next(`training on cycle ${p.cycle + 1}, round ${p.round + 1}`);
        io.err(
          `training on cycle ${p.cycle + 1}, round ${p.round + 1}: ${p.agent} agent and ${p.designer} designer samples…`,
        );
      } else {
        next(`replays of cycle ${p.cycle + 1} for round ${p.round + 1}`);
        io.err(`training: the agent replays cycle ${p.cycle + 1}'s environments for round ${p.round + 1}…`);
      }
    },
    plays(p) {
      counter ??= startProgress(io, { label, unit: 'plays', total: p.total, every: 1 });
      const note = `${p.title}, seed ${p.seed}${p.turn === null ? '' : `, turn ${p.turn}`}`;
      if (p.turn === null) counter.tick(p.done - counter.done, note);
      else counter.note(note);
    },
    step(s, done, total) {
      lines.push(JSON.stringify({ ...s, tokensPerSecond: s.ms > 0 ? (s.tokens / s.ms) * 1000 : 0 }));
      counter ??= startProgress(io, { label, unit: 'optimiser steps', total });
      counter.tick(done - counter.done, `${s.role} loss ${s.loss.toFixed(4)}`);
    },
    interrupt() {
      counter?.interrupt();
      counter = null;
    },
    async save(progress: LoopProgress, summary) {
      if ((await o.engine.summary())?.adapter) {
        const peft = await o.engine.exportAdapter();
        await writeAtomic(file('adapter_model.safetensors'), peft.weights);
        await writeAtomic(file('adapter_config.json'), peft.configJson);
      }
      const optimizer = await o.engine.exportState();
      if (optimizer) await writeAtomic(file('optimizer.safetensors'), optimizer);
      if (lines.length) await appendToFile(file('updates.jsonl'), lines.map((l) => `${l}\n`).join(''));
      lines = [];
      await writeAtomic(file('state.json'), JSON.stringify(progress));
      next('');
      io.err(roundLine(summary, o.cfg.tisCap));
    },
    async probe(r) {
      await appendToFile(file('probe.jsonl'), `${JSON.stringify(r)}\n`);
      const result = `mean return ${r.meanReturn.toFixed(3)}, win rate ${r.winRate.toFixed(2)}`;
      if (counter) counter.finish(result);
      else io.err(`probe (${r.label}): ${result}`);
      counter = null;
    },
  };
}

export async function attachTraining(o: {
  model: ChatModel;
  cfg: Config;
  out: string;
  runner: CheckingRunner;
  io: Io;
  signal?: AbortSignal;
}): Promise<RunTraining> {
  const { cfg } = o;
  const problems = closedLoopProblems({ designer: o.model, hint: o.model, agent: o.model });
  if (problems.length || !(o.model instanceof EngineChatModel))
    throw new UsageError(
      `--train needs --backend local (our engine samples and trains the same adapter). ${problems.join(' ')}`.trim(),
    );
  // the engine the model samples from is the one trained, through the calls the Training panel makes
  const engine = o.model.engine;
  // a real folder of the run, and none of its files a link (nor a FIFO where a line is appended)
  const dir = await runSubdir(o.out, 'train');
  const file = (f: string) => join(dir, f);
  for (const f of TRAIN_FILES) await checkWritable(file(f));
  for (const f of ['updates.jsonl', 'probe.jsonl']) await (await openForWrite(file(f)))?.close();
  const progress: LoopProgress = (await readProgress(file('state.json'))) ?? { updates: 0, trainedThrough: -1 };
  await openTrainer(engine, cfg, file);
  const opts = trainOptions(cfg);
  // the run's records, for cycles the loop has not seen in this process (catchUp gives them)
  let read = (c: number): Promise<CycleRecords> =>
    Promise.reject(
      new StorageError(
        `Training needs cycle ${c + 1} of ${o.out}, which it was not given: call catchUp before afterCycle.`,
      ),
    );
  const store = fileStore({ engine, cfg, io: o.io, file, read: (c) => read(c) });
  const loop = new ClosedLoop(
    {
      cfg,
      trainer: {
        releaseDecodeMemory: () => engine.releaseDecodeMemory(),
        learnerLogprobs: (ss) => engine.learnerLogprobs(ss, opts),
        step: (mb) => engine.trainGrpo(mb, opts),
      },
      store,
      runner: o.runner,
      model: o.model,
      signal: o.signal,
    },
    { ...progress, probed: existsSync(file('probe.jsonl')) },
  );
  return {
    probeAtStart: () => loop.probeBeforeTraining(),
    async catchUp(cycles, records) {
      read = records;
      await loop.trainThrough(cycles - 1);
    },
    afterCycle: (c) => loop.afterCycle(c),
    interrupt: () => store.interrupt(),
  };
}
