/**
 * Playing an environment by hand: loads it into the sandbox pool, resets with a
 * seed, steps with the user's actions and keeps the transcript. Errors from the
 * sandbox are shown, never thrown at the page. Nothing starts by itself: the panel
 * calls start() only from a user's click, so a shared link runs no code on opening.
 */
import type { ToolSchema } from '../core/env/contract.ts';
import type { EnvRecord } from '../core/env/envset.ts';
import { serializeError } from '../core/errors.ts';
import { sandboxPool } from './envs.svelte.ts';
import type { SandboxLimits } from '../core/env/limits.ts';

export interface Turn {
  action: string | null;
  observation: string;
  reward: number;
  terminated: boolean;
  truncated: boolean;
}

export class PlaySession {
  /** The environment of the last start(), set before loading: a failed load belongs to it too. */
  envId = $state<string | null>(null);
  /** Tool schemas the loaded environment declares (tool use); [] for games. */
  tools = $state<ToolSchema[]>([]);
  seed = $state(0);
  transcript = $state<Turn[]>([]);
  busy = $state(false);
  error = $state<string | null>(null);
  private sandboxId: string | null = null;

  turns = $derived(Math.max(0, this.transcript.length - 1));
  totalReward = $derived(this.transcript.reduce((s, t) => s + t.reward, 0));
  last = $derived(this.transcript[this.transcript.length - 1] ?? null);
  done = $derived(Boolean(this.last && (this.last.terminated || this.last.truncated)));

  async start(env: EnvRecord, seed: number, maxTurns: number, limits?: SandboxLimits): Promise<void> {
    if (this.busy) return; // a second click while loading would leak the first environment
    this.busy = true;
    this.error = null;
    this.envId = env.id;
    this.seed = seed;
    this.transcript = [];
    this.tools = [];
    try {
      await this.close();
      const pool = sandboxPool();
      const loaded = await pool.load(env.code, maxTurns, limits);
      this.sandboxId = loaded.id;
      this.tools = loaded.tools;
      const [obs] = await pool.reset(loaded.id, seed);
      this.transcript = [{ action: null, observation: obs, reward: 0, terminated: false, truncated: false }];
    } catch (err) {
      this.transcript = [];
      this.error = serializeError(err).message;
    } finally {
      this.busy = false;
    }
  }

  async act(action: string): Promise<void> {
    if (!this.sandboxId || this.done || this.busy) return;
    this.busy = true;
    this.error = null;
    try {
      const [observation, reward, terminated, truncated] = await sandboxPool().step(this.sandboxId, action);
      this.transcript = [...this.transcript, { action, observation, reward, terminated, truncated }];
    } catch (err) {
      this.error = serializeError(err).message;
    } finally {
      this.busy = false;
    }
  }

  async close(): Promise<void> {
    if (this.sandboxId) {
      const id = this.sandboxId;
      this.sandboxId = null;
      await sandboxPool()
        .dispose(id)
        .catch(() => undefined);
    }
  }
}
