// Batched decoding on the CPU references: the paged KV allocator (sharing, copy-on-write,
// growth), LlamaModel.step against forward() with a contiguous cache, and the DecodeScheduler's
// per-request results against generate() on its own — concurrent requests, prefix reuse, chunked
// prefill, admission mid-decode, abort, and a failing step.
import { describe, expect, it, vi } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { generate, type GenerateOptions } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { loraKey } from '../../src/engine/io/peft.ts';
import { GpuError } from '../../src/core/errors.ts';
import { KvPages, PAGE } from '../../src/engine/model/kv_pages.ts';
import { LoraTrainer } from '../../src/engine/train/train.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { stepVsForward } from '../helpers/step_check.ts';
import { TINY_VARIANTS, tinyCheckpointFiles, type TinyVariant } from '../helpers/tiny_checkpoint.ts';

async function tinyModel(variant: TinyVariant) {
  const ck = tinyCheckpointFiles(variant, 'f32', 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  return new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
}

/** A LoRA adapter on every module with non-zero B (so each delta changes the logits). */
function randomLora(m: LlamaModel<CpuTensor>) {
  m.initLora(4, 8, ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], 1);
  const rng = createRng(9);
  for (let i = 0; i < m.cfg.numLayers; i++)
    for (const mod of m.lora!.targets) {
      const B = m.lora!.w.get(loraKey(i, mod, 'B'))!;
      for (let j = 0; j < B.data.length; j++) B.data[j] = (rng.next() - 0.5) * 0.5;
    }
}

const ids = (n: number, seed: number) => {
  const rng = createRng(seed);
  return Array.from({ length: n }, () => rng.int(256));
};

const maxAbs = (a: Float32Array, b: Float32Array) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
};

/** Logit and log-prob tolerance on the CPU: the paged attention sums in another order than attentionCpu. */
const TOL = 1e-5;

describe('KvPages', () => {
  const ops = new CpuOps();
  const dims = { layers: 2, Hkv: 1, D: 2 };
  /** Write `len` rows of seq with value base + position into every layer's K and V (as a step would). */
  const write = (
    kv: KvPages<CpuTensor>,
    seq: ReturnType<KvPages<CpuTensor>['newSeq']>,
    toks: number[],
    base: number,
  ) => {
    const b = kv.prepare([{ seq, ids: toks }]);
    for (let n = 0; n < toks.length; n++)
      for (const s of [...kv.k, ...kv.v]) s.data.fill(base + b.pos[n]!, b.dest[n]! * 2, b.dest[n]! * 2 + 2);
    kv.commit([{ seq, ids: toks }]);
  };
  const rowsOf = (kv: KvPages<CpuTensor>, seq: { pages: number[]; length: number }, layer = 1) =>
    Array.from({ length: seq.length }, (_, j) => kv.v[layer]!.data[(seq.pages[j >> 4]! * PAGE + (j % PAGE)) * 2]!);

  it('shares full pages, copies a shared partial page before writing, and keeps contents across growth', () => {
    const kv = new KvPages(ops, dims, { initialPages: 1 });
    const a = kv.newSeq();
    write(kv, a, ids(20, 1), 100); // 2 pages: one full, one with 4 rows
    expect(a.pages).toHaveLength(2);
    expect(kv.growths).toBe(1); // 1 → 2 pages
    const b = kv.fork(a, 18);
    expect(b.pages).toEqual(a.pages);
    expect(kv.refCount(a.pages[0]!)).toBe(2);
    write(kv, b, ids(3, 2), 500); // b writes at 18..20 of the shared partial page → its own copy
    expect(b.pages[0]).toBe(a.pages[0]); // the full page stays shared
    expect(b.pages[1]).not.toBe(a.pages[1]);
    expect(kv.refCount(a.pages[1]!)).toBe(1);
    // a's rows are untouched; b has a's first 18 rows, then its own
    expect(rowsOf(kv, a)).toEqual(Array.from({ length: 20 }, (_, j) => 100 + j));
    expect(rowsOf(kv, b)).toEqual(Array.from({ length: 21 }, (_, j) => (j < 18 ? 100 + j : 500 + j)));
    // growth beyond the first allocations keeps every row
    const c = kv.newSeq();
    write(kv, c, ids(70, 3), 1000);
    expect(kv.growths).toBeGreaterThanOrEqual(3);
    expect(rowsOf(kv, a)).toEqual(Array.from({ length: 20 }, (_, j) => 100 + j));
    expect(rowsOf(kv, c, 0)).toEqual(Array.from({ length: 70 }, (_, j) => 1000 + j));
    // release gives pages back: a's full page is still held by b
    const used = kv.usedPages;
    kv.release(a);
    expect(kv.usedPages).toBe(used - 1);
    kv.release(b);
    kv.release(c);
    expect(kv.usedPages).toBe(0);
    expect(() => kv.prepare([{ seq: a, ids: [1] }])).toThrow(/released/);
  });
});

