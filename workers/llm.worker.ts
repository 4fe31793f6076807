/**
 * The WebLLM worker: web-llm's own MLCEngine behind its WebWorkerMLCEngineHandler, speaking
 * web-llm's typed message protocol (no comlink here; src/platform/browser/webllm_model.ts is the
 * client). One addition: the GPU device web-llm acquires is watched, and its loss is posted as a
 * `spade:device-lost` message, so the main thread can fail the call in flight at once instead of
 * waiting on a generation that will never finish.
 *
 * Created by `new Worker(new URL('../../../workers/llm.worker.ts', import.meta.url), { type: 'module' })`.
 */
import { WebWorkerMLCEngineHandler } from '@mlc-ai/web-llm';
import type { WebLlmDeviceLostMessage } from '../src/core/llm/webllm/side_channel.ts';

/** Wrap navigator.gpu.requestAdapter so that every device web-llm requests reports its loss. */
function watchDeviceLoss(post: (msg: WebLlmDeviceLostMessage) => void): void {
  const gpu = (self.navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) return; // web-llm reports WebGPU missing on its own
  const requestAdapter = gpu.requestAdapter.bind(gpu);
  gpu.requestAdapter = async (options?: GPURequestAdapterOptions) => {
    const adapter = await requestAdapter(options);
    if (!adapter) return adapter;
    const requestDevice = adapter.requestDevice.bind(adapter);
    adapter.requestDevice = async (descriptor?: GPUDeviceDescriptor) => {
      const device = await requestDevice(descriptor);
      void device.lost.then((info) => {
        // 'destroyed' is web-llm unloading the model on purpose.
        if (info.reason === 'destroyed') return;
        post({ kind: 'spade:device-lost', reason: String(info.reason), message: info.message || '' });
      });
      return device;
    };
    return adapter;
  };
}

watchDeviceLoss((msg) => self.postMessage(msg));

const handler = new WebWorkerMLCEngineHandler();
self.onmessage = (event: MessageEvent) => handler.onmessage(event);
