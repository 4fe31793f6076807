/**
 * One environment instance of a `spade serve` session, in the shared sandbox pool. It remembers
 * its seed and every action, so when a neighbour's runaway call gets their shared worker killed
 * and replaced (the pool fails every environment on it as lost), the instance loads again,
 * replays its episode and answers the call as if nothing happened: a hostile environment harms
 * only its own session. Its own time-out or crash is not replayed; the caller gets that error
 * (and `ownKill` says whether the watchdog killed the worker for it).
 *
 * A replay must reach the same state: each answer's digest (observation, reward, end) is kept, and
 * a replay whose reset or steps answer differently ends the episode with an EnvContractError — an
 * environment that keeps state between episodes (or is not deterministic for its seed) cannot be
 * rebuilt, and the session is told so rather than played on in a state the client never saw.
 *
 * The rebuild budget is per call, not per instance: a neighbour that kills the worker again and
 * again costs this instance one replay each time, never its episode (the server closes a session
 * that keeps tripping the watchdog). The actions kept for replay are counted (`keptChars`), so the
 * server can cap them.
 *
 * An instance may have a `guard` (its caller's kill budget, kill_budget.ts): it runs before every
 * call and before every rebuild, so an instance whose own caller has spent its budget — an HTTP
 * request lost to its own client's kill — fails with the guard's error instead of loading again
 * and running the same call once more.
 */
import type { EnvRecord } from '../../../core/env/envset.ts';
import type { ResetResult, StepResult, ToolSchema } from '../../../core/env/contract.ts';
import { EnvContractError, SpadeError, WorkerCrashedError } from '../../../core/errors.ts';
import { hashSeed } from '../../../core/rng.ts';
import type { SandboxPool } from '../../../core/sandbox/pool.ts';
import type { SandboxLimits } from '../../../core/env/limits.ts';

/**
 * Rebuilds one call may take when its worker is lost to neighbours, again and again, while it
 * waits: each needs a neighbour's call to be killed (a step's limit plus the grace period), so 8
 * covers several hostile sessions on one worker without letting a call loop for ever.
 */
export const MAX_REBUILDS_PER_CALL = 8;

/** A call failed only because the worker was replaced for someone else's sake. */
export function lostToNeighbour(err: unknown): boolean {
  return err instanceof WorkerCrashedError && err.data.lost === true && err.data.killed !== true;
}

/** The watchdog killed the worker because of this instance's own call. */
export function killedByOwnCall(err: unknown): boolean {
  return err instanceof SpadeError && err.data.killed === true;
}

/** Counts instances loaded and not yet disposed, and replays done, across a server. */
export interface LiveCounter {
  live: number;
  /** Instances loaded again and replayed after losing their worker to a neighbour. */
  replays: number;
}

export class EnvInstance {
  private poolId: string | null = null;
  private readonly actions: string[] = [];
  /** Digests of the reset's answer and of each step's (replays are checked against them). */
  private readonly digests: number[] = [];
  private disposed = false;
  /** Characters of the actions kept for replay. */
  keptChars = 0;
  tools: ToolSchema[] = [];

  constructor(
    private readonly pool: SandboxPool,
    readonly record: EnvRecord,
    private seed: number,
    private readonly maxTurns: number,
    private readonly limits: SandboxLimits,
    private readonly counter: LiveCounter,
    private readonly guard: () => void = () => undefined,
  ) {}

  /** Load and reset; the first observation and info. */
  async start(): Promise<ResetResult> {
    return this.keep(0, await this.withRebuild(() => this.loadAndReset()));
  }

  /** Loaded, not disposed: a reset can start the next episode on it (restart). */
  get alive(): boolean {
    return !this.disposed && this.poolId !== null;
  }

  /**
   * The next episode on this same instance, as OpenEnv resets a session's environment: reset with
   * `seed` (no load; what was kept for replay starts again from here).
   */
  async restart(seed: number): Promise<ResetResult> {
    this.seed = seed;
    this.actions.length = 0;
    this.digests.length = 0;
    this.keptChars = 0;
    return this.keep(0, await this.withRebuild(() => this.pool.reset(this.id(), seed)));
  }

  async step(action: string): Promise<StepResult> {
    const r = await this.withRebuild(() => this.pool.step(this.id(), action));
    this.actions.push(action);
    this.keptChars += action.length;
    return this.keep(this.actions.length, r);
  }

  /** Free the sandbox instance; never throws (a close() that fails is the environment's own business). */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.release();
  }

  /** Keep the digest of answer `i` (0: the reset) and pass the answer on. */
  private keep<T extends ResetResult | StepResult>(i: number, r: T): T {
    this.digests[i] = digest(r);
    return r;
  }

  /** A replayed answer must be the one the client saw. */
  private check(i: number, r: ResetResult | StepResult): void {
    if (this.digests[i] === undefined || digest(r) === this.digests[i]) return;
    throw new EnvContractError(
      `After its sandbox worker was replaced for another session's sake, this environment did not replay to the same state (${i === 0 ? 'its reset' : `step ${i}`} answered differently): it keeps state between episodes or is not deterministic for its seed. This episode cannot go on; reset to start a new one.`,
      { replayDiverged: true, at: i },
    );
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

  /**
   * Run `call`; if the worker was lost to a neighbour, load again, replay the actions so far and
   * retry. A rebuild that is itself lost to a neighbour is tried again (within the call's budget).
   */
  private async withRebuild<T>(call: () => Promise<T>): Promise<T> {
    let lost: unknown = null;
    for (let rebuilds = 0; ;) {
      this.guard();
      if (lost === null) {
        try {
          return await call();
        } catch (err) {
          if (!lostToNeighbour(err) || this.disposed) throw err;
          lost = err;
        }
      }
      if (rebuilds >= MAX_REBUILDS_PER_CALL) throw lost;
      rebuilds++;
      this.counter.replays++;
      try {
        this.check(0, await this.loadAndReset());
        for (const [i, a] of this.actions.entries()) this.check(i + 1, await this.pool.step(this.id(), a));
        lost = null;
      } catch (again) {
        if (!lostToNeighbour(again) || this.disposed) throw again;
        lost = again;
      }
    }
  }
}

/** A 32-bit digest of an answer's observation, reward and end (info is left out: it may hold anything). */
function digest(r: ResetResult | StepResult): number {
  return hashSeed(r.length === 2 ? `r\u0000${r[0]}` : `s\u0000${r[0]}\u0000${r[1]}\u0000${r[2]}\u0000${r[3]}`);
}
