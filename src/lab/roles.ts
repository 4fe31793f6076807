/**
 * The Lab's two roles on our engine (shared by `spade lab` and workers/lab.worker.ts, so a
 * browser run prints the CLI's numbers for the same settings): a tiny fresh model per role made on
 * the spot from the seed (the engine's createTinyPolicy, through its front door: the `engine init`
 * path) with its vocabulary constraint, a LoRA adapter and the clipped-GRPO trainer behind the lab's
 * PolicyTrainer interface; and the runs built on them (runLabSeed, screenLabSeed, learningCheck).
 *
 * Two models rather than one shared (the paper shares): the roles' vocabularies differ (digits 0–4
 * for the agent, 0–3 for the designer), and at this size a shared adapter would let one role's
 * updates swamp the other's; two tiny models cost little.
 */
import type { EnvRunner } from '../core/env/checker.ts';
import type { SeedRun } from '../core/lab/compare.ts';
import { AGENT_DIGITS, hintText, levelCode, levelValues } from '../core/lab/families.ts';
import {
  designerNamed,
  DESIGNER_STEPS,
  LAB_LOOP_DEFAULTS,
  LabLoop,
  MODEL_DESIGNERS,
  playLabEpisode,
  screenSeed,
  type CycleReport,
  type DesignerKind,
  type LabLoopDeps,
  type LabPolicy,
  type LabLoopSettings,
  type ScreenResult,
} from '../core/lab/lab.ts';
import { SPACE, type SpaceName } from '../core/lab/spaces.ts';
import { mean } from '../core/spade/estimators.ts';
import { hashSeed } from '../core/rng.ts';
import { ConfigError } from '../core/errors.ts';
import { createTinyPolicy, type ModelPath } from '../engine/engine_api.ts';

export interface LabEngineOptions {
  /**
   * Agent learning rate (default 3e-3, from the learning-curve check: 1e-2 with 4–8 steps a cycle
   * collapsed the fresh agent onto one losing digit; 3e-3 masters each family's easiest level in
   * a few cycles, docs/lab.md).
   */
  agentLr?: number;
  /**
   * AdamW's decoupled weight decay on both roles' adapters (default: the space's agentModel's for
   * the agent, else 0): each step scales the adapter by 1 − lr·wd, a pull toward the base model.
   */
  weightDecay?: number;
  /**
   * β of the k3 KL to the base model (the adapter off) in both roles' GRPO loss (default: the
   * space's agentModel's for the agent, else 0).
   */
  klCoef?: number;
  /**
   * The agent's spike guard: skip an agent step whose gradient norm is over this many times the
   * median of its last 64 steps' (the engine's SpikeGuard; default 0: off). The designer has none.
   */
  skipSpikes?: number;
  /**
   * The agent's learning rate at the last planned cycle, as a fraction of its first (default 1:
   * constant): runLabSeed sets cycle c's to lr·(1 − (1 − f)·(c − 1)/(cycles − 1)), a linear fall.
   */
  agentLrEnd?: number;
  /** Designer learning rate (default 5e-3: slow enough that a few lucky batches do not collapse it onto one level). */
  designerLr?: number;
  /**
   * Model size (default 2 layers, hidden 16: a third of the toy's 2 × 32 cost per token, which the
   * Lab's hundreds of replies per cycle need) and init std (default 0.2: the fresh policy starts
   * near uniform — at 0.4 it started so peaked that 9 of seeds 1–30 never won the easiest chain level
   * in 64 plays, at 0.2 one did (docs/lab.md) — while the logit gap the adapter can open, about
   * std·|h|·√(2C) = 0.2·4·√32 ≈ 4.5 nats, still allows P ≥ 0.95 on one digit of five).
   */
  layers?: number;
  hidden?: number;
  std?: number;
  /** The LoRA adapter's rank (default 8; its scale stays 2). */
  rank?: number;
  /** The temperature both roles sample at (default 1): the trainer's π must be the sampler's π. */
  temperature?: number;
  /**
   * Which implementation runs the models (default 'fast'): 'fast' — tiny_lm.ts, contiguous KV and
   * plain Float32Array loops, the same numbers bit for bit; 'reference' — LocalChatModel on the
   * engine's CPU references and LoraTrainer (what the Lab ran before; `spade bench lab` times both).
   */
  path?: ModelPath;
}

