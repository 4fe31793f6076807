// The device on the software adapter: its report, the self-check behind the status chip, the
// pipeline cache, GPU errors surfacing as GpuError, and device loss.
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceLostError, GpuError } from '../../src/core/errors.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';
import { gpuSelfCheck } from '../../src/engine/ops/self_check.ts';
import { acquireNodeGpu } from '../../src/platform/node/gpu.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

describe.skipIf(!ctx)(`WebGPU device ${reason}`, () => {
  const gpu = ctx as GpuContext;

  it('reports adapter, features and limits', () => {
    expect(gpu.report.architecture.length).toBeGreaterThan(0);
    expect(typeof gpu.report.features.shaderF16).toBe('boolean');
    expect(gpu.report.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
    expect(gpu.report.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  });

  it('passes the self-check: the add kernel equals its CPU reference exactly', async () => {
    expect(await gpuSelfCheck(gpu)).toEqual({ ok: true, maxAbsError: 0 });
  });

  it('caches a pipeline per key and constants', () => {
    const code =
      '@group(0) @binding(0) var<storage, read_write> x: array<f32>; override K: f32 = 1.0;\n@compute @workgroup_size(1) fn main() { x[0] = K; }';
    const p1 = gpu.pipeline('cache_probe', code, { K: 2 });
    expect(gpu.pipeline('cache_probe', code, { K: 2 })).toBe(p1);
    expect(gpu.pipeline('cache_probe', code, { K: 3 })).not.toBe(p1);
  });
});

describe.skipIf(!ctx)('GPU errors and device loss', () => {
  let own: GpuContext;
  beforeAll(async () => {
    own = await acquireNodeGpu();
  });

  it('a shader that fails to compile becomes a GpuError on the next call', async () => {
    const c = await acquireNodeGpu();
    c.pipeline('broken', 'this is not WGSL');
    await c.device.queue.onSubmittedWorkDone();
    await expect.poll(() => c.gpuError).toBeInstanceOf(GpuError);
    expect(() => c.throwIfLost()).toThrow(/The GPU reported an error: [\s\S]*This is a bug in a kernel/);
    c.destroy();
  });

  it('destroy() is not reported as a loss', async () => {
    const seen: DeviceLostError[] = [];
    own.onLost((e) => seen.push(e));
    own.destroy();
    await own.device.lost;
    expect(seen).toEqual([]);
  });
});
