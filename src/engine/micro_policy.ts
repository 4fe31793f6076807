/**
 * The micro lab's two roles on our engine (shared by `spade micro` and workers/lab.worker.ts, so a
 * browser run prints the CLI's numbers for the same settings): a tiny fresh model per role made on
 * the spot from the seed (toy_train.ts's toyModel, the `engine init` path) with its vocabulary
 * constraint, a LoRA adapter and the clipped-GRPO trainer behind the lab's PolicyTrainer interface.
 *
 * Two models rather than one shared (the paper shares): the roles' vocabularies differ (digits 0–9
 * for the agent, 0–3 for the designer), and at this size a shared adapter would let one role's
 * updates swamp the other's; two tiny models cost little.
 */
import type { EnvRunner } from '../core/env/checker.ts';
import type { DesignerKind, MicroDeps, MicroPolicy } from '../core/micro/lab.ts';
import { hashSeed } from '../core/rng.ts';
import type { PolicyTrainer } from '../core/train/schedule.ts';
import { toyModel } from './toy_train.ts';
import { LoraTrainer } from './train.ts';

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
export async function enginePolicy(
  allowed: string,
  seed: number,
  lr: number,
  o: MicroEngineOptions = {},
): Promise<MicroPolicy> {
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

/** The lab's dependencies: the agent (and, for the regret designer, the designer) on fresh tiny models. */
export async function engineMicroDeps(
  seed: number,
  designer: DesignerKind,
  runner: EnvRunner,
  o: MicroEngineOptions = {},
): Promise<MicroDeps> {
  const agent = await enginePolicy('0123456789', hashSeed(`micro-agent:${seed}`), o.agentLr ?? 1e-2, o);
  const deps: MicroDeps = { runner, agent };
  if (designer === 'regret')
    deps.designer = await enginePolicy('0123', hashSeed(`micro-designer:${seed}`), o.designerLr ?? 2e-2, o);
  return deps;
}
