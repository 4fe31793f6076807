// Sandbox limits from the config and the host's action-length refusal, in process (fast): the guest
// stack is capped at 256 KiB whatever the config asks, and an action one character over
// maxActionChars is refused on the host while one at the limit reaches the guest.
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/core/config.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';
import { DEFAULT_LIMITS, limitsFromConfig } from '../../src/core/env/limits.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';

describe('sandbox limits', () => {
  it('caps the guest stack at 256 KiB; smaller settings pass through', () => {
    expect(limitsFromConfig({ ...DEFAULTS, sandboxStackKiB: 1024 }).stackBytes).toBe(256 * 1024);
    expect(limitsFromConfig({ ...DEFAULTS, sandboxStackKiB: 128 }).stackBytes).toBe(128 * 1024);
  });

  it('refuses an action one character over maxActionChars on the host', async () => {
    const api = createSandboxWorkerApi();
    const env = await api.load(FAKE_ENV, 12, { ...DEFAULT_LIMITS, maxActionChars: 40 });
    await api.reset(env.id, 0);
    const ok = await api.step(env.id, 'x'.repeat(40));
    expect(ok[0]).toMatch(/number/);
    const err = await Promise.resolve(api.step(env.id, 'x'.repeat(41))).catch((e: unknown) => e);
    expect((err as Error).name).toBe('ActionRejectedError');
    expect((err as Error).message).toMatch(/41 characters; the limit is 40/);
    await api.dispose(env.id);
  });
});
