/**
 * The CPU backend of Ops (ops_interface.ts): the kernels' plain-TypeScript CPU references, for
 * `--device cpu` and as the test oracle of the GPU backend (gpu_ops.ts).
 */
import { numel } from '../runtime/runtime.ts';
import type { MatOpts, NllBackwardOpts, Ops } from './ops_interface.ts';
import { adamwCpu, type AdamWOptions } from '../kernels/adamw.ts';
import { attentionBackwardCpu, attentionCpu } from '../kernels/attention.ts';
import { attentionPagedCpu, type KvFormat, type PagedBatch } from '../kernels/attention_paged.ts';
import { addCpu, addInPlaceCpu, scaleCpu } from '../kernels/elementwise.ts';
import { embeddingCpu } from '../kernels/embedding.ts';
import { grpoWeightsCpu, type GrpoWeightOptions } from '../kernels/grpo_weights.ts';
import { matmulCpu } from '../kernels/matmul.ts';
import { nllBackwardCpu, nllCpu } from '../kernels/nll.ts';
import { sumSquaresCpu } from '../kernels/reduce.ts';
import { rmsnormBackwardCpu, rmsnormCpu } from '../kernels/rmsnorm.ts';
import { ropeBackwardCpu, ropeCpu } from '../kernels/rope.ts';
import { ropeAppendCpu } from '../kernels/rope_append.ts';
import { segmentBounds } from '../kernels/segments.ts';
import { sampleCpu } from '../kernels/sample.ts';
import { swigluBackwardCpu, swigluCpu } from '../kernels/swiglu.ts';
import { quantiseLike, type WeightFormat } from '../io/pack.ts';
import type { SampleOptions } from '../kernels/sample_cpu.ts';

export interface CpuTensor {
  data: Float32Array;
  shape: number[];
  /** Set on a paged KV store made by kvStore(): its format (with 'f16', ropeAppend rounds what it writes to f16). */
  kvFormat?: KvFormat;
}

