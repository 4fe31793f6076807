/**
 * The continuous-batching scheduler behind LocalChatModel.chat: concurrent generate()
 * calls on one model share decode steps on a paged KV cache (kv_pages.ts, LlamaModel.step).
 *
 * One async loop runs while any request is active. Each step:
 *   1. aborted requests leave (resolved with their tokens so far, as generate() returns);
 *   2. waiting requests are admitted up to `maxBatch`, each starting from the longest cached prefix
 *      of its prompt (an active sequence's or a finished one's kept in an LRU prefix cache); a
 *      request whose prompt shares more with a prompt still being prefilled waits for that prefill
 *      instead of computing the shared part again (the plays of one environment);
 *   3. one forward (LlamaModel.step) over every decoding request's last token and prefill chunks of
 *      the admitted prompts, at most `prefillBudget` prompt tokens per step (longer prompts go on in
 *      the next steps);
 *   4. every request whose prompt is complete samples one id with its own options and seeded Rng
 *      (one draw per sampled token, as generate() does), logitBias and logprobs; rows with equal
 *      sampling options share one Ops.sample call, and all calls are read back together.
 * With `stepsPerReadback` K > 1, while every active request decodes and no waiting request could take
 * a free row, up to K such steps are recorded before one read-back (decodeBlock): each step's sampled
 * ids stay on the backend as the next step's embedding input, and stopping is applied on read-back,
 * the ids sampled past a request's end discarded and its k/v rows rolled back (the same ids for any K).
 * Each request's ids, log-probs and stopping equal those of generate(model, prompt, o) on its own,
 * up to the float rounding of a different kernel on the GPU (tests/unit/engine_batch.test.ts).
 * An error in a step rejects the requests in that step; the scheduler stays usable.
 *
 * The prefix cache holds k/v computed with the adapter of the moment: it is dropped when the model's
 * adapterVersion moves (a new or removed adapter, or LoraTrainer's optimiser step in place).
 */
import { SCHEDULER_DEFAULTS } from '../../core/defaults.ts';
import { createRng, type Rng } from '../../core/rng.ts';
import { generate, type GenerateOptions } from './generate.ts';
import { checkKvFormat, KvPages, PAGE, type KvFormat, type KvSeq, type StepItem } from './kv_pages.ts';
import type { LlamaModel } from './model.ts';
import { checkSampleOptions, type SampleOptions } from '../kernels/sample_cpu.ts';

export interface SchedulerOptions {
  /**
   * Most sequences decoded together in one step (default 16). A run passes its budget of chats in
   * flight (the loop's `concurrency`), so every chat it sends gets a row; `maxBatch` can also be set
   * on the scheduler later, and the next admission follows it.
   */
  maxBatch?: number;
  /**
   * Most prompt tokens prefilled in one step (default 512: a long prompt does not stall the decoding
   * rows for more than about one 512-token forward; longer prompts prefill in chunks).
   */
  prefillBudget?: number;
  /**
   * Tokens of finished sequences kept for prefix reuse (default 8192: a few episodes' conversations;
   * for Qwen2.5-0.5B that is 8192 · 24 layers · (k + v) · 2 heads · 64 · 4 B ≈ 201 MB of k/v in
   * f32, 101 MB in f16).
   */
  prefixCacheTokens?: number;
  /** Pages of the KV stores allocated up front (default 64 = 1024 rows; they double as needed). */
  initialPages?: number;
  /**
   * What the KV stores hold (kv_pages.ts; default 'f32'): 'f16' halves them (Qwen2.5-0.5B, 16
   * sequences of 2k tokens: 403 MB instead of 805 MB), k and v rounded to f16 as they are written.
   */
  kvFormat?: KvFormat;
  /**
   * Decode steps recorded before one read-back of their ids (default 1: a read-back every step).
   * While every request of the batch decodes and no waiting request could be admitted, up to this
   * many steps (never past a request's maxNew) are recorded and submitted with no wait between
   * them, each step's sampled ids staying on the backend as the next step's input. Stop ids,
   * maxNew, onToken and aborts are applied on read-back; ids sampled past a request's end are
   * discarded and its sequence's k/v rolled back to the tokens it took. The same ids and log-probs
   * for every value. 1 by default: on the software adapter K = 8 cuts the host time per token
   * about 16× at batch 8 but not the wall time (the adapter is compute-bound there); a real GPU,
   * host-bound at decode, is where a larger K should pay, and has not been measured yet.
   */
  stepsPerReadback?: number;
}