describe('KvPages and the device limit', () => {
  it('refuses to grow past the largest tensor the backend can bind, with a GpuError that says what to do', () => {
    class SmallOps extends CpuOps {
      override readonly maxTensorBytes = 2 * PAGE * 2 * 4; // two pages of (1 head × 2) floats per store
    }
    const kv = new KvPages(new SmallOps(), { layers: 1, Hkv: 1, D: 2 }, { initialPages: 1 });
    const a = kv.newSeq();
    kv.prepare([{ seq: a, ids: ids(PAGE + 1, 1) }]); // 1 → 2 pages: allowed
    expect(kv.capacity).toBe(2);
    kv.commit([{ seq: a, ids: ids(PAGE + 1, 1) }]);
    let err: unknown;
    try {
      kv.prepare([{ seq: a, ids: ids(2 * PAGE, 2) }]); // 2 → 4 pages: over the limit
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GpuError);
    expect((err as GpuError).message).toMatch(/KV cache is full.*fewer chats at once/);
  });
});

describe('LlamaModel.step on the paged cache', () => {
  it.each(TINY_VARIANTS)('%s: logits equal forward() with a contiguous cache (mixed prefill and decode)', async (v) => {
    const m = await tinyModel(v);
    if (v === 'qwen2') randomLora(m); // LoRA deltas into the fused q/k/v columns, gate/up unfused
    const A = ids(21, 1);
    const B = ids(9, 2);
    const C = ids(3, 3);
    // step 1: A's first 17 tokens; step 2: A's next token (decode), B whole, C whole; step 3: one token each
    const r = await stepVsForward(
      m,
      [
        [{ seq: 0, ids: A.slice(0, 17) }],
        [
          { seq: 0, ids: A.slice(17, 18) },
          { seq: 1, ids: B },
          { seq: 2, ids: C },
        ],
        [
          { seq: 2, ids: [7] },
          { seq: 0, ids: A.slice(18) },
          { seq: 1, ids: [11] },
        ],
      ],
      maxAbs,
    );
    expect(r.errors).toHaveLength(7);
    for (const [i, e] of r.errors.entries()) expect(e, `item ${i}`).toBeLessThan(TOL);
    expect(r.growths).toBeGreaterThan(0);
    expect(r.seqs[0]!.length).toBe(21);
  });
});

