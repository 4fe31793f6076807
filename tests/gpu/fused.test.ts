// The fused decode-step kernels (matvec.wgsl's FUSED and GLU variants) and the Engine's bind-group
// cache: matvecFused's column blocks are bit-identical to a plain matvec of each weight plus
// addBias, and close to the CPU reference (f32, bf16, f16, q4; 1 and 32 threads per column; 1–16
// rows); gluMatvec matches swiglu(matvec, matvec) and the CPU; GpuOps.linearFused / gluLinear are
// one dispatch up to MATVEC_MAX_ROWS rows and fall back beyond; a repeated step reuses its bind
// groups, while other buffers (or trim()) never hit a stale one.
import { describe, expect, it } from 'vitest';
import { packWeight, type PackedWeight, type WeightFormat } from '../../src/engine/io/pack.ts';
import {
  gluMatvec,
  gluMatvecCpu,
  matvec,
  matvecFused,
  matvecFusedCpu,
  MATVEC_MAX_ROWS,
  type CpuWeight,
} from '../../src/engine/kernels/matvec.ts';
import { matvecPacked } from '../../src/engine/kernels/matvec_packed.ts';
import { isPacked, uploadPacked } from '../../src/engine/kernels/packed_weight.ts';
import { swiglu } from '../../src/engine/kernels/swiglu.ts';
import { CpuOps, GpuOps } from '../../src/engine/ops/ops.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { expectClose, randomArray, relError } from './expect_close.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();
const K = 64;
/** Column counts that leave partial workgroups at 32 lanes (8 columns per workgroup). */
const NS = [37, 12, 13];
/** Against the CPU references (another summation order): relative to 1% of max |want|. */
const RTOL = 1e-4;

/** A weight in `format` on the GPU and its CPU form (f32 values, or packed for dequantisation). */
function makeWeight(e: Engine, n: number, seed: number, format: WeightFormat): { gpu: Tensor; cpu: CpuWeight } {
  const data = randomArray(n * K, seed, -0.5, 0.5);
  if (format === 'f32') return { gpu: e.tensor([n, K], data), cpu: { data, n } };
  const p: PackedWeight = packWeight(data, n, K, format);
  return { gpu: uploadPacked(e, p), cpu: p };
}

/** The unfused GPU path for one weight: matvec (+ addBias through GpuOps). */
function separate(e: Engine, x: Tensor, w: Tensor, b: Tensor | undefined, lanes?: number): Tensor {
  const y = isPacked(w) ? matvecPacked(e, x, w, { lanes }) : matvec(e, x, w, { lanes });
  return b ? new GpuOps(e).addBias(y, b) : y;
}

/** Columns [c0, c0 + c) of a row-major (m, width) array. */
function block(a: Float32Array, m: number, width: number, c0: number, c: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < m; r++) out.push(...a.subarray(r * width + c0, r * width + c0 + c));
  return out;
}

