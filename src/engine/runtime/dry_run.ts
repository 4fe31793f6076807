/**
 * A recording-only stand-in for a WebGPU device, for allocation replays: buffers, pipelines, bind
 * groups, encoders and passes are inert objects, nothing runs, and reads return zeros. The engine's
 * allocator (Engine's pool and its live/device counters) sees the same tensor()/release()/flush()
 * sequence as on a real device, because no allocation in the engine depends on tensor values; so the
 * peak memory of a layout too large or too slow for the adapter at hand (a Qwen2.5-0.5B training step
 * on a software adapter) comes out exactly, in seconds. `tests/gpu/train_memory.test.ts` checks a
 * replay's figures against the same step on a real device.
 *
 *   const e = new Engine(dryRunContext(realCtx.report));   // same report: the same kernel variants
 */
import { GpuContext, type GpuReport } from './device.ts';

const noop = () => {};

/** WebGPU's usage flags, for a Node process without the `webgpu` package's globals (values from the spec). */
function ensureGlobals(): void {
  const g = globalThis as Record<string, unknown>;
  g.GPUBufferUsage ??= {
    MAP_READ: 0x1,
    MAP_WRITE: 0x2,
    COPY_SRC: 0x4,
    COPY_DST: 0x8,
    INDEX: 0x10,
    VERTEX: 0x20,
    UNIFORM: 0x40,
    STORAGE: 0x80,
    INDIRECT: 0x100,
    QUERY_RESOLVE: 0x200,
  };
  g.GPUMapMode ??= { READ: 0x1, WRITE: 0x2 };
}

/**
 * A device that records nothing, but checks what a real one validates about sizes: a buffer over
 * `limits.maxBufferSize` and a storage binding over `limits.maxStorageBufferBindingSize` throw
 * (so a replay proves a layout fits an adapter's limits).
 */
function dryDevice(limits: GpuReport['limits']): GPUDevice {
  const pass = { setPipeline: noop, setBindGroup: noop, dispatchWorkgroups: noop, end: noop };
  const device = {
    label: 'dry run',
    lost: new Promise<never>(noop), // never lost
    addEventListener: noop,
    createBuffer: (d: GPUBufferDescriptor) => {
      if (d.size > limits.maxBufferSize)
        throw new RangeError(`dry run: a buffer of ${d.size} bytes exceeds maxBufferSize (${limits.maxBufferSize})`);
      return {
        size: d.size,
        usage: d.usage,
        label: d.label ?? '',
        destroy: noop,
        mapAsync: async () => {},
        getMappedRange: () => new ArrayBuffer(d.size), // zeros
        unmap: noop,
      };
    },
    createShaderModule: () => ({}),
    createComputePipeline: () => ({ getBindGroupLayout: () => ({}) }),
    createBindGroup: (d: GPUBindGroupDescriptor) => {
      for (const entry of d.entries) {
        const r = entry.resource as GPUBufferBinding;
        const size = r.size ?? r.buffer?.size ?? 0;
        if (r.buffer && r.buffer.usage & GPUBufferUsage.STORAGE && size > limits.maxStorageBufferBindingSize)
          throw new RangeError(
            `dry run: binding ${entry.binding} of ${size} bytes exceeds maxStorageBufferBindingSize (${limits.maxStorageBufferBindingSize})`,
          );
      }
      return {};
    },
    createCommandEncoder: () => ({
      beginComputePass: () => pass,
      copyBufferToBuffer: noop,
      clearBuffer: noop,
      finish: () => ({}),
    }),
    queue: { writeBuffer: noop, submit: noop, onSubmittedWorkDone: async () => {} },
    destroy: noop,
  };
  return device as unknown as GPUDevice;
}

/** A GpuContext on a recording-only device; `report` (e.g. the real adapter's) picks the kernel variants. */
export function dryRunContext(report: GpuReport): GpuContext {
  ensureGlobals();
  return new GpuContext(dryDevice(report.limits), report);
}
