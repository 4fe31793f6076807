/**
 * The learning proofs, small enough for the CPU references (`CpuOps`) in the unit tier
 * and for `spade train toy`:
 *
 * toyTrain — a tiny fresh model (tiny_model.ts, the `spade engine init` path) learns the
 *   "Lucky Digit" environment through the app's own code path: LocalChatModel samples (token-exact,
 *   with log π_old), playEpisode (core/spade/agent.ts) plays it in the real QuickJS sandbox,
 *   groupAdvantages (core/spade/estimators.ts) centres the returns of each group of plays, and the
 *   GRPO trainer (train.ts) updates the LoRA adapter on exactly the sampled ids.
 *   The policy's vocabulary is the ten digits (allowedTokens), so a random model wins ~10% of the
 *   time and a group of plays has signal from the first update.
 *
 * toyDesignerTrain — the designer side with a rigged reward: a design is "kind A" or "kind B" (its
 *   first character); A earns raw reward 1, B earns 0; designerAdvantages centres the k designs of
 *   each skill; P(A) is read from the model's log-probs before and after.
 *
 * Everything is seeded: the checkpoint, the adapter's init and every sampling seed derive from
 * (seed, update, group, play), so a run resumed from its state (adapter in PEFT format, optimiser
 * state, update index) samples and trains exactly as the uninterrupted run.
 */
import { hashSeed } from '../../core/rng.ts';
import { WrappedChatModel, type ChatMessage, type ChatModel } from '../../core/llm/chat_model.ts';
import { createSandboxWorkerApi } from '../../core/sandbox/worker_api.ts';
import { playEpisode } from '../../core/spade/agent.ts';
import { designerAdvantages, groupAdvantages, mean } from '../../core/spade/estimators.ts';
import { extendTrace } from '../../core/train/grpo.ts';
import { exportPeft, importPeft } from '../io/peft.ts';
import type { Ops } from '../ops/ops.ts';
import {
  decodeTrainerState,
  encodeTrainerState,
  LoraTrainer,
  type GrpoSample,
  type TrainOptions,
} from '../train/train.ts';
import { tinyModel, type TinyModelOptions } from './tiny_model.ts';

/**
 * The toy environment, written to the seed contract. It reads the first digit of the reply (not
 * \boxed{}: the toy policy can only write digits); 7 wins.
 */
export const LUCKY_DIGIT_ENV = `class LuckyDigitEnv {
  constructor(maxTurns = 1) { this.maxTurns = maxTurns; }
  reset(seed) { this.done = false; return ['Pick a digit.', {}]; }
  step(action) {
    const m = /[0-9]/.exec(String(action));
    const win = m !== null && m[0] === '7';
    this.done = true;
    return [win ? 'Lucky!' : 'Not this time.', win ? 1 : 0, true, false, {}];
  }
  solution() { return ['7']; }
}`;

/** A ChatModel that sends every call to `inner` with at most `maxTokens` reply tokens. */
function capped(inner: ChatModel, maxTokens: number): ChatModel {
  return new WrappedChatModel(inner, (m, o = {}) =>
    inner.chat(m, { ...o, max_tokens: Math.min(o.max_tokens ?? maxTokens, maxTokens) }),
  );
}

export interface ToyUpdate {
  /** 1-based. */
  update: number;
  /** Mean return of this update's plays (sampled before its optimiser steps). */
  meanReturn: number;
  /** Mean over the update's optimiser steps (0 steps: no group had signal). */
  loss: number;
  clipFraction: number;
  approxKl: number;
  gradNorm: number;
  steps: number;
  samples: number;
  /** Tokens the trainer ran and the time split of the update. */
  trainTokens: number;
  generateMs: number;
  trainMs: number;
}

/** What a resumed run needs: the adapter (PEFT files), the optimiser state and the next update. */
interface ToyState {
  update: number;
  adapterConfigJson: string;
  adapterWeights: Uint8Array;
  optimizer: Uint8Array;
  curve: ToyUpdate[];
}

