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
 *
 * Buffer recycling (training memory). A released buffer goes to one of two lists:
 *   - released this step: released while the step that reads it is still being recorded. It may be
 *     handed out again in the SAME step, but only to work that writes it on the GPU timeline after
 *     the recorded reads: kernel outputs and zeros() (dispatches, copies and clearBuffer run in
 *     recording order, and WebGPU orders a write after earlier reads of the same buffer). Never to
 *     `tensor(shape, data)`: queue.writeBuffer runs at once, before the unsubmitted commands that
 *     still read the old contents.
 *   - retired: released before a flush that has since been submitted; any use, uploads included
 *     (queue.writeBuffer is ordered after earlier submissions).
 * flush() moves the first list into the second. So a caller may release a temporary as soon as the
 * last operation that reads it has been RECORDED, and must not record another read of it after that.
 * Accounting (GPU backend only; the CPU backend has none): `liveBytes` are the buffers handed out
 * and not released; `deviceBytes` the pool's buffers that exist (live, released, pooled: the GPU
 * memory the engine holds; only trim() gives any back); `peakLiveBytes` / `peakDeviceBytes` their
 * maxima since `resetPeak()`; `bytesAllocated` every buffer ever created. Without in-step recycling
 * the device peak exceeds the live peak by the temporaries released during a step.
 */
import type { GpuContext } from './device.ts';
import { f16ToF32 } from '../io/float16.ts';

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

/** Buffers of at least this many bytes written by kernels are pooled by size class. */
const CLASS_MIN_BYTES = 64 * 1024;
/** Size classes per octave: a buffer is at most 1/16 (6.25 %) larger than asked for. */
const CLASSES_PER_OCTAVE = 16;
/**
 * Retired buffers the pool keeps beyond the largest set of live buffers before it evicts: this
 * share of that set, at least POOL_SLACK_MIN bytes.
 */
const POOL_SLACK = 0.1;
const POOL_SLACK_MIN = 64 * 2 ** 20;

/**
 * The pool's byte size for a kernel-written tensor of `bytes`: rounded up to one of 16 classes per
 * octave from 64 KiB, so that activations of nearby lengths (a 700- and a 720-token sample) share
 * buffers; exact below (and for uploads, whose sizes are the data's: weights stay exact).
 */
export function classBytes(bytes: number): number {
  if (bytes < CLASS_MIN_BYTES) return bytes;
  const step = 2 ** (Math.floor(Math.log2(bytes)) - Math.log2(CLASSES_PER_OCTAVE));
  return Math.ceil(bytes / step) * step;
}

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

/**
 * Most dispatches one submission holds before run() submits on its own (Engine's
 * maxDispatchesPerSubmit): a training step is thousands, and one long submission can outlast an OS
 * GPU watchdog (about 2 s on Windows and ChromeOS) on a small GPU; a decode step is about 200.
 */
export const MAX_DISPATCHES_PER_SUBMIT = 512;

