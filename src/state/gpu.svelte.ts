/**
 * WebGPU status for the shell's chip: acquires the device once, runs the
 * kernel self-check (GPU vs CPU reference), and reports device loss.
 */
import { serializeError } from '../core/errors.ts';
import { acquireGpu, gpuSelfCheck, WEBGPU_HELP, type GpuContext, type GpuReport } from '../engine/engine_api.ts';

export type GpuStatus = 'checking' | 'ready' | 'unavailable' | 'lost';

export class GpuState {
  status = $state<GpuStatus>('checking');
  report = $state<GpuReport | null>(null);
  selfCheck = $state<{ ok: boolean; maxAbsError: number } | null>(null);
  message = $state('');
  context: GpuContext | null = null;

  async init(): Promise<void> {
    try {
      const ctx = await acquireGpu();
      this.context = ctx;
      this.report = ctx.report;
      ctx.onLost((err) => {
        this.status = 'lost';
        this.message = err.message;
      });
      this.selfCheck = await gpuSelfCheck(ctx);
      this.status = 'ready';
    } catch (err) {
      this.status = 'unavailable';
      const e = serializeError(err);
      this.message = e.name === 'WebGpuUnavailableError' ? e.message : `${e.message}. ${WEBGPU_HELP}`;
    }
  }
}

export const gpu = new GpuState();
