// The pacer (core/spade/pacer.ts) on a fake clock: events pass straight through unpaced; at N
// tokens/s a typed word waits 1/N s; pause holds everything; steps show one event, one play, one
// environment or one cycle and hold again, going on as new events arrive; flush and whenDrained.
import { describe, expect, it } from 'vitest';
import { eventTokens, Pacer, type PacerClock } from '../../src/core/spade/pacer.ts';
import type { LoopEvent } from '../../src/core/spade/run_events.ts';

/** A clock whose time moves only when the test says so. */
class FakeClock implements PacerClock {
  now = 0;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private next = 1;
  setTimeout(fn: () => void, ms: number) {
    const id = this.next++;
    this.timers.push({ at: this.now + ms, fn, id });
    return id;
  }
  clearTimeout(h: unknown) {
    this.timers = this.timers.filter((t) => t.id !== h);
  }
  advance(ms: number) {
    const end = this.now + ms;
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at);
      const t = this.timers[0];
      if (!t || t.at > end) break;
      this.timers.shift();
      this.now = t.at;
      t.fn();
    }
    this.now = end;
  }
}

const tok = (delta: string): LoopEvent => ({ type: 'designer_token', cycle: 0, index: 0, attempt: 0, delta });
const turn = (play: number, action: string): LoopEvent => ({
  type: 'rollout_turn',
  cycle: 0,
  index: 0,
  play,
  hinted: false,
  turn: 0,
  data: { action, observation: 'o', reward: 0, terminated: false, truncated: false, formatError: false },
});
const end = (play: number): LoopEvent => ({
  type: 'rollout_end',
  cycle: 0,
  index: 0,
  play,
  hinted: false,
  return: 1,
  end: 'terminated',
});
const start: LoopEvent = { type: 'cycle_start', cycle: 0, skills: ['a'] };
const cycleEnd = { type: 'cycle_end', cycle: 0 } as unknown as LoopEvent;
const scored = { type: 'env_scored', cycle: 0, index: 0 } as unknown as LoopEvent;

function setup(tokensPerSecond = 0) {
  const clock = new FakeClock();
  const shown: LoopEvent[] = [];
  const pacer = new Pacer((e) => shown.push(e), { tokensPerSecond, clock });
  return { clock, shown, pacer, types: () => shown.map((e) => e.type) };
}

describe('pacer', () => {
  it('costs typed words only', () => {
    expect(eventTokens(tok(' hello'))).toBe(1);
    expect(eventTokens(turn(0, 'probe 3 now'))).toBe(3);
    expect(eventTokens({ type: 'hint', cycle: 0, index: 0, hint: 'try the middle' })).toBe(3);
    expect(eventTokens(start)).toBe(0);
  });

  it('passes events straight through when unpaced', () => {
    const { pacer, shown } = setup(0);
    pacer.push(start);
    pacer.push(tok('a'));
    expect(shown.length).toBe(2);
    expect(pacer.queued).toBe(0);
  });

  it('shows typed words at the chosen tokens per second', () => {
    const { pacer, shown, clock } = setup(10); // 100 ms a word
    pacer.push(start);
    for (const w of ['one', ' two', ' three']) pacer.push(tok(w));
    expect(shown.length).toBe(1); // the cycle start costs nothing
    clock.advance(99);
    expect(shown.length).toBe(1);
    clock.advance(1);
    expect(shown.length).toBe(2);
    clock.advance(200);
    expect(shown.length).toBe(4);
    pacer.push(tok('four'));
    pacer.setSpeed(1000); // faster: the wait is recomputed
    clock.advance(1);
    expect(shown.length).toBe(5);
  });

  it('holds everything while paused and goes on when played', () => {
    const { pacer, shown, clock } = setup(0);
    pacer.pause();
    pacer.push(start);
    pacer.push(tok('x'));
    clock.advance(10_000);
    expect(shown.length).toBe(0);
    expect(pacer.queued).toBe(2);
    pacer.play();
    expect(shown.length).toBe(2);
  });

  it('steps by event, play, environment and cycle, then holds', () => {
    const { pacer, types } = setup(0);
    pacer.pause();
    for (const e of [
      start,
      tok('a'),
      tok('b'),
      turn(0, 'x'),
      turn(0, 'y'),
      end(0),
      turn(1, 'z'),
      end(1),
      scored,
      cycleEnd,
    ])
      pacer.push(e);
    pacer.step('event');
    expect(types()).toEqual(['cycle_start']);
    pacer.step('play');
    expect(types()).toEqual([
      'cycle_start',
      'designer_token',
      'designer_token',
      'rollout_turn',
      'rollout_turn',
      'rollout_end',
    ]);
    pacer.step('env');
    expect(types().slice(6)).toEqual(['rollout_turn', 'rollout_end', 'env_scored']);
    pacer.step('cycle');
    expect(types().at(-1)).toBe('cycle_end');
    expect(pacer.paused).toBe(true);
    expect(pacer.queued).toBe(0);
  });

  it('a step that runs out of events goes on as they arrive, then holds', () => {
    const { pacer, types } = setup(0);
    pacer.pause();
    pacer.push(turn(0, 'x'));
    pacer.step('play');
    expect(types()).toEqual(['rollout_turn']);
    pacer.push(end(0)); // the step's boundary arrives later
    pacer.push(turn(1, 'y')); // and is held after it
    expect(types()).toEqual(['rollout_turn', 'rollout_end']);
    expect(pacer.queued).toBe(1);
  });

  it('flush shows everything; whenDrained waits for the queue to empty', async () => {
    const { pacer, shown, clock } = setup(1);
    pacer.push(tok('a'));
    pacer.push(tok('b'));
    let drained = false;
    const done = pacer.whenDrained().then(() => (drained = true));
    clock.advance(1000);
    await Promise.resolve();
    expect(drained).toBe(false);
    pacer.flush();
    await done;
    expect(shown.length).toBe(2);
    expect(drained).toBe(true);
  });
});
