// Opening run files in the app (src/state/run.svelte.ts): a `#run=URL` download is bounded — a
// server that drips bytes or stalls is given up on with a message saying what happened and what to
// do, a body past the size cap stops the download, the user can cancel — and a hostile file (also
// as a self-contained data: link) is refused quickly with the parser's error, the page's run intact.
import { gzipSync, strToU8 } from 'fflate';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/core/config.ts';
import { MAX_RUN_LIST, makeRunFile, runFileToJson } from '../../src/core/spade/run_file.ts';
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

async function timed(p: Promise<boolean>): Promise<[boolean, number]> {
  const t = performance.now();
  const ok = await p;
  return [ok, performance.now() - t];
}

describe('opening a run link', () => {
  it('opens a good run file from a link', async () => {
    const run = new RunState(new MemoryStore());
    const ok = await run.openRunUrl(
      'https://example.org/runs/a.json',
      serving((c) => (c.enqueue(strToU8(GOOD)), c.close())),
    );
    expect(ok, run.openError ?? '').toBe(true);
    expect(run.opened).toEqual({ name: 'a.json', from: 'link' });
    expect(run.opening).toBeNull();
  });

  it('gives up on a server that drips bytes, after the time-out, saying what to do', async () => {
    const run = new RunState(new MemoryStore());
    const drip = serving(async (c) => {
      await sleep(20);
      c.enqueue(new Uint8Array([0x20]));
    });
    const [ok, ms] = await timed(run.openRunUrl('https://slow.example/run.json', drip, { totalMs: 400, idleMs: 200 }));
    expect(ok).toBe(false);
    expect(ms).toBeLessThan(2000);
    expect(run.openError).toMatch(
      /^Could not open the run from https:\/\/slow\.example\/run\.json: the download took longer than 0\.4 s after \d+ bytes, so it was stopped\. .*try again later, or download the file and open it with "Open a run file"\.$/,
    );
    expect(run.opening).toBeNull();
  });

  it('gives up on a server that stalls, and on a fetch that never answers', async () => {
    const run = new RunState(new MemoryStore());
    let sent = false;
    const stall = serving(async (c) => {
      if (!sent) return ((sent = true), c.enqueue(strToU8('{"format":')));
      await new Promise(() => undefined);
    });
    expect(await run.openRunUrl('https://x.example/r.json', stall, { idleMs: 150 })).toBe(false);
    expect(run.openError).toMatch(/the server sent nothing for 0\.15 s after 10 bytes, so the download was stopped/);
    const never = (() => new Promise<Response>(() => undefined)) as typeof fetch;
    expect(await run.openRunUrl('https://x.example/r.json', never, { idleMs: 150 })).toBe(false);
    expect(run.openError).toMatch(/sent nothing for 0\.15 s before any data arrived/);
  });

  it('stops a body past the size cap while it streams', async () => {
    const run = new RunState(new MemoryStore());
    const mib = new Uint8Array(2 ** 20).fill(0x20);
    let n = 0;
    const endless = serving((c) => {
      n++;
      c.enqueue(mib);
    });
    expect(await run.openRunUrl('https://big.example/r.json', endless)).toBe(false);
    expect(run.openError).toMatch(/The linked run file is 65\.0 MiB; a run file may be at most 64 MiB/);
    expect(n).toBeLessThan(70);
  });

  it('the user can cancel, and what was on screen stays', async () => {
    const run = new RunState(new MemoryStore());
    const stall = serving(() => new Promise(() => undefined));
    const opening = run.openRunUrl('https://x.example/r.json', stall);
    await sleep(20);
    expect(run.opening).toBe('https://x.example/r.json');
    run.cancelOpen();
    expect(await opening).toBe(false);
    expect(run.openError).toBe(
      'Could not open the run from https://x.example/r.json: Cancelled: the run was not opened.',
    );
    expect(run.opening).toBeNull();
    expect(run.opened).toBeNull();
  });

  it('refuses a hostile self-contained data: link (a 64 KB gzip of 33 M zeros) quickly', async () => {
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
    const [ok, ms] = await timed(run.openRunUrl(link));
    expect(ok).toBe(false);
    expect(ms).toBeLessThan(1500);
    expect(run.openError).toBe(
      `Could not open linked run: $.archive is a list of more than ${MAX_RUN_LIST} items; a run file's lists hold at most ${MAX_RUN_LIST}. It was rejected.`,
    );
  });
});