export class CpuOps implements Ops<CpuTensor> {
  readonly device = 'cpu' as const;
  /** A Float32Array of up to 2³¹ − 1 elements. */
  readonly maxTensorBytes = (2 ** 31 - 1) * 4;
  upload(shape: number[], data: Float32Array): CpuTensor {
    if (data.length !== numel(shape))
      throw new RangeError(`upload: ${data.length} values for shape ${JSON.stringify(shape)}`);
    return { data, shape: [...shape] };
  }
  /** Dequantised at load: the same values as the packed kernels' CPU references multiply. */
  uploadWeight(shape: [number, number], data: Float32Array, format: WeightFormat): CpuTensor {
    return this.upload(shape, quantiseLike(data, shape[0], shape[1], format));
  }
  bytes(x: CpuTensor): number {
    return x.data.byteLength;
  }
  zeros(shape: number[]): CpuTensor {
    return { data: new Float32Array(numel(shape)), shape: [...shape] };
  }
  async read(x: CpuTensor): Promise<Float32Array> {
    return x.data;
  }
  shape(x: CpuTensor): number[] {
    return x.shape;
  }
  view(x: CpuTensor, shape: number[]): CpuTensor {
    if (numel(shape) !== x.data.length)
      throw new RangeError(`view: ${JSON.stringify(x.shape)} → ${JSON.stringify(shape)}`);
    return { data: x.data, shape };
  }
  rows(x: CpuTensor, start: number, n: number): CpuTensor {
    const c = x.data.length / x.shape[0]!;
    return { data: x.data.slice(start * c, (start + n) * c), shape: [n, ...x.shape.slice(1)] };
  }
  embedding(table: CpuTensor, ids: number[]): CpuTensor {
    const c = table.shape[1]!;
    return { data: embeddingCpu(table.data, table.shape[0]!, c, Uint32Array.from(ids)), shape: [ids.length, c] };
  }
  appendRows(store: CpuTensor | undefined, len: number, x: CpuTensor): CpuTensor {
    const row = x.data.length / x.shape[0]!;
    const data = new Float32Array((len + x.shape[0]!) * row);
    if (store) data.set(store.data.subarray(0, len * row));
    data.set(x.data, len * row);
    return { data, shape: [len + x.shape[0]!, ...x.shape.slice(1)] };
  }
  copyRows(src: CpuTensor, srcRow: number, dst: CpuTensor, dstRow: number, n: number): void {
    const c = src.data.length / src.shape[0]!;
    if (dst.data.length / dst.shape[0]! !== c) throw new RangeError('copyRows: src and dst rows differ in size');
    dst.data.set(src.data.subarray(srcRow * c, (srcRow + n) * c), dstRow * c);
  }
  private mm(a: CpuTensor, b: CpuTensor, o: MatOpts, acc?: Float32Array): CpuTensor {
    const m = o.transA ? a.shape[1]! : a.shape[0]!;
    const n = o.transB ? b.shape[0]! : b.shape[1]!;
    const data = matmulCpu(a.data, a.shape, b.data, b.shape, {
      transA: o.transA,
      transB: o.transB,
      alpha: o.alpha,
      accumulate: acc,
    });
    return { data, shape: [m, n] };
  }
  matmul(a: CpuTensor, b: CpuTensor, o: MatOpts = {}): CpuTensor {
    return this.mm(a, b, o);
  }
  matmulAcc(out: CpuTensor, a: CpuTensor, b: CpuTensor, o: MatOpts = {}): void {
    out.data.set(this.mm(a, b, o, out.data).data);
  }
  addBias(x: CpuTensor, bias: CpuTensor): CpuTensor {
    const c = bias.data.length;
    const out = x.data.slice();
    for (let i = 0; i < out.length; i++) out[i]! += bias.data[i % c]!;
    return { data: out, shape: x.shape };
  }
  add(a: CpuTensor, b: CpuTensor): CpuTensor {
    return { data: addCpu(a.data, b.data), shape: a.shape };
  }
  addInPlace(a: CpuTensor, b: CpuTensor, s = 1): void {
    a.data.set(addInPlaceCpu(a.data, b.data, s));
  }
  scale(a: CpuTensor, s: number): CpuTensor {
    return { data: scaleCpu(a.data, s), shape: a.shape };
  }
  rmsnorm(x: CpuTensor, w: CpuTensor, eps: number): CpuTensor {
    return { data: rmsnormCpu(x.data, w.data, eps), shape: x.shape };
  }
  rmsnormBackward(x: CpuTensor, w: CpuTensor, dy: CpuTensor, eps: number): CpuTensor {
    return { data: rmsnormBackwardCpu(x.data, w.data, dy.data, eps).dx, shape: x.shape };
  }
  segments(lengths: number[]): CpuTensor {
    const b = segmentBounds(lengths);
    return { data: Float32Array.from(b), shape: [b.length / 2, 2] };
  }
  rope(x: CpuTensor, freqs: CpuTensor, pos0: number, seg?: CpuTensor): CpuTensor {
    return { data: ropeCpu(x.data, x.shape, freqs.data, pos0, seg?.data), shape: x.shape };
  }
  ropeBackward(dy: CpuTensor, freqs: CpuTensor, pos0: number, seg?: CpuTensor): CpuTensor {
    return { data: ropeBackwardCpu(dy.data, dy.shape, freqs.data, pos0, seg?.data), shape: dy.shape };
  }
  private dims(q: CpuTensor, k: CpuTensor) {
    return { T: q.shape[0]!, S: k.shape[0]!, Hq: q.shape[1]!, Hkv: k.shape[1]!, D: q.shape[2]! };
  }
  attention(q: CpuTensor, k: CpuTensor, v: CpuTensor, seg?: CpuTensor) {
    const d = this.dims(q, k);
    const r = attentionCpu(q.data, k.data, v.data, d, seg?.data);
    return { out: { data: r.out, shape: q.shape }, lse: { data: r.lse, shape: [d.Hq, d.T] } };
  }
  attentionBackward(
    q: CpuTensor,
    k: CpuTensor,
    v: CpuTensor,
    _out: CpuTensor,
    _lse: CpuTensor,
    dout: CpuTensor,
    seg?: CpuTensor,
  ) {
    const r = attentionBackwardCpu(q.data, k.data, v.data, dout.data, this.dims(q, k), seg?.data);
    return {
      dq: { data: r.dq, shape: q.shape },
      dk: { data: r.dk, shape: k.shape },
      dv: { data: r.dv, shape: v.shape },
    };
  }
  swiglu(g: CpuTensor, u: CpuTensor): CpuTensor {
    return { data: swigluCpu(g.data, u.data), shape: g.shape };
  }
  swigluBackward(g: CpuTensor, u: CpuTensor, dout: CpuTensor) {
    const r = swigluBackwardCpu(g.data, u.data, dout.data);
    return { dgate: { data: r.dgate, shape: g.shape }, dup: { data: r.dup, shape: u.shape } };
  }
  nll(logits: CpuTensor, targets: number[], weights: Float32Array) {
    const [t, v] = logits.shape as [number, number];
    const r = nllCpu(logits.data, Uint32Array.from(targets), weights, v);
    return {
      loss: { data: r.loss, shape: [t] },
      logprobs: { data: r.logp, shape: [t] },
      lse: { data: r.lse, shape: [t] },
    };
  }
  nllBackward(
    logits: CpuTensor,
    targets: number[],
    weights: Float32Array | CpuTensor,
    _lse: CpuTensor,
    o: NllBackwardOpts = {},
  ): CpuTensor {
    const v = logits.shape[1]!;
    const w = weights instanceof Float32Array ? weights : weights.data;
    return {
      data: nllBackwardCpu(logits.data, Uint32Array.from(targets), w, v, o.upstream ?? 1),
      shape: logits.shape,
    };
  }
  grpoWeights(logp: CpuTensor, info: CpuTensor, base: CpuTensor | undefined, o: GrpoWeightOptions) {
    const r = grpoWeightsCpu(logp.data, info.data, base?.data, o);
    return { w: { data: r.w, shape: [r.w.length] }, stats: { data: r.stats, shape: [r.w.length, 4] } };
  }
  async sumSquares(xs: CpuTensor[]): Promise<number> {
    return sumSquaresCpu(xs.map((x) => x.data));
  }
  adamw(param: CpuTensor, grad: CpuTensor, m: CpuTensor, v: CpuTensor, opts: AdamWOptions): void {
    adamwCpu(param.data, grad.data, m.data, v.data, opts);
  }
  async sample(logits: CpuTensor, o: SampleOptions, u: number[]): Promise<number[]> {
    return sampleCpu(logits.data, logits.shape[logits.shape.length - 1]!, o, u);
  }
  idTensor(n: number): CpuTensor {
    return this.zeros([n]);
  }
  embeddingAt(table: CpuTensor, ids: CpuTensor, offset: number, count: number, base = 0): CpuTensor {
    const rows = table.shape[0]!;
    const local = Array.from(ids.data.subarray(offset, offset + count), (id) =>
      id >= base && id < base + rows ? id - base : rows,
    );
    return this.embedding(table, local);
  }
  sampleInto(
    logits: CpuTensor,
    o: SampleOptions,
    rand: CpuTensor,
    randOffset: number,
    out: CpuTensor,
    outOffset: number,
  ): void {
    const v = logits.shape[logits.shape.length - 1]!;
    const n = logits.data.length / v;
    out.data.set(sampleCpu(logits.data, v, o, rand.data.subarray(randOffset, randOffset + n)), outOffset);
  }
  async readIdTensor(ids: CpuTensor): Promise<number[]> {
    return Array.from(ids.data);
  }
  linearFused(x: CpuTensor, ws: CpuTensor[], biases: (CpuTensor | undefined)[]): CpuTensor {
    const n = x.shape[0]!;
    const parts = ws.map((w, i) => {
      const y = this.matmul(x, w, { transB: true });
      const b = biases[i];
      return b ? this.addBias(y, b) : y;
    });
    const width = parts.reduce((a, p) => a + p.shape[1]!, 0);
    const data = new Float32Array(n * width);
    for (let r = 0; r < n; r++) {
      let off = r * width;
      for (const p of parts) {
        const c = p.shape[1]!;
        data.set(p.data.subarray(r * c, (r + 1) * c), off);
        off += c;
      }
    }
    return { data, shape: [n, width] };
  }
  gluLinear(x: CpuTensor, wg: CpuTensor, wu: CpuTensor): CpuTensor {
    return this.swiglu(this.matmul(x, wg, { transB: true }), this.matmul(x, wu, { transB: true }));
  }
  ropeAppend(
    qkv: CpuTensor,
    freqs: CpuTensor,
    kStore: CpuTensor,
    vStore: CpuTensor,
    b: PagedBatch,
    o: { Hq: number; Hkv: number; qNorm?: CpuTensor; kNorm?: CpuTensor; eps?: number },
  ): CpuTensor {
    const N = qkv.shape[0]!;
    const D = 2 * freqs.data.length;
    const dims = { N, Hq: o.Hq, Hkv: o.Hkv, D };
    const norm = { qNorm: o.qNorm?.data, kNorm: o.kNorm?.data, eps: o.eps };
    if ((kStore.kvFormat ?? 'f32') !== (vStore.kvFormat ?? 'f32'))
      throw new TypeError('ropeAppend: kStore and vStore must hold one KV format (make both with kvStore)');
    const q = ropeAppendCpu(qkv.data, freqs.data, kStore.data, vStore.data, b, dims, norm, kStore.kvFormat);
    return { data: q, shape: [N, o.Hq, D] };
  }
  attentionPaged(q: CpuTensor, kStore: CpuTensor, vStore: CpuTensor, b: PagedBatch): CpuTensor {
    const [N, Hq, D] = q.shape as [number, number, number];
    const dims = { N, Hq, Hkv: kStore.shape[1]!, D };
    return { data: attentionPagedCpu(q.data, kStore.data, vStore.data, b, dims), shape: [N, Hq, D] };
  }
  kvStore(shape: [number, number, number], format: KvFormat): CpuTensor {
    return { ...this.zeros(shape), kvFormat: format };
  }
  free(): void {}
  flush(): void {}
  trim(): void {}
}
