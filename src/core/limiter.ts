/** A counting semaphore for bounded concurrency (model calls, rollouts, loop tasks). */
export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(readonly max: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }

  /**
   * Run fn over items with at most `max` at once; results keep the items' order. Waits for every
   * task to settle before it rethrows the first failure, so nothing is still running after a stop.
   */
  async map<T, R>(items: T[], fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
    const settled = await Promise.allSettled(items.map((item, i) => this.run(() => fn(item, i))));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((r) => (r as PromiseFulfilledResult<R>).value);
  }
}