export class Engine {
  private encoder: GPUCommandEncoder | null = null;
  /** Dispatches recorded since the last submission. */
  private unsubmitted = 0;
  /** See MAX_DISPATCHES_PER_SUBMIT (opts.maxDispatchesPerSubmit; Infinity: only flush() submits). */
  readonly maxDispatchesPerSubmit: number;
  private pass: GPUComputePassEncoder | null = null;
  /** Retired buffers by byte size: free for any use (see the header). */
  private readonly free = new Map<number, GPUBuffer[]>();
  /** The same retired buffers, oldest retirement first (what a miss evicts first). */
  private readonly retiredOrder = new Set<GPUBuffer>();
  /** Released during the step being recorded, by byte size: only for GPU-written outputs (see the header). */
  private readonly releasedThisStep = new Map<number, GPUBuffer[]>();
  /** Buffers handed out by tensor()/zeros() and not released. */
  private readonly live = new Set<GPUBuffer>();
  /**
   * Uniform blocks of the step being recorded, packed into 64 KiB chunks (one GPU buffer each,
   * bound at 256-byte offsets) and written with one writeBuffer per chunk at flush, instead of
   * a buffer created and written per dispatch (which dominated decode steps).
   */
  private readonly chunks: { buffer: GPUBuffer; shadow: Uint8Array; used: number }[] = [];
  private readonly spareChunks: { buffer: GPUBuffer; shadow: Uint8Array }[] = [];
  /**
   * Bind groups by pipeline, bound buffers and uniform slot (objectId), least recently used first;
   * at most BIND_GROUP_CACHE. Entries of a buffer that trim() or evict() destroys are dropped
   * (bindGroupsOf), so a destroyed buffer is never bound from the cache.
   */
  private readonly bindGroups = new Map<string, { group: GPUBindGroup; buffers: GPUBuffer[] }>();
  /** The keys of bindGroups that bind each storage buffer (what destroying the buffer drops). */
  private readonly bindGroupsOf = new Map<GPUBuffer, Set<string>>();
  /**
   * Whether run() reuses cached bind groups (default: opts.bindGroupCache, else true); false creates
   * one per dispatch, as before the cache. Switchable between steps, so a benchmark can alternate.
   */
  bindGroupCache: boolean;
  /** Counters for `spade bench engine` (dispatches per generated token, copies that split passes). */
  dispatches = 0;
  /** Dispatches that reused a cached bind group (run()) instead of creating one. */
  bindGroupHits = 0;
  copies = 0;
  submits = 0;
  /** Device buffers ever created by the pool (bytes). */
  bytesAllocated = 0;
  /** Bytes of the pool's device buffers that exist now (created, not destroyed by trim()): the GPU memory held. */
  deviceBytes = 0;
  /** Largest deviceBytes since the engine was made or resetPeak() was called: the step's real GPU peak. */
  peakDeviceBytes = 0;
  /** Bytes of buffers handed out and not released (the allocator's view of memory in use). */
  liveBytes = 0;
  /** Largest liveBytes since the engine was made or resetPeak() was called. */
  peakLiveBytes = 0;
  /** Buffers handed out again from the list released in the same step (recycled within a step). */
  reusedInStep = 0;
  /** Retired buffers destroyed to make room for a new one (the pool's evictions). */
  evictedBytes = 0;
  /** Largest liveBytes since the engine was made (the pool's budget is this plus its slack). */
  maxLiveBytes = 0;

  /**
   * `recycleInStep: false` keeps every released buffer out of use until the next flush (the
   * behaviour before recycling), for measuring what recycling saves; default true.
   * `sizeClasses: false` pools kernel outputs by exact byte size and never evicts (the pool before
   * size classes: a run of mixed lengths keeps every length's buffers); default true: size
   * classes (classBytes), and when a buffer has to be created while the pool would then hold more
   * than the largest live set (`maxLiveBytes`) plus 10 % of it (at least 64 MiB), retired buffers
   * are destroyed first, oldest first, down to that budget: a run of mixed lengths holds about one
   * step's memory, and alternating workloads that fit the budget (decode and training) keep all
   * their buffers.
   * `bindGroupCache: false` starts with the bind-group cache off (see `bindGroupCache`).
   * `maxDispatchesPerSubmit`: run() submits what is recorded once it holds this many dispatches
   * (default MAX_DISPATCHES_PER_SUBMIT), so no submission runs long.
   */
  constructor(
    readonly ctx: GpuContext,
    readonly opts: {
      recycleInStep?: boolean;
      sizeClasses?: boolean;
      bindGroupCache?: boolean;
      maxDispatchesPerSubmit?: number;
    } = {},
  ) {
    this.bindGroupCache = opts.bindGroupCache !== false;
    this.maxDispatchesPerSubmit = opts.maxDispatchesPerSubmit ?? MAX_DISPATCHES_PER_SUBMIT;
    if (!(this.maxDispatchesPerSubmit >= 1))
      throw new RangeError(`Engine: maxDispatchesPerSubmit must be ≥ 1; got ${this.maxDispatchesPerSubmit}`);
  }

  get device(): GPUDevice {
    return this.ctx.device;
  }
  get f16(): boolean {
    return this.ctx.report.features.shaderF16;
  }
  /** Bind groups held by run()'s cache now. */
  get cachedBindGroups(): number {
    return this.bindGroups.size;
  }

