/**
 * The clients of `spade bench serve`, run as their own Node process (bench_serve.ts starts it), so
 * the server's process spends its time on the server only: `sessions` concurrent WebSocket sessions
 * each play their seed environment with its reference solution, episode after episode. Every session
 * first connects and plays one episode (its environment loads); then the timed window of `seconds`
 * starts for all at once, announced by printing TIMED_MARK, so the figures are the steady state.
 * Reads its ClientPlan as JSON on stdin and prints one ClientResult as JSON on stdout, last.
 */
import { OpenEnvWsClient } from '../platform/node/serve/ws_client.ts';

export interface ClientPlan {
  url: string;
  sessions: number;
  seconds: number;
  /** Session i plays envs[i % envs.length]: its env_id, title and the actions that win it at seed 0. */
  envs: { id: string; title: string; actions: string[] }[];
}

/** The line printed when the timed window starts (the server's side starts its CPU clock there). */
export const TIMED_MARK = 'timed window starts';

export interface ClientResult {
  /** Step latencies (send to reply), ms, to 0.01 ms. */
  latencies: number[];
  episodes: number;
  errors: number;
  firstError: string | null;
  /** From the start of the timed window to the last session's end. */
  seconds: number;
  /** CPU time the client process used (user + system), seconds. */
  cpuSeconds: number;
}

export async function runClients(plan: ClientPlan): Promise<ClientResult> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  const fail = (what: string) => {
    errors++;
    firstError ??= what;
  };
  let episodes = 0;
  let timed = false;
  let deadline = Infinity;
  let warm!: () => void;
  const allWarm = new Promise<void>((resolve) => (warm = resolve));
  let warming = plan.sessions;
  const warmed = () => {
    if (--warming === 0) warm();
  };
  const episode = async (client: OpenEnvWsClient, env: ClientPlan['envs'][number]) => {
    const r = await client.reset({ env_id: env.id, seed: 0 });
    if (r.type !== 'observation') throw new Error(String(r.data.message));
    let last = r;
    for (const text of env.actions) {
      const s0 = performance.now();
      last = await client.step({ text });
      if (timed) latencies.push(Math.round((performance.now() - s0) * 100) / 100);
      if (last.type !== 'observation') throw new Error(String(last.data.message));
      if (last.data.done) break;
    }
    if (timed) episodes++;
    if (!(last.data.done && Number(last.data.reward) > 0)) fail(`${env.title}: the reference solution did not win`);
  };
  const session = async (i: number) => {
    const env = plan.envs[i % plan.envs.length]!;
    let client: OpenEnvWsClient;
    try {
      client = await OpenEnvWsClient.connect(plan.url);
    } catch (err) {
      fail(`connect: ${(err as Error).message}`);
      warmed();
      return;
    }
    try {
      try {
        await episode(client, env);
      } finally {
        warmed();
      }
      await allWarm;
      do await episode(client, env);
      while (performance.now() < deadline);
      await client.close();
    } catch (err) {
      fail((err as Error).message);
      client.terminate();
    }
  };
  const all = Promise.all(Array.from({ length: plan.sessions }, (_, i) => session(i)));
  await allWarm;
  process.stdout.write(`${TIMED_MARK}\n`);
  timed = true;
  const t0 = performance.now();
  deadline = t0 + plan.seconds * 1000;
  const cpu0 = process.cpuUsage();
  await all;
  const cpu = process.cpuUsage(cpu0);
  return {
    latencies,
    episodes,
    errors,
    firstError,
    seconds: (performance.now() - t0) / 1000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}

async function main(): Promise<void> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  const result = await runClients(JSON.parse(text) as ClientPlan);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  });
}