export interface ToyOptions extends TinyModelOptions {
  /** Updates to run in all (default 8: the default seed passes 0.8 by the third); a resumed run continues to this number. */
  updates?: number;
  /** Groups per update (default 2), each `plays` plays of the environment (default 8). */
  groups?: number;
  plays?: number;
  /** Reply tokens (default 2: a digit and one more; the env reads the first). */
  replyTokens?: number;
  /** Sampling temperature (default 1: the model's own distribution). */
  temperature?: number;
  /**
   * Trainer knobs; the toy's defaults: lr 1e-2 (a fresh rank-8 adapter on a model this small moves
   * little at the app's 1e-4) and 1000 tokens per step (4 episodes: up to 4 steps per update).
   */
  train?: TrainOptions;
  /** Stop after the first update whose mean return reaches this (default: run all updates). */
  stopAt?: number;
  resume?: ToyState;
  onUpdate?: (u: ToyUpdate) => void;
  /** The backend (default the CPU references; `spade ... --device gpu` passes GpuOps). */
  ops?: Ops<unknown>;
}

export interface ToyResult {
  curve: ToyUpdate[];
  returnFirst: number;
  returnLast: number;
  updates: number;
  seconds: number;
  /** Resume from here. */
  state: ToyState;
}

/** Train the toy: see the file header. */
export async function toyTrain(o: ToyOptions = {}): Promise<ToyResult> {
  const t0 = performance.now();
  const seed = o.seed ?? 1;
  const { llm, chat, allowed } = await tinyModel('0123456789', { ...o, seed }, o.ops);
  const trainer = new LoraTrainer(llm, {
    lr: 1e-2,
    minibatchTokens: 1000,
    ...o.train,
    temperature: o.temperature ?? 1,
    allowedTokens: allowed,
  });
  const curve: ToyUpdate[] = [...(o.resume?.curve ?? [])];
  if (o.resume) {
    llm.setLora(importPeft(o.resume.adapterConfigJson, o.resume.adapterWeights, llm.cfg));
    trainer.importState(decodeTrainerState(o.resume.optimizer));
  }
  const runner = createSandboxWorkerApi();
  const env = await runner.load(LUCKY_DIGIT_ENV, 1);
  const model = capped(chat, o.replyTokens ?? 2);
  const updates = o.updates ?? 8;
  try {
    for (let u = curve.length + 1; u <= updates; u++) {
      const tg = performance.now();
      const samples: GrpoSample[] = [];
      const returns: number[] = [];
      for (let g = 0; g < (o.groups ?? 2); g++) {
        const eps = [];
        for (let j = 0; j < (o.plays ?? 8); j++)
          eps.push(
            await playEpisode({
              runner,
              envId: env.id,
              setting: 'games',
              model,
              seed: g,
              hint: null,
              maxTurns: 1,
              tokenBudget: 256,
              temperature: o.temperature ?? 1,
              sampleSeed: hashSeed(`${seed}:${u}:${g}:${j}`),
            }),
          );
        const adv = groupAdvantages(eps.map((e) => e.return));
        eps.forEach((e, j) => {
          returns.push(e.return);
          if (e.trace && Math.abs(adv[j]!) > 1e-9)
            samples.push({ ids: e.trace.ids, spans: e.trace.spans, oldLogprobs: e.trace.logprobs, advantage: adv[j]! });
        });
      }
      const tt = performance.now();
      const steps = await trainer.train(samples);
      const avg = (k: 'loss' | 'clipFraction' | 'approxKl' | 'gradNorm') =>
        steps.length ? mean(steps.map((s) => s[k])) : 0;
      const row: ToyUpdate = {
        update: u,
        meanReturn: mean(returns),
        loss: avg('loss'),
        clipFraction: avg('clipFraction'),
        approxKl: avg('approxKl'),
        gradNorm: avg('gradNorm'),
        steps: steps.length,
        samples: samples.length,
        trainTokens: steps.reduce((a, s) => a + s.tokens, 0),
        generateMs: tt - tg,
        trainMs: performance.now() - tt,
      };
      curve.push(row);
      o.onUpdate?.(row);
      if (o.stopAt !== undefined && row.meanReturn >= o.stopAt) break;
    }
  } finally {
    await runner.dispose(env.id);
  }
  const peft = exportPeft((await llm.getLora())!, { baseModel: 'spade-toy' });
  return {
    curve,
    returnFirst: curve[0]?.meanReturn ?? 0,
    returnLast: curve.at(-1)?.meanReturn ?? 0,
    updates: curve.length,
    seconds: (performance.now() - t0) / 1000,
    state: {
      update: curve.length,
      adapterConfigJson: peft.adapterConfigJson,
      adapterWeights: peft.weights,
      optimizer: encodeTrainerState(await trainer.exportState()),
      curve,
    },
  };
}

