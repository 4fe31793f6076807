/**
 * Run-file review in the browser, as a rune class: a run file opened from disk or from a `#run=URL` link is shown
 * in place of this browser's run (which stays saved; the live run, run.svelte.ts, owns this and brings its own
 * back on close) and reviewed cycle by cycle (core/spade/run_review.ts, ui/RunReview.svelte). A run file is parsed
 * in a worker (workers/run_file.worker.ts), so a hostile one cannot freeze the page; a link is fetched with a
 * time-out, an idle time-out and a byte cap, and both can be cancelled. Nothing in a run file runs: its
 * environments are played only from the Environments panel, on the user's click, in the sandbox.
 */
import * as Comlink from 'comlink';
import '../platform/rpc.ts';
import type { RunFileWorkerApi } from '../../workers/run_file.worker.ts';
import { joinChunks } from '../core/capped_decompress.ts';
import { abortError, RunFileError, serializeError } from '../core/errors.ts';
import { checkRunFileSize, parseRunFileBytes, type RunFile } from '../core/spade/run_file.ts';

/** Where a run file on screen came from. */
type OpenedFrom = 'file' | 'link';

/** The run the review shows its file in: refuses while busy (a run in progress), and shows a file it is handed. */
interface ReviewHost {
  busy(): boolean;
  show(file: RunFile, name: string, from: OpenedFrom): void;
}

/** Parses and checks a run file's bytes; rejects when `signal` aborts. */
type RunFileParser = (bytes: Uint8Array, signal: AbortSignal) => Promise<RunFile>;

/** The most a `#run=URL` download may take in all, and between two pieces of its body. */
const LINK_TIMEOUT_MS = 120_000;
const LINK_IDLE_MS = 30_000;
/** The most parsing one run file in the worker may take (a 64 MiB file takes a few seconds). */
const PARSE_TIMEOUT_MS = 60_000;
/**
 * A fetch that failed before any answer: the browser gives the same TypeError for a host that is
 * down, an address that does not resolve, a refused connection and a CORS refusal.
 */
const UNREACHABLE_WHY =
  'No answer came back: the host may be down or unreachable from here, the address may be mistyped, or the host does not allow other sites to read its files (CORS); the browser does not say which. Open the link in a new tab to tell: if the file downloads there, it is CORS.';

export class RunReviewState {
  /** Set while a run file (opened from disk or a link) is on screen instead of this browser's run. */
  opened = $state<{ name: string; from: OpenedFrom } | null>(null);
  /** Why the last run file or link could not be opened. */
  openError = $state<string | null>(null);
  /** What is being opened (a file's name or a link) while it is fetched and checked; cancelOpen stops it. */
  opening = $state<string | null>(null);

  private openAbort: AbortController | null = null;

  constructor(private readonly run: ReviewHost) {}

  /**
   * Show a run file (its bytes: JSON or gzip) in review mode, in place of this browser's run (which
   * stays saved; the run's closeOpened brings it back). It is parsed and checked off the page (parseRunFileOffThread);
   * nothing in it runs: its environments are played only from the Environments panel, on the user's
   * click, in the sandbox. A bad file, a cancel or a time-out becomes openError.
   */
  async openRunBytes(
    bytes: Uint8Array,
    name: string,
    from: OpenedFrom,
    parse: RunFileParser = parseRunFileOffThread,
  ): Promise<boolean> {
    if (this.run.busy()) {
      this.openError = 'Stop the current run before opening another one.';
      return false;
    }
    const ac = this.beginOpen(name);
    try {
      const file = await parse(bytes, ac.signal);
      this.openError = null;
      this.opened = { name, from };
      this.run.show(file, name, from);
      return true;
    } catch (err) {
      this.openError = `Could not open ${name}: ${serializeError(err).message}`;
      return false;
    } finally {
      this.endOpen(ac);
    }
  }

  /** Stop opening a run file or link (the Cancel button); what was on screen stays. */
  cancelOpen(): void {
    this.openAbort?.abort(new RunFileError('Cancelled: the run was not opened.'));
  }

  private beginOpen(what: string): AbortController {
    this.openAbort?.abort(new RunFileError('Cancelled: another run file was opened.'));
    const ac = new AbortController();
    this.openAbort = ac;
    this.opening = what;
    return ac;
  }

  private endOpen(ac: AbortController): void {
    if (this.openAbort !== ac) return;
    this.openAbort = null;
    this.opening = null;
  }

