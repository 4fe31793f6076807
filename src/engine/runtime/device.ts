/**
 * WebGPU device acquisition for the browser (navigator.gpu) and Node (the
 * `webgpu` package, passed in by src/platform/node/gpu.ts). Reports the adapter,
 * its features and the limits the engine cares about, turns device loss into an
 * event, and caches compute pipelines by key (one per kernel + constants).
 */
import { DeviceLostError, GpuError, WebGpuUnavailableError } from '../../core/errors.ts';

export interface GpuReport {
  vendor: string;
  architecture: string;
  description: string;
  isFallback: boolean;
  features: { shaderF16: boolean; subgroups: boolean; timestampQuery: boolean };
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupSizeX: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupStorageSize: number;
  };
}

/**
 * SwiftShader, llvmpipe/lavapipe and other CPU fallbacks: kernels pick other tile sizes and lane
 * counts there (software adapters gain nothing from wide tiles and compile them slowly).
 */
export function isSoftwareAdapter(r: GpuReport): boolean {
  return r.isFallback || /swiftshader|llvmpipe|lavapipe/i.test(`${r.architecture} ${r.description} ${r.vendor}`);
}

export class GpuContext {
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly lostListeners = new Set<(err: DeviceLostError) => void>();
  lostError: DeviceLostError | null = null;

  /** The first uncaptured GPU error (a shader that failed to compile, a bad binding); later calls throw it. */
  gpuError: GpuError | null = null;

  constructor(
    readonly device: GPUDevice,
    readonly report: GpuReport,
  ) {
    device.addEventListener?.('uncapturederror', (ev: Event) => {
      const err = (ev as GPUUncapturedErrorEvent).error;
      this.gpuError ??= new GpuError(
        `The GPU reported an error: ${err?.message ?? 'unknown'}. This is a bug in a kernel; please report it.`,
      );
    });
    void device.lost.then((info) => {
      if (info.reason === 'destroyed') return; // we asked for it
      this.lostError = new DeviceLostError(
        `The GPU device was lost (${info.message || 'no reason given'}). Reload the page or pick a smaller model; work saved so far is kept.`,
        { reason: info.reason },
      );
      for (const fn of this.lostListeners) fn(this.lostError);
    });
  }

  /** Subscribe to device loss; returns an unsubscribe function. */
  onLost(fn: (err: DeviceLostError) => void): () => void {
    this.lostListeners.add(fn);
    return () => this.lostListeners.delete(fn);
  }

  /** A compute pipeline for `code` with `constants` injected as WGSL overrides, cached by key. */
  pipeline(key: string, code: string, constants: Record<string, number> = {}): GPUComputePipeline {
    // run() looks a pipeline up on every dispatch: a plain concatenation, not JSON.stringify
    let fullKey = key;
    for (const name in constants) fullKey += `|${name}=${constants[name]}`;
    let p = this.pipelines.get(fullKey);
    if (!p) {
      const module = this.device.createShaderModule({ label: key, code });
      p = this.device.createComputePipeline({
        label: key,
        layout: 'auto',
        compute: { module, entryPoint: 'main', constants },
      });
      this.pipelines.set(fullKey, p);
    }
    return p;
  }

  throwIfLost(): void {
    if (this.lostError) throw this.lostError;
    if (this.gpuError) throw this.gpuError;
  }

  destroy(): void {
    this.pipelines.clear();
    this.device.destroy();
  }
}

function describeAdapter(adapter: GPUAdapter): GpuReport {
  const info = adapter.info;
  const l = adapter.limits;
  return {
    vendor: info?.vendor || 'unknown',
    architecture: info?.architecture || 'unknown',
    description: info?.description || '',
    // `isFallbackAdapter` moved from GPUAdapter to GPUAdapterInfo; read both.
    isFallback: Boolean(
      (info as { isFallbackAdapter?: boolean } | undefined)?.isFallbackAdapter ??
      (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter,
    ),
    features: {
      shaderF16: adapter.features.has('shader-f16'),
      subgroups: adapter.features.has('subgroups'),
      timestampQuery: adapter.features.has('timestamp-query'),
    },
    limits: {
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
    },
  };
}

export const WEBGPU_HELP =
  'WebGPU is not available here. Environments, the sandbox and remote (OpenAI-compatible) models still work; ' +
  'on-device models need WebGPU: use a recent Chrome or Edge, or enable WebGPU in your browser flags ' +
  '(chrome://flags/#enable-unsafe-webgpu on Linux).';

/**
 * Acquire a device. `gpu` defaults to navigator.gpu in the browser; Node passes the
 * object from the `webgpu` package. Requests the adapter's full limits and
 * `shader-f16` and `subgroups` when present.
 */
export async function acquireGpu(gpu?: GPU | null): Promise<GpuContext> {
  const g = gpu ?? (typeof navigator !== 'undefined' ? (navigator as Navigator & { gpu?: GPU }).gpu : undefined);
  if (!g) throw new WebGpuUnavailableError(WEBGPU_HELP);
  let adapter: GPUAdapter | null;
  try {
    adapter = await g.requestAdapter({ powerPreference: 'high-performance' });
  } catch (err) {
    throw new WebGpuUnavailableError(`requestAdapter failed: ${(err as Error).message}. ${WEBGPU_HELP}`);
  }
  if (!adapter) throw new WebGpuUnavailableError(`No GPU adapter was found. ${WEBGPU_HELP}`);
  const report = describeAdapter(adapter);
  const requiredFeatures: GPUFeatureName[] = report.features.shaderF16 ? ['shader-f16'] : [];
  // matvec.wgsl's shuffles ('subgroups' is newer than some GPUFeatureName typings)
  if (report.features.subgroups) requiredFeatures.push('subgroups' as GPUFeatureName);
  const l = adapter.limits;
  const device = await adapter.requestDevice({
    requiredFeatures,
    requiredLimits: {
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
      maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
    },
  });
  return new GpuContext(device, report);
}
