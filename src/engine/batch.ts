/**
 * The continuous-batching scheduler behind LocalChatModel.chat (issue 12): concurrent generate()
 * calls on one model share decode steps. PLACEHOLDER: runs calls one after another through
 * generate(); the batched implementation replaces the body, keeping this contract.
 */
import { generate, type GenerateOptions } from './generate.ts';
import type { LlamaModel } from './model.ts';

export interface SchedulerOptions {
  /** Most sequences decoded together in one step. */
  maxBatch?: number;
}

export class DecodeScheduler<X> {
  private chain: Promise<unknown> = Promise.resolve();
  constructor(
    readonly model: LlamaModel<X>,
    readonly opts: SchedulerOptions = {},
  ) {}

  /** The same contract as generate(model, prompt, o), batched with every other call in flight. */
  generate(prompt: number[], o: GenerateOptions): Promise<number[]> {
    const run = this.chain.then(() => generate(this.model, prompt, o));
    this.chain = run.catch(() => undefined);
    return run;
  }
}