describe.skipIf(!ctx)(`fused matvec kernels on WebGPU ${reason}`, () => {
  it.each([
    ['f32', 3, undefined],
    ['f32', 16, 32],
    ['bf16', 5, undefined],
    ['f16', 1, 32],
    ['q4', 16, undefined],
    ['q4', 4, 32],
  ] as const)('matvecFused %s M=%i lanes=%s: columns bit-identical to matvec + bias', async (format, m, lanes) => {
    const e = new Engine(ctx!);
    const x = randomArray(m * K, 1);
    const xt = e.tensor([m, K], x);
    const ws = NS.map((n, j) => makeWeight(e, n, 10 + j, format));
    const bData = [randomArray(NS[0]!, 20), undefined, randomArray(NS[2]!, 22)];
    const bs = bData.map((b) => (b ? e.tensor([b.length], b) : undefined));
    const width = NS.reduce((a, b) => a + b, 0);
    const before = e.dispatches;
    const fused = matvecFused(
      e,
      xt,
      ws.map((w) => w.gpu),
      bs,
      { lanes },
    );
    expect(e.dispatches - before).toBe(1);
    const got = await e.read(fused);
    expect(fused.shape).toEqual([m, width]);
    let c0 = 0;
    for (let j = 0; j < 3; j++) {
      const want = await e.read(separate(e, xt, ws[j]!.gpu, bs[j], lanes));
      expect(block(got, m, width, c0, NS[j]!), `weight ${j}`).toEqual(Array.from(want));
      c0 += NS[j]!;
    }
    expectClose(
      got,
      matvecFusedCpu(
        x,
        ws.map((w) => w.cpu),
        bData,
        m,
        K,
      ),
      RTOL,
    );
  });

  it('matvecFused with one or two weights and no biases', async () => {
    const e = new Engine(ctx!);
    const m = 2;
    const x = randomArray(m * K, 2);
    const ws = NS.slice(0, 2).map((n, j) => makeWeight(e, n, 30 + j, 'f32'));
    for (const count of [1, 2]) {
      const got = await e.read(
        matvecFused(
          e,
          e.tensor([m, K], x),
          ws.slice(0, count).map((w) => w.gpu),
        ),
      );
      const want = matvecFusedCpu(
        x,
        ws.slice(0, count).map((w) => w.cpu),
        [],
        m,
        K,
      );
      expectClose(got, want, RTOL);
    }
  });

  it('matvecFused rejects mixed formats, a wrong bias size and more than 16 rows', () => {
    const e = new Engine(ctx!);
    const x = e.tensor([2, K]);
    const f = makeWeight(e, 8, 1, 'f32').gpu;
    const q = makeWeight(e, 8, 2, 'q4').gpu;
    expect(() => matvecFused(e, x, [f, q])).toThrow('must share a format');
    expect(() => matvecFused(e, x, [f], [e.tensor([7])])).toThrow('bias 0 has 7 values');
    expect(() => matvecFused(e, e.tensor([17, K]), [f])).toThrow('17 rows; at most 16');
    expect(() => matvecFused(e, x, [f, f, f, f])).toThrow('1 to 3 weights');
  });

  // SiLU is swiglu.wgsl's formula on the same dot products; tolerance 1e-6 relative to max |s|
  // (both are f32 evaluations of one expression; on SwiftShader they agree exactly).
  it.each([
    ['f32', 1, undefined],
    ['f32', 16, 32],
    ['bf16', 7, 32],
    ['q4', 16, undefined],
  ] as const)('gluMatvec %s M=%i lanes=%s equals swiglu(matvec, matvec) within 1e-6', async (format, m, lanes) => {
    const e = new Engine(ctx!);
    const f = 45;
    const x = randomArray(m * K, 3);
    const xt = e.tensor([m, K], x);
    const wg = makeWeight(e, f, 40, format);
    const wu = makeWeight(e, f, 41, format);
    const before = e.dispatches;
    const s = gluMatvec(e, xt, wg.gpu, wu.gpu, { lanes });
    expect(e.dispatches - before).toBe(1);
    const got = await e.read(s);
    const unfused = await e.read(
      swiglu(e, separate(e, xt, wg.gpu, undefined, lanes), separate(e, xt, wu.gpu, undefined, lanes)),
    );
    expect(relError(got, unfused, 1)).toBeLessThanOrEqual(1e-6);
    expectClose(got, gluMatvecCpu(x, wg.cpu, wu.cpu, m, K), RTOL);
  });

  it.each(['f32', 'q4'] as const)(
    'GpuOps.linearFused / gluLinear (%s): one dispatch up to matvecRows rows, the fallback beyond, both as the CPU',
    async (format) => {
      const e = new Engine(ctx!);
      const gpu = new GpuOps(e);
      const cpu = new CpuOps();
      const data = NS.map((n, j) => randomArray(n * K, 50 + j, -0.5, 0.5));
      const gw = NS.map((n, j) => gpu.uploadWeight([n, K], data[j]!, format));
      const cw = NS.map((n, j) => cpu.uploadWeight([n, K], data[j]!, format));
      const bias = randomArray(NS[1]!, 60);
      const fData = randomArray(NS[1]! * K, 61, -0.5, 0.5);
      const gUp = gpu.uploadWeight([NS[1]!, K], fData, format);
      const cUp = cpu.uploadWeight([NS[1]!, K], fData, format);
      // MATVEC_MAX_ROWS on every adapter (GpuOps.matvecRows)
      expect(gpu.matvecRows).toBeLessThanOrEqual(MATVEC_MAX_ROWS);
      for (const m of [gpu.matvecRows, gpu.matvecRows + 1, MATVEC_MAX_ROWS + 1]) {
        const x = randomArray(m * K, 70 + m);
        const gx = gpu.upload([m, K], x);
        const cx = cpu.upload([m, K], x);
        const before = e.dispatches;
        const y = gpu.linearFused(gx, gw, [undefined, gpu.upload([NS[1]!], bias), undefined]);
        const s = gpu.gluLinear(gx, gw[1]!, gUp);
        if (m <= gpu.matvecRows) expect(e.dispatches - before).toBe(2);
        else expect(e.dispatches - before).toBeGreaterThan(2);
        expectClose(
          await gpu.read(y),
          cpu.linearFused(cx, cw, [undefined, cpu.upload([NS[1]!], bias), undefined]).data,
          RTOL,
        );
        expectClose(await gpu.read(s), cpu.gluLinear(cx, cw[1]!, cUp).data, RTOL);
      }
    },
  );
});

