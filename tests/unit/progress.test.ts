// cli/progress.ts on a fake clock and a fake timer: off a TTY, one line every `every` items and one
// per heartbeat with no line; on a TTY, a bar redrawn in place (\r … \x1b[K) and ended with a line
// break; the estimate is the average pace so far; finish prints once, interrupt prints nothing.
import { describe, expect, it } from 'vitest';
import { createProgress, progressLine, secondsLeft, startProgress } from '../../src/cli/progress.ts';

function harness(opts: { tty?: boolean; total?: number; every?: number; heartbeatMs?: number } = {}) {
  let t = 0;
  let timer: { fn: () => void; ms: number } | null = null;
  let cancelled = false;
  const lines: string[] = [];
  const writes: string[] = [];
  const p = createProgress(
    {
      label: 'probe',
      unit: 'plays',
      total: opts.total ?? 6,
      every: opts.every,
      heartbeatMs: opts.heartbeatMs,
      now: () => t,
      schedule: (fn, ms) => {
        timer = { fn, ms };
        return () => (cancelled = true);
      },
    },
    {
      line: (l) => lines.push(l),
      ...(opts.tty ? { stream: { isTTY: true, columns: 200, write: (s: string) => writes.push(s) } } : {}),
    },
  );
  return {
    p,
    lines,
    writes,
    advance(ms: number) {
      t += ms;
    },
    fire() {
      timer!.fn();
    },
    timer: () => timer,
    cancelled: () => cancelled,
  };
}

describe('progress', () => {
  it('estimates from the average pace so far, from the first item on', () => {
    expect(secondsLeft(0, 6, 10)).toBeNull();
    expect(secondsLeft(2, 6, 10)).toBe(20);
    expect(secondsLeft(6, 6, 10)).toBe(0);
    expect(secondsLeft(3, 0, 10)).toBeNull();
    expect(progressLine({ label: 'probe', unit: 'plays', total: 6 }, 2, 65, 'Lantern Lock, seed 202')).toBe(
      'probe: 2/6 plays · 1 min 05 s · about 2 min 10 s left · Lantern Lock, seed 202',
    );
    expect(progressLine({ label: 'steps', unit: 'steps', total: 0 }, 4, 3)).toBe('steps: 4 steps · 3 s');
  });

  it('off a TTY: a line every `every` items, none for notes, the last line once from finish', () => {
    const h = harness({ total: 10, every: 3 });
    for (let i = 1; i <= 10; i++) {
      h.advance(1000);
      h.p.note(`item ${i}`);
      h.p.tick();
    }
    // after items 3, 6 and 9 (10 is finish's)
    expect(h.lines).toEqual([
      'probe: 3/10 plays · 3 s · about 7 s left · item 3',
      'probe: 6/10 plays · 6 s · about 4 s left · item 6',
      'probe: 9/10 plays · 9 s · about 1 s left · item 9',
    ]);
    h.p.finish('mean return 0.5');
    h.p.finish('again');
    expect(h.lines.at(-1)).toBe('probe: 10/10 plays · 10 s · mean return 0.5');
    expect(h.lines).toHaveLength(4);
    expect(h.cancelled()).toBe(true);
  });

  it('off a TTY the default is a line every tenth of the total (every item below 10)', () => {
    const six = harness({ total: 6 });
    for (let i = 0; i < 5; i++) six.p.tick();
    expect(six.lines).toHaveLength(5);
    const hundred = harness({ total: 100 });
    for (let i = 0; i < 99; i++) hundred.p.tick();
    expect(hundred.lines.map((l) => l.split(' ')[1])).toEqual([
      '10/100',
      '20/100',
      '30/100',
      '40/100',
      '50/100',
      '60/100',
      '70/100',
      '80/100',
      '90/100',
    ]);
  });

  it('off a TTY a long item is not silence: the heartbeat prints a line when none came for heartbeatMs', () => {
    const h = harness({ total: 6, heartbeatMs: 10_000 });
    expect(h.timer()!.ms).toBe(10_000);
    h.p.note('Lantern Lock, seed 101, turn 2');
    h.advance(4_000);
    h.fire();
    expect(h.lines).toEqual([]);
    h.advance(6_000);
    h.fire();
    expect(h.lines).toEqual(['probe: 0/6 plays · 10 s · Lantern Lock, seed 101, turn 2']);
    h.advance(5_000);
    h.fire();
    expect(h.lines).toHaveLength(1);
    h.p.interrupt();
    h.advance(60_000);
    h.fire();
    h.p.tick();
    expect(h.lines).toHaveLength(1);
  });

  it('on a TTY: a bar redrawn in place, notes throttled, messages above it, a line break at the end', () => {
    const h = harness({ tty: true, total: 4 });
    expect(h.timer()!.ms).toBe(1000);
    h.p.tick();
    expect(h.writes.at(-1)).toBe('\r[█████░░░░░░░░░░░░░░░] probe: 1/4 plays · 0 s · about 0 s left\x1b[K');
    const n = h.writes.length;
    h.p.note('a');
    h.p.note('b'); // within 100 ms of the last draw: not drawn
    expect(h.writes.length).toBe(n);
    h.advance(150);
    h.p.note('c');
    expect(h.writes.at(-1)!.endsWith(' · c\x1b[K')).toBe(true);
    h.p.say('trained after cycle 1');
    expect(h.writes.slice(-2)[0]).toBe('\r\x1b[Ktrained after cycle 1\n');
    expect(h.writes.at(-1)).toMatch(/^\r\[/);
    h.p.tick(3);
    h.p.finish('all played');
    expect(h.writes.at(-1)).toBe('\n');
    expect(h.writes.at(-2)).toBe('\r[████████████████████] probe: 4/4 plays · 0 s · all played\x1b[K');
    expect(h.lines).toEqual([]);
  });

  it('startProgress draws on io.errStream only when it is a terminal, else prints lines through io.err', () => {
    const err: string[] = [];
    const writes: string[] = [];
    const io = { out: () => undefined, err: (l: string) => err.push(l) };
    const opts = { label: 'x', unit: 'items', total: 2, schedule: () => () => undefined };
    startProgress({ ...io, errStream: { isTTY: false, write: (s: string) => writes.push(s) } }, opts).finish();
    expect(err).toHaveLength(1);
    startProgress({ ...io, errStream: { isTTY: true, write: (s: string) => writes.push(s) } }, opts).finish();
    expect(err).toHaveLength(1);
    expect(writes.at(-1)).toBe('\n');
  });
});