/** The requests' outputs differ pairwise, so rows mixed up between requests cannot go unnoticed. */
function distinct(outs: number[][]) {
  expect(new Set(outs.map((o) => o.join(','))).size).toBe(outs.length);
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** generate() on its own for each request, and the same requests through one scheduler at once. */
async function compare(
  m: LlamaModel<CpuTensor>,
  reqs: { prompt: number[]; o: GenerateOptions }[],
  s = new DecodeScheduler(m),
) {
  const want: { ids: number[]; lp: number[] }[] = [];
  for (const r of reqs) {
    const lp: number[] = [];
    want.push({ ids: await generate(m, r.prompt, { ...r.o, logprobs: r.o.logprobs ? lp : undefined }), lp });
  }
  const lps = reqs.map(() => [] as number[]);
  const got = await Promise.all(
    reqs.map((r, i) => s.generate(r.prompt, { ...r.o, logprobs: r.o.logprobs ? lps[i] : undefined })),
  );
  got.forEach((g, i) => {
    expect(g, `request ${i}`).toEqual(want[i]!.ids);
    expect(lps[i]).toHaveLength(want[i]!.lp.length);
    lps[i]!.forEach((x, k) => expect(Math.abs(x - want[i]!.lp[k]!), `request ${i} log-prob ${k}`).toBeLessThan(TOL));
  });
  return { s, got };
}

describe('DecodeScheduler', () => {
  it('concurrent requests (prompts, lengths, seeds, temperatures, greedy, bias, log-probs) equal generate() each', async () => {
    // llama (untied head): the tied-embedding tiny variants repeat one id at any seed, which would hide a mix-up
    const m = await tinyModel('llama');
    const V = m.cfg.vocabSize;
    const bias = new Float32Array(V);
    for (let i = 0; i < V; i += 2) bias[i] = -1e9; // odd ids only
    const reqs = [
      { prompt: ids(5, 1), o: { maxNew: 12, temperature: 0, logprobs: [] } },
      { prompt: ids(23, 2), o: { maxNew: 9, temperature: 1, seed: 1, logprobs: [] } },
      { prompt: ids(11, 3), o: { maxNew: 14, temperature: 0.7, topP: 0.9, seed: 2, logitBias: bias, logprobs: [] } },
      { prompt: ids(2, 4), o: { maxNew: 7, temperature: 1, seed: 3 } },
      { prompt: ids(17, 5), o: { maxNew: 10, temperature: 1.3, topK: 20, minP: 0.02, seed: 4, logprobs: [] } },
    ];
    const { s, got } = await compare(m, reqs);
    distinct(got);
    expect(got[2]!.every((id) => id % 2 === 1)).toBe(true);
    const st = s.stats();
    expect(st.maxRows).toBeGreaterThan(5); // the prompts went through one step together
    expect(st.sampled).toBe(sum(got.map((g) => g.length)));
    expect(st.prefillTokens).toBe(sum(reqs.map((r) => r.prompt.length)));
    // decoding rows were batched: far fewer steps than sampled tokens
    expect(st.steps).toBeLessThan(st.sampled / 2);
    expect(st.requests).toBe(5);
  });

  it('a long prompt prefills in chunks across steps, with a LoRA adapter, and stops on a stop id', async () => {
    const m = await tinyModel('llama');
    randomLora(m);
    const first = await generate(m, ids(40, 7), { maxNew: 6, temperature: 0 });
    const reqs = [
      { prompt: ids(40, 7), o: { maxNew: 20, temperature: 0, stopIds: [first[3]!] } },
      { prompt: ids(6, 8), o: { maxNew: 20, temperature: 0.9, seed: 5 } },
    ];
    const { s, got } = await compare(m, reqs, new DecodeScheduler(m, { prefillBudget: 8 }));
    expect(got[0]!.length).toBeLessThanOrEqual(4);
    expect(s.stats().maxRows).toBeLessThanOrEqual(8 + 1);
  });

  it('reuses a prefix (a later turn, and plays of one prompt) with the same tokens as without reuse', async () => {
    const m = await tinyModel('qwen2');
    const s = new DecodeScheduler(m);
    const P = ids(37, 11);
    const o = { maxNew: 8, temperature: 0.8, seed: 3 };
    const t1 = await s.generate(P, o);
    expect(t1).toEqual(await generate(m, P, o));
    expect(s.stats().prefixReusedTokens).toBe(0);
    // the next turn: the whole first conversation is a prefix
    const P2 = [...P, ...t1, ...ids(5, 12)];
    const t2 = await s.generate(P2, o);
    expect(t2).toEqual(await generate(m, P2, o));
    const reused = s.stats().prefixReusedTokens;
    expect(reused).toBe(P.length + t1.length - 1); // the last sampled id was never fed
    // four plays of one prompt at once: one prefill, three reuse it (all but the last token)
    const Q = [...P, ...ids(30, 13)];
    const plays = [1, 2, 3, 4].map((seed) => ({ prompt: Q, o: { maxNew: 6, temperature: 1, seed, logprobs: [] } }));
    const before = s.stats();
    distinct((await compare(m, plays, s)).got);
    const after = s.stats();
    expect(after.prefixReusedTokens - before.prefixReusedTokens).toBeGreaterThanOrEqual(P.length + 3 * (Q.length - 1));
    expect(after.prefillTokens - before.prefillTokens).toBeLessThanOrEqual(Q.length - P.length + 3);
  });

  it('drops the prefix cache after an optimiser step on the adapter (no stale k/v)', async () => {
    const m = await tinyModel('qwen2');
    randomLora(m);
    const s = new DecodeScheduler(m);
    const P = ids(40, 21);
    const o = { maxNew: 6, temperature: 0 };
    await s.generate(P, o);
    const trainer = new LoraTrainer(m, { lr: 0.05 });
    await trainer.trainStep([{ ids: [...P, ...ids(8, 22)], promptLen: P.length, advantage: 1 }]);
    const before = s.stats().prefixReusedTokens;
    const again = await s.generate(P, o);
    expect(s.stats().prefixReusedTokens).toBe(before); // nothing reused across the update
    expect(again).toEqual(await generate(m, P, o));
  });

  it('never reuses k/v of a sequence that ran across an adapter update (finished or still running)', async () => {
    const m = await tinyModel('qwen2');
    randomLora(m);
    /** An update in place mid-generation, as a training step while chats run would make. */
    const update = () => {
      for (const [k, x] of m.lora!.w) if (k.endsWith('.B')) x.data.forEach((v, j) => (x.data[j] = v * -0.7 + 0.01));
      m.adapterChanged();
    };
    const s = new DecodeScheduler(m);
    const P = ids(40, 21);
    let n = 0;
    let late: Promise<number[]> | undefined;
    const lateLp: number[] = [];
    const Q = [...P, ...ids(6, 4)];
    const first = await s.generate(P, {
      maxNew: 10,
      temperature: 0,
      onToken: () => {
        if (++n !== 2) return;
        update();
        late = s.generate(Q, { maxNew: 6, temperature: 0, logprobs: lateLp }); // joins while P still runs
      },
    });
    const lateOut = await late!;
    // the next turn of the sequence that finished after the update
    const P2 = [...P, ...first, ...ids(5, 3)];
    const lp2: number[] = [];
    const next = await s.generate(P2, { maxNew: 6, temperature: 0, logprobs: lp2 });
    for (const [prompt, got, lp] of [
      [Q, lateOut, lateLp],
      [P2, next, lp2],
    ] as const) {
      const want: number[] = [];
      expect(got).toEqual(await generate(m, prompt, { maxNew: 6, temperature: 0, logprobs: want }));
      lp.forEach((x, i) => expect(Math.abs(x - want[i]!)).toBeLessThan(TOL));
    }
  });

  it('releaseIdle frees the KV stores when nothing is in flight, and decoding goes on after', async () => {
    const m = await tinyModel('qwen2');
    const s = new DecodeScheduler(m);
    const P = ids(12, 5);
    const o = { maxNew: 4, temperature: 0 };
    const pending = s.generate(P, o);
    expect(s.releaseIdle()).toBe(false); // a request is waiting
    const first = await pending;
    expect(s.stats().kvPages).toBeGreaterThan(0);
    expect(s.releaseIdle()).toBe(true);
    expect(s.stats().kvPages).toBe(0);
    expect(await s.generate(P, o)).toEqual(first);
  });

  it('rejects a request with a wrong-sized logit bias alone; its batch-mates finish', async () => {
    const m = await tinyModel('llama');
    const s = new DecodeScheduler(m);
    const [good, bad] = await Promise.allSettled([
      s.generate(ids(5, 1), { maxNew: 4, temperature: 0 }),
      s.generate(ids(7, 2), { maxNew: 4, temperature: 0, logitBias: new Float32Array(3) }),
    ]);
    expect(good.status).toBe('fulfilled');
    expect(bad.status).toBe('rejected');
    expect(String((bad as PromiseRejectedResult).reason)).toContain('logitBias has 3 values');
  });

  it('admits a request while others are mid-decode, and one aborted request leaves while the others go on', async () => {
    const m = await tinyModel('qwen2');
    const s = new DecodeScheduler(m);
    const late = { prompt: ids(9, 21), o: { maxNew: 8, temperature: 1, seed: 8 } };
    const ctrl = new AbortController();
    let lateRun: Promise<number[]> | undefined;
    const aOut: number[] = [];
    const a = s.generate(ids(12, 22), {
      maxNew: 15,
      temperature: 0.9,
      seed: 1,
      onToken: (id) => {
        aOut.push(id);
        if (aOut.length === 3) lateRun = s.generate(late.prompt, late.o);
      },
    });
    let cOut = 0;
    const c = s.generate(ids(4, 23), {
      maxNew: 15,
      temperature: 0,
      signal: ctrl.signal,
      onToken: () => {
        if (++cOut === 5) ctrl.abort();
      },
    });
    const [ga, gc] = await Promise.all([a, c]);
    const gl = await lateRun!;
    expect(ga).toEqual(await generate(m, ids(12, 22), { maxNew: 15, temperature: 0.9, seed: 1 }));
    expect(gl).toEqual(await generate(m, late.prompt, late.o));
    expect(gc).toHaveLength(5);
    expect(gc).toEqual((await generate(m, ids(4, 23), { maxNew: 15, temperature: 0 })).slice(0, 5));
    expect(s.stats().maxRows).toBeGreaterThan(1);
  });

  it('a failing step rejects its requests and the scheduler stays usable', async () => {
    const m = await tinyModel('llama');
    const s = new DecodeScheduler(m);
    const spy = vi.spyOn(m, 'step').mockImplementationOnce(() => {
      throw new Error('device lost');
    });
    const o = { maxNew: 4, temperature: 0 };
    const r = await Promise.allSettled([s.generate(ids(5, 1), o), s.generate(ids(6, 2), o)]);
    expect(r.map((x) => x.status)).toEqual(['rejected', 'rejected']);
    spy.mockRestore();
    expect(await s.generate(ids(5, 1), o)).toEqual(await generate(m, ids(5, 1), o));
    await expect(s.generate([], o)).rejects.toThrow(/no tokens/);
    expect(await s.generate([1], { maxNew: 0, temperature: 0 })).toEqual([]);
  });
});
