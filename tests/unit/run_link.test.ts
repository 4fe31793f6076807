// Opening run files in the app (src/state/run_review.svelte.ts, owned by the run as `run.review`): a `#run=URL` download is bounded — a
// server that drips bytes or stalls is given up on with a message saying what happened and what to
// do, a body past the size cap stops the download, the user can cancel — and a hostile file (also
// as a self-contained data: link) is refused with the parser's error after scanning a few MB of it,
// the page's run intact. No wall-clock bounds: each case asserts which limit ended it and what it stopped.
import { gzipSync, strToU8 } from 'fflate';
import { describe, expect, it, vi } from 'vitest';
import { DEFAULTS } from '../../src/core/config.ts';
import { MAX_RUN_LIST, makeRunFile, RunFileScanner, runFileToJson } from '../../src/core/spade/run_file.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { RunState } from '../../src/state/run.svelte.ts';

const GOOD = runFileToJson(
  makeRunFile({
    spec: {
      config: DEFAULTS,
      skills: [],
      models: { designer: 'd', hint: 'h', agent: 'a' },
      corpus: 'test',
      createdAt: '2026-01-01T00:00:00Z',
    },
    archive: [],
    rollouts: [],
    metrics: [],
    memory: null,
  }),
);

/** A fetch double answering with a body that `pull` fills; it ignores the abort signal, as a stuck one would. */
function serving(pull: (c: ReadableStreamDefaultController<Uint8Array>) => Promise<void> | void): typeof fetch {
  return (async () => new Response(new ReadableStream<Uint8Array>({ pull }), { status: 200 })) as typeof fetch;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('opening a run link', () => {
  it('opens a good run file from a link', async () => {
    const run = new RunState(new MemoryStore());
    const ok = await run.review.openRunUrl(
      'https://example.org/runs/a.json',
      serving((c) => (c.enqueue(strToU8(GOOD)), c.close())),
    );
    expect(ok, run.review.openError ?? '').toBe(true);
    expect(run.review.opened).toEqual({ name: 'a.json', from: 'link' });
    expect(run.review.opening).toBeNull();
    // the file is on the run's screen in place of this browser's run; closing it brings that back
    expect([run.runId, run.status]).toEqual(['link-a.json', 'done']);
    await run.closeOpened();
    expect([run.review.opened, run.runId, run.status]).toEqual([null, null, 'idle']);
  });

  it('gives up on a server that drips bytes, at the total time-out, hanging up on it, saying what to do', async () => {
    const run = new RunState(new MemoryStore());
    // a byte at once, then one every 20 ms; the idle time-out is longer than the total one, so on any
    // machine only the total one can end it (bytes that keep coming must not keep it open)
    let pulls = 0;
    let hungUp = false;
    const drip = (async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          async pull(c) {
            if (pulls++) await sleep(20);
            if (!hungUp) c.enqueue(new Uint8Array([0x20]));
          },
          cancel: () => void (hungUp = true),
        }),
        { status: 200 },
      )) as typeof fetch;
    const ok = await run.review.openRunUrl('https://slow.example/run.json', drip, { totalMs: 400, idleMs: 60_000 });
    expect(ok).toBe(false);
    // the containment: the client cancelled the body (the server saw it hang up)
    expect(hungUp).toBe(true);
    expect(run.review.openError).toMatch(
      /^Could not open the run from https:\/\/slow\.example\/run\.json: the download took longer than 0\.4 s after \d+ bytes, so it was stopped\. .*try again later, or download the file and open it with "Open a run file"\.$/,
    );
    expect(run.review.opening).toBeNull();
  });

  it('a steady download outlives the idle time-out: each piece re-arms it (fake clock)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const run = new RunState(new MemoryStore());
      // a byte every 20 ms for ever; the idle time-out is 100 ms, the total 1 s: only the total may end it
      const drip = serving(async (c) => {
        await sleep(20);
        c.enqueue(new Uint8Array([0x20]));
      });
      const done = run.review.openRunUrl('https://steady.example/run.json', drip, { totalMs: 1000, idleMs: 100 });
      for (let t = 0; t < 60 && run.review.opening; t++) await vi.advanceTimersByTimeAsync(20);
      expect(await done).toBe(false);
      expect(run.review.openError).toMatch(/the download took longer than 1 s after \d+ bytes, so it was stopped/);
    } finally {
      vi.useRealTimers();
    }
  });

  it('gives up on a server that stalls, and on a fetch that never answers', async () => {
    const run = new RunState(new MemoryStore());
    let sent = false;
    const stall = serving(async (c) => {
      if (!sent) return ((sent = true), c.enqueue(strToU8('{"format":')));
      await new Promise(() => undefined);
    });
    expect(await run.review.openRunUrl('https://x.example/r.json', stall, { idleMs: 150 })).toBe(false);
    expect(run.review.openError).toMatch(
      /the server sent nothing for 0\.15 s after 10 bytes, so the download was stopped/,
    );
    const never = (() => new Promise<Response>(() => undefined)) as typeof fetch;
    expect(await run.review.openRunUrl('https://x.example/r.json', never, { idleMs: 150 })).toBe(false);
    expect(run.review.openError).toMatch(/sent nothing for 0\.15 s before any data arrived/);
  });

  it('stops a body past the size cap while it streams', async () => {
    const run = new RunState(new MemoryStore());
    const mib = new Uint8Array(2 ** 20).fill(0x20);
    let n = 0;
    const endless = serving((c) => {
      n++;
      c.enqueue(mib);
    });
    expect(await run.review.openRunUrl('https://big.example/r.json', endless)).toBe(false);
    expect(run.review.openError).toMatch(/The linked run file is 65\.0 MiB; a run file may be at most 64 MiB/);
    expect(n).toBeLessThan(70);
  });

  it('the user can cancel, and what was on screen stays', async () => {
    const run = new RunState(new MemoryStore());
    const stall = serving(() => new Promise(() => undefined));
    const opening = run.review.openRunUrl('https://x.example/r.json', stall);
    await sleep(20);
    expect(run.review.opening).toBe('https://x.example/r.json');
    run.review.cancelOpen();
    expect(await opening).toBe(false);
    expect(run.review.openError).toBe(
      'Could not open the run from https://x.example/r.json: Cancelled: the run was not opened.',
    );
    expect(run.review.opening).toBeNull();
    expect(run.review.opened).toBeNull();
  });

  it('refuses a hostile self-contained data: link (a 64 KB gzip of 33 M zeros) after scanning a few MB of it', async () => {
    const head = GOOD.slice(0, GOOD.indexOf('"archive":[') + '"archive":['.length);
    const body = new Uint8Array(head.length + 66_000_000 + 2);
    body.set(strToU8(head));
    for (let at = head.length; at < body.length - 2; at += 2) {
      body[at] = 0x30;
      body[at + 1] = 0x2c;
    }
    body.set(strToU8('0]'), body.length - 2);
    const gz = gzipSync(body, { level: 9 });
    const link = `data:application/gzip;base64,${Buffer.from(gz).toString('base64')}`;
    expect(link.length).toBeLessThan(200_000);
    const run = new RunState(new MemoryStore());
    // the containment, counted: the bytes unpacked and handed to the scanner before it refused them
    let scanned = 0;
    const push = RunFileScanner.prototype.push;
    const spy = vi.spyOn(RunFileScanner.prototype, 'push').mockImplementation(function (this: RunFileScanner, b) {
      scanned += b.length;
      push.call(this, b);
    });
    let ok: boolean;
    try {
      ok = await run.review.openRunUrl(link);
    } finally {
      spy.mockRestore();
    }
    expect(ok).toBe(false);
    expect(scanned).toBeGreaterThan(2 * MAX_RUN_LIST);
    expect(scanned).toBeLessThan(2 * MAX_RUN_LIST + 8 * 2 ** 20);
    expect(run.review.openError).toBe(
      `Could not open linked run: $.archive is a list of more than ${MAX_RUN_LIST} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
    );
  });
});
