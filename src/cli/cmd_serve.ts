/**
 * `spade serve [SOURCE...] [--watch DIR] [--host H] [--port P] [--workers N] [--max-sessions N]
 *   [--idle-timeout S] [--max-turns N] [--token T] [--allow-origin URL] [--allow-host NAME]` — serve
 * environments over OpenEnv's protocol
 * (HTTP and /ws) until SIGINT or SIGTERM, then shut down gracefully. SOURCE: "seeds" (the default),
 * an env-set .json, a share link, environment .js files or a run directory (its valid
 * environments); --watch DIR adds a run directory's new valid environments as the loop writes them.
 * The token may also come from SPADE_SERVE_TOKEN; it is required on any host but loopback. Pages on
 * other origins and requests naming other hosts are refused unless --allow-origin / --allow-host
 * name them (docs/scale-out.md, "What the server refuses").
 */
import { SERVE_DEFAULTS } from '../core/defaults.ts';
import { UsageError } from '../core/errors.ts';
import { loadCatalog } from '../platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../platform/node/serve/server.ts';
import { flag, intFlag, JSON_FLAG, parseCommand, type CommandSpec, type Io } from './args.ts';

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(sig);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

export const SERVE: CommandSpec = {
  name: 'serve',
  usage: '[SOURCE...] [flags]',
  summary:
    'Serve environments over OpenEnv (HTTP and /ws) to RL trainers until Ctrl-C. SOURCE: "seeds" (the\n' +
    'default), an env-set .json, a share link, environment .js files or a run directory.',
  positionals: true,
  flags: {
    watch: { value: 'DIR', help: "add a run directory's new valid environments as the loop writes them" },
    host: {
      value: 'H',
      help: 'the address to listen on; any but loopback needs --token',
      default: SERVE_DEFAULTS.host,
    },
    port: { value: 'P', help: 'the port to listen on', default: SERVE_DEFAULTS.port },
    workers: { value: 'N', help: 'sandbox worker threads (default: one per CPU core)' },
    'max-sessions': { value: 'N', help: "concurrent sessions at most (default: what the workers' memory holds)" },
    'idle-timeout': {
      value: 'S',
      help: 'seconds before an idle session is closed',
      default: SERVE_DEFAULTS.idleTimeoutS,
    },
    'max-turns': { value: 'N', help: 'steps per episode at most', default: SERVE_DEFAULTS.maxTurns },
    token: { value: 'T', help: 'bearer token clients must send (or SPADE_SERVE_TOKEN)' },
    'allow-origin': {
      value: 'URL',
      help: 'a web page origin (http://host:port) allowed to call the server besides its own (on loopback: localhost, 127.0.0.1, [::1] at its port); others are refused',
      repeat: true,
    },
    'allow-host': {
      value: 'NAME',
      help: 'a host name clients may reach the server by, besides loopback names and IP addresses (a Host, not an origin)',
      repeat: true,
    },
    json: JSON_FLAG,
  },
  example: 'spade serve seeds --port 8000',
};

export async function serve(argv: string[], io: Io): Promise<number> {
  const args = parseCommand(SERVE, argv, io);
  if (!args) return 0;
  const watch = flag(args, 'watch');
  const positive = (name: string) => {
    const n = intFlag(args, name);
    if (n < 1) throw new UsageError(`--${name} must be at least 1; got ${n}`);
    return n;
  };
  const workers = args.flags.has('workers') ? positive('workers') : undefined;
  const maxSessions = args.flags.has('max-sessions') ? positive('max-sessions') : undefined;
  const idleS = positive('idle-timeout');
  const maxTurns = positive('max-turns');
  const port = intFlag(args, 'port');
  const token = flag(args, 'token') ?? process.env.SPADE_SERVE_TOKEN ?? null;
  const log = (line: string) => io.err(`spade serve: ${line}`);
  // --watch alone serves only that run's environments; with no source at all, the seed library
  const catalog = await loadCatalog(args.positional, log, watch);
  if (watch) {
    catalog.watch(
      watch,
      2000,
      (n) => io.out(`spade serve: ${n} new environment(s) from ${watch} (${catalog.size} in all)`),
      (err) => io.err(`spade serve: reading ${watch}: ${err.message}`),
    );
  }
  const server = await SpadeServer.start({
    catalog,
    host: flag(args, 'host')!,
    port,
    workers,
    maxSessions,
    idleTimeoutMs: idleS * 1000,
    maxTurns,
    token,
    allowOrigins: (args.flags.get('allow-origin') ?? []).flatMap((v) => v.split(',')),
    allowHosts: (args.flags.get('allow-host') ?? []).flatMap((v) => v.split(',')),
    log,
  });
  const s = server.stats();
  io.out(
    `spade serve: listening on ${server.url} (ws ${server.url.replace(/^http/, 'ws')}/ws) — ${catalog.size} environment(s), ${s.workers} worker(s), at most ${s.maxSessions} sessions${token ? ', bearer token required' : ''}`,
  );
  // last line of defence: a rejection nothing handled is logged, never the end of every session
  const onUnhandled = (err: unknown) =>
    log(
      `internal error, left unanswered: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`.slice(
        0,
        500,
      ),
    );
  process.on('unhandledRejection', onUnhandled);
  const sig = await untilSignal();
  process.off('unhandledRejection', onUnhandled);
  io.out(`spade serve: ${sig}: closing ${server.stats().sessions} session(s)`);
  await server.close();
  const end = server.stats();
  if (args.flags.has('json')) io.out(JSON.stringify({ ok: true, url: server.url, ...end }));
  else
    io.out(
      `spade serve: stopped (${end.liveEnvs} environment instance(s) left, ${end.workerReplacements} worker(s) replaced)`,
    );
  return 0;
}
