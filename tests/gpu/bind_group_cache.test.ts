// The engine's bind-group cache (Engine.run): decode steps reuse the bind groups of the step before,
// a buffer that trim() or the pool's eviction destroys is never bound again from the cache (checked on
// a recording device that remembers every destroyed buffer), the cache can be switched off
// (Engine.bindGroupCache: one bind group per dispatch) and decoding gives the same tokens either way.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { benchStepRecording, benchStepTemplate } from '../../src/engine/bench/batch.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { matvec } from '../../src/engine/kernels/matvec.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { GpuOps } from '../../src/engine/ops/ops.ts';
import type { GpuReport } from '../../src/engine/runtime/device.ts';
import { dryRunContext } from '../../src/engine/runtime/dry_run.ts';
import { Engine, type Tensor } from '../../src/engine/runtime/runtime.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

const DRY_REPORT: GpuReport = {
  vendor: 'dry run',
  architecture: 'swiftshader',
  description: '',
  isFallback: true,
  features: { shaderF16: false, subgroups: false, timestampQuery: false },
  limits: {
    maxStorageBufferBindingSize: 2 ** 31,
    maxBufferSize: 2 ** 31,
    maxComputeWorkgroupSizeX: 256,
    maxComputeInvocationsPerWorkgroup: 256,
    maxComputeWorkgroupStorageSize: 16384,
  },
};

/**
 * An engine on a recording device whose buffers remember destroy(), whose bind groups remember their
 * buffers, and whose passes throw when a bind group with a destroyed buffer is set.
 */
function checkedEngine(opts: { bindGroupCache?: boolean } = {}) {
  const dry = dryRunContext(DRY_REPORT);
  const device = dry.device as unknown as Record<string, (...a: never[]) => unknown>;
  const destroyed = new WeakSet<object>();
  const stats = { bound: 0, created: 0 };
  const createBuffer = device.createBuffer!.bind(device);
  device.createBuffer = ((d: GPUBufferDescriptor) => {
    const b = createBuffer(d as never) as { destroy: () => void };
    b.destroy = () => destroyed.add(b);
    return b;
  }) as never;
  const createBindGroup = device.createBindGroup!.bind(device);
  device.createBindGroup = ((d: GPUBindGroupDescriptor) => {
    createBindGroup(d as never); // its size checks
    stats.created++;
    return { buffers: [...d.entries].map((en) => (en.resource as GPUBufferBinding).buffer) };
  }) as never;
  const createCommandEncoder = device.createCommandEncoder!.bind(device);
  device.createCommandEncoder = (() => {
    const enc = createCommandEncoder() as { beginComputePass: () => Record<string, unknown> };
    return {
      ...enc,
      beginComputePass: () => ({
        ...enc.beginComputePass(),
        setBindGroup: (_i: number, g: { buffers: object[] }) => {
          if (g.buffers.some((b) => destroyed.has(b))) throw new Error('a destroyed buffer was bound');
          stats.bound++;
        },
      }),
    };
  }) as never;
  return { e: new Engine(dry, opts), stats };
}

