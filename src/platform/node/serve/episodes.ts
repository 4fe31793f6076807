/**
 * What `spade serve`'s HTTP routes and WebSocket sessions share: the served catalog, the sandbox
 * pool, the limits, the session count, and how an episode is picked, started and stepped.
 *
 * The server enforces the turn limit itself (`maxTurns`): the step that reaches it comes back
 * truncated and the episode is over, whatever the environment says; and it caps what an episode
 * keeps for replay (`maxReplayChars` of actions): the step that passes the cap is played and
 * truncates the episode, so a client cannot grow a session's memory without bound.
 */
import { randomUUID } from 'node:crypto';
import type { ResetResult, StepResult } from '../../../core/env/contract.ts';
import type { EnvRecord } from '../../../core/env/envset.ts';
import type { SandboxLimits } from '../../../core/env/limits.ts';
import type { SandboxPool } from '../../../core/sandbox/pool.ts';
import { drawFor, sampleEnv, scoresOf, type EnvCatalog } from './env_catalog.ts';
import { EnvInstance, type LiveCounter } from './env_instance.ts';
import {
  resetPayload,
  SAMPLE_RULES,
  stepPayload,
  WS_ERROR,
  type EpisodeInfo,
  type FieldError,
  type ResetParams,
} from './openenv.ts';

/**
 * Characters of actions one episode keeps for replay (1 Mi): 16 actions of the sandbox's largest
 * (64 KiB), above the default 12 turns of them, and a bounded cost per session beside its 32 MiB
 * sandbox instance.
 */
export const MAX_REPLAY_CHARS = 2 ** 20;

/** A failure the client caused or that the environment raised, with its OpenEnv code. */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly errors?: FieldError[],
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

export interface Episode {
  env: EnvInstance;
  info: EpisodeInfo;
  episodeId: string;
  steps: number;
  done: boolean;
}

export interface StartedEpisode extends Episode {
  first: ResetResult;
}

export interface EpisodeOptions {
  catalog: EnvCatalog;
  pool: SandboxPool;
  limits: SandboxLimits;
  maxTurns: number;
  maxReplayChars: number;
  maxSessions: number;
}

export class Episodes {
  readonly counter: LiveCounter = { live: 0, replays: 0 };
  /** WebSocket sessions open. */
  sessions = 0;
  /** Stateless HTTP requests holding an instance right now (they count against maxSessions). */
  httpInFlight = 0;

  constructor(readonly o: EpisodeOptions) {}

  get active(): number {
    return this.sessions + this.httpInFlight;
  }

  get full(): boolean {
    return this.active >= this.o.maxSessions;
  }

  capacityError(): RequestError {
    return new RequestError(
      `Server at capacity: ${this.active}/${this.o.maxSessions} sessions active. Retry later.`,
      WS_ERROR.capacity,
    );
  }

  /** Run `fn` as one stateless HTTP request's instance (it counts as a session while it runs). */
  async withHttpInstance<T>(fn: () => Promise<T>): Promise<T> {
    if (this.full) throw this.capacityError();
    this.httpInFlight++;
    try {
      return await fn();
    } finally {
      this.httpInFlight--;
    }
  }

  pick(params: ResetParams): EnvRecord {
    if (params.envId !== null) {
      const rec = this.o.catalog.get(params.envId);
      if (!rec)
        throw new RequestError(
          `No environment "${params.envId}" in the served set; GET /metadata lists the env_id values.`,
          WS_ERROR.execution,
          [
            {
              type: 'value_error',
              loc: ['body', 'env_id'],
              msg: 'Unknown environment id (see GET /metadata)',
              input: params.envId,
            },
          ],
        );
      return rec;
    }
    return sampleEnv(this.o.catalog.list(), params.sample ?? 'uniform', drawFor(params.seed, params.episodeId));
  }

