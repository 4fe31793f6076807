/**
 * Peer comparison for `spade bench engine` (benchmark only, Node only, never in the browser
 * bundle): the same f32 product C (m×n) = A (m×k) · B (k×n) that benchMatmul (bench/kernels.ts)
 * times, run by TensorFlow.js's WebGPU backend on the same GPU object.
 *
 * Timed like benchMatmul: one warm-up product (pipeline compilation, upload of A and B), then
 * `reps` products, each submitted and waited for with queue.onSubmittedWorkDone(). The result
 * stays on the GPU (no read-back in the timed loop). tfjs defers its dispatches into a shared
 * command encoder, so after each tf.matMul we flush it with the backend's own public
 * endComputePassEncoder() / ensureCommandEncoderReady() / submitQueue() before waiting.
 *
 * tfjs is loaded with dynamic imports, so nothing loads it unless this benchmark runs. Its backend
 * refuses to construct without navigator.gpu; we define it for the duration of the call and
 * restore what was there afterwards.
 */

import { filler } from './kernels.ts';

type TfCore = typeof import('@tensorflow/tfjs-core');
type WebGpuBackendCtor = typeof import('@tensorflow/tfjs-backend-webgpu').WebGPUBackend;

const LIBRARY_PACKAGE = '@tensorflow/tfjs-backend-webgpu';

let peerRuns = 0;

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Make `navigator.gpu` available (tfjs checks it when its backend module loads and when a
 * WebGPUBackend is constructed). Returns a function that undoes exactly what was done.
 */
function provideNavigatorGpu(gpu: GPU): () => void {
  const g = globalThis as { navigator?: { gpu?: GPU } };
  const nav = g.navigator;
  if (nav === undefined || nav === null) {
    Object.defineProperty(globalThis, 'navigator', {
      value: { gpu },
      configurable: true,
      writable: true,
      enumerable: false,
    });
    return () => {
      delete (globalThis as { navigator?: unknown }).navigator;
    };
  }
  if (nav.gpu) return () => {};
  const own = Object.getOwnPropertyDescriptor(nav, 'gpu');
  Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true, writable: true });
  return () => {
    if (own) Object.defineProperty(nav, 'gpu', own);
    else delete nav.gpu;
  };
}

/** tfjs uses the WebGPU constant globals (GPUBufferUsage, GPUMapMode, ...). nodeGpu() sets them. */
async function ensureWebGpuGlobals(): Promise<void> {
  const g = globalThis as Record<string, unknown>;
  if (g.GPUBufferUsage !== undefined && g.GPUMapMode !== undefined && g.GPUShaderStage !== undefined) return;
  // Node without nodeGpu(): borrow the constants from the `webgpu` package (plain numbers).
  const spec = 'webgpu';
  // a package by name, kept out of Vite's graph (Node only): a computed import eslint.config.js allows
  // in this file, in this shape (COMPUTED_IMPORT_ALLOWED)
  const { globals } = (await import(/* @vite-ignore */ spec)) as { globals: Record<string, unknown> };
  for (const [key, value] of Object.entries(globals)) if (g[key] === undefined) g[key] = value;
}

/** Request a device from `gpu` the way tfjs-backend-webgpu's own registration does (base.ts). */
async function requestPeerDevice(gpu: GPU): Promise<{ device: GPUDevice; info: GPUAdapterInfo | undefined }> {
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new Error('requestAdapter() returned null');
  const requiredFeatures: GPUFeatureName[] = [];
  if (adapter.features.has('timestamp-query')) requiredFeatures.push('timestamp-query');
  if (adapter.features.has('bgra8unorm-storage')) requiredFeatures.push('bgra8unorm-storage');
  const l = adapter.limits;
  const device = await adapter.requestDevice({
    requiredFeatures,
    requiredLimits: {
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    },
  });
  return { device, info: 'info' in adapter ? adapter.info : undefined };
}

/** Check a few entries of C against a CPU dot product (catches a backend that silently fails). */
function checkSamples(
  a: Float32Array,
  b: Float32Array,
  c: Float32Array,
  m: number,
  n: number,
  k: number,
): string | null {
  const samples = 8;
  for (let s = 0; s < samples; s++) {
    const i = Math.floor((((s * 7919) % 1000) / 1000) * m);
    const j = Math.floor((((s * 104729) % 1000) / 1000) * n);
    let want = 0;
    let scale = 0;
    for (let p = 0; p < k; p++) {
      const t = a[i * k + p]! * b[p * n + j]!;
      want += t;
      scale += Math.abs(t);
    }
    const got = c[i * n + j]!;
    if (!(Math.abs(got - want) <= 1e-4 * scale + 1e-5)) {
      return `C[${i},${j}] = ${got}, expected ${want}`;
    }
  }
  return null;
}

/**
 * GFLOP/s of C (m×n) = A (m×k) · B (k×n) in f32 with TensorFlow.js's WebGPU backend on `gpu`,
 * averaged over `reps` products after one warm-up; 2·m·n·k flops per product, as benchMatmul.
 * Never throws: returns `{ error }` when tfjs is missing or cannot initialise or run.
 */
