/**
 * GPU tier setup: acquire a device on the `webgpu` package. In CI (CI=true) a
 * missing adapter is a failure; locally the tier skips with the reason.
 */
import { acquireNodeGpu } from '../../src/platform/node/gpu.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';

export async function tryGpu(): Promise<{ ctx: GpuContext | null; reason: string }> {
  try {
    return { ctx: await acquireNodeGpu(), reason: '' };
  } catch (err) {
    const reason = `no WebGPU adapter in Node (${(err as Error).message}); install the apt packages chromium and mesa-vulkan-drivers`;
    if (process.env.CI) throw new Error(`CI requires the GPU tier: ${reason}`, { cause: err });
    console.warn(`[gpu tier skipped] ${reason}`);
    return { ctx: null, reason };
  }
}