const AGENT_LR = 3e-3;
/** The init std of both roles' fresh models (LabEngineOptions.std). */
const MODEL_STD = 0.2;
const DESIGNER_LR = 5e-3;

/** A role on a fresh tiny model (the engine's createTinyPolicy): its vocabulary `allowed`, the Lab's sizes and temperature. */
function enginePolicy(allowed: string, seed: number, lr: number, o: LabEngineOptions = {}): Promise<LabPolicy> {
  return createTinyPolicy({
    allowed,
    seed,
    lr,
    weightDecay: o.weightDecay ?? 0,
    klCoef: o.klCoef ?? 0,
    skipSpikes: o.skipSpikes ?? 0,
    temperature: o.temperature ?? 1,
    layers: o.layers ?? 2,
    hidden: o.hidden ?? 16,
    std: o.std ?? MODEL_STD,
    ...(o.rank ? { rank: o.rank } : {}),
    path: o.path ?? 'fast',
  });
}

/** The Lab's dependencies: the agent (and, for the learned designer, the designer) on fresh tiny models. */
export async function engineLabDeps(
  seed: number,
  designer: DesignerKind,
  runner: EnvRunner,
  o: LabEngineOptions & { space?: SpaceName; designerSteps?: boolean } = {},
): Promise<LabLoopDeps> {
  const s = o.skipSpikes ?? 0;
  if (!(s === 0 || (s >= 1 && s <= 1000)))
    throw new ConfigError(`skipSpikes must be 0 (off) or from 1 to 1000, got ${s}`, { key: 'skipSpikes' });
  const end = o.agentLrEnd ?? 1;
  if (!(end >= 0.01 && end <= 1))
    throw new ConfigError(`agentLrEnd must be from 0.01 to 1, got ${end}`, { key: 'agentLrEnd' });
  const agent = await freshAgent(seed, o);
  const deps: LabLoopDeps = { runner, agent };
  if (MODEL_DESIGNERS.includes(designerNamed(designer) ?? designer)) {
    // a step-writing designer (designerSteps) writes only the steps; else the space's rungs
    const digits = o.designerSteps ? DESIGNER_STEPS : SPACE[o.space ?? LAB_LOOP_DEFAULTS.space].designerDigits;
    deps.designer = await enginePolicy(digits, hashSeed(`micro-designer:${seed}`), o.designerLr ?? DESIGNER_LR, {
      ...o,
      skipSpikes: 0,
    });
  }
  return deps;
}

/**
 * The fresh agent of a seed (the same for every arm: its model depends only on the seed); its
 * learning rate, width, init std and weight decay the run's, else the space's (the climb's 1e-3,
 * hidden 32, std 0.14, weight decay 0.1), else AGENT_LR, the Lab's 16 and MODEL_STD, and none.
 */
async function freshAgent(seed: number, o: LabEngineOptions & { space?: SpaceName } = {}): Promise<LabPolicy> {
  const space = SPACE[o.space ?? LAB_LOOP_DEFAULTS.space];
  const lr = o.agentLr ?? space.agentLr ?? AGENT_LR;
  return enginePolicy(AGENT_DIGITS, hashSeed(`micro-agent:${seed}`), lr, {
    ...o,
    hidden: o.hidden ?? space.agentModel?.hidden ?? 16,
    std: o.std ?? space.agentModel?.std ?? MODEL_STD,
    ...((o.rank ?? space.agentModel?.rank) ? { rank: o.rank ?? space.agentModel?.rank } : {}),
    weightDecay: o.weightDecay ?? space.agentModel?.weightDecay ?? 0,
    klCoef: o.klCoef ?? space.agentModel?.klCoef ?? 0,
    skipSpikes: o.skipSpikes ?? 0,
  });
}

/** The dead-seed screen of a seed (lab.ts screenSeed) on its fresh agent. */
export async function screenLabSeed(
  seed: number,
  space: SpaceName,
  runner: EnvRunner,
  o: LabEngineOptions = {},
): Promise<ScreenResult> {
  const agent = await freshAgent(seed, { ...o, space });
  return screenSeed(seed, SPACE[space], runner, agent.chat, o.temperature ?? LAB_LOOP_DEFAULTS.temperature);
}

