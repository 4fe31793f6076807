/**
 * The engine's one entry for the Lab: a policy on a tiny fresh model (tiny_model.ts) — its chat
 * model, restricted to the characters it is given, a PolicyTrainer (clipped GRPO on its LoRA
 * adapter) and its scorer, the token record of a reply under the current adapter. The Lab (src/lab/)
 * builds each role on one; what the Lab chooses (sizes, learning rates, temperature) comes in whole.
 *
 * Two implementations, the same numbers bit for bit: 'fast' — TinyLm (tiny_lm.ts: contiguous KV,
 * plain Float32Array loops, WebAssembly SIMD) with TinyChat and tinyTrainer; 'reference' —
 * LocalChatModel on the engine's CPU references and LoraTrainer (`spade bench lab` times both).
 */
import type { ChatMessage, ChatModel } from '../../core/llm/chat_model.ts';
import type { TokenTrace } from '../../core/train/grpo.ts';
import type { PolicyTrainer } from '../../core/train/grpo_rounds.ts';
import { LoraTrainer } from '../train/train.ts';
import { TinyChat } from './tiny_chat.ts';
import { TinyLm } from './tiny_lm.ts';
import { tinyModel } from './tiny_model.ts';
import { TINY_TRAIN_DEFAULTS, tinyTrainer } from './tiny_train.ts';

export const MODEL_PATHS = ['fast', 'reference'] as const;
export type ModelPath = (typeof MODEL_PATHS)[number];

export interface TinyPolicyOptions {
  /** The characters the chat model may write (its vocabulary constraint). */
  allowed: string;
  /** Seeds the checkpoint and the adapter's init. */
  seed: number;
  /** The adapter's learning rate, and AdamW's decoupled weight decay on it (pulls it toward the base). */
  lr: number;
  weightDecay: number;
  /** β of the k3 KL to the base model (the adapter off); 0: no term. */
  klCoef: number;
  /** Skip a step whose gradient norm is over this many times the recent median (SpikeGuard; 0 or absent: off). */
  skipSpikes?: number;
  /** The temperature the policy samples at: the trainer's π is the sampler's π. */
  temperature: number;
  /** The model's size and init std (tiny_model.ts's TinyModelOptions). */
  layers: number;
  hidden: number;
  std: number;
  /** The adapter's rank (default 8); its alpha is twice the rank, so the adapter's scale stays 2. */
  rank?: number;
  path: ModelPath;
}

/** A tiny model as a policy: what it writes, how it learns, how it scores a given reply. */
export interface TinyPolicy {
  chat: ChatModel;
  trainer: PolicyTrainer;
  score(messages: ChatMessage[], reply: string): Promise<TokenTrace>;
}

/** A policy on a fresh tiny model: see the file header. */
export async function createTinyPolicy(o: TinyPolicyOptions): Promise<TinyPolicy> {
  const { lr, temperature, weightDecay, klCoef } = o;
  const skipSpikes = o.skipSpikes ?? 0;
  const rank = o.rank ?? 8;
  const m = await tinyModel(o.allowed, {
    seed: o.seed,
    layers: o.layers,
    hidden: o.hidden,
    std: o.std,
    rank,
    alpha: 2 * rank,
  });
  if (o.path === 'fast') {
    const lm = new TinyLm(m.llm, m.weights);
    const ids = [...m.allowed].sort((a, b) => a - b);
    const chat = new TinyChat('toy', lm, m.tokenizer, ids);
    return {
      chat,
      trainer: tinyTrainer(lm, {
        ...TINY_TRAIN_DEFAULTS,
        lr,
        temperature,
        allowed: ids,
        weightDecay,
        klCoef,
        skipSpikes,
      }),
      score: async (messages, reply) => chat.score(messages, reply, temperature),
    };
  }
  const lora = new LoraTrainer(m.llm, {
    lr,
    weightDecay,
    klCoef,
    skipSpikes,
    temperature,
    allowedTokens: m.allowed,
    minibatchTokens: Number.MAX_SAFE_INTEGER, // the lab's trainRound already cut the minibatches
  });
  const trainer: PolicyTrainer = {
    scaleLr(factor) {
      lora.opts.lr = lr * factor; // read at each step (LoraTrainer's o('lr'))
    },
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
        ...(s.skipped ? { skipped: true } : {}),
        tokens: s.tokens,
        ms: s.ms,
      };
    },
  };
  const score = async (messages: ChatMessage[], reply: string): Promise<TokenTrace> => {
    const prompt = m.chat.promptIds(messages);
    const ids = [...prompt, ...m.tokenizer.encode(reply, { addSpecialTokens: false })];
    const spans: [number, number][] = [[prompt.length, ids.length]];
    const [logprobs] = await lora.learnerLogprobs([{ ids, spans, advantage: 0 }]);
    return { ids, spans, logprobs: logprobs! };
  };
  return { chat: m.chat, trainer, score };
}
