/**
 * `spade micro [--cycles N] [--seed S] [--designer regret|random|fixed] [--levels K] [--plays N]
 *              [--probe-plays P] [--json]` — the micro self-play lab (src/core/micro/lab.ts) on our
 * engine's CPU references: two tiny fresh models made on the spot from the seed (the `engine init`
 * path, via engine/toy_train.ts's toyModel), one per role, each with its own LoRA adapter and GRPO
 * trainer. One line per cycle; with --json the last line is one JSON object with probeReturnFirst,
 * probeReturnLast, difficultyFirst, difficultyLast (mean designed difficulty, 0–1), cycles, seconds.
 *
 * Two models rather than one shared (the paper shares): the roles' vocabularies differ (digits 0–9
 * for the agent, 0–3 for the designer), and at this size a shared adapter would let one role's
 * updates swamp the other's; two tiny models cost little.
 */
import { hashSeed } from '../core/rng.ts';
import { UsageError } from '../core/errors.ts';
import {
  DESIGNERS,
  MicroLab,
  summarise,
  type DesignerKind,
  type MicroDeps,
  type MicroPolicy,
} from '../core/micro/lab.ts';
import type { EnvRunner } from '../core/env/checker.ts';
import type { PolicyTrainer } from '../core/train/schedule.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import { toyModel } from '../engine/toy_train.ts';
import { LoraTrainer } from '../engine/train.ts';
import { flag, intFlag, parseArgs, type Io } from './args.ts';

export interface MicroEngineOptions {
  /** Agent learning rate (default 1e-2: the toy's scale for a rank-8 adapter on a fresh model, halved for stability). */
  agentLr?: number;
  /** Designer learning rate (default 2e-2, the toy designer proof's). */
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
}

/** A role on a fresh tiny model: its chat model (vocabulary `allowed`) and a PolicyTrainer over its adapter. */
async function enginePolicy(allowed: string, seed: number, lr: number, o: MicroEngineOptions): Promise<MicroPolicy> {
  const m = await toyModel(allowed, { seed, layers: o.layers ?? 2, hidden: o.hidden ?? 16, std: o.std ?? 0.4 });
  const lora = new LoraTrainer(m.llm, {
    lr,
    temperature: 1,
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

/** The lab's dependencies on the engine's CPU references and the in-process sandbox. */
export async function engineMicroDeps(
  seed: number,
  designer: DesignerKind,
  o: MicroEngineOptions = {},
  runner: EnvRunner = createSandboxWorkerApi(),
): Promise<MicroDeps> {
  const agent = await enginePolicy('0123456789', hashSeed(`micro-agent:${seed}`), o.agentLr ?? 1e-2, o);
  const deps: MicroDeps = { runner, agent };
  if (designer === 'regret')
    deps.designer = await enginePolicy('0123', hashSeed(`micro-designer:${seed}`), o.designerLr ?? 2e-2, o);
  return deps;
}

const f2 = (x: number | null) => (x === null ? '  -  ' : x.toFixed(2));

export async function micro(argv: string[], io: Io): Promise<number> {
  const args = parseArgs(argv, ['json']);
  const json = args.flags.has('json');
  const cycles = intFlag(args, 'cycles', 10);
  const seed = intFlag(args, 'seed', 0);
  const designer = (flag(args, 'designer') ?? 'regret') as DesignerKind;
  if (!DESIGNERS.includes(designer)) throw new UsageError(`--designer must be one of ${DESIGNERS.join(', ')}`);
  if (cycles < 1) throw new UsageError('--cycles must be ≥ 1');
  const t0 = performance.now();
  const deps = await engineMicroDeps(seed, designer);
  const lab = new MicroLab(
    {
      seed,
      designer,
      levels: intFlag(args, 'levels', 4),
      plays: intFlag(args, 'plays', 4),
      probePlays: intFlag(args, 'probe-plays', 2),
    },
    deps,
  );
  const p0 = await lab.start();
  io.out(
    `cycle  0  probe ${f2(p0.mean)} (easy ${f2(p0.byBucket.easy)} medium ${f2(p0.byBucket.medium)} hard ${f2(p0.byBucket.hard)})`,
  );
  for (let c = 1; c <= cycles; c++) {
    const r = await lab.cycle();
    io.out(
      `cycle ${String(c).padStart(2)}  probe ${f2(r.probe.mean)} (easy ${f2(r.probe.byBucket.easy)} medium ${f2(r.probe.byBucket.medium)} hard ${f2(r.probe.byBucket.hard)})` +
        `  designed ${r.designs.map((d) => d.description ?? `invalid(${d.text})`).join(', ')}` +
        `  difficulty ${f2(r.meanDifficulty)}  regret ${f2(r.meanRegret)}  reward ${f2(r.meanDesignerReward)}` +
        `  return ${f2(r.meanReturn)}  ${(r.ms / 1000).toFixed(1)} s`,
    );
  }
  await lab.close();
  const seconds = (performance.now() - t0) / 1000;
  const summary = {
    ...summarise(lab),
    seconds: Math.round(seconds * 10) / 10,
    designer,
    seed,
    secondsPerCycle: Math.round((seconds / cycles) * 10) / 10,
    probeCurve: [p0.mean, ...lab.history.map((h) => h.probe.mean)].map((x) => Math.round(x * 1000) / 1000),
    difficultyCurve: lab.history.map((h) =>
      h.meanDifficulty === null ? null : Math.round(h.meanDifficulty * 1000) / 1000,
    ),
  };
  if (json) io.out(JSON.stringify(summary));
  else
    io.out(
      `probe return ${summary.probeReturnFirst.toFixed(2)} → ${summary.probeReturnLast.toFixed(2)}, designed difficulty ${f2(summary.difficultyFirst)} → ${f2(summary.difficultyLast)}, ${cycles} cycles in ${summary.seconds} s`,
    );
  return 0;
}