/** The agent's learning-rate factor in cycle c of `cycles` (LabEngineOptions.agentLrEnd): 1 at the first, `end` at the last. */
export function agentLrFactor(c: number, cycles: number, end: number): number {
  return cycles > 1 ? 1 - ((1 - end) * (c - 1)) / (cycles - 1) : 1;
}

/** Run one designer on one seed for `cycles` cycles (the lab built as `spade lab` builds it); onCycle sees each cycle. */
export async function runLabSeed(
  settings: Partial<LabLoopSettings> & { seed: number; designer: DesignerKind },
  cycles: number,
  runner: EnvRunner,
  o: LabEngineOptions = {},
  onCycle: (r: CycleReport, lab: LabLoop) => void = () => undefined,
  arm: string = settings.designer,
): Promise<{ run: SeedRun; lab: LabLoop }> {
  const t0 = performance.now();
  const temperature = settings.temperature ?? o.temperature ?? LAB_LOOP_DEFAULTS.temperature;
  const space = settings.space ?? LAB_LOOP_DEFAULTS.space;
  const deps = await engineLabDeps(settings.seed, settings.designer, runner, {
    ...o,
    temperature,
    space,
    designerSteps: settings.designerSteps ?? false,
  });
  const lab = new LabLoop({ ...settings, temperature, plannedCycles: cycles }, deps);
  try {
    await lab.start();
    const end = o.agentLrEnd ?? 1;
    for (let c = 1; c <= cycles; c++) {
      if (end !== 1) deps.agent.trainer!.scaleLr!(agentLrFactor(c, cycles, end));
      onCycle(await lab.cycle(), lab);
    }
  } finally {
    await lab.close();
  }
  return { run: seedRun(lab, arm, (performance.now() - t0) / 1000), lab };
}

/** A finished lab as the comparison reads it. */
function seedRun(lab: LabLoop, arm: string, seconds: number): SeedRun {
  const h = lab.history;
  return {
    seed: lab.settings.seed,
    designer: arm,
    curve: [lab.initialProbe!.mean, ...h.map((c) => c.probe?.mean ?? null)],
    hardCurve: [lab.initialProbe!.hardHalf, ...h.map((c) => c.probe?.hardHalf ?? null)],
    stages: [lab.initialProbe!.byStage, ...h.map((c) => c.probe?.byStage ?? null)],
    level: h.map((c) => c.meanDifficulty),
    medianRegret: h.map((c) => c.medianRegret),
    distinctLevels: h.map((c) => c.distinctLevels),
    steps: { agent: h.reduce((a, c) => a + c.steps.agent, 0), designer: h.reduce((a, c) => a + c.steps.designer, 0) },
    ...skipped(h),
    stepsCurve: h.reduce((acc, c) => [...acc, acc.at(-1)! + c.steps.agent], [0]),
    plays: h.reduce((a, c) => a + c.designs.reduce((b, d) => b + d.noHint.length, 0), 0),
    topRung: [lab.initialProbe!.topRung, ...h.map((c) => c.probe?.topRung ?? null)],
    seconds,
  };
}

/** The agent's steps its spike guard skipped over a run, as SeedRun carries them (only when some were). */
function skipped(h: readonly CycleReport[]): { skippedSteps?: number } {
  const n = h.reduce((a, c) => a + c.updates.filter((u) => u.role === 'agent' && u.skipped).length, 0);
  return n ? { skippedSteps: n } : {};
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
const MASTERY = 0.8;

/** Plays per arm of the check's closing hinted/unhinted comparison. */
export const CHECK_PLAYS = 16;

export async function learningCheck(
  family: number,
  seed: number,
  cycles: number,
  runner: EnvRunner,
  settings: Partial<LabLoopSettings> = {},
  o: LabEngineOptions = {},
): Promise<LearningCheck> {
  const knobs = { L: 0, A: 0, D: 0 };
  const { run, lab } = await runLabSeed(
    {
      ...settings,
      seed,
      designer: 'fixed',
      families: [family],
      fixedLevel: knobs,
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
        const ep = await playLabEpisode(runner, env.id, lab.deps.agent.chat, {
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
