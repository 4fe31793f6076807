/**
 * LlamaModel.step on the paged cache against forward() with a contiguous cache, on any backend:
 * runs `steps` (items naming sequences by index), and returns, per item of every step, the error
 * `err(got, want)` between the step's logits row and forward()'s last-position logits. Starts from a
 * one-page store, so the steps also exercise growth (kv.growths is returned).
 */
import { KvPages, type KvSeq } from '../../src/engine/model/kv_pages.ts';
import type { LlamaModel } from '../../src/engine/model/model.ts';

export async function stepVsForward<X>(
  m: LlamaModel<X>,
  steps: { seq: number; ids: number[] }[][],
  err: (got: Float32Array, want: Float32Array) => number,
): Promise<{ errors: number[]; growths: number; seqs: KvSeq[] }> {
  const V = m.cfg.vocabSize;
  const kv = new KvPages(
    m.ops,
    { layers: m.cfg.numLayers, Hkv: m.cfg.numKvHeads, D: m.cfg.headDim },
    { initialPages: 1 },
  );
  const count = Math.max(...steps.flat().map((it) => it.seq)) + 1;
  const seqs = Array.from({ length: count }, () => kv.newSeq());
  const refs = seqs.map(() => m.newCache());
  const errors: number[] = [];
  for (const step of steps) {
    const items = step.map((it) => ({ seq: seqs[it.seq]!, ids: it.ids }));
    const got = await m.ops.read(m.step(kv, items));
    if (got.length !== items.length * V)
      throw new Error(`step returned ${got.length} logits for ${items.length} items`);
    for (const [r, it] of step.entries()) {
      const want = await m.ops.read(m.forward(it.ids, { cache: refs[it.seq]!, lastOnly: true }).logits);
      errors.push(err(got.slice(r * V, (r + 1) * V), want));
    }
  }
  return { errors, growths: kv.growths, seqs };
}