export interface SchedulerStats {
  /** Forwards run. */
  steps: number;
  /** Rows (new tokens) over all steps: rows / steps is the mean batch. */
  rows: number;
  /** Most rows in one step. */
  maxRows: number;
  /** Prompt tokens computed (prefill rows). */
  prefillTokens: number;
  /** Prompt tokens not computed because a cached prefix was reused. */
  prefixReusedTokens: number;
  /** Tokens sampled. */
  sampled: number;
  /** Requests finished (resolved or rejected). */
  requests: number;
  /** Pages the KV stores hold now, and how often they grew. */
  kvPages: number;
  kvGrowths: number;
  /** What the KV stores hold, and the bytes they take now (0 when not allocated). */
  kvFormat: KvFormat;
  kvBytes: number;
}

interface Request<X> {
  prompt: number[];
  o: GenerateOptions;
  rng: Rng;
  out: number[];
  resolve: (ids: number[]) => void;
  reject: (e: unknown) => void;
  seq?: KvSeq;
  /** Prompt tokens whose k/v are in seq (reused or computed). */
  fed: number;
  bias?: X;
  /** (count,) log-probs of the sampled ids, on the backend; read once at the end. */
  lp?: X;
}

/** The rule of sample.ts with its defaults made explicit, as a grouping key. */
function sampleKey(o: SampleOptions): string {
  return `${o.temperature > 0 ? o.temperature : 0}|${o.topK ?? 0}|${o.topP ?? 1}|${o.minP ?? 0}`;
}

