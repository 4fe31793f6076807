/**
 * vector_add: GPU dispatch of vector_add.wgsl and its CPU reference.
 * Parity tests: tests/gpu/vector_add.test.ts (Node) and the app's self-check (Chromium).
 */
import type { GpuContext } from '../device.ts';
import shader from './vector_add.wgsl?raw';

const WG = 64;

/** CPU reference. a, b: (N,) → (N,) */
export function vectorAddCpu(a: Float32Array, b: Float32Array): Float32Array {
  if (a.length !== b.length) throw new RangeError(`vector_add: length mismatch ${a.length} vs ${b.length}`);
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! + b[i]!;
  return out;
}

/** GPU version. a, b: (N,) → (N,) */
export async function vectorAdd(ctx: GpuContext, a: Float32Array, b: Float32Array): Promise<Float32Array> {
  if (a.length !== b.length) throw new RangeError(`vector_add: length mismatch ${a.length} vs ${b.length}`);
  ctx.throwIfLost();
  const n = a.length;
  const { device } = ctx;
  const pipeline = ctx.pipeline('vector_add', shader, { WG });
  const ba = ctx.upload(a);
  const bb = ctx.upload(b);
  const bo = ctx.upload(new Float32Array(n));
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [ba, bb, bo].map((buffer, binding) => ({ binding, resource: { buffer, size: n * 4 } })),
  });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bind);
  pass.dispatchWorkgroups(Math.ceil(n / WG));
  pass.end();
  device.queue.submit([enc.finish()]);
  const out = await ctx.readF32(bo, n);
  for (const b of [ba, bb, bo]) b.destroy();
  return out;
}

/** Self-check used by the app's status chip: GPU result vs CPU reference on 1000 values. */
export async function vectorAddSelfCheck(ctx: GpuContext): Promise<{ ok: boolean; maxAbsError: number }> {
  const n = 1000;
  const a = new Float32Array(n).map((_, i) => Math.sin(i) * 100);
  const b = new Float32Array(n).map((_, i) => Math.cos(i * 0.5) * 10);
  const want = vectorAddCpu(a, b);
  const got = await vectorAdd(ctx, a, b);
  let maxAbsError = 0;
  for (let i = 0; i < n; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i]! - want[i]!));
  return { ok: maxAbsError === 0, maxAbsError };
}
