/**
 * The device self-check behind the WebGPU chip and `spade gpu`: the elementwise add kernel on
 * 1,000 values against its CPU reference, which must match exactly.
 */
import type { GpuContext } from '../runtime/device.ts';
import { add, addCpu } from '../kernels/elementwise.ts';
import { Engine } from '../runtime/runtime.ts';

export async function gpuSelfCheck(ctx: GpuContext): Promise<{ ok: boolean; maxAbsError: number }> {
  const e = new Engine(ctx);
  const n = 1000;
  const a = new Float32Array(n).map((_, i) => Math.sin(i) * 100);
  const b = new Float32Array(n).map((_, i) => Math.cos(i * 0.5) * 10);
  const want = addCpu(a, b);
  const got = await e.read(add(e, e.tensor([n], a), e.tensor([n], b)));
  let maxAbsError = 0;
  for (let i = 0; i < n; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i]! - want[i]!));
  e.trim();
  return { ok: maxAbsError === 0, maxAbsError };
}
