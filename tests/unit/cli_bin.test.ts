// The `spade` command as users run it: `node bin/spade.js ...` in a child process, through the real
// TypeScript loader (bin/ts_loader.js) and process exit code — exit 0 on success, 1 on a failed
// check, 2 on bad usage, and with --json the last line of stdout is one JSON object. (cli.test.ts
// covers the commands in depth by calling main() in-process; this file checks the binary around it.)
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SEED = 'src/core/env/seeds/lantern_lock.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last non-empty line of stdout, parsed as JSON (typed by the caller). */
  json: <T = { ok: boolean } & Record<string, unknown>>() => T;
}

function spade(...args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/spade.js', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({
        code,
        stdout,
        stderr,
        json: <T>() => JSON.parse(stdout.trimEnd().split('\n').at(-1) ?? '') as T,
      }),
    );
  });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spade-bin-'));
  // loads, but reset() returns a string instead of [observation, info]
  await writeFile(
    join(dir, 'broken.js'),
    `// @title Broken\nclass BrokenEnv { reset(seed) { return 'no tuple'; } step(a) { return ['x', 0, true, false, {}]; } solution() { return []; } }\n`,
  );
});

describe('bin/spade.js', { timeout: 60_000 }, () => {
  it('help exits 0; an unknown command exits 2 with one line on stderr, suggesting the nearest', async () => {
    const help = await spade('help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(
      'Exit codes: 0 success, 1 a check failed (or the command failed), 2 bad usage, 130 stopped by Ctrl-C.',
    );
    const bad = await spade('no-such-command');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('spade: unknown command "no-such-command" (spade help lists the commands)\n');
    expect(bad.stdout).toBe('');
    const typo = await spade('rnu');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('did you mean "run"?');
  });

  it('--version and -V print the version on stdout with exit 0', async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const v of ['--version', '-V']) {
      const r = await spade(v);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`spade ${pkg.version}\n`);
      expect(r.stderr).toBe('');
    }
  });

  it('a bad flag value exits 2, and --json still ends with one JSON object', async () => {
    const r = await spade('validate', SEED, '--max-turns', 'many', '--json');
    expect(r.code).toBe(2);
    expect(r.json()).toMatchObject({ ok: false, error: { name: 'UsageError' } });
    expect(r.stderr).toContain('--max-turns must be a whole number');
  });

  it('validate: a seed environment exits 0, a broken one exits 1; the last line is JSON', async () => {
    const good = await spade('validate', SEED, '--json');
    expect(good.code).toBe(0);
    expect(good.json()).toMatchObject({ ok: true, files: [{ ok: true, className: 'LanternLockEnv' }] });
    const bad = await spade('validate', join(dir, 'broken.js'), '--json');
    expect(bad.code).toBe(1);
    const j = bad.json<{ ok: boolean; files: { ok: boolean; checks: { name: string; ok: boolean }[] }[] }>();
    expect(j.ok).toBe(false);
    expect(j.files[0]!.checks.find((c) => !c.ok)?.name).toBe('reset');
  });

  it('play: replaying the solution as --actions gives the same transcript', async () => {
    const solved = await spade('play', SEED, '--seed', '4', '--solution', '--json');
    expect(solved.code).toBe(0);
    const s = solved.json<{ return: number; transcript: { action: string | null }[] }>();
    expect(s.return).toBeGreaterThan(0);
    const actions = s.transcript.map((t) => t.action).filter((a): a is string => a !== null);
    expect(actions.length).toBeGreaterThan(0);
    const replayed = await spade('play', SEED, '--seed', '4', '--actions', ...actions, '--json');
    expect(replayed.code).toBe(0);
    expect(replayed.json()).toEqual(s);
  });

  it('share encode → decode round trip', async () => {
    const enc = await spade('share', 'encode', SEED, '--json');
    expect(enc.code).toBe(0);
    const link = enc.json().link as string;
    expect(link).toMatch(/#panel=environments&set=/);
    const out = join(dir, 'set.json');
    const dec = await spade('share', 'decode', link, '--out', out, '--json');
    expect(dec.code).toBe(0);
    const code = await readFile(join(ROOT, SEED), 'utf8');
    expect(dec.json<{ set: { envs: { code: string }[] } }>().set.envs.map((e) => e.code)).toEqual([code]);
    expect(JSON.parse(await readFile(out, 'utf8')).envs[0].code).toBe(code);
  });
});
