/**
 * A tiny fresh model, made on the spot from a seed: the `spade engine init` builder's checkpoint
 * (io/init_checkpoint.ts), loaded through io/load.ts as any checkpoint is, with a fresh LoRA adapter
 * and a chat model that may only write the characters it is given. The toy proofs (toy_train.ts)
 * and the Lab's policies (tiny_policy.ts, on the fast path tiny_lm.ts or these references) start here.
 */
import { hashSeed } from '../../core/rng.ts';
import { initCheckpointFiles, initConfig } from '../io/init_checkpoint.ts';
import { loadCheckpoint } from '../io/load.ts';
import { MemoryModelFiles } from '../io/model_files.ts';
import { LORA_MODULES } from '../io/peft.ts';
import type { TensorStore } from '../io/safetensors.ts';
import type { TextTokenizer } from '../io/tokenizer.ts';
import { LocalChatModel } from '../model/local_model.ts';
import { LlamaModel } from '../model/model.ts';
import type { CpuTensor } from '../ops/cpu_ops.ts';
import { CpuOps, type Ops } from '../ops/ops.ts';

export interface TinyModelOptions {
  /**
   * Seeds the checkpoint, the adapter and every sampling seed. toyTrain's default is 1: that fresh
   * model picks 7 first 11% of the time (seed 0's picks it 2%: too rare for 16 plays to see a win).
   */
  seed?: number;
  /** Default 2 layers, hidden 32 (head_dim 16, 2 heads): seconds per update on the CPU references. */
  layers?: number;
  hidden?: number;
  /**
   * Init std (default 0.2). The final RMSNorm fixes |h| = √C, so the logit gap the adapter can open
   * is at most ≈ std·C; 0.2 at C = 32 allows > 6 nats (P ≥ 0.95) while the start stays spread
   * over the digits.
   */
  std?: number;
  /** LoRA rank (default 8) and alpha (default 16), on all seven projections. */
  rank?: number;
  alpha?: number;
}

export interface TinyModel<X> {
  llm: LlamaModel<X>;
  tokenizer: TextTokenizer;
  chat: LocalChatModel<X>;
  allowed: number[];
  /** The checkpoint's tensors (the fast path, tiny_lm.ts, reads the base weights from them). */
  weights: TensorStore;
}

/**
 * A fresh model with a fresh adapter; its chat model may only write the characters of
 * `allowedText` ('' = any token). On the CPU references unless `ops` names another backend.
 */
export function tinyModel(allowedText: string, o?: TinyModelOptions): Promise<TinyModel<CpuTensor>>;
export function tinyModel<X>(allowedText: string, o?: TinyModelOptions, ops?: Ops<X>): Promise<TinyModel<X>>;
export async function tinyModel(
  allowedText: string,
  o: TinyModelOptions = {},
  ops: Ops<unknown> = new CpuOps(),
): Promise<TinyModel<unknown>> {
  const seed = o.seed ?? 0;
  const config = initConfig({ arch: 'llama', layers: o.layers ?? 2, hidden: o.hidden ?? 32 });
  const ck = initCheckpointFiles(config, { seed, std: o.std ?? 0.2 });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: true });
  const tokenizer = loaded.tokenizer!;
  const llm = new LlamaModel(loaded.config, ops, loaded.weights);
  llm.initLora(o.rank ?? 8, o.alpha ?? 16, [...LORA_MODULES], hashSeed(`lora:${seed}`));
  const allowed = [...new Set(tokenizer.encode(allowedText, { addSpecialTokens: false }))];
  const chat = new LocalChatModel('toy', llm, tokenizer, allowed.length ? { allowedTokens: allowed } : {});
  return { llm, tokenizer, chat, allowed, weights: loaded.weights };
}
