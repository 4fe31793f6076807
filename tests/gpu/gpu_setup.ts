/**
 * GPU tier setup: acquire a device on the `webgpu` package. In CI (CI=true) a
 * missing adapter is a failure; locally the tier skips with the reason.
 *
 * One device per worker process, shared by the files that worker runs (the gpu project sets
 * `isolate: false` in vitest.config.ts) and by the engines they start through the product's own
 * paths (`spade engine` in multi_step_decode.test.ts, createEngineApi with `sharedDevice`): it is the
 * platform's sharedNodeGpu. A GpuContext caches its compiled pipelines, and on the software adapter
 * compiling them is most of the tier's CPU — a device per file (or per engine) compiled the same
 * kernels (sampling, attention, the matmul tiles) again each time. A file that needs a device of its
 * own (one it destroys, loses or breaks) calls acquireNodeGpu itself, and never destroys this one.
 * A shared device that was lost, destroyed or holds a GPU error is replaced, so one file's failure
 * stays its own.
 */
import { sharedNodeGpu } from '../../src/platform/node/gpu.ts';
import type { GpuContext } from '../../src/engine/runtime/device.ts';

type Gpu = { ctx: GpuContext | null; reason: string };

/** The worker's shared device (the platform's sharedNodeGpu: replaced once lost, destroyed or broken), or why there is none. */
export async function tryGpu(): Promise<Gpu> {
  try {
    return { ctx: await sharedNodeGpu(), reason: '' };
  } catch (err) {
    const reason = `no WebGPU adapter in Node (${(err as Error).message}); install the apt packages chromium and mesa-vulkan-drivers`;
    if (process.env.CI) throw new Error(`CI requires the GPU tier: ${reason}`, { cause: err });
    console.warn(`[gpu tier skipped] ${reason}`);
    return { ctx: null, reason };
  }
}