export interface DesignerToyOptions extends TinyModelOptions {
  /** Rounds of design → reward → update (default 4). */
  rounds?: number;
  /** Skills per round (default 2) and designs per skill k (default 4). */
  skills?: number;
  k?: number;
  train?: TrainOptions;
}

export interface DesignerToyResult {
  /** P(first character is "A") before and after, averaged over the skills' prompts. */
  pBefore: number;
  pAfter: number;
  rounds: { round: number; shareA: number; loss: number }[];
}

const designBrief = (skill: number): ChatMessage[] => [
  { role: 'system', content: 'You design environments.' },
  { role: 'user', content: `Skill ${skill}. Write a design; its first letter is its kind.` },
];

/** The designer-side proof with a rigged reward (see the file header). */
export async function toyDesignerTrain(o: DesignerToyOptions = {}): Promise<DesignerToyResult> {
  const seed = o.seed ?? 0;
  const { llm, chat, allowed, tokenizer } = await tinyModel('AB', o);
  const [idA] = tokenizer.encode('A', { addSpecialTokens: false });
  const trainer = new LoraTrainer(llm, { lr: 1e-2, ...o.train, temperature: 1, allowedTokens: allowed });
  const skills = Array.from({ length: o.skills ?? 2 }, (_, i) => i);
  const pA = async () => {
    const ps = [];
    for (const s of skills) {
      const ids = chat.promptIds(designBrief(s));
      const { logits } = llm.forward(ids, { lastOnly: true });
      const row = await llm.ops.read(logits);
      const z = allowed.map((id) => row[id]!);
      const m = Math.max(...z);
      const sum = z.reduce((a, x) => a + Math.exp(x - m), 0);
      ps.push(Math.exp(row[idA!]! - m) / sum);
      llm.ops.free(logits);
    }
    return mean(ps);
  };
  const pBefore = await pA();
  const rounds: DesignerToyResult['rounds'] = [];
  for (let r = 1; r <= (o.rounds ?? 4); r++) {
    const designs: {
      skill: string;
      raw: number;
      tokens: NonNullable<Awaited<ReturnType<typeof chat.chat>>['tokens']>;
    }[] = [];
    for (const s of skills)
      for (let j = 0; j < (o.k ?? 4); j++) {
        const res = await chat.chat(designBrief(s), {
          temperature: 1,
          max_tokens: 2,
          seed: hashSeed(`design:${seed}:${r}:${s}:${j}`),
        });
        designs.push({ skill: String(s), raw: res.text.startsWith('A') ? 1 : 0, tokens: res.tokens! });
      }
    const { advantages } = designerAdvantages(designs, 1);
    const samples: GrpoSample[] = [];
    designs.forEach((d, i) => {
      const trace = extendTrace(null, d.tokens);
      const a = advantages[i];
      if (trace && a != null && Math.abs(a) > 1e-9)
        samples.push({ ids: trace.ids, spans: trace.spans, oldLogprobs: trace.logprobs, advantage: a });
    });
    const steps = await trainer.train(samples);
    rounds.push({
      round: r,
      shareA: mean(designs.map((d) => d.raw)),
      loss: steps.length ? mean(steps.map((s) => s.loss)) : 0,
    });
  }
  return { pBefore, pAfter: await pA(), rounds };
}
