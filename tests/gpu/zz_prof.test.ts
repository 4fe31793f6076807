import { it } from 'vitest';
import { benchFmaPeak, benchMatmul } from '../../src/engine/bench_kernels.ts';
import { Engine } from '../../src/engine/runtime.ts';
import { tryGpu } from './gpu_setup.ts';
it('prof', async () => {
  const { ctx } = await tryGpu();
  const e = new Engine(ctx!);
  let t0 = performance.now();
  console.log('fma', (await benchFmaPeak(e)).toFixed(2), (performance.now() - t0).toFixed(0));
  for (const tile of (process.env.TILES ?? '16x16x8').split(',').map((s) => s.split('x').map(Number))) {
    t0 = performance.now();
    const tl = {wgX: tile[0]!, wgY: tile[1]!, bk: tile[2]!};
    const g256 = await benchMatmul(e, 256, 256, 256, 3, {tile: tl});
    const t1 = performance.now();
    const g1k = process.env.BIG ? await benchMatmul(e, 1024, 1024, 1024, 1, {tile: tl}) : 0;
    console.log('tile', tile.join('x'), g256.toFixed(2), g1k.toFixed(2), (t1 - t0).toFixed(0), (performance.now() - t1).toFixed(0));
  }
}, 600000);