describe('bind-group cache on a recording device', () => {
  it('trim() and eviction drop the cached bind groups of the buffers they destroy', () => {
    const { e, stats } = checkedEngine();
    const K = 4;
    const N = 10_000_000; // 40 MiB outputs: eviction starts above the pool's 64 MiB slack
    const x = e.tensor([1, K], new Float32Array(K));
    const w = e.tensor([N, K], new Float32Array(N * K));
    const step = () => {
      const y = matvec(e, x, w);
      e.release(y);
      e.flush();
      return y.buffer;
    };
    const first = step();
    const hits = e.bindGroupHits;
    expect(step()).toBe(first); // y's buffer comes back from the pool ...
    expect(e.bindGroupHits).toBe(hits + 1); // ... and so does the bind group
    const cached = e.cachedBindGroups;

    e.trim(); // destroys y's retired buffer
    expect(e.cachedBindGroups).toBe(cached - 1);
    const second = step(); // a new buffer: a new bind group
    expect(second).not.toBe(first);
    expect(e.bindGroupHits).toBe(hits + 1);

    // a 120 MiB buffer of another size while the pool is at its budget: the retired y is evicted
    const big = e.tensor([30_000_000]);
    expect(e.evictedBytes).toBeGreaterThan(0);
    expect(e.cachedBindGroups).toBe(cached - 1);
    e.release(big);
    expect(step()).not.toBe(second);
    expect(stats.bound).toBe(e.dispatches); // every dispatch bound a group without a destroyed buffer
  });

  it('with the cache off every dispatch creates its bind group and none is kept', () => {
    const { e, stats } = checkedEngine({ bindGroupCache: false });
    const x = e.tensor([1, 8], new Float32Array(8));
    const w = e.tensor([16, 8], new Float32Array(128));
    for (let i = 0; i < 3; i++) {
      e.release(matvec(e, x, w));
      e.flush();
    }
    expect(e.bindGroupHits).toBe(0);
    expect(e.cachedBindGroups).toBe(0);
    expect(stats.created).toBe(3);
    e.bindGroupCache = true; // switched on between steps
    for (let i = 0; i < 2; i++) {
      e.release(matvec(e, x, w));
      e.flush();
    }
    expect(e.bindGroupHits).toBe(1);
    expect(stats.created).toBe(4);
  });
});

describe.skipIf(!ctx)(`bind-group cache on WebGPU ${reason}`, () => {
  async function tinyModel(e: Engine) {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    return new LlamaModel<Tensor>(loaded.config, new GpuOps(e), loaded.weights);
  }
  const prompts = [0, 1, 2].map((s) => {
    const rng = createRng(s + 11);
    return Array.from({ length: 7 + s }, () => rng.int(256));
  });
  const decode = async (m: LlamaModel<Tensor>, maxNew: number) => {
    const scheduler = new DecodeScheduler(m, { maxBatch: 3, prefixCacheTokens: 0 });
    const out = await Promise.all(
      prompts.map((p, i) => scheduler.generate(p, { maxNew, temperature: 0.8, topP: 0.9, seed: i })),
    );
    scheduler.dispose();
    return out;
  };

  it('decode steps after the first take most bind groups from the cache; tokens equal with it off', async () => {
    const e = new Engine(ctx!);
    const m = await tinyModel(e);
    await decode(m, 2); // pipelines, pools
    const count = async (maxNew: number) => {
      const h0 = e.bindGroupHits;
      const d0 = e.dispatches;
      const out = await decode(m, maxNew);
      return { out, h: e.bindGroupHits - h0, d: e.dispatches - d0 };
    };
    const short = await count(2);
    const on = await count(8);
    // the 6 extra decode steps' dispatches: mostly the bind groups of the step before
    expect((on.h - short.h) / (on.d - short.d)).toBeGreaterThan(0.5);

    e.bindGroupCache = false;
    const off = await count(8);
    expect(off.h).toBe(0);
    expect(off.out).toEqual(on.out); // tokens and log-probs, bit for bit
    m.dispose();
  });

  it('benchStepTemplate and benchStepRecording time both settings; the same tokens either way', async () => {
    const e = new Engine(ctx!);
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const { config } = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const r = await benchStepTemplate(e, config, { batch: 2, tokens: 3, reps: 1, promptLen: 4 });
    expect(r.sameTokens).toBe(true);
    expect(r.hitRate).toBeGreaterThan(0.5);
    expect(r.hostMsPerStepOff).toBeGreaterThan(0);
    expect(r.hostMsPerStepOn).toBeGreaterThan(0);
    expect(r.ratio).toBeCloseTo(r.hostMsPerStepOff / r.hostMsPerStepOn);
    expect(e.bindGroupCache).toBe(true); // left as it was

    const hits = e.bindGroupHits;
    const rec = await benchStepRecording(e, { dispatches: 20, reps: 2 });
    expect(rec.hostMsPerStepOff).toBeGreaterThan(0);
    expect(rec.hostMsPerStepOn).toBeGreaterThan(0);
    expect(e.bindGroupHits - hits).toBeGreaterThanOrEqual(2 * 20); // every timed step with the cache on
    expect(e.bindGroupCache).toBe(true);
  });
});
