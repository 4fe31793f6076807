// Decode products of up to MATVEC_MAX_ROWS (16) rows go to the matvec kernels on every adapter,
// software ones included (GpuOps.matvecRows): at 16 rows the vec4 matvec beats the tiled matmul on
// SwiftShader for every decode shape, so a batch-16 decode step's q|k|v, o, gate-up, down and LM-head
// products are one matvec dispatch each. Checked on the Qwen2.5-0.5B shapes against the CPU
// (within 1e-5 of max |out|).
import { describe, expect, it } from 'vitest';
import { MATVEC_MAX_ROWS } from '../../src/engine/kernels/matvec.ts';
import { CpuOps, GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine } from '../../src/engine/runtime/runtime.ts';
import { randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/** Qwen2.5-0.5B: hidden 896, 14 / 2 heads of 64 (q|k|v = 896 + 128 + 128), intermediate 4864. */
const HIDDEN = 896;
const QKV = [896, 128, 128];
const FFN = 4864;

describe.skipIf(!ctx)(`16-row decode products on matvec ${reason}`, () => {
  it('GpuOps sends 16 rows to matvec: one dispatch per product, within 1e-5 of the CPU', async () => {
    const e = new Engine(ctx!);
    const gpu = new GpuOps(e);
    const cpu = new CpuOps();
    expect(gpu.matvecRows).toBe(MATVEC_MAX_ROWS);
    const m = MATVEC_MAX_ROWS;
    const weight = (n: number, k: number, seed: number) => {
      const data = randomArray(n * k, seed, -0.1, 0.1);
      return { g: gpu.uploadWeight([n, k], data, 'f32'), c: cpu.uploadWeight([n, k], data, 'f32') };
    };
    const input = (k: number, seed: number) => {
      const x = randomArray(m * k, seed);
      return { g: gpu.upload([m, k], x), c: cpu.upload([m, k], x) };
    };
    const qkv = QKV.map((n, j) => weight(n, HIDDEN, 10 + j));
    const bias = randomArray(QKV[0]!, 13);
    const gate = weight(FFN, HIDDEN, 14);
    const up = weight(FFN, HIDDEN, 15);
    const down = weight(HIDDEN, FFN, 16);
    const x = input(HIDDEN, 17);
    const h = input(FFN, 18);

    const products = [
      {
        what: 'q|k|v',
        g: () =>
          gpu.linearFused(
            x.g,
            qkv.map((w) => w.g),
            [gpu.upload([QKV[0]!], bias)],
          ),
        c: () =>
          cpu.linearFused(
            x.c,
            qkv.map((w) => w.c),
            [cpu.upload([QKV[0]!], bias)],
          ).data,
      },
      { what: 'gate-up', g: () => gpu.gluLinear(x.g, gate.g, up.g), c: () => cpu.gluLinear(x.c, gate.c, up.c).data },
      {
        what: 'down',
        g: () => gpu.matmul(h.g, down.g, { transB: true }),
        c: () => cpu.matmul(h.c, down.c, { transB: true }).data,
      },
    ];
    for (const p of products) {
      const before = e.dispatches;
      const y = p.g();
      expect(e.dispatches - before, p.what).toBe(1);
      expect(relError(await gpu.read(y), p.c(), 1), p.what).toBeLessThanOrEqual(1e-5);
    }
  });
});
