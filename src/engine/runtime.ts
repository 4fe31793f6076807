/**
 * The engine's GPU runtime: tensors (a storage buffer with a shape), a buffer pool
 * keyed by byte size, and a recorder that puts every dispatch of a step into one
 * command encoder, submitted once (flush). Kernels (src/engine/kernels/<op>.ts)
 * call `engine.run(...)` with their WGSL, injected constants, bound tensors and a
 * small uniform block; they never submit on their own.
 *
 *   const e = new Engine(ctx);
 *   const y = matmul(e, x, w);            // recorded
 *   const out = await e.read(y);           // flushes, then maps
 *
 * The f16/bf16 conversions live in io/float16.ts (pure; the safetensors reader uses them too).
 */
import type { GpuContext } from './device.ts';
import { f16ToF32 } from './io/float16.ts';

export type DType = 'f32' | 'f16';

export interface Tensor {
  buffer: GPUBuffer;
  shape: number[];
  dtype: DType;
  /** Number of elements (product of shape). */
  size: number;
}

/** Bytes per uniform chunk, and the offset alignment (WebGPU's minUniformBufferOffsetAlignment default). */
const UNIFORM_CHUNK = 64 * 1024;
const UNIFORM_ALIGN = 256;

export const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);
const bytesOf = (size: number, dtype: DType) => Math.max(16, Math.ceil((size * (dtype === 'f16' ? 2 : 4)) / 16) * 16);

export interface RunSpec {
  /** Pipeline cache key (kernel name + variant). */
  key: string;
  code: string;
  constants?: Record<string, number>;
  /** Tensors in binding order (0, 1, 2, ...); the uniform block, if any, binds after them. */
  bindings: Tensor[];
  /** Up to 64 bytes of u32/f32 parameters, bound as a uniform at index bindings.length. */
  uniforms?: ArrayBuffer;
  workgroups: [number, number?, number?];
}

export class Engine {
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly free = new Map<number, GPUBuffer[]>();
  /** Buffers to return to the pool after the next flush (temporaries of this step). */
  private readonly pendingRelease: GPUBuffer[] = [];
  /**
   * Uniform blocks of the step being recorded, packed into 64 KiB chunks (one GPU buffer each,
   * bound at 256-byte offsets) and written with one writeBuffer per chunk at flush, instead of
   * a buffer created and written per dispatch (which dominated decode steps).
   */
  private readonly chunks: { buffer: GPUBuffer; shadow: Uint8Array; used: number }[] = [];
  private readonly spareChunks: GPUBuffer[] = [];
  /** Counters for `spade bench engine` (dispatches per generated token, copies that split passes). */
  dispatches = 0;
  copies = 0;
  submits = 0;
  bytesAllocated = 0;

  constructor(readonly ctx: GpuContext) {}

  get device(): GPUDevice {
    return this.ctx.device;
  }
  get f16(): boolean {
    return this.ctx.report.features.shaderF16;
  }

