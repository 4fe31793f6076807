/**
 * The micro lab's two roles on our engine (shared by `spade micro` and workers/lab.worker.ts, so a
 * browser run prints the CLI's numbers for the same settings): a tiny fresh model per role made on
 * the spot from the seed (toy_train.ts's toyModel, the `engine init` path) with its vocabulary
 * constraint, a LoRA adapter and the clipped-GRPO trainer behind the lab's PolicyTrainer interface.
 *
 * Two models rather than one shared (the paper shares): the roles' vocabularies differ (digits 0–4
 * for the agent, 0–3 for the designer), and at this size a shared adapter would let one role's
 * updates swamp the other's; two tiny models cost little.
 */
import type { EnvRunner } from '../../core/env/checker.ts';
import type { SeedRun } from '../../core/micro/compare.ts';
import { AGENT_DIGITS, hintText, levelCode, levelValues } from '../../core/micro/families.ts';
import {
  MicroLab,
  playMicroEpisode,
  type CycleReport,
  type DesignerKind,
  type MicroDeps,
  type MicroPolicy,
  type MicroSettings,
} from '../../core/micro/lab.ts';
import { mean } from '../../core/spade/estimators.ts';
import { hashSeed } from '../../core/rng.ts';
import type { PolicyTrainer } from '../../core/train/grpo_rounds.ts';
import { toyModel } from './toy_train.ts';
import { TINY_TRAIN_DEFAULTS, TinyChat, TinyLm, tinyTrainer } from './tiny_lm.ts';
import type { LlamaModel } from '../model/model.ts';
import type { CpuTensor } from '../ops/cpu_ops.ts';
import { LoraTrainer } from '../train/train.ts';

export interface MicroEngineOptions {
  /**
   * Agent learning rate (default 3e-3, from the learning-curve check: 1e-2 with 4–8 steps a cycle
   * collapsed the fresh agent onto one losing digit; 3e-3 masters each family's easiest level in
   * a few cycles, docs/micro.md).
   */
  agentLr?: number;
  /** Designer learning rate (default 5e-3: slow enough that a few lucky batches do not collapse it onto one level). */
  designerLr?: number;
  /**
   * Model size (default 2 layers, hidden 16: a third of the toy's 2 × 32 cost per token on the CPU
   * references, which the lab's hundreds of replies per cycle need) and init std (default 0.4: the
   * final RMSNorm fixes |h| = √C, so the logit gap LoRA can open is about std·C — 0.4 at C = 16
   * allows > 6 nats, i.e. P ≥ 0.95 on one digit of ten).
   */
  layers?: number;
  hidden?: number;
  std?: number;
  /** The temperature both roles sample at (default 1): the trainer's π must be the sampler's π. */
  temperature?: number;
  /**
   * Which implementation runs the models (default 'fast'): 'fast' — tiny_lm.ts, contiguous KV and
   * plain Float32Array loops, the same numbers bit for bit; 'reference' — LocalChatModel on the
   * engine's CPU references and LoraTrainer (what the Lab ran before; `spade bench lab` times both).
   */
  path?: ModelPath;
}

export const MODEL_PATHS = ['fast', 'reference'] as const;
export type ModelPath = (typeof MODEL_PATHS)[number];

export const AGENT_LR = 3e-3;
export const DESIGNER_LR = 5e-3;

/** A role on a fresh tiny model: its chat model (vocabulary `allowed`) and a PolicyTrainer over its adapter. */
export async function enginePolicy(
  allowed: string,
  seed: number,
  lr: number,
  o: MicroEngineOptions = {},
): Promise<MicroPolicy> {
  const m = await toyModel(allowed, { seed, layers: o.layers ?? 2, hidden: o.hidden ?? 16, std: o.std ?? 0.4 });
  if ((o.path ?? 'fast') === 'fast') {
    const lm = new TinyLm(m.llm as unknown as LlamaModel<CpuTensor>, m.weights);
    const ids = [...m.allowed].sort((a, b) => a - b);
    return {
      chat: new TinyChat('toy', lm, m.tokenizer, ids),
      trainer: tinyTrainer(lm, { lr, temperature: o.temperature ?? 1, allowed: ids, ...TINY_TRAIN_DEFAULTS }),
    };
  }
  const lora = new LoraTrainer(m.llm, {
    lr,
    temperature: o.temperature ?? 1,
    allowedTokens: m.allowed,
    minibatchTokens: Number.MAX_SAFE_INTEGER, // the lab's trainRound already cut the minibatches
  });
  const trainer: PolicyTrainer = {
    async step(mb) {
      const s = await lora.trainStep(
        mb.map((x) => ({ ids: x.ids, spans: x.spans, oldLogprobs: x.logprobs, advantage: x.advantage })),
      );
      return {
        loss: s.loss,
        clipFraction: s.clipFraction,
        approxKl: s.approxKl,
        ...(s.klToBase !== undefined ? { klToBase: s.klToBase } : {}),
        gradNorm: s.gradNorm,
        tokens: s.tokens,
        ms: s.ms,
      };
    },
  };
  return { chat: m.chat, trainer };
}