describe.skipIf(!ctx)(`Engine bind-group cache ${reason}`, () => {
  it('a repeated identical step reuses every bind group; new buffers never hit, and results stay right', async () => {
    const e = new Engine(ctx!);
    const m = 4;
    const ws = NS.map((n, j) => makeWeight(e, n, 80 + j, 'f32'));
    const wu = makeWeight(e, NS[0]!, 90, 'f32');
    const b0 = randomArray(NS[0]!, 91);
    const bs = [e.tensor([NS[0]!], b0), undefined, undefined];
    const step = async (xt: Tensor) => {
      const y = matvecFused(
        e,
        xt,
        ws.map((w) => w.gpu),
        bs,
      );
      const s = gluMatvec(e, xt, ws[0]!.gpu, wu.gpu);
      e.flush();
      const out = { y: await e.read(y), s: await e.read(s) };
      e.release(y);
      e.release(s);
      return out;
    };
    const x1 = randomArray(m * K, 92);
    const xt = e.tensor([m, K], x1);
    const first = await step(xt);
    const hits0 = e.bindGroupHits;
    const second = await step(xt);
    expect(e.bindGroupHits - hits0).toBe(2); // both dispatches: same pipelines, buffers, uniform slots
    expect(second.y).toEqual(first.y);
    expect(second.s).toEqual(first.s);

    // new contents in the same buffer still hit (a bind group binds buffers, not values)
    const x2 = randomArray(m * K, 93);
    e.device.queue.writeBuffer(xt.buffer, 0, x2.buffer as ArrayBuffer);
    const hits1 = e.bindGroupHits;
    const third = await step(xt);
    expect(e.bindGroupHits - hits1).toBe(2);
    expectClose(
      third.y,
      matvecFusedCpu(
        x2,
        ws.map((w) => w.cpu),
        [b0],
        m,
        K,
      ),
      RTOL,
    );

    // another x buffer: no hit, right values
    const x3 = randomArray(m * K, 94);
    const hits2 = e.bindGroupHits;
    const fourth = await step(e.tensor([m, K], x3));
    expect(e.bindGroupHits).toBe(hits2);
    expectClose(
      fourth.y,
      matvecFusedCpu(
        x3,
        ws.map((w) => w.cpu),
        [b0],
        m,
        K,
      ),
      RTOL,
    );
    expectClose(fourth.s, gluMatvecCpu(x3, ws[0]!.cpu, wu.cpu, m, K), RTOL);
  });

  it('the same bindings with other uniforms reuse the bind group with the new values', async () => {
    const e = new Engine(ctx!);
    const x = randomArray(2 * K, 95);
    const w = randomArray(9 * K, 96);
    const xt = e.tensor([2, K], x);
    const wt = e.tensor([9, K], w);
    const out = e.tensor([2, 9]);
    const a = await e.read(matvec(e, xt, wt, { out, alpha: 1 }));
    const hits = e.bindGroupHits;
    const b = await e.read(matvec(e, xt, wt, { out, alpha: -2 }));
    expect(e.bindGroupHits - hits).toBe(1);
    expect(Array.from(b)).toEqual(Array.from(a).map((v) => -2 * v)); // × −2 is exact in f32
  });

  it('trim() drops the bind groups of the buffers it destroys', async () => {
    const e = new Engine(ctx!);
    const w = e.tensor([9, K], randomArray(9 * K, 97));
    const x = e.tensor([1, K], randomArray(K, 98));
    const y = matvec(e, x, w);
    await e.read(y);
    const cached = e.cachedBindGroups;
    e.release(y);
    e.release(x);
    e.flush();
    e.trim(); // destroys x's and y's buffers
    expect(e.cachedBindGroups).toBe(cached - 1);
    // the engine still works on fresh buffers
    const x2 = randomArray(K, 99);
    const got = await e.read(matvec(e, e.tensor([1, K], x2), w));
    expect(got.length).toBe(9);
  });
});
