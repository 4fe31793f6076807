/**
 * GPU tier setup: acquire a device on the `webgpu` package. In CI (CI=true) a
 * missing adapter is a failure; locally the tier skips with the reason.
 *
 * One device per worker process, shared by the files that worker runs (the gpu project sets
 * `isolate: false` in vitest.config.ts): a GpuContext caches its compiled pipelines, and on the
 * software adapter compiling them is most of the tier's CPU — a device per file compiled the same
 * kernels (sampling, attention, the matmul tiles) again in every file. A file that needs a device of
 * its own (one it destroys, loses or breaks) calls acquireNodeGpu itself, and never destroys this one.
 * A shared device that was lost or holds a GPU error is replaced, so one file's failure stays its own.
 */
import { acquireNodeGpu } from '../../src/platform/node/gpu.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';

type Gpu = { ctx: GpuContext | null; reason: string };
type Shared = Gpu & { gone?: boolean };
// on globalThis, not in this module: the shared device outlives any one file's module graph
const SHARED = Symbol.for('spade.gpuTier.device');
const shared = globalThis as { [SHARED]?: Promise<Shared> };

async function acquire(): Promise<Shared> {
  try {
    const got: Shared = { ctx: await acquireNodeGpu(), reason: '' };
    void got.ctx!.device.lost.then(() => (got.gone = true)); // destroyed (by mistake) or lost
    return got;
  } catch (err) {
    const reason = `no WebGPU adapter in Node (${(err as Error).message}); install the apt packages chromium and mesa-vulkan-drivers`;
    if (process.env.CI) throw new Error(`CI requires the GPU tier: ${reason}`, { cause: err });
    console.warn(`[gpu tier skipped] ${reason}`);
    return { ctx: null, reason };
  }
}

export async function tryGpu(): Promise<Gpu> {
  const prior = await shared[SHARED];
  if (prior && !prior.gone && !prior.ctx?.gpuError) return { ctx: prior.ctx, reason: prior.reason };
  shared[SHARED] = acquire();
  const { ctx, reason } = await shared[SHARED];
  return { ctx, reason };
}
