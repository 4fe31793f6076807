/**
 * The Run panel's progress line for the live cycle, in words: the phase (designing, checking,
 * playing, finishing), how many environments and plays are done, the designer's characters
 * streamed, the time spent in this cycle and an estimate of the time left (from the cycles this
 * session has timed). Pure: the panel passes the live tasks and its clock.
 */
import type { TaskView } from './run_events.ts';

/** "42 s", "3 min 05 s". */
export function formatSeconds(s: number): string {
  const t = Math.max(0, Math.round(s));
  return t < 60 ? `${t} s` : `${Math.floor(t / 60)} min ${String(t % 60).padStart(2, '0')} s`;
}

export interface CycleClock {
  /** Seconds since this cycle started. */
  elapsed: number;
  /** Seconds the cycles timed so far took each (empty: no estimate yet). */
  done: number[];
  /** Cycles still to run after this one. */
  after: number;
}

/** The phase, counts, elapsed time and time left of the live cycle (one line). */
export function cycleProgress(tasks: TaskView[], playsPerEnv: number, clock: CycleClock): string {
  const designed = tasks.filter((t) => t.record || t.attempts.some((a) => a.ok)).length;
  const finished = tasks.filter((t) => t.record || t.error).length;
  const plays = tasks.reduce((a, t) => a + t.plays.filter((p) => p.result !== null).length, 0);
  const valid = tasks.filter((t) => (t.record ? t.record.stats : t.attempts.some((a) => a.ok))).length;
  const chars = tasks.reduce((a, t) => a + t.designer.length, 0);
  const playing = tasks.some((t) => t.plays.some((p) => p.result === null));
  const writing = tasks.some((t) => !t.record && !t.error && !t.attempts.some((a) => a.ok));
  const phase = !tasks.length
    ? 'starting the cycle (skills, documents, memory)'
    : finished === tasks.length
      ? 'finishing the cycle (memory, metrics, training if it is on)'
      : playing
        ? 'playing'
        : writing
          ? 'designing and checking'
          : 'writing hints and playing';
  const parts = [phase];
  if (tasks.length) {
    parts.push(`${designed} of ${tasks.length} environments valid so far, ${finished} finished`);
    parts.push(`${plays} of ${valid * playsPerEnv * 2} plays`);
    parts.push(`designer wrote ${chars.toLocaleString('en')} characters`);
  }
  parts.push(`${formatSeconds(clock.elapsed)} in this cycle`);
  if (clock.done.length) {
    const per = clock.done.reduce((a, b) => a + b, 0) / clock.done.length;
    parts.push(`about ${formatSeconds(Math.max(0, per - clock.elapsed) + per * clock.after)} left`);
  }
  return parts.join(' · ');
}
