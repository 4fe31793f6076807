/**
 * vector_add: out = a + b — the smallest kernel, used as the device self-check.
 * CPU reference beside it; parity tests in tests/gpu/ (Node) and the app's chip (Chromium).
 */
import type { GpuContext } from '../device.ts';
import { Engine, type Tensor } from '../runtime.ts';
import shader from './vector_add.wgsl?raw';

const WG = 64;

/** CPU reference. a, b: (N,) → (N,) */
export function vectorAddCpu(a: Float32Array, b: Float32Array): Float32Array {
  if (a.length !== b.length) throw new RangeError(`vector_add: length mismatch ${a.length} vs ${b.length}`);
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! + b[i]!;
  return out;
}

/** GPU version, recorded on `e`. a, b: (N,) → (N,) */
export function vectorAdd(e: Engine, a: Tensor, b: Tensor): Tensor {
  if (a.size !== b.size) throw new RangeError(`vector_add: length mismatch ${a.size} vs ${b.size}`);
  const out = e.tensor([a.size]);
  e.run({
    key: 'vector_add',
    code: shader,
    constants: { WG },
    bindings: [a, b, out],
    workgroups: [Math.ceil(a.size / WG)],
  });
  return out;
}

/** Self-check used by the status chip and `spade gpu`: GPU result vs CPU reference on 1000 values. */
export async function vectorAddSelfCheck(ctx: GpuContext): Promise<{ ok: boolean; maxAbsError: number }> {
  const e = new Engine(ctx);
  const n = 1000;
  const a = new Float32Array(n).map((_, i) => Math.sin(i) * 100);
  const b = new Float32Array(n).map((_, i) => Math.cos(i * 0.5) * 10);
  const want = vectorAddCpu(a, b);
  const got = await e.read(vectorAdd(e, e.tensor([n], a), e.tensor([n], b)));
  let maxAbsError = 0;
  for (let i = 0; i < n; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i]! - want[i]!));
  return { ok: maxAbsError === 0, maxAbsError };
}
