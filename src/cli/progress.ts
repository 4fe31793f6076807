/**
 * Progress on stderr for any phase of the CLI that may take more than ~2 s: a counter of items done
 * out of a total, the time spent and an estimate of the time left — a bar redrawn in place when
 * stderr is a terminal, otherwise whole lines (one every `every` items, plus one when `heartbeatMs`
 * passes without a line, so a long single item is never silence). Never on stdout: with --json the
 * last line of stdout stays the command's JSON object.
 *
 *   const p = startProgress(io, { label: 'probe (before training)', unit: 'plays', total: 6 });
 *   p.note('Lantern Lock, seed 101, turn 3');   // what is going on now (redraws the bar; no line of its own)
 *   p.tick();                                   // one more item done (a line every `every` items off a TTY)
 *   p.say('trained after cycle 1: …');          // a message of its own (above the bar on a TTY)
 *   p.finish('mean return 0.000');              // the last line, always printed
 *   p.interrupt();                              // Ctrl-C: end the bar's line, print nothing more
 *
 * Line format: `probe (before training): 2/6 plays · 1 min 05 s · about 2 min 10 s left · Lantern
 * Lock, seed 202`. The estimate is (time so far ÷ items done) × items left, shown from the first item.
 * Testable without wall time or a terminal: `now` is the clock, `schedule` starts the heartbeat (and
 * the bar's clock redraw) and returns its canceller, and `stream` is where a TTY bar is drawn.
 */
import { formatSeconds } from '../core/spade/run_progress.ts';
import type { Io } from './args.ts';

/** Where a bar is drawn: process.stderr, or a test's double. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressOptions {
  /** What runs: "probe (before training)", "cycle 2/3". */
  label: string;
  /** What one item is, plural: "plays", "environments", "steps". */
  unit: string;
  /** Items in all (0: unknown; then no estimate and no bar). */
  total: number;
  /** Off a TTY, a line every this many items (default: a tenth of the total, at least 1). */
  every?: number;
  /** Off a TTY, a line when this long passed with none (default 10 s); on a TTY the bar's clock redraw (1 s). */
  heartbeatMs?: number;
  /** Milliseconds, monotonic (default performance.now). */
  now?: () => number;
  /** Start a repeating timer; returns its canceller (default setInterval, unref'd so it never keeps Node alive). */
  schedule?: (fn: () => void, ms: number) => () => void;
}

export interface Progress {
  /** `n` more items done (default 1); `note` says what is going on now. */
  tick(n?: number, note?: string): void;
  /** What is going on now, without counting: redraws the bar; off a TTY it shows on the next line printed. */
  note(text: string): void;
  /** A message of its own while the counter runs: on a TTY above the bar (which is then redrawn). */
  say(text: string): void;
  /** The last line (done of total, the time taken, and `summary`); stops the heartbeat. Printed once. */
  finish(summary?: string): void;
  /** Stop at once (Ctrl-C, an error): end the bar's line, stop the heartbeat, print nothing more. */
  interrupt(): void;
  /** Items done so far. */
  readonly done: number;
}

const BAR_WIDTH = 20;
/** The TTY bar is redrawn at most this often between ticks (a note per token would flood a terminal). */
const REDRAW_MS = 100;

const defaultSchedule = (fn: () => void, ms: number): (() => void) => {
  const t = setInterval(fn, ms);
  t.unref?.();
  return () => clearInterval(t);
};

/** Seconds left at the average pace so far, or null before the first item (or with no total). */
export function secondsLeft(done: number, total: number, elapsedS: number): number | null {
  if (done <= 0 || total <= 0 || done >= total) return done >= total && total > 0 ? 0 : null;
  return (elapsedS / done) * (total - done);
}

/** One progress line: label, count, time spent, estimate, note (the bar, on a TTY, goes before it). */
export function progressLine(
  o: { label: string; unit: string; total: number },
  done: number,
  elapsedS: number,
  note = '',
): string {
  const parts = [`${o.label}: ${o.total > 0 ? `${done}/${o.total}` : done} ${o.unit}`, formatSeconds(elapsedS)];
  const left = secondsLeft(done, o.total, elapsedS);
  if (left !== null && done < o.total) parts.push(`about ${formatSeconds(left)} left`);
  if (note) parts.push(note);
  return parts.join(' · ');
}

/**
 * A reporter writing to `stream` as a bar when it is a TTY, else to `line` one line at a time.
 * `startProgress(io, o)` picks both from the command's Io; this is the constructor tests call.
 */
export function createProgress(
  o: ProgressOptions,
  out: { line: (text: string) => void; stream?: ProgressStream },
): Progress {
  const now = o.now ?? (() => performance.now());
  const schedule = o.schedule ?? defaultSchedule;
  const tty = Boolean(out.stream?.isTTY);
  const every = Math.max(1, Math.floor(o.every ?? Math.ceil(o.total / 10)));
  const t0 = now();
  let done = 0;
  let note = '';
  let lastLineAt = t0;
  let lastDrawAt = -Infinity;
  let lastLineCount = 0;
  let open = true;
  const elapsed = () => (now() - t0) / 1000;
  const draw = () => {
    const s = out.stream!;
    const text = progressLine(o, done, elapsed(), note);
    const fill = o.total > 0 ? Math.min(BAR_WIDTH, Math.round((done / o.total) * BAR_WIDTH)) : 0;
    const bar = o.total > 0 ? `[${'█'.repeat(fill)}${'░'.repeat(BAR_WIDTH - fill)}] ` : '';
    const max = Math.max(20, (s.columns ?? 100) - 1);
    const full = bar + text;
    s.write(`\r${full.length > max ? `${full.slice(0, max - 1)}…` : full}\x1b[K`);
    lastDrawAt = now();
  };
  const line = () => {
    out.line(progressLine(o, done, elapsed(), note));
    lastLineAt = now();
    lastLineCount = done;
  };
  const cancel = schedule(
    () => {
      if (!open) return;
      if (tty) draw();
      else if (now() - lastLineAt >= (o.heartbeatMs ?? 10_000)) line();
    },
    tty ? 1000 : (o.heartbeatMs ?? 10_000),
  );
  const close = () => {
    open = false;
    cancel();
  };
  return {
    get done() {
      return done;
    },
    tick(n = 1, text) {
      if (!open) return;
      done += n;
      if (text !== undefined) note = text;
      if (tty) draw();
      else if (done - lastLineCount >= every && done < o.total) line();
    },
    note(text) {
      if (!open) return;
      note = text;
      if (tty && now() - lastDrawAt >= REDRAW_MS) draw();
    },
    say(text) {
      if (!tty || !open) return out.line(text);
      out.stream!.write(`\r\x1b[K${text}\n`);
      draw();
    },
    finish(summary) {
      if (!open) return;
      close();
      note = summary ?? '';
      if (tty) {
        draw();
        out.stream!.write('\n');
      } else line();
    },
    interrupt() {
      if (!open) return;
      close();
      if (tty) out.stream!.write('\n');
    },
  };
}

/** A reporter on the command's stderr: a bar when `io.errStream` is a terminal, else lines through io.err. */
export function startProgress(io: Io, o: ProgressOptions): Progress {
  return createProgress(o, { line: (l) => io.err(l), ...(io.errStream?.isTTY ? { stream: io.errStream } : {}) });
}
