/**
 * WebGPU in Node through the `webgpu` package (Dawn). On machines without a GPU,
 * point the Vulkan loader at a software driver before the first adapter request:
 * VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json (apt package chromium).
 * We set that automatically when the variable is unset and the file exists.
 */
import { existsSync } from 'node:fs';
import { acquireGpu, type GpuContext } from '../../engine/engine_api.ts';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

let gpuObject: GPU | null = null;

export async function nodeGpu(): Promise<GPU> {
  if (gpuObject) return gpuObject;
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD) && !process.env.SPADE_NO_SWIFTSHADER) {
    process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  }
  // Outside a desktop session, libwayland-client (loaded by a Vulkan driver) prints "error:
  // XDG_RUNTIME_DIR is invalid or not set" twice while probing for a display we never use; an
  // absolute WAYLAND_DISPLAY naming no socket makes it fail quietly (a real session sets one of these)
  if (!process.env.XDG_RUNTIME_DIR && !process.env.WAYLAND_DISPLAY && !process.env.WAYLAND_SOCKET)
    process.env.WAYLAND_DISPLAY = '/dev/null/no-wayland-session';
  const { create, globals } = (await import('webgpu')) as unknown as {
    create: (flags: string[]) => GPU;
    globals: Record<string, unknown>;
  };
  Object.assign(globalThis, globals);
  gpuObject = create([]);
  return gpuObject;
}

export async function acquireNodeGpu(): Promise<GpuContext> {
  return acquireGpu(await nodeGpu());
}

// on globalThis, not in this module: one device a process even where a module graph is loaded twice
// (a test runner running several files in one process)
const SHARED = Symbol.for('spade.node.sharedGpu');
type Held = { ctx: GpuContext; gone: boolean };
const held = globalThis as { [SHARED]?: Promise<Held> };

/**
 * The process's shared device (Node's engines: `spade engine`, `spade run --backend local`, the gpu
 * tier's tests): acquired on first use, again once it was lost, destroyed or holds a GPU error; its
 * users never destroy it. On the software adapter compiling pipelines is most of a small command's
 * work, and every engine on this device reuses what another compiled.
 */
export async function sharedNodeGpu(): Promise<GpuContext> {
  const prior = await held[SHARED]?.catch(() => null);
  if (prior && !prior.gone && !prior.ctx.lostError && !prior.ctx.gpuError) return prior.ctx;
  const next = acquireNodeGpu().then((ctx) => {
    const h: Held = { ctx, gone: false };
    void ctx.device.lost.then(() => (h.gone = true)); // lost, or destroyed by mistake
    return h;
  });
  held[SHARED] = next;
  return (await next).ctx;
}