  /**
   * Fetch a run file from a link (any CORS-enabled host) and show it. The body is read within the
   * run file size cap (a larger declared or streamed size stops the download), within LINK_TIMEOUT_MS
   * in all and LINK_IDLE_MS between pieces (a server that drips bytes is given up on), and cancelOpen
   * stops it. Every failure becomes openError, saying what happened and what to do.
   */
  async openRunUrl(
    url: string,
    fetcher: typeof fetch = fetch,
    limits: { totalMs?: number; idleMs?: number } = {},
    parse: RunFileParser = parseRunFileOffThread,
  ): Promise<boolean> {
    if (this.run.busy()) {
      this.openError = 'Stop the current run before opening another one.';
      return false;
    }
    const shown = url.startsWith('data:') ? `${url.slice(0, 40)}…` : url.slice(0, 200);
    const name = url.startsWith('data:') ? 'linked run' : url.split('/').pop()?.split(/[?#]/)[0] || 'run';
    const totalMs = limits.totalMs ?? LINK_TIMEOUT_MS;
    const idleMs = limits.idleMs ?? LINK_IDLE_MS;
    const ac = this.beginOpen(shown);
    let received = 0;
    const got = () => (received ? ` after ${received} bytes` : ' before any data arrived');
    const total = setTimeout(
      () =>
        ac.abort(
          new RunFileError(
            `the download took longer than ${totalMs / 1000} s${got()}, so it was stopped. The server may be slow or stalled: try again later, or download the file and open it with "Open a run file".`,
          ),
        ),
      totalMs,
    );
    let idle: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(
        () =>
          ac.abort(
            new RunFileError(
              `the server sent nothing for ${idleMs / 1000} s${got()}, so the download was stopped. Check the link and try again, or download the file and open it with "Open a run file".`,
            ),
          ),
        idleMs,
      );
    };
    let bytes: Uint8Array;
    try {
      arm();
      const res = await untilAborted(fetcher(url, { signal: ac.signal }), ac.signal);
      if (!res.ok) throw new RunFileError(`the server answered HTTP ${res.status}; check the link.`);
      const declared = Number(res.headers.get('content-length') ?? 0);
      if (declared) checkRunFileSize(declared, 'The linked run file');
      bytes = await readCapped(res, ac.signal, (n) => {
        received = n;
        arm();
      });
      clearTimeout(idle);
    } catch (err) {
      const e = ac.signal.aborted ? abortError(ac.signal) : err;
      const m = serializeError(e).message;
      this.openError = `Could not open the run from ${shown}: ${
        !ac.signal.aborted && /fetch|network/i.test(m) ? `${m}. ${UNREACHABLE_WHY}` : m
      }`;
      this.endOpen(ac);
      return false;
    } finally {
      clearTimeout(total);
      clearTimeout(idle);
    }
    this.endOpen(ac);
    return this.openRunBytes(bytes, name, 'link', parse);
  }

  /** Leave the run file on screen (the live run brings its own back). */
  close(): void {
    this.opened = null;
    this.openError = null;
  }
}

/** `p`, or the signal's reason as soon as it aborts (a fetch double may ignore its signal). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Parse a run file in a worker of its own, ended when done, on abort or after PARSE_TIMEOUT_MS —
 * the page never runs the parse; where there are no workers (Node), the bounded parse runs here.
 */
async function parseRunFileOffThread(bytes: Uint8Array, signal: AbortSignal): Promise<RunFile> {
  if (typeof Worker === 'undefined')
    return untilAborted(
      Promise.resolve().then(() => parseRunFileBytes(bytes)),
      signal,
    );
  const worker = new Worker(new URL('../../workers/run_file.worker.ts', import.meta.url), {
    type: 'module',
    name: 'spade-run-file',
  });
  const failed = new Promise<never>((_, reject) =>
    worker.addEventListener('error', (e) =>
      reject(
        new RunFileError(`The run file reader failed to start (${e.message || 'no reason given'}); reload the page.`),
      ),
    ),
  );
  const timeout = new AbortController();
  const timer = setTimeout(
    () =>
      timeout.abort(
        new RunFileError(
          `Checking the run file took longer than ${PARSE_TIMEOUT_MS / 1000} s, so it was stopped; open a smaller run file.`,
        ),
      ),
    PARSE_TIMEOUT_MS,
  );
  try {
    const api = Comlink.wrap<RunFileWorkerApi>(worker);
    const parsed = Promise.race([api.parse(Comlink.transfer(bytes, [bytes.buffer])), failed]);
    return await untilAborted(untilAborted(parsed, signal), timeout.signal);
  } finally {
    clearTimeout(timer);
    worker.terminate();
  }
}

/** A response body, read chunk by chunk and abandoned past the run file size cap or on abort. */
async function readCapped(
  res: Response,
  signal: AbortSignal,
  onProgress: (bytes: number) => void,
): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array(await untilAborted(res.arrayBuffer(), signal));
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await untilAborted(reader.read(), signal);
      if (done) break;
      total += value.length;
      checkRunFileSize(total, 'The linked run file');
      onProgress(total);
      chunks.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    throw err;
  }
  return joinChunks(chunks, total);
}