  /** A new tensor (from the pool), optionally filled with `data`. */
  tensor(shape: number[], data?: Float32Array | Uint16Array | Uint32Array, dtype: DType = 'f32'): Tensor {
    const size = numel(shape);
    const bytes = bytesOf(size, dtype);
    let buffer = this.free.get(bytes)?.pop();
    if (!buffer) {
      buffer = this.device.createBuffer({
        size: bytes,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      this.bytesAllocated += bytes;
    }
    if (data) {
      if (data.byteLength > bytes)
        throw new RangeError(
          `tensor data is ${data.byteLength} bytes, the shape ${JSON.stringify(shape)} holds ${bytes}`,
        );
      this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    }
    return { buffer, shape: [...shape], dtype, size };
  }

  /** A zero-filled tensor. */
  zeros(shape: number[], dtype: DType = 'f32'): Tensor {
    const t = this.tensor(shape, undefined, dtype);
    this.endPass();
    this.enc().clearBuffer(t.buffer);
    return t;
  }

  /** Return a tensor's buffer to the pool (after the recorded work that uses it has been submitted). */
  release(t: Tensor): void {
    this.pendingRelease.push(t.buffer);
  }

  private enc(): GPUCommandEncoder {
    this.ctx.throwIfLost();
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }
  private endPass(): void {
    this.pass?.end();
    this.pass = null;
  }

  /** Record one compute dispatch. */
  run(spec: RunSpec): void {
    const pipeline = this.ctx.pipeline(spec.key, spec.code, spec.constants);
    const entries: GPUBindGroupEntry[] = spec.bindings.map((t, i) => ({ binding: i, resource: { buffer: t.buffer } }));
    if (spec.uniforms) {
      const size = Math.max(16, Math.ceil(spec.uniforms.byteLength / 16) * 16);
      let chunk = this.chunks[this.chunks.length - 1];
      if (!chunk || chunk.used + size > UNIFORM_CHUNK) {
        const buffer =
          this.spareChunks.pop() ??
          this.device.createBuffer({ size: UNIFORM_CHUNK, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
        chunk = { buffer, shadow: new Uint8Array(UNIFORM_CHUNK), used: 0 };
        this.chunks.push(chunk);
      }
      const offset = chunk.used;
      chunk.shadow.set(new Uint8Array(spec.uniforms), offset);
      chunk.used = offset + Math.ceil(size / UNIFORM_ALIGN) * UNIFORM_ALIGN;
      entries.push({ binding: spec.bindings.length, resource: { buffer: chunk.buffer, offset, size } });
    }
    const bind = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    if (!this.pass) this.pass = this.enc().beginComputePass();
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, bind);
    const [x, y = 1, z = 1] = spec.workgroups;
    this.pass.dispatchWorkgroups(x, y, z);
    this.dispatches++;
  }

  /** Record a buffer copy (e.g. into the KV cache). */
  copy(src: Tensor, srcOffsetElems: number, dst: Tensor, dstOffsetElems: number, elems: number): void {
    this.endPass();
    const b = src.dtype === 'f16' ? 2 : 4;
    this.enc().copyBufferToBuffer(src.buffer, srcOffsetElems * b, dst.buffer, dstOffsetElems * b, elems * b);
    this.copies++;
  }

  /** Submit everything recorded so far (one submission per step). */
  flush(): void {
    this.endPass();
    // queue.writeBuffer is ordered before the submit that follows, and after earlier submits,
    // so a chunk can be rewritten for the next step as soon as this one is submitted
    for (const c of this.chunks) this.device.queue.writeBuffer(c.buffer, 0, c.shadow.buffer, 0, c.used);
    if (this.encoder) {
      this.device.queue.submit([this.encoder.finish()]);
      this.encoder = null;
      this.submits++;
    }
    for (const c of this.chunks.splice(0)) this.spareChunks.push(c.buffer);
    for (const b of this.pendingRelease.splice(0)) {
      const list = this.free.get(b.size) ?? [];
      list.push(b);
      this.free.set(b.size, list);
    }
  }

  /** Flush, then copy a tensor back as f32 (f16 tensors are widened on the CPU). */
  async read(t: Tensor): Promise<Float32Array> {
    const bytes = t.size * (t.dtype === 'f16' ? 2 : 4);
    const staging = this.device.createBuffer({
      size: Math.ceil(bytes / 4) * 4,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    this.endPass();
    this.enc().copyBufferToBuffer(t.buffer, 0, staging, 0, Math.ceil(bytes / 4) * 4);
    this.flush();
    await staging.mapAsync(GPUMapMode.READ);
    const raw = staging.getMappedRange().slice(0);
    staging.unmap();
    staging.destroy();
    this.ctx.throwIfLost();
    if (t.dtype === 'f32') return new Float32Array(raw, 0, t.size);
    return f16ToF32(new Uint16Array(raw, 0, t.size));
  }

  /** Destroy pooled buffers (tensors still held by callers stay valid). */
  trim(): void {
    for (const list of this.free.values()) for (const b of list) b.destroy();
    this.free.clear();
  }
}

/** Uniform block builder: u32 and f32 fields, in order (std140-like 4-byte packing). */
export function uniforms(...fields: ({ u32: number } | { f32: number })[]): ArrayBuffer {
  const buf = new ArrayBuffer(Math.max(16, Math.ceil((fields.length * 4) / 16) * 16));
  const dv = new DataView(buf);
  fields.forEach((f, i) => {
    if ('u32' in f) dv.setUint32(i * 4, f.u32 >>> 0, true);
    else dv.setFloat32(i * 4, f.f32, true);
  });
  return buf;
}
