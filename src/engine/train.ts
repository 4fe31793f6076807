/**
 * LoRA training on the engine: the policy-gradient step of GRPO. Each sample is a
 * token sequence (prompt + completion) with an advantage; the loss is
 *   L = Σ_samples Σ_{t in completion} −(A / |completion| / N) · log π(token_t)
 * (one fresh step per batch, so the PPO ratio is 1 and its clip never binds).
 * Gradients reach only the LoRA adapters; AdamW with clipping by global norm.
 */
import type { LlamaModel } from './model.ts';
import { gradClipScale } from './kernels/adamw.ts';

export interface TokenSample {
  ids: number[];
  /** Tokens before the completion (the completion is ids[promptLen..]). */
  promptLen: number;
  advantage: number;
}

export interface TrainOptions {
  /** Paper: 1e-6 for full fine-tuning; LoRA tolerates ~1e-4 (default 1e-4). */
  lr?: number;
  weightDecay?: number;
  beta1?: number;
  beta2?: number;
  /** Clip the global gradient norm to this (default 1). */
  maxGradNorm?: number;
}

export interface StepStats {
  loss: number;
  gradNorm: number;
  tokens: number;
  ms: number;
}

export class LoraTrainer<X> {
  step = 0;
  private readonly m = new Map<string, X>();
  private readonly v = new Map<string, X>();

  constructor(
    readonly model: LlamaModel<X>,
    readonly opts: TrainOptions = {},
  ) {
    if (!model.lora) throw new Error('LoraTrainer: the model has no LoRA adapter; call initLora() first');
    for (const [k, p] of model.lora.w) {
      this.m.set(k, model.ops.zeros([...model.ops.shape(p)]));
      this.v.set(k, model.ops.zeros([...model.ops.shape(p)]));
    }
  }

  /** Loss and gradients of one batch, summed over samples (no update). */
  async gradients(samples: TokenSample[]): Promise<{ grads: Map<string, X>; loss: number; tokens: number }> {
    const { model } = this;
    const ops = model.ops;
    let total: Map<string, X> | null = null;
    let loss = 0;
    let tokens = 0;
    for (const s of samples) {
      const n = s.ids.length - s.promptLen;
      if (n <= 0 || s.promptLen < 1) continue;
      const input = s.ids.slice(0, -1);
      const targets = s.ids.slice(1);
      const w = new Float32Array(targets.length);
      for (let t = s.promptLen - 1; t < targets.length; t++) w[t] = s.advantage / n / samples.length;
      const { logits, tape } = model.forward(input, { tape: true });
      const r = ops.nll(logits, targets, w);
      const dlogits = ops.nllBackward(logits, targets, w, r.lse);
      const grads = model.backward(tape!, dlogits);
      loss += (await ops.read(r.loss)).reduce((a, b) => a + b, 0);
      tokens += input.length;
      ops.free(r.loss, r.logprobs, r.lse, dlogits);
      model.freeTape(tape!);
      if (!total) total = grads;
      else {
        for (const [k, g] of grads) ops.addInPlace(total.get(k)!, g);
        ops.free(...grads.values());
      }
      ops.flush();
    }
    if (!total) {
      total = new Map();
      for (const [k, p] of model.lora!.w) total.set(k, ops.zeros([...ops.shape(p)]));
    }
    return { grads: total, loss, tokens };
  }

  /** One optimizer step on a batch. */
  async trainStep(samples: TokenSample[]): Promise<StepStats> {
    const t0 = performance.now();
    const ops = this.model.ops;
    const { grads, loss, tokens } = await this.gradients(samples);
    const sumSq = await ops.sumSquares([...grads.values()]);
    const gradScale = gradClipScale(sumSq, this.opts.maxGradNorm ?? 1);
    this.step++;
    for (const [k, p] of this.model.lora!.w) {
      ops.adamw(p, grads.get(k)!, this.m.get(k)!, this.v.get(k)!, {
        lr: this.opts.lr ?? 1e-4,
        weightDecay: this.opts.weightDecay ?? 0,
        beta1: this.opts.beta1 ?? 0.9,
        beta2: this.opts.beta2 ?? 0.999,
        step: this.step,
        gradScale,
      });
    }
    ops.free(...grads.values());
    ops.flush();
    return { loss, gradNorm: Math.sqrt(sumSq), tokens, ms: performance.now() - t0 };
  }
}
