/**
 * A counting semaphore for bounded concurrency (model calls, plays, loop tasks). Work that holds a
 * slot must never wait for another slot of the same limiter: once every slot is held by such work,
 * nothing frees one and all of it waits for ever (a budget of 1 shows it at once).
 */
export class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(readonly max: number) {
    if (!(Number.isInteger(max) && max >= 1))
      throw new RangeError(`Limiter: max must be a whole number ≥ 1 (config: concurrency); got ${max}`);
  }

  /**
   * Run fn in a slot, waiting first (in call order) while every slot is taken. A finishing run
   * hands its slot straight to the next waiter, so a call made before that waiter resumes finds
   * no free slot and more than `max` never run at once.
   */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active < this.max) this.active++;
    else await new Promise<void>((r) => this.queue.push(r));
    try {
      return await fn();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
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
