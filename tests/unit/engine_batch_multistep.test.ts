// Multi-step decode in the DecodeScheduler on the CPU references (batch.ts, stepsPerReadback): a
// batch of mixed-length requests with different stop conditions (stop ids inside a block, maxNew
// not a multiple of K, an onToken that aborts as a stop string does, an onToken that throws),
// per-request sampling options, a logit bias and log-probs gives the same ids and log-probs for
// K = 1, 4 and 8, with fewer read-backs; the over-generated rows are rolled back so a later turn
// reuses exactly the prefix it would have; KvPages.reserveAhead / truncate keep the page counts.
import { describe, expect, it, vi } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { generate, type GenerateOptions } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { KvPages, PAGE } from '../../src/engine/model/kv_pages.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

async function tinyModel() {
  // llama (untied head): the tied-embedding tiny variants repeat one id at any seed
  const ck = tinyCheckpointFiles('llama', 'f32', 0, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  return new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
}

const ids = (n: number, seed: number) => {
  const rng = createRng(seed);
  return Array.from({ length: n }, () => rng.int(256));
};

interface Run {
  tokens: (number[] | string)[];
  logprobs: number[][];
  streamed: number[][];
  readBacks: number;
  steps: number;
}

/**
 * The requests of `make` (fresh options each run: logprobs arrays, signals) on a new scheduler
 * with `k` steps per read-back; a rejected request gives its error's message.
 */
async function run(
  m: LlamaModel<CpuTensor>,
  make: () => { prompt: number[]; o: GenerateOptions }[],
  k: number,
  extra: { maxBatch?: number } = {},
): Promise<Run> {
  const s = new DecodeScheduler(m, { stepsPerReadback: k, ...extra });
  const reads = vi.spyOn(m.ops, 'readIdTensor');
  const samples = vi.spyOn(m.ops, 'sample');
  const reqs = make();
  const streamed = reqs.map(() => [] as number[]);
  const tokens = await Promise.all(
    reqs.map((r, i) =>
      s
        .generate(r.prompt, {
          ...r.o,
          onToken: (id) => {
            streamed[i]!.push(id);
            r.o.onToken?.(id);
          },
        })
        .catch((e: Error) => e.message),
    ),
  );
  const out = {
    tokens,
    logprobs: reqs.map((r) => r.o.logprobs ?? []),
    streamed,
    readBacks: reads.mock.calls.length + samples.mock.calls.length,
    steps: s.stats().steps,
  };
  reads.mockRestore();
  samples.mockRestore();
  s.dispose();
  return out;
}

describe('DecodeScheduler with several decode steps per read-back', () => {
  it('gives the ids, log-probs and streamed tokens of one step per read-back for K = 4 and 8', async () => {
    const m = await tinyModel();
    const V = m.cfg.vocabSize;
    const bias = new Float32Array(V);
    for (let i = 0; i < V; i += 2) bias[i] = -1e9; // odd ids only
    const free = await generate(m, ids(9, 2), { maxNew: 30, temperature: 1, seed: 1 });
    const make = () => {
      const stopping = new AbortController();
      let seen = 0;
      return [
        { prompt: ids(5, 1), o: { maxNew: 13, temperature: 0, logprobs: [] } },
        // a stop id whose first occurrence falls inside a block
        { prompt: ids(9, 2), o: { maxNew: 30, temperature: 1, seed: 1, stopIds: [free[6]!], logprobs: [] } },
        {
          prompt: ids(14, 3),
          o: { maxNew: 21, temperature: 0.7, topP: 0.9, seed: 2, logitBias: bias, logprobs: [] },
        },
        { prompt: ids(2, 4), o: { maxNew: 7, temperature: 1.3, topK: 20, minP: 0.02, seed: 3 } },
        // a stop string seen by onToken: it aborts after the 10th token, as LocalChatModel.chat does
        {
          prompt: ids(20, 5),
          o: {
            maxNew: 40,
            temperature: 0.9,
            seed: 4,
            signal: stopping.signal,
            onToken: () => void (++seen === 10 && stopping.abort()),
          },
        },
        // a consumer that throws on the 5th token: that request is rejected alone
        {
          prompt: ids(3, 6),
          o: {
            maxNew: 25,
            temperature: 1,
            seed: 5,
            onToken: (() => {
              let n = 0;
              return () => {
                if (++n === 5) throw new Error('consumer failed');
              };
            })(),
          },
        },
      ] as { prompt: number[]; o: GenerateOptions }[];
    };
    const one = await run(m, make, 1);
    expect(one.tokens[0]).toHaveLength(13);
    expect((one.tokens[1] as number[]).length).toBeLessThanOrEqual(7);
    expect((one.tokens[2] as number[]).every((id) => id % 2 === 1)).toBe(true);
    expect(one.tokens[4]).toHaveLength(10);
    expect(one.tokens[5]).toBe('consumer failed');
    expect(one.streamed[5]).toHaveLength(5);
    for (const k of [4, 8]) {
      const got = await run(m, make, k);
      expect(got.tokens, `K=${k}`).toEqual(one.tokens);
      expect(got.logprobs, `K=${k} log-probs`).toEqual(one.logprobs);
      expect(got.streamed, `K=${k} streamed`).toEqual(one.streamed);
      expect(got.readBacks, `K=${k}: fewer read-backs than steps`).toBeLessThan(one.readBacks / 2);
    }
  });

  it('admits a waiting request as soon as a row is free, with the same ids (maxBatch 2, five requests)', async () => {
    const m = await tinyModel();
    const make = () =>
      [3, 8, 1, 12, 5].map((len, i) => ({
        prompt: ids(len, 30 + i),
        o: { maxNew: 6 + 3 * i, temperature: i % 2 ? 0 : 1.1, seed: i } as GenerateOptions,
      }));
    const one = await run(m, make, 1, { maxBatch: 2 });
    const got = await run(m, make, 8, { maxBatch: 2 });
    expect(got.tokens).toEqual(one.tokens);
    expect(got.readBacks).toBeLessThan(one.readBacks);
  });

  it('rolls back discarded rows: a later turn reuses exactly the tokens taken, with the same ids', async () => {
    const m = await tinyModel();
    const P = ids(21, 40);
    const Q = ids(9, 42);
    const o = { maxNew: 30, temperature: 0.8, seed: 3 };
    const free = await generate(m, P, o);
    const stopped = await generate(m, P, { ...o, stopIds: [free[5]!] });
    expect(stopped.length).toBeLessThan(8); // it stops inside the first block: rows past it are written, then discarded
    // a prefix cache holding exactly the two finished sequences: one row too many and the older is evicted
    const held = P.length + stopped.length - 1 + Q.length + 3;
    for (const k of [1, 8]) {
      const s = new DecodeScheduler(m, { stepsPerReadback: k, prefixCacheTokens: held });
      expect(await s.generate(P, { ...o, stopIds: [free[5]!] })).toEqual(stopped);
      await s.generate(Q, { ...o, maxNew: 4 });
      const P2 = [...P, ...stopped, ...ids(4, 41)];
      const t2 = await s.generate(P2, o);
      expect(s.stats().prefixReusedTokens, `K=${k}`).toBe(P.length + stopped.length - 1); // the last sampled id was never fed
      expect(t2, `K=${k}`).toEqual(await generate(m, P2, o));
      s.dispose();
    }
  });

  it('rejects a stepsPerReadback that is not a whole number ≥ 1', async () => {
    const m = await tinyModel();
    for (const k of [0, 1.5, -2])
      expect(() => new DecodeScheduler(m, { stepsPerReadback: k })).toThrow(/stepsPerReadback/);
  });
});

describe('KvPages.reserveAhead and truncate', () => {
  it('reserve the pages of future rows and give back the pages wholly past a rolled-back length', () => {
    const ops = new CpuOps();
    const kv = new KvPages(ops, { layers: 1, Hkv: 1, D: 2 }, { initialPages: 2 });
    const seq = kv.newSeq();
    const first = [{ seq, ids: ids(PAGE + 3, 1) }];
    kv.prepare(first);
    kv.commit(first);
    expect(kv.usedPages).toBe(2);
    kv.reserveAhead(seq, 2 * PAGE); // rows up to 3·PAGE + 3: four pages, the stores doubled now
    expect(seq.pages).toHaveLength(4);
    expect(seq.length).toBe(PAGE + 3);
    expect(kv.growths).toBe(1);
    const base = kv.fork(seq, PAGE); // shares the first page
    kv.truncate(seq, PAGE - 2);
    expect(seq.length).toBe(PAGE - 2);
    expect(seq.tokens).toHaveLength(PAGE - 2);
    expect(seq.pages).toHaveLength(1);
    expect(kv.usedPages).toBe(1);
    expect(kv.refCount(seq.pages[0]!)).toBe(2);
    kv.release(base);
    expect(() => kv.truncate(seq, PAGE)).toThrow(/truncate/);
  });
});
