/**
 * One environment instance of a `spade serve` session, in the shared sandbox pool. It remembers
 * its seed and every action, so when a neighbour's runaway call gets their shared worker killed
 * and replaced (the pool fails every environment on it as lost), the instance loads again,
 * replays its episode and answers the call as if nothing happened: a hostile environment harms
 * only its own session. Its own time-out or crash is not replayed; the caller gets that error.
 */
import type { EnvRecord } from '../../../core/env/envset.ts';
import type { ResetResult, StepResult, ToolSchema } from '../../../core/env/contract.ts';
import { WorkerCrashedError } from '../../../core/errors.ts';
import type { SandboxPool } from '../../../core/sandbox/pool.ts';
import type { SandboxLimits } from '../../../core/env/limits.ts';

/** How many times one instance may be rebuilt after losing its worker to a neighbour. */
const MAX_REBUILDS = 3;

/** A call failed only because the worker was replaced for someone else's sake. */
function lostToNeighbour(err: unknown): boolean {
  return err instanceof WorkerCrashedError && err.data.lost === true && err.data.killed !== true;
}

/** Counts instances loaded and not yet disposed, across a server (its leak check). */
export interface LiveCounter {
  live: number;
}

export class EnvInstance {
  private poolId: string | null = null;
  private readonly actions: string[] = [];
  private rebuilds = 0;
  private disposed = false;
  tools: ToolSchema[] = [];

  constructor(
    private readonly pool: SandboxPool,
    readonly record: EnvRecord,
    readonly seed: number,
    private readonly maxTurns: number,
    private readonly limits: SandboxLimits,
    private readonly counter: LiveCounter,
  ) {}

  /** Load and reset; the first observation and info. */
  async start(): Promise<ResetResult> {
    return this.withRebuild(() => this.loadAndReset());
  }

  async step(action: string): Promise<StepResult> {
    const r = await this.withRebuild(() => this.pool.step(this.id(), action));
    this.actions.push(action);
    return r;
  }

  /** Free the sandbox instance; never throws (a close() that fails is the environment's own business). */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.release();
  }

  private id(): string {
    if (this.poolId === null) throw new WorkerCrashedError('The environment instance is not loaded; reset again.');
    return this.poolId;
  }

  private async release(): Promise<void> {
    const id = this.poolId;
    if (id === null) return;
    this.poolId = null;
    this.counter.live--;
    await this.pool.dispose(id).catch(() => undefined);
  }

  private async loadAndReset(): Promise<ResetResult> {
    await this.release();
    const env = await this.pool.load(this.record.code, this.maxTurns, this.limits);
    this.poolId = env.id;
    this.counter.live++;
    if (this.disposed) {
      await this.release();
      throw new WorkerCrashedError('The session ended while its environment was loading.');
    }
    this.tools = env.tools;
    return this.pool.reset(env.id, this.seed);
  }

  /** Run `call`; if the worker was lost to a neighbour, load again, replay the actions so far and retry. */
  private async withRebuild<T>(call: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!lostToNeighbour(err) || this.disposed || this.rebuilds >= MAX_REBUILDS) throw err;
        this.rebuilds++;
        try {
          await this.loadAndReset();
          for (const a of this.actions) await this.pool.step(this.id(), a);
        } catch (again) {
          if (!lostToNeighbour(again)) throw again;
        }
      }
    }
  }
}
