// `spade gpu` as users run it, outside any desktop session (no XDG_RUNTIME_DIR, no Wayland): the
// report and the self-check, and nothing on stderr — the Vulkan driver's Wayland probe used to print
// "error: XDG_RUNTIME_DIR is invalid or not set in the environment." twice on every GPU command.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tryGpu } from './gpu_setup.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const { ctx, reason } = await tryGpu(); // whether there is an adapter; the command acquires its own device

describe.skipIf(!ctx)(`spade gpu ${reason}`, () => {
  it('reports the adapter with no display noise on stderr', { timeout: 120_000 }, () => {
    const env = { ...process.env };
    for (const k of ['XDG_RUNTIME_DIR', 'WAYLAND_DISPLAY', 'WAYLAND_SOCKET']) delete env[k];
    const r = spawnSync(process.execPath, ['bin/spade.js', 'gpu', '--json'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ ok: true, selfCheck: { ok: true } });
    expect(r.stderr).not.toContain('XDG_RUNTIME_DIR');
    expect(r.stderr.trim()).toBe('');
  });
});