  /**
   * Start an episode. `previous` is the session's last episode, if any: when it picked the same
   * environment and its instance is alive, the new episode resets that instance (a load costs
   * milliseconds, a reset a fraction of one); otherwise its instance is disposed first. `rec` is
   * the environment when the caller picked it already; `guard` runs before each of a new
   * instance's calls (its caller's kill budget).
   */
  async start(
    params: ResetParams,
    previous: Episode | null = null,
    opts: { rec?: EnvRecord; guard?: () => void } = {},
  ): Promise<StartedEpisode> {
    const rec = opts.rec ?? this.pick(params);
    const seed = params.seed ?? Math.floor(Math.random() * 2 ** 31);
    const reuse = previous !== null && previous.env.alive && previous.env.record === rec;
    if (previous && !reuse) await previous.env.dispose();
    const env = reuse
      ? previous.env
      : new EnvInstance(this.o.pool, rec, seed, this.o.maxTurns, this.o.limits, this.counter, opts.guard);
    let first;
    try {
      first = reuse ? await env.restart(seed) : await env.start();
    } catch (err) {
      await env.dispose();
      throw err;
    }
    return {
      env,
      info: {
        envId: rec.id,
        title: rec.title,
        setting: rec.setting,
        skill: rec.skill,
        difficulty: rec.difficulty,
        seed,
      },
      episodeId: params.episodeId ?? randomUUID(),
      steps: 0,
      done: false,
      first,
    };
  }

  /**
   * One step of a live episode: refused when it is over; the step that reaches maxTurns, or that
   * passes the replay cap, comes back truncated. An error from the instance ends the episode (the
   * instance is disposed) and is rethrown.
   */
  async step(ep: Episode, action: string): Promise<StepResult> {
    if (ep.done)
      throw new RequestError('The episode is over: send a reset message to start another.', WS_ERROR.execution);
    let r: StepResult;
    try {
      r = await ep.env.step(action);
    } catch (err) {
      // the instance is gone or broken (its own time-out, crash or error): the episode ends here
      ep.done = true;
      await ep.env.dispose();
      throw err;
    }
    ep.steps++;
    if (!r[2] && !r[3] && (ep.steps >= this.o.maxTurns || ep.env.keptChars > this.o.maxReplayChars))
      r = [r[0], r[1], false, true, r[4]];
    ep.done = r[2] || r[3];
    return r;
  }

  resetPayload(ep: StartedEpisode, hint: boolean): Record<string, unknown> {
    const h = hint && ep.env.record.hint !== '' ? ep.env.record.hint : null;
    return resetPayload(ep.info, ep.first[0], ep.first[1], ep.env.tools, h);
  }

  stepPayload(ep: Episode, r: StepResult): Record<string, unknown> {
    return stepPayload(ep.info, ep.steps, r);
  }

  metadata(): Record<string, unknown> {
    const envs = this.o.catalog.list();
    return {
      name: 'spade',
      description: `SPADE environments served over OpenEnv: ${this.o.catalog.title}, ${envs.length} environment(s). Reset with env_id (one of environments[].env_id) or sample (${SAMPLE_RULES.join(', ')}); hint: true adds the privileged hint to the first observation.`,
      readme_content: null,
      version: '1',
      author: null,
      documentation_url: null,
      environments: envs.map((e) => {
        const s = scoresOf(e);
        return {
          env_id: e.id,
          title: e.title,
          setting: e.setting,
          skill: e.skill,
          difficulty: e.difficulty,
          has_hint: e.hint !== '',
          scores: {
            regret: s.regret,
            win_rate: s.winRate,
            win_rate_hinted: s.winRateHinted,
            learnability: s.learnability,
            designer_reward: s.designerReward,
          },
        };
      }),
      sampling: SAMPLE_RULES,
      sessions: { active: this.sessions, max: this.o.maxSessions },
      limits: { max_turns: this.o.maxTurns, max_replay_chars: this.o.maxReplayChars },
    };
  }
}
