/**
 * The operations the model is written against (the Ops contract, ops_interface.ts), with two
 * backends: `CpuOps` (cpu_ops.ts: the kernels' plain-TypeScript CPU references, for `--device cpu`
 * and as the test oracle) and `GpuOps` (gpu_ops.ts: the WGSL kernels, recorded on an Engine and
 * submitted once per step). The model (model.ts) never knows which one it runs on. Importers take
 * all of it from here.
 */
export type { Ops } from './ops_interface.ts';
export { CpuOps, type CpuTensor } from './cpu_ops.ts';
export { GpuOps } from './gpu_ops.ts';
