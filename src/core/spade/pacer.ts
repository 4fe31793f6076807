/**
 * Pacing for watching a run: an event queue between the loop and the view. The loop runs at its own
 * speed (a replay answers instantly); the pacer hands its events on at a chosen number of tokens
 * per second — a designer token, a word of a hint or of an agent's action each cost one token, the
 * other events none — and can be paused, and stepped by one event, one play, one environment or
 * one cycle. Pure: time comes from an injected clock (setTimeout in the app, a fake in tests).
 */
import type { LoopEvent } from './run_events.ts';

export type StepKind = 'event' | 'play' | 'env' | 'cycle';

export interface PacerClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realClock: PacerClock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

const words = (text: string) => text.match(/\S+/g)?.length ?? 0;

/** What an event costs to show, in tokens (≈ words): what is typed costs, the rest is instant. */
export function eventTokens(e: LoopEvent): number {
  switch (e.type) {
    case 'designer_token':
      return Math.max(1, words(e.delta));
    case 'hint':
      return words(e.hint);
    case 'rollout_turn':
      return Math.max(1, words(e.data.action));
    default:
      return 0;
  }
}

/** Does delivering `e` finish a step of `kind`? */
function endsStep(kind: StepKind, e: LoopEvent): boolean {
  if (e.type === 'done' || e.type === 'stopped' || e.type === 'error') return true;
  switch (kind) {
    case 'event':
      return true;
    case 'play':
      return e.type === 'rollout_end' || e.type === 'env_scored' || e.type === 'task_error' || e.type === 'cycle_end';
    case 'env':
      return e.type === 'env_scored' || e.type === 'task_error' || e.type === 'cycle_end';
    case 'cycle':
      return e.type === 'cycle_end';
  }
}

export interface PacerOptions {
  /** Tokens per second; 0 = no pacing (events pass straight through unless paused). */
  tokensPerSecond?: number;
  clock?: PacerClock;
  /** Called after every change of the queue or the mode (for a display of what is waiting). */
  onChange?: () => void;
}

export class Pacer {
  private queue: LoopEvent[] = [];
  private timer: unknown = null;
  private tps: number;
  private held = false;
  /** A step in progress that ran out of queued events: it goes on as events arrive. */
  private stepping: StepKind | null = null;
  private readonly clock: PacerClock;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly deliver: (e: LoopEvent) => void,
    private readonly opts: PacerOptions = {},
  ) {
    this.tps = Math.max(0, opts.tokensPerSecond ?? 0);
    this.clock = opts.clock ?? realClock;
  }

  get tokensPerSecond(): number {
    return this.tps;
  }
  get paused(): boolean {
    return this.held;
  }
  /** Events received and not yet shown. */
  get queued(): number {
    return this.queue.length;
  }

  setSpeed(tokensPerSecond: number): void {
    this.tps = Math.max(0, Number.isFinite(tokensPerSecond) ? tokensPerSecond : 0);
    this.cancelTimer(); // the head's wait is recomputed at the new speed
    this.pump();
  }

  push(e: LoopEvent): void {
    this.queue.push(e);
    if (this.stepping) this.runStep(this.stepping);
    else this.pump();
    this.changed();
  }

  pause(): void {
    this.held = true;
    this.cancelTimer();
    this.changed();
  }

  play(): void {
    this.held = false;
    this.stepping = null;
    this.pump();
    this.changed();
  }

  /** While paused (or to pause): show events up to the end of the next `kind`, then hold. */
  step(kind: StepKind): void {
    this.held = true;
    this.cancelTimer();
    this.runStep(kind);
    this.changed();
  }

  /** Show everything queued now (a stopped run, leaving the panel). */
  flush(): void {
    this.cancelTimer();
    this.stepping = null;
    while (this.queue.length) this.deliver(this.queue.shift()!);
    this.settle();
    this.changed();
  }

  /** Resolves once nothing is left to show. */
  whenDrained(): Promise<void> {
    if (!this.queue.length) return Promise.resolve();
    return new Promise((res) => this.waiters.push(res));
  }

  private runStep(kind: StepKind): void {
    this.stepping = kind;
    while (this.queue.length) {
      const e = this.queue.shift()!;
      this.deliver(e);
      if (endsStep(kind, e)) {
        this.stepping = null;
        break;
      }
    }
    this.settle();
  }

  private pump(): void {
    if (this.held || this.timer !== null) return;
    while (this.queue.length) {
      const cost = this.tps > 0 ? (eventTokens(this.queue[0]!) * 1000) / this.tps : 0;
      if (cost > 0) {
        this.timer = this.clock.setTimeout(() => {
          this.timer = null;
          if (this.held || !this.queue.length) return;
          this.deliver(this.queue.shift()!);
          this.changed();
          this.pump();
        }, cost);
        return;
      }
      this.deliver(this.queue.shift()!);
    }
    this.settle();
  }

  private settle(): void {
    if (this.queue.length) return;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private changed(): void {
    this.opts.onChange?.();
  }
}
