// A Python OpenEnv client (standard library + Debian's python3-websockets, tests/helpers/
// openenv_client.py) plays every seed environment through `spade serve` with its reference
// solution and gets exactly the transcripts `spade play --solution --json` prints for the same
// seeds. Skips, saying why, when no python3 here can import websockets (.ci/run installs it).
import { spawnSync, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { play } from '../../src/cli/cmd_env.ts';
import { SEED_ENVS, SEED_FILES } from '../../src/core/env/seeds/index.ts';
import { EnvCatalog } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';

const CLIENT = new URL('../helpers/openenv_client.py', import.meta.url).pathname;
const SEEDS_DIR = new URL('../../src/core/env/seeds/', import.meta.url).pathname;

/** Debian's python3 first (where python3-websockets installs), then whatever python3 is on PATH. */
const python = ['/usr/bin/python3', 'python3'].find(
  (p) => spawnSync(p, ['-c', 'import websockets'], { stdio: 'ignore' }).status === 0,
);

describe.skipIf(!python)('spade serve: a Python OpenEnv client', () => {
  let server: SpadeServer;
  beforeAll(async () => {
    server = await SpadeServer.start({ catalog: new EnvCatalog('seeds', SEED_ENVS), port: 0, workers: 2 });
  });
  afterAll(() => server.close());

  it('plays every seed environment to a win with the same transcripts as `spade play`', async () => {
    const files = Object.keys(SEED_FILES);
    const expected = await Promise.all(
      files.map(async (file, i) => {
        const out: string[] = [];
        const code = await play([join(SEEDS_DIR, file), '--solution', '--json', '--seed', String(i + 1)], {
          out: (l) => out.push(l),
          err: () => undefined,
        });
        expect(code).toBe(0);
        return JSON.parse(out[out.length - 1]!) as {
          seed: number;
          return: number;
          transcript: { action: string | null }[];
        };
      }),
    );
    const plan = files.map((_, i) => ({
      env_id: SEED_ENVS[i]!.id,
      seed: i + 1,
      actions: expected[i]!.transcript.slice(1).map((t) => t.action),
    }));
    const dir = await mkdtemp(join(tmpdir(), 'spade-py-'));
    await writeFile(join(dir, 'plan.json'), JSON.stringify(plan));
    const child = spawn(python!, [CLIENT, server.url, join(dir, 'plan.json')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const got = JSON.parse(stdout) as { env_id: string; seed: number; return: number; transcript: unknown[] }[];
    expect(got).toHaveLength(16);
    got.forEach((g, i) => {
      expect(g.return).toBeGreaterThan(0);
      expect(g.return).toBe(expected[i]!.return);
      expect(g.transcript).toEqual(expected[i]!.transcript);
    });
    for (let i = 0; i < 500 && server.stats().sessions > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(server.stats()).toMatchObject({ sessions: 0, liveEnvs: 0, workerReplacements: 0 });
  }, 60_000);
});
