// The engine's buffer pool by size classes (runtime.ts): kernel outputs are rounded up to one of 16
// classes per octave from 64 KiB (uploads stay exact), and a buffer that must be created while the
// pool holds more than the largest live set plus its slack (10 %, at least 64 MiB) first destroys
// retired buffers, oldest first. A run of mixed lengths then holds about one step's worth of
// memory, where the exact-size pool kept every length's buffers.
import { describe, expect, it } from 'vitest';
import { benchTrainMemoryMixed, QWEN25_05B_CONFIG } from '../../src/engine/bench/model.ts';
import type { ModelConfig } from '../../src/engine/io/config.ts';
import { dryRunContext } from '../../src/engine/runtime/dry_run.ts';
import { classBytes, Engine } from '../../src/engine/runtime/runtime.ts';
import { tryGpu } from './gpu_setup.ts';

const { ctx, reason } = await tryGpu();

/** Qwen2.5-0.5B's widths and vocabulary with 2 layers: steps of hundreds of MB, replayed in seconds. */
const TWO_LAYERS: ModelConfig = { ...QWEN25_05B_CONFIG, numLayers: 2 };

describe.skipIf(!ctx)(`buffer pool by size classes ${reason}`, () => {
  it('rounds kernel outputs up by at most 1/16 from 64 KiB, keeps uploads and small buffers exact', () => {
    expect(classBytes(4096)).toBe(4096);
    for (const b of [65_536, 70_000, 1_000_000, 123_456_784, 272_000_000]) {
      expect(classBytes(b)).toBeGreaterThanOrEqual(b);
      expect(classBytes(b)).toBeLessThanOrEqual(b * (1 + 1 / 16));
      expect(classBytes(classBytes(b))).toBe(classBytes(b)); // a class is its own class
    }
    const e = new Engine(dryRunContext(ctx!.report));
    expect(e.tensor([70_000]).buffer.size).toBe(classBytes(280_000));
    expect(e.tensor([70_000], new Float32Array(70_000)).buffer.size).toBe(280_000);
  });

  it('steps of other lengths reuse or evict retired buffers: the footprint stays at one step', () => {
    // 32 MiB per 512 rows: above the pool's 64 MiB minimum slack
    const step = (e: Engine, rows: number) => {
      const ts = [1, 2, 3, 4].map((i) => e.tensor([rows * i, 16_384]));
      for (const t of ts) e.release(t);
      e.flush();
    };
    const footprint = (sizeClasses: boolean) => {
      const e = new Engine(dryRunContext(ctx!.report), { sizeClasses });
      step(e, 512);
      const one = e.deviceBytes;
      for (const rows of [300, 511, 420, 130, 490, 257, 333]) step(e, rows);
      return { one, end: e.deviceBytes, peak: e.peakDeviceBytes, evicted: e.evictedBytes };
    };
    const classes = footprint(true);
    expect(classes.peak).toBeLessThanOrEqual(classes.one * 1.1 + 64 * 2 ** 20); // one step plus the slack
    expect(classes.evicted).toBeGreaterThan(0);
    const exact = footprint(false);
    expect(exact.end).toBeGreaterThan(exact.one * 4); // every length's buffers kept
  });

  it('trainMemory.mixed: mixed-length LoRA steps peak within 10% of one step (exact sizes: far above)', async () => {
    const r = await benchTrainMemoryMixed(new Engine(ctx!), {
      cfg: TWO_LAYERS,
      tokens: 1024,
      weights: 'bf16',
      steps: 5,
    });
    expect(r.lengths.flat().every((n) => n <= 1024)).toBe(true);
    expect(r.ratio).toBeLessThanOrEqual(1.1);
    expect(r.exactSizes.ratio).toBeGreaterThan(r.ratio);
  });
});