function commonPrefix(a: number[], b: number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

const ZERO_STATS = {
  steps: 0,
  rows: 0,
  maxRows: 0,
  prefillTokens: 0,
  prefixReusedTokens: 0,
  sampled: 0,
  requests: 0,
};

export class DecodeScheduler<X> {
  private batchLimit = 16;
  private readonly prefillBudget: number;
  private readonly prefixCacheTokens: number;
  private readonly stepsPerReadback: number;
  private format: KvFormat = 'f32';
  private readonly waiting: Request<X>[] = [];
  private readonly active: Request<X>[] = [];
  /** Finished sequences for prefix reuse, least recently used first. */
  private cache: KvSeq[] = [];
  private cacheTokens = 0;
  private cacheVersion = -1;
  /** The model's adapterVersion when each sequence started: k/v of another version are never reused. */
  private readonly versions = new WeakMap<KvSeq, number>();
  private kv: KvPages<X> | null = null;
  private running = false;
  private counts = { ...ZERO_STATS };

  /** Most sequences decoded together in one step (SchedulerOptions.maxBatch); a new value applies from the next admission. */
  get maxBatch(): number {
    return this.batchLimit;
  }
  set maxBatch(n: number) {
    if (!(Number.isInteger(n) && n >= 1))
      throw new RangeError(`DecodeScheduler: maxBatch must be a whole number ≥ 1; got ${n}`);
    this.batchLimit = n;
  }

  constructor(
    readonly model: LlamaModel<X>,
    readonly opts: SchedulerOptions = {},
  ) {
    // defaults and their reasons: core/defaults.ts SCHEDULER_FIELDS
    this.maxBatch = opts.maxBatch ?? SCHEDULER_DEFAULTS.maxBatch;
    this.prefillBudget = opts.prefillBudget ?? SCHEDULER_DEFAULTS.prefillBudget;
    this.prefixCacheTokens = opts.prefixCacheTokens ?? SCHEDULER_DEFAULTS.prefixCacheTokens;
    this.stepsPerReadback = opts.stepsPerReadback ?? SCHEDULER_DEFAULTS.stepsPerReadback;
    this.kvFormat = opts.kvFormat ?? 'f32';
    if (!(Number.isInteger(this.stepsPerReadback) && this.stepsPerReadback >= 1))
      throw new RangeError(
        `DecodeScheduler: stepsPerReadback must be a whole number ≥ 1; got ${this.stepsPerReadback}`,
      );
    if (!(Number.isInteger(this.prefillBudget) && this.prefillBudget >= 1))
      throw new RangeError(`DecodeScheduler: prefillBudget must be a whole number ≥ 1; got ${this.prefillBudget}`);
    if (!(this.prefixCacheTokens >= 0))
      throw new RangeError(`DecodeScheduler: prefixCacheTokens must be ≥ 0; got ${this.prefixCacheTokens}`);
  }

  /**
   * What the KV stores hold (SchedulerOptions.kvFormat). A new value applies when the stores are
   * next allocated: at once when idle (the stores and the prefix cache are freed), else once the
   * stores are released (releaseIdle, dispose).
   */
  get kvFormat(): KvFormat {
    return this.format;
  }
  set kvFormat(f: KvFormat) {
    const { cfg } = this.model;
    checkKvFormat({ layers: cfg.numLayers, Hkv: cfg.numKvHeads, D: cfg.headDim }, f);
    this.format = f;
    if (this.kv && this.kv.kvFormat !== f) this.releaseIdle();
  }

  /** The same contract as generate(model, prompt, o), batched with every other call in flight. */
  generate(prompt: number[], o: GenerateOptions): Promise<number[]> {
    if (o.noCache) return generate(this.model, prompt, o); // the test-only recomputing path
    return new Promise<number[]>((resolve, reject) => {
      if (prompt.length === 0) throw new RangeError('generate: the prompt has no tokens');
      checkSampleOptions(o);
      // checked here, so a bad request is rejected alone instead of failing the step it would join
      const V = this.model.cfg.vocabSize;
      if (o.logitBias && o.logitBias.length !== V)
        throw new RangeError(`generate: logitBias has ${o.logitBias.length} values; the vocabulary has ${V}`);
      if (prompt.some((id) => !(Number.isInteger(id) && id >= 0 && id < V)))
        throw new RangeError(`generate: prompt ids must be whole numbers in [0, ${V})`);
      if (o.maxNew <= 0 || o.signal?.aborted) return resolve([]);
      this.waiting.push({ prompt: [...prompt], o, rng: createRng(o.seed ?? 0), out: [], resolve, reject, fed: 0 });
      this.kick();
    });
  }

  stats(): SchedulerStats {
    return {
      ...this.counts,
      kvPages: this.kv?.capacity ?? 0,
      kvGrowths: this.kv?.growths ?? 0,
      kvFormat: this.kv?.kvFormat ?? this.format,
      kvBytes: this.kv?.bytes ?? 0,
    };
  }

  /** Forget the cached prefixes (their k/v belong to the old weights): call after a training step. */
  clearPrefixCache(): void {
    for (const s of this.cache) this.kv?.release(s);
    this.cache = [];
    this.cacheTokens = 0;
  }

  /**
   * Free the KV stores (and the prefix cache) when nothing is in flight; true when freed. Called
   * before a training step: the step needs the memory, and the cached k/v are stale after it anyway.
   */
  releaseIdle(): boolean {
    if (this.active.length || this.waiting.length || !this.kv) return false;
    this.dispose();
    return true;
  }

  /** Free the KV stores once idle (a later generate() allocates them again). */
  dispose(): void {
    if (this.active.length || this.waiting.length) throw new Error('DecodeScheduler.dispose: requests in flight');
    this.clearPrefixCache();
    this.kv?.dispose();
    this.kv = null;
    this.model.ops.flush();
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    // after the current task: calls made together (Promise.all) start in the same step
    queueMicrotask(() => void this.loop());
  }

  private async loop(): Promise<void> {
    try {
      while (this.waiting.length || this.active.length) {
        await this.stepOnce();
        // the CPU backend never yields on its own: let timers and I/O run between steps
        if (this.model.ops.device === 'cpu') await new Promise((r) => setTimeout(r, 0));
      }
    } catch (e) {
      // a bug outside a step's forward and sampling: fail everything in flight, stay usable
      for (const r of [...this.active, ...this.waiting.splice(0)]) this.fail(r, e);
    } finally {
      this.running = false;
    }
  }

  private pages(): KvPages<X> {
    const { cfg, ops } = this.model;
    this.kv ??= new KvPages(
      ops,
      { layers: cfg.numLayers, Hkv: cfg.numKvHeads, D: cfg.headDim },
      { initialPages: this.opts.initialPages ?? 64, kvFormat: this.format },
    );
    return this.kv;
  }

  private async stepOnce(): Promise<void> {
    const kv = this.pages();
    const ops = this.model.ops;
    // 1. aborted requests leave
    await this.finish(this.active.filter((r) => r.o.signal?.aborted));
    for (const r of [...this.waiting])
      if (r.o.signal?.aborted) {
        this.waiting.splice(this.waiting.indexOf(r), 1);
        this.counts.requests++;
        r.resolve([]);
      }
    // 2. admission
    if (this.model.adapterVersion !== this.cacheVersion) {
      this.clearPrefixCache();
      this.cacheVersion = this.model.adapterVersion;
    }
    for (let i = 0; i < this.waiting.length && this.active.length < this.maxBatch;) {
      const r = this.waiting[i]!;
      if (this.admit(r, kv)) this.waiting.splice(i, 1);
      else i++;
    }
    if (this.active.length === 0) return;
    const block = this.blockLength();
    if (block > 1) return this.decodeBlock(kv, block);
    // 3. the step's items: every decoding request's last id, then prefill chunks within the budget
    const items: StepItem[] = [];
    const owners: Request<X>[] = [];
    const sampled: number[] = []; // item indices whose request samples after this step
    let budget = this.prefillBudget;
    for (const r of this.active) {
      const left = r.prompt.length - r.fed;
      if (left === 0) {
        sampled.push(items.length);
        items.push({ seq: r.seq!, ids: [r.out[r.out.length - 1]!] });
        owners.push(r);
      } else if (budget > 0) {
        const n = Math.min(left, budget);
        budget -= n;
        if (n === left) sampled.push(items.length);
        items.push({ seq: r.seq!, ids: r.prompt.slice(r.fed, r.fed + n) });
        owners.push(r);
      }
    }
    const temps: X[] = [];
    let ids: number[];
    try {
      const logits = this.model.step(kv, items); // (items, V)
      temps.push(logits);
      const rows = items.reduce((a, it) => a + it.ids.length, 0);
      this.counts.steps++;
      this.counts.rows += rows;
      this.counts.maxRows = Math.max(this.counts.maxRows, rows);
      items.forEach((it, j) => {
        const r = owners[j]!;
        if (r.fed < r.prompt.length) {
          r.fed += it.ids.length;
          this.counts.prefillTokens += it.ids.length;
        }
      });
      ids = sampled.length ? await this.sample(logits, sampled, owners, temps) : [];
    } catch (e) {
      ops.free(...temps);
      ops.flush();
      for (const r of owners) this.fail(r, e);
      return;
    }
    ops.free(...temps);
    ops.flush();
    // 4. emit
    const done: Request<X>[] = [];
    for (let k = 0; k < sampled.length; k++) {
      const r = owners[sampled[k]!]!;
      const id = ids[k]!;
      r.out.push(id);
      this.counts.sampled++;
      try {
        r.o.onToken?.(id);
      } catch (e) {
        this.fail(r, e);
        continue;
      }
      if (r.o.stopIds?.includes(id) || r.out.length >= r.o.maxNew) done.push(r);
    }
    await this.finish(done);
  }

  /** Start r on the longest reusable prefix; false when it should wait for a prefill in flight. */
  private admit(r: Request<X>, kv: KvPages<X>): boolean {
    const cap = r.prompt.length - 1; // the last prompt token is always computed: its logits are sampled
    let best = 0;
    let from: KvSeq | undefined;
    let fromCache = -1;
    // only k/v computed with the adapter of now: a sequence that began before an update (a training
    // step while it ran) holds rows of the old adapter
    const now = this.model.adapterVersion;
    const current = (seq: KvSeq) => this.versions.get(seq) === now;
    const consider = (s: KvSeq, c: number) => {
      if (!current(s)) return;
      const n = Math.min(commonPrefix(s.tokens, r.prompt), cap);
      if (n > best) [best, from, fromCache] = [n, s, c];
    };
    for (const a of this.active) consider(a.seq!, -1);
    this.cache.forEach((s, c) => consider(s, c));
    // a prompt still being prefilled that shares a page more than what is stored now: wait for it
    for (const a of this.active)
      if (current(a.seq!) && a.fed < a.prompt.length && Math.min(commonPrefix(a.prompt, r.prompt), cap) >= best + PAGE)
        return false;
    if (from && fromCache >= 0) {
      this.cache.splice(fromCache, 1);
      this.cache.push(from); // most recently used
    }
    r.seq = from ? kv.fork(from, best) : kv.newSeq();
    this.versions.set(r.seq, now);
    r.fed = best;
    this.counts.prefixReusedTokens += best;
    if (r.o.logitBias) r.bias = this.model.ops.upload([r.o.logitBias.length], r.o.logitBias);
    this.active.push(r);
    return true;
  }

  /**
   * One id per sampled item, read back together: logits (+ each request's bias), grouped by equal
   * sampling options (one Ops.sample each), and each request's log-prob appended on the backend.
   */
  private async sample(logits: X, sampled: number[], owners: Request<X>[], temps: X[]): Promise<number[]> {
    const ops = this.model.ops;
    const [nItems, V] = ops.shape(logits) as [number, number];
    const bias = this.biasRows(sampled, owners, nItems, V, temps);
    const L = bias ? ops.add(logits, bias) : logits;
    if (L !== logits) temps.push(L);
    const groups = new Map<string, number[]>();
    for (const j of sampled) {
      const key = sampleKey(owners[j]!.o);
      groups.set(key, [...(groups.get(key) ?? []), j]);
    }
    const pending: Promise<number[]>[] = [];
    const order: number[] = [];
    for (const js of groups.values()) {
      const o = owners[js[0]!]!.o;
      const u = js.map((j) => (o.temperature > 0 ? owners[j]!.rng.next() : 0));
      pending.push(ops.sample(this.gather(L, js, temps), o, u));
      order.push(...js);
    }
    const got = (await Promise.all(pending)).flat();
    const byItem = new Map<number, number>();
    order.forEach((j, k) => byItem.set(j, got[k]!));
    this.appendLogprobs(L, sampled, owners, (j) => byItem.get(j)!, temps);
    return sampled.map((j) => byItem.get(j)!);
  }

  /**
   * (items, V): each biased request's logitBias on its row, zeros elsewhere (logits + this: x + 0 = x,
   * the same sums as generate()), for the rows `js` that sample; undefined when none is biased.
   */
  private biasRows(js: number[], owners: Request<X>[], nItems: number, V: number, temps: X[]): X | undefined {
    const ops = this.model.ops;
    const biased = js.filter((j) => owners[j]!.bias !== undefined);
    if (biased.length === 0) return undefined;
    const B = ops.zeros([nItems, V]);
    temps.push(B);
    for (const j of biased) {
      const b = owners[j]!.bias!;
      if (ops.shape(b)[0] !== V)
        throw new RangeError(`generate: logitBias has ${ops.shape(b)[0]} values, the vocabulary ${V}`);
      ops.copyRows(ops.view(b, [1, V]), 0, B, j, 1);
    }
    return B;
  }

  /** The rows `js` of L as one (n, V) tensor (L itself when that is all of its rows, in order). */
  private gather(L: X, js: number[], temps: X[]): X {
    const ops = this.model.ops;
    if (js.length === ops.shape(L)[0] && js.every((j, i) => j === i)) return L;
    const g = ops.embedding(L, js);
    temps.push(g);
    return g;
  }

  /**
   * Append log π(id) under log_softmax(L / T) (T = 1 when greedy) of row j's sampled id `idOf(j)` to
   * its request's log-probs on the backend, for the rows `js` whose request asks for them; rows
   * grouped by temperature.
   */
  private appendLogprobs(L: X, js: number[], owners: Request<X>[], idOf: (j: number) => number, temps: X[]): void {
    const ops = this.model.ops;
    const lpGroups = new Map<number, number[]>();
    for (const j of js) {
      const r = owners[j]!;
      if (!r.o.logprobs) continue;
      const t = r.o.temperature > 0 ? r.o.temperature : 1;
      lpGroups.set(t, [...(lpGroups.get(t) ?? []), j]);
    }
    for (const [t, group] of lpGroups) {
      const g = this.gather(L, group, temps);
      const z = t !== 1 ? ops.scale(g, 1 / t) : g;
      if (z !== g) temps.push(z);
      const res = ops.nll(z, group.map(idOf), new Float32Array(group.length).fill(1));
      temps.push(res.loss, res.logprobs, res.lse);
      group.forEach((j, k) => {
        const r = owners[j]!;
        const one = group.length === 1 ? res.logprobs : ops.rows(res.logprobs, k, 1);
        r.lp = ops.appendRows(r.lp, r.out.length, one);
        if (one !== res.logprobs) ops.free(one);
      });
    }
  }

  /** Decode steps to record before the next read-back: 1 unless every request decodes and none waits for a free row. */
  private blockLength(): number {
    if (this.stepsPerReadback === 1) return 1;
    if (this.waiting.length && this.active.length < this.maxBatch) return 1;
    let n = this.stepsPerReadback;
    for (const r of this.active) {
      if (r.fed < r.prompt.length) return 1;
      n = Math.min(n, r.o.maxNew - r.out.length);
    }
    return n;
  }

  /**
   * `n` decode steps of every active request (all decoding) and one read-back of their n × B ids.
   * Rows sit in groups of equal sampling options (one sampleInto per group and step, the uniforms
   * drawn up front from each request's Rng in step order); step j's ids are written to row j of an id
   * tensor on the backend, which step j + 1 embeds. On read-back each request takes its ids in order
   * until it ends (stop id, maxNew, abort, an error in onToken) — the ids after are discarded and its
   * sequence rolled back to the tokens it took, so what follows and what the prefix cache reuses is
   * exactly what one step per read-back would hold. Log-probs are computed after the read-back from
   * each step's logits, kept until then.
   */
  private async decodeBlock(kv: KvPages<X>, n: number): Promise<void> {
    const ops = this.model.ops;
    const groups = new Map<string, Request<X>[]>();
    for (const r of this.active) {
      const key = sampleKey(r.o);
      groups.set(key, [...(groups.get(key) ?? []), r]);
    }
    const rows = [...groups.values()].flat();
    const B = rows.length;
    const all = rows.map((_, i) => i);
    const start = rows.map((r) => r.seq!.length);
    const last = rows.map((r) => r.out[r.out.length - 1]!);
    const withLp = rows.some((r) => r.o.logprobs);
    const temps: X[] = [];
    /** Per step, the logits the ids were sampled from (with log-probs asked for). */
    const kept: X[] = [];
    let got: number[];
    let step: X[] = [];
    try {
      for (const r of rows) kv.reserveAhead(r.seq!, n);
      const draws = new Float32Array(n * B);
      rows.forEach((r, i) => {
        for (let j = 0; j < n; j++) draws[j * B + i] = r.o.temperature > 0 ? r.rng.next() : 0;
      });
      const rand = ops.upload([n * B], draws);
      const ids = ops.idTensor(n * B);
      temps.push(rand, ids);
      const bias = this.biasRows(all, rows, B, this.model.cfg.vocabSize, temps); // the same for every step
      for (let j = 0; j < n; j++) {
        step = [];
        const items = rows.map((r, i) => ({ seq: r.seq!, ids: [j === 0 ? last[i]! : -1] }));
        const input = j === 0 ? undefined : { tensor: ids, offset: (j - 1) * B, count: B };
        const logits = this.model.step(kv, items, input); // (B, V)
        step.push(logits);
        const L = bias ? ops.add(logits, bias) : logits;
        if (L !== logits) step.push(L);
        let s = 0;
        for (const group of groups.values()) {
          const g = group.length === B ? L : ops.rows(L, s, group.length);
          if (g !== L) step.push(g);
          ops.sampleInto(g, group[0]!.o, rand, j * B + s, ids, j * B + s);
          s += group.length;
        }
        if (withLp) {
          kept.push(L);
          temps.push(...step);
        } else ops.free(...step);
        step = [];
        // submitted step by step: the device runs step j while step j + 1 is recorded, and the
        // buffers step j released serve step j + 1 (one submission of all n would hold n steps' buffers)
        ops.flush();
        this.counts.steps++;
        this.counts.rows += B;
        this.counts.maxRows = Math.max(this.counts.maxRows, B);
      }
      got = await ops.readIdTensor(ids); // one read-back of the n steps' ids
    } catch (e) {
      ops.free(...temps, ...step);
      ops.flush();
      for (const r of rows) this.fail(r, e);
      return;
    }
    // each request takes its ids in step order until it ends
    const taken = rows.map(() => 0);
    const open = new Set(rows);
    const done: Request<X>[] = [];
    for (let j = 0; j < n && open.size; j++) {
      for (const r of rows)
        if (open.has(r) && r.o.signal?.aborted) {
          open.delete(r);
          done.push(r);
        }
      const idAt = (i: number) => got[j * B + i]!;
      if (withLp)
        try {
          this.appendLogprobs(
            kept[j]!,
            all.filter((i) => open.has(rows[i]!)),
            rows,
            idAt,
            temps,
          );
        } catch (e) {
          for (const r of open) this.fail(r, e);
          open.clear();
        }
      rows.forEach((r, i) => {
        if (!open.has(r)) return;
        const id = idAt(i);
        r.out.push(id);
        taken[i]!++;
        this.counts.sampled++;
        try {
          r.o.onToken?.(id);
        } catch (e) {
          open.delete(r);
          return this.fail(r, e);
        }
        if (r.o.stopIds?.includes(id) || r.out.length >= r.o.maxNew || r.o.signal?.aborted) {
          open.delete(r);
          done.push(r);
        }
      });
    }
    // roll each sequence back to the tokens it took: its last id before the block, then the ids it took but the last
    rows.forEach((r, i) => {
      if (!r.seq) return; // failed: released
      const m = taken[i]!;
      const fed = [last[i]!, ...Array.from({ length: n - 1 }, (_, j) => got[j * B + i]!)].slice(0, m);
      r.seq.tokens.splice(start[i]!, n, ...fed);
      kv.truncate(r.seq, start[i]! + m);
    });
    ops.free(...temps);
    ops.flush();
    await this.finish(done);
  }

  /** Leave the batch: log-probs read back, the sequence kept for prefix reuse, the promise resolved. */
  private async finish(rs: Request<X>[]): Promise<void> {
    if (rs.length === 0) return;
    for (const r of rs) this.active.splice(this.active.indexOf(r), 1);
    const ops = this.model.ops;
    ops.flush();
    // every finishing request's log-probs read back together (one wait on the GPU)
    await Promise.all(
      rs.map(async (r) => {
        try {
          if (r.o.logprobs && r.lp !== undefined) {
            const lp = await ops.read(r.lp);
            for (let i = 0; i < r.out.length; i++) r.o.logprobs.push(lp[i]!);
          }
        } catch (e) {
          this.release(r, false);
          this.counts.requests++;
          return r.reject(e);
        }
        this.release(r, true);
        this.counts.requests++;
        r.resolve(r.out);
      }),
    );
  }

  private fail(r: Request<X>, e: unknown): void {
    const i = this.active.indexOf(r);
    if (i >= 0) this.active.splice(i, 1);
    this.release(r, false);
    this.counts.requests++;
    r.reject(e);
  }

  private release(r: Request<X>, keep: boolean): void {
    const ops = this.model.ops;
    if (r.bias !== undefined) ops.free(r.bias);
    if (r.lp !== undefined) ops.free(r.lp);
    r.bias = r.lp = undefined;
    if (r.seq) {
      if (keep) this.remember(r.seq);
      else this.kv?.release(r.seq);
      r.seq = undefined;
    }
    ops.flush();
  }

  /** Keep a finished sequence for prefix reuse (LRU, bounded in tokens). */
  private remember(seq: KvSeq): void {
    const kv = this.kv!;
    const stale = this.versions.get(seq) !== this.model.adapterVersion; // the adapter changed while it ran
    if (seq.length === 0 || this.prefixCacheTokens === 0 || stale) return kv.release(seq);
    // an entry that is a prefix of seq is redundant, and seq is if it is a prefix of an entry
    for (let i = 0; i < this.cache.length; i++) {
      const c = this.cache[i]!;
      const n = commonPrefix(c.tokens, seq.tokens);
      if (n === seq.length) {
        this.cache.splice(i, 1);
        this.cache.push(c);
        return kv.release(seq);
      }
      if (n === c.length) {
        this.cache.splice(i--, 1);
        this.cacheTokens -= c.length;
        kv.release(c);
      }
    }
    this.cache.push(seq);
    this.cacheTokens += seq.length;
    while (this.cacheTokens > this.prefixCacheTokens) {
      const old = this.cache.shift()!;
      this.cacheTokens -= old.length;
      kv.release(old);
    }
  }
}