export async function benchPeerMatmul(
  gpu: GPU,
  m: number,
  n: number,
  k: number,
  reps = 5,
): Promise<{ gflops: number; library: string } | { error: string }> {
  if (!(Number.isInteger(m) && Number.isInteger(n) && Number.isInteger(k) && m > 0 && n > 0 && k > 0)) {
    return { error: 'benchPeerMatmul: sizes must be positive integers' };
  }
  if (!(Number.isInteger(reps) && reps > 0)) return { error: 'benchPeerMatmul: reps must be a positive integer' };

  let tf: TfCore;
  let WebGPUBackend: WebGpuBackendCtor;
  try {
    await ensureWebGpuGlobals();
    tf = await import('@tensorflow/tfjs-core');
    ({ WebGPUBackend } = await import('@tensorflow/tfjs-backend-webgpu'));
  } catch (err) {
    return {
      error: `TensorFlow.js WebGPU backend unavailable (npm i -D @tensorflow/tfjs-core ${LIBRARY_PACKAGE}): ${message(err)}`,
    };
  }
  const library = `TensorFlow.js ${tf.version_core} (tfjs-backend-webgpu)`;

  const restoreNavigator = provideNavigatorGpu(gpu);
  const engine = tf.engine();
  const previousBackend = engine.backendName as string | null;
  const flags = tf.env();
  const cpuForward = flags.getBool('WEBGPU_CPU_FORWARD');
  const name = `spade-peer-webgpu-${++peerRuns}`;
  let device: GPUDevice | null = null;
  let registered = false;
  const kernelNames: string[] = [];
  const tensors: { dispose(): void }[] = [];
  try {
    let backend: InstanceType<WebGpuBackendCtor>;
    try {
      const req = await requestPeerDevice(gpu);
      device = req.device;
      backend = new WebGPUBackend(device, req.info);
      registered = tf.registerBackend(name, () => backend);
      if (!registered) throw new Error(`could not register backend ${name}`);
      // tfjs keys kernels by backend name: borrow the 'webgpu' ones for our private name, so that
      // an application's own 'webgpu' backend (if any) is left alone.
      for (const kernel of tf.getKernelsForBackend('webgpu')) {
        tf.registerKernel({ ...kernel, backendName: name });
        kernelNames.push(kernel.kernelName);
      }
      if (kernelNames.length === 0) throw new Error('no webgpu kernels registered');
      if (!(await tf.setBackend(name))) throw new Error(`could not select backend ${name}`);
    } catch (err) {
      return { error: `TensorFlow.js WebGPU backend failed to initialise: ${message(err)}` };
    }
    // Small inputs would otherwise run on tfjs's CPU path; this is a GPU comparison.
    flags.set('WEBGPU_CPU_FORWARD', false);

    const dev = device;
    const wait = async (): Promise<void> => {
      backend.endComputePassEncoder();
      backend.ensureCommandEncoderReady();
      backend.submitQueue();
      await dev.queue.onSubmittedWorkDone();
    };

    const aData = filler(m * k, 1);
    const bData = filler(k * n, 2);
    const a = tf.tensor2d(aData, [m, k], 'float32');
    const b = tf.tensor2d(bData, [k, n], 'float32');
    tensors.push(a, b);

    // Warm-up: compiles tfjs's pipeline and uploads A and B; also checks the result.
    dev.pushErrorScope('out-of-memory');
    dev.pushErrorScope('validation');
    const warm = tf.matMul(a, b);
    tensors.push(warm);
    await wait();
    const validation = await dev.popErrorScope();
    const oom = await dev.popErrorScope();
    const gpuError = validation ?? oom;
    if (gpuError) return { error: `TensorFlow.js matMul failed on the GPU: ${gpuError.message}` };
    const bad = checkSamples(aData, bData, (await warm.data()) as Float32Array, m, n, k);
    if (bad) return { error: `TensorFlow.js matMul gave a wrong result: ${bad}` };
    warm.dispose();

    // throughput: all products queued, then one wait (the same method as our benchMatmul)
    const t0 = performance.now();
    const outs = [];
    for (let r = 0; r < reps; r++) outs.push(tf.matMul(a, b));
    await wait();
    const secs = (performance.now() - t0) / 1000;
    for (const c of outs) c.dispose();
    return { gflops: (2 * m * n * k * reps) / secs / 1e9, library };
  } catch (err) {
    return { error: `TensorFlow.js matMul benchmark failed: ${message(err)}` };
  } finally {
    try {
      for (const t of tensors) t.dispose();
      flags.set('WEBGPU_CPU_FORWARD', cpuForward);
      for (const kernelName of kernelNames) tf.unregisterKernel(kernelName, name);
      if (registered) tf.removeBackend(name); // disposes the backend's buffers
      if (previousBackend && previousBackend !== name) {
        await tf.setBackend(previousBackend);
      }
    } catch {
      // best effort: the measurement (or its error) is what the caller wants
    }
    device?.destroy();
    restoreNavigator();
  }
}
