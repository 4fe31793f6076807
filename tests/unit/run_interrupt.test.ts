// Ctrl-C on `spade run` as users press it: SIGINT to a child process (node bin/spade.js) on a fresh
// tiny checkpoint with --train. Mid-probe and mid-run it stops at the next step, says what the run
// directory kept and the command that resumes it — never an AbortError — and exits 130; that command
// then finishes the run. No wall time decides anything: the signal is sent when a progress line shows
// the phase under way.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs `spade ...args`; `interruptWhen` sees each stderr line and says when to send SIGINT (once). */
function spade(args: string[], interruptWhen?: (line: string) => boolean) {
  return new Promise<{ code: number | null; stdout: string; stderr: string[] }>((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/spade.js', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let buf = '';
    const stderr: string[] = [];
    let sent = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) {
        stderr.push(l);
        if (!sent && interruptWhen?.(l)) {
          sent = true;
          child.kill('SIGINT');
        }
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr: buf ? [...stderr, buf] : stderr }));
  });
}

const SMALL = [
  '--device',
  'cpu',
  '--corpus',
  'none',
  '--set',
  'skillsPerCycle=1',
  'envsPerSkill=2',
  'playsPerEnv=1',
  'maxTurns=2',
  'designerMaxTokens=500',
  'repairTurns=0',
  'agentTokenBudget=100',
];

let dir: string;
beforeAll(() => {
  dir = join(tmpdir(), `spade-sigint-${process.pid}`);
  const r = spawnSync(
    process.execPath,
    ['bin/spade.js', 'engine', 'init', '--arch', 'qwen2', '--layers', '1', '--hidden', '32', '--out', join(dir, 'm')],
    { cwd: ROOT, encoding: 'utf8' },
  );
  expect(r.status, r.stderr).toBe(0);
});

describe('spade run: Ctrl-C', { timeout: 300_000 }, () => {
  it('mid-probe: says nothing was finished and how to resume, exits 130, no AbortError', async () => {
    const out = await mkdtemp(join(tmpdir(), 'spade-sigint-probe-'));
    const args = ['run', '--backend', 'local', '--model-dir', join(dir, 'm'), '--train', '--iterations', '5'];
    const r = await spade([...args, '--out', out, ...SMALL], (l) => /^probe \(before training\): 1\/6 plays/.test(l));
    const text = r.stderr.join('\n');
    expect(r.code, text).toBe(130);
    expect(text).not.toMatch(/AbortError|aborted/);
    expect(text).toContain('stopping: the environments in flight are left for --resume');
    expect(r.stderr).toContain(`stopped during cycle 1 of 5: ${out} keeps no finished cycle`);
    expect(text).toContain(`the adapter in ${join(out, 'train')} has no update yet`);
    expect(text).toMatch(/resume with: spade run --backend local .* --resume$/m);
    expect(r.stdout).toBe('');
  });

  it('mid-run: names the cycles kept and the adapter, exits 130; the printed command finishes the run', async () => {
    const out = await mkdtemp(join(tmpdir(), 'spade-sigint-run-'));
    const args = ['run', '--backend', 'local', '--model-dir', join(dir, 'm'), '--train', '--iterations', '6'];
    const r = await spade([...args, '--out', out, ...SMALL], (l) => /^trained after cycle 1:/.test(l));
    const text = r.stderr.join('\n');
    expect(r.code, text).toBe(130);
    expect(text).not.toMatch(/AbortError/);
    const stopped = /^stopped during cycle (\d) of 6: (.*) keeps (cycles? 1(?:–\d)?) \(finished and written\)/m.exec(
      text,
    );
    expect(stopped, text).not.toBeNull();
    const kept = Number(stopped![1]) - 1;
    expect(stopped![2]).toBe(out);
    const state = JSON.parse(await readFile(join(out, 'state.json'), 'utf8')) as { cycle: number };
    expect(state.cycle).toBe(kept);
    const trained = JSON.parse(await readFile(join(out, 'train', 'state.json'), 'utf8')) as { trainedThrough: number };
    expect(text).toContain(`is trained through cycle ${trained.trainedThrough + 1}`);
    // the printed command resumes the run to its end
    const resume = /resume with: spade (run .*)$/m.exec(text)![1]!.split(' ');
    expect(resume).toContain('--resume');
    const again = await spade([...resume, '--json']);
    expect(again.code, again.stderr.join('\n')).toBe(0);
    expect(JSON.parse(again.stdout.trim().split('\n').at(-1)!)).toMatchObject({ ok: true, cycles: 6 });
  });
});