  /** A new tensor (from the pool), optionally filled with `data`. */
  tensor(shape: number[], data?: Float32Array | Uint16Array | Uint32Array, dtype: DType = 'f32'): Tensor {
    const size = numel(shape);
    const classes = this.opts.sizeClasses !== false;
    const bytes = data || !classes ? bytesOf(size, dtype) : classBytes(bytesOf(size, dtype));
    // data is written by queue.writeBuffer, which runs before unsubmitted reads: retired buffers only
    let buffer = data || this.opts.recycleInStep === false ? undefined : this.releasedThisStep.get(bytes)?.pop();
    if (buffer) this.reusedInStep++;
    else {
      buffer = this.free.get(bytes)?.pop();
      if (buffer) this.retiredOrder.delete(buffer);
    }
    if (!buffer && classes)
      this.evict(
        this.deviceBytes + bytes - this.maxLiveBytes - Math.max(POOL_SLACK * this.maxLiveBytes, POOL_SLACK_MIN),
      );
    if (!buffer) {
      buffer = this.device.createBuffer({
        size: bytes,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      this.bytesAllocated += bytes;
      this.deviceBytes += bytes;
      if (this.deviceBytes > this.peakDeviceBytes) this.peakDeviceBytes = this.deviceBytes;
    }
    if (data) {
      if (data.byteLength > bytes)
        throw new RangeError(
          `tensor data is ${data.byteLength} bytes, the shape ${JSON.stringify(shape)} holds ${bytes}`,
        );
      this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    }
    this.live.add(buffer);
    this.liveBytes += bytes;
    if (this.liveBytes > this.peakLiveBytes) this.peakLiveBytes = this.liveBytes;
    if (this.liveBytes > this.maxLiveBytes) this.maxLiveBytes = this.liveBytes;
    return { buffer, shape: [...shape], dtype, size };
  }

  /** Start new peak measurements (live and device) from the bytes held now. */
  resetPeak(): void {
    this.peakLiveBytes = this.liveBytes;
    this.peakDeviceBytes = this.deviceBytes;
  }

  /** A zero-filled tensor. */
  zeros(shape: number[], dtype: DType = 'f32'): Tensor {
    const t = this.tensor(shape, undefined, dtype);
    this.endPass();
    this.enc().clearBuffer(t.buffer);
    return t;
  }

  /**
   * Return a tensor's buffer to the pool once the last operation that reads it has been recorded:
   * later outputs of this step may reuse it (see the header). A second release of the same buffer
   * (or of a view of it) before it is handed out again is ignored, so it can never be handed out twice.
   */
  release(t: Tensor): void {
    const b = t.buffer;
    if (!this.live.delete(b)) return;
    this.liveBytes -= b.size;
    const list = this.releasedThisStep.get(b.size) ?? [];
    list.push(b);
    this.releasedThisStep.set(b.size, list);
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
    // a submission of what is recorded, between two dispatches (as a caller's flush() would be)
    if (this.unsubmitted >= this.maxDispatchesPerSubmit) this.flush();
    const pipeline = this.ctx.pipeline(spec.key, spec.code, spec.constants);
    let key = `${objectId(pipeline)}|`;
    for (const t of spec.bindings) key += `${objectId(t.buffer)},`;
    let uniform: { buffer: GPUBuffer; offset: number; size: number } | undefined;
    if (spec.uniforms) {
      const size = Math.max(16, Math.ceil(spec.uniforms.byteLength / 16) * 16);
      let chunk = this.chunks[this.chunks.length - 1];
      if (!chunk || chunk.used + size > UNIFORM_CHUNK) {
        const spare = this.spareChunks.pop();
        chunk = spare
          ? { ...spare, used: 0 }
          : {
              buffer: this.device.createBuffer({
                size: UNIFORM_CHUNK,
                usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
              }),
              shadow: new Uint8Array(UNIFORM_CHUNK),
              used: 0,
            };
        this.chunks.push(chunk);
      }
      const offset = chunk.used;
      chunk.shadow.set(new Uint8Array(spec.uniforms), offset);
      chunk.used = offset + Math.ceil(size / UNIFORM_ALIGN) * UNIFORM_ALIGN;
      uniform = { buffer: chunk.buffer, offset, size };
      key += `|${objectId(chunk.buffer)}@${offset}+${size}`;
    }
    // the same pipeline, buffers and uniform slot as an earlier dispatch: reuse its bind group
    // (a decode step repeats the last one's; the contents may differ, the bindings do not)
    let cached = this.bindGroupCache ? this.bindGroups.get(key) : undefined;
    if (cached) {
      this.bindGroups.delete(key); // re-insert: Map order is the LRU order
      this.bindGroupHits++;
    } else {
      const entries: GPUBindGroupEntry[] = spec.bindings.map((t, i) => ({
        binding: i,
        resource: { buffer: t.buffer },
      }));
      if (uniform) entries.push({ binding: spec.bindings.length, resource: uniform });
      const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
      cached = { group, buffers: spec.bindings.map((t) => t.buffer) };
      if (this.bindGroupCache) this.cacheBindGroup(key, cached);
    }
    if (this.bindGroupCache) this.bindGroups.set(key, cached);
    const bind = cached.group;
    if (!this.pass) this.pass = this.enc().beginComputePass();
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, bind);
    const [x, y = 1, z = 1] = spec.workgroups;
    this.pass.dispatchWorkgroups(x, y, z);
    this.dispatches++;
    this.unsubmitted++;
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
    this.unsubmitted = 0;
    // reversed, so the next step pops them in this step's order (same uniform slots: bind-group hits)
    for (const c of this.chunks.splice(0).reverse()) this.spareChunks.push(c);
    // everything that reads this step's released buffers is submitted now: they retire
    for (const [bytes, released] of this.releasedThisStep) {
      const list = this.free.get(bytes) ?? [];
      list.push(...released);
      this.free.set(bytes, list);
      for (const b of released) this.retiredOrder.add(b);
    }
    this.releasedThisStep.clear();
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

  /**
   * Destroy retired pooled buffers of at least `minBytes` (default: all). Tensors still held by
   * callers, and this step's releases, stay valid. A training step trims its LM-head chunk buffers
   * this way before the backward, so their size does not sit idle in the pool at the step's peak.
   */
  trim(minBytes = 0): void {
    this.forgetBindGroups(new Set([...this.free].filter(([bytes]) => bytes >= minBytes).flatMap(([, l]) => l)));
    for (const [bytes, list] of this.free) {
      if (bytes < minBytes) continue;
      for (const b of list) {
        this.deviceBytes -= b.size;
        this.retiredOrder.delete(b);
        b.destroy();
      }
      this.free.delete(bytes);
    }
  }

  /** Destroy retired buffers, oldest first, until at least `bytes` are gone (or none is left); ≤ 0: none. */
  private evict(bytes: number): void {
    if (bytes <= 0) return;
    const gone = new Set<GPUBuffer>();
    let freed = 0;
    for (const b of this.retiredOrder) {
      if (freed >= bytes) break;
      gone.add(b);
      freed += b.size;
    }
    if (gone.size === 0) return;
    this.forgetBindGroups(gone);
    for (const b of gone) {
      this.retiredOrder.delete(b);
      const list = this.free.get(b.size)!;
      list.splice(list.indexOf(b), 1);
      if (list.length === 0) this.free.delete(b.size);
      this.deviceBytes -= b.size;
      this.evictedBytes += b.size;
      b.destroy();
    }
  }

  /** Index a new cache entry by its buffers, first dropping the least recently used entry when full. */
  private cacheBindGroup(key: string, entry: { group: GPUBindGroup; buffers: GPUBuffer[] }): void {
    if (this.bindGroups.size >= BIND_GROUP_CACHE) this.dropBindGroup(this.bindGroups.keys().next().value!);
    for (const b of entry.buffers) {
      let keys = this.bindGroupsOf.get(b);
      if (!keys) this.bindGroupsOf.set(b, (keys = new Set()));
      keys.add(key);
    }
  }

  /** Remove one cache entry and its index references. */
  private dropBindGroup(key: string): void {
    const entry = this.bindGroups.get(key);
    if (!entry) return;
    this.bindGroups.delete(key);
    for (const b of entry.buffers) {
      const keys = this.bindGroupsOf.get(b);
      keys?.delete(key);
      if (keys?.size === 0) this.bindGroupsOf.delete(b);
    }
  }

  /** Drop the cached bind groups that bind any of `buffers` (about to be destroyed). */
  private forgetBindGroups(buffers: Set<GPUBuffer>): void {
    for (const b of buffers) for (const key of this.bindGroupsOf.get(b) ?? []) this.dropBindGroup(key);
  }
}

/** Bind groups the Engine keeps at most (a decode step of a 24-layer model uses ~200). */
const BIND_GROUP_CACHE = 4096;

const objectIds = new WeakMap<object, number>();
let nextObjectId = 1;
/** A stable number for a GPU object (pipeline, buffer), for cache keys; the object is not kept alive. */
function objectId(o: object): number {
  let id = objectIds.get(o);
  if (id === undefined) {
    id = nextObjectId++;
    objectIds.set(o, id);
  }
  return id;
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