/** The lab's dependencies: the agent (and, for the regret designer, the designer) on fresh tiny models. */
export async function engineMicroDeps(
  seed: number,
  designer: DesignerKind,
  runner: EnvRunner,
  o: MicroEngineOptions = {},
): Promise<MicroDeps> {
  const agent = await enginePolicy(AGENT_DIGITS, hashSeed(`micro-agent:${seed}`), o.agentLr ?? AGENT_LR, o);
  const deps: MicroDeps = { runner, agent };
  if (designer === 'regret')
    deps.designer = await enginePolicy('0123', hashSeed(`micro-designer:${seed}`), o.designerLr ?? DESIGNER_LR, o);
  return deps;
}

/** Run one designer on one seed for `cycles` cycles (the lab built as `spade micro` builds it); onCycle sees each cycle. */
export async function runMicro(
  settings: Partial<MicroSettings> & { seed: number; designer: DesignerKind },
  cycles: number,
  runner: EnvRunner,
  o: MicroEngineOptions = {},
  onCycle: (r: CycleReport, lab: MicroLab) => void = () => undefined,
): Promise<{ run: SeedRun; lab: MicroLab }> {
  const t0 = performance.now();
  const temperature = settings.temperature ?? o.temperature ?? 1;
  const deps = await engineMicroDeps(settings.seed, settings.designer, runner, { ...o, temperature });
  const lab = new MicroLab({ ...settings, temperature }, deps);
  try {
    await lab.start();
    for (let c = 0; c < cycles; c++) onCycle(await lab.cycle(), lab);
  } finally {
    await lab.close();
  }
  const run: SeedRun = {
    seed: settings.seed,
    designer: settings.designer,
    curve: [lab.initialProbe!.mean, ...lab.history.map((h) => h.probe.mean)],
    medianRegret: lab.history.map((h) => h.medianRegret),
    distinctLevels: lab.history.map((h) => h.distinctLevels),
    seconds: (performance.now() - t0) / 1000,
  };
  return { run, lab };
}

/** A family's learning-curve check: the fixed designer on its easiest level, every play of every cycle on it. */
export interface LearningCheck {
  family: number;
  seed: number;
  /** Mean unhinted return on the level, per cycle. */
  curve: number[];
  /** The first cycle from which the mean return of two cycles in a row is ≥ MASTERY (null: not within the budget). */
  masteredAt: number | null;
  /**
   * After the last cycle, the trained agent itself on the level, CHECK_PLAYS plays without and as many
   * with the hint appended (the same seeds): a fresh tiny model cannot read the hint, and an agent
   * that mastered the level may be thrown by the unfamiliar text — the case for the oracle.
   */
  agentNoHint: number;
  agentWithHint: number;
  seconds: number;
}

/** The win rate that counts as mastering a level in the learning-curve check. */
export const MASTERY = 0.8;

/** Plays per arm of the check's closing hinted/unhinted comparison. */
export const CHECK_PLAYS = 16;

export async function learningCheck(
  family: number,
  seed: number,
  cycles: number,
  runner: EnvRunner,
  settings: Partial<MicroSettings> = {},
  o: MicroEngineOptions = {},
): Promise<LearningCheck> {
  const knobs = { L: 0, A: 0, D: 0 };
  const { run, lab } = await runMicro(
    {
      ...settings,
      seed,
      designer: 'fixed',
      families: [family],
      fixedKnobs: knobs,
      probeLevels: [{ family, ...knobs }],
    },
    cycles,
    runner,
    o,
  );
  const curve = lab.history.map((h) => h.meanReturn);
  const at = curve.findIndex((x, i) => i > 0 && mean([curve[i - 1]!, x]) >= MASTERY);
  const level = { family, ...knobs };
  const v = levelValues(level);
  const env = await runner.load(levelCode(level), v.maxTurns);
  const arms = { noHint: [] as number[], withHint: [] as number[] };
  try {
    for (let j = 0; j < CHECK_PLAYS; j++)
      for (const arm of ['noHint', 'withHint'] as const) {
        const envSeed = hashSeed(`${seed}:check-hint:${j}`);
        const hint =
          arm === 'withHint'
            ? (await runner.reset(env.id, envSeed), hintText(level, await runner.solution(env.id)))
            : null;
        const ep = await playMicroEpisode(runner, env.id, lab.deps.agent.chat, {
          seed: envSeed,
          hint,
          maxTurns: v.maxTurns,
          temperature: lab.settings.temperature,
          sampleSeed: hashSeed(`${seed}:check-hint:${j}:play`),
        });
        arms[arm].push(ep.return);
      }
  } finally {
    await runner.dispose(env.id);
  }
  return {
    family,
    seed,
    curve,
    masteredAt: at < 0 ? null : at + 1,
    agentNoHint: mean(arms.noHint),
    agentWithHint: mean(arms.withHint),
    seconds: run.seconds,
  };
}
