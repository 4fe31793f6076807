// The Lab's fast path (src/engine/tiny/tiny_*.ts) against the engine's CPU references: the same
// prompt ids, the same sampled ids and log-probs, the same GRPO step (adapter, moments and figures
// bit for bit), and a whole Lab cycle with the same report — the fast path is the reference's
// arithmetic in the same order, not an approximation of it. The WebAssembly-vs-loops comparisons
// assert the kernels are there (TinyKernels.create() on Node 20) and called on the kernel side only:
// with create() returning null both sides would run the loops and agree trivially.
import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { LabLoop } from '../../src/core/lab/lab.ts';
import { createSandboxWorkerApi } from '../../src/core/sandbox/worker_api.ts';
import type { TokenSample } from '../../src/core/train/grpo.ts';
import { engineLabDeps } from '../../src/lab/roles.ts';
import { TinyKernels } from '../../src/engine/tiny/tiny_kernels.ts';
import { TINY_KERNELS_WASM } from '../../src/engine/tiny/tiny_kernels_wasm.ts';
import { createRng } from '../../src/core/rng.ts';
import { TinyChat } from '../../src/engine/tiny/tiny_chat.ts';
import { TinyLm } from '../../src/engine/tiny/tiny_lm.ts';
import { TINY_TRAIN_DEFAULTS, tinyTrainer } from '../../src/engine/tiny/tiny_train.ts';
import { tinyModel } from '../../src/engine/tiny/tiny_model.ts';
import { createTinyPolicy } from '../../src/engine/tiny/tiny_policy.ts';
import { extendTrace } from '../../src/core/train/grpo.ts';
import { LoraTrainer } from '../../src/engine/train/train.ts';

/**
 * The same fresh model twice: one for the references, one for the fast path. `hidden` 16 is the Lab's
 * (one head of 16); 32 has two query heads sharing one key/value head (the head offsets), and 24 one
 * head of 24 (the general loops, not the D = 16 ones, and no WebAssembly attention).
 */
const twin = async (seed: number, hidden = 16) => {
  const ref = await tinyModel('01234', { seed, layers: 2, hidden, std: 0.4 });
  const fast = await tinyModel('01234', { seed, layers: 2, hidden, std: 0.4 });
  const lm = new TinyLm(fast.llm as never, fast.weights);
  const ids = [...fast.allowed].sort((a, b) => a - b);
  return { ref, fast, lm, ids, chat: new TinyChat('toy', lm, fast.tokenizer, ids) };
};

/** The adapter's values (CpuOps tensors hold their data as a Float32Array). */
const adapter = (m: { llm: { lora: { w: Map<string, unknown> } | null } }) =>
  [...m.llm.lora!.w.entries()].map(([k, t]) => [k, Array.from((t as { data: Float32Array }).data)] as const);

describe('the fast path gives the references’ numbers', () => {
  it.each([16, 32, 24])(
    'the same prompt ids, replies and log-probs over an episode’s turns (hidden %i)',
    async (hidden) => {
      const { ref, chat } = await twin(3, hidden);
      const messages: ChatMessage[] = [
        { role: 'user', content: 'Lock 3 digits, 0-1, same code every time. Digit 1? [4 0 2]' },
      ];
      for (let turn = 0; turn < 4; turn++) {
        const o = { temperature: 1, max_tokens: 1, seed: 100 + turn };
        const [a, b] = [await ref.chat.chat(messages, o), await chat.chat(messages, o)];
        expect(b.tokens).toEqual(a.tokens); // prompt ids (continued from the last call), the sampled id, log π
        expect(b.text).toBe(a.text);
        messages.push({ role: 'assistant', content: a.text }, { role: 'user', content: `no. Digit ${turn + 1}? [7]` });
      }
      // a second conversation reuses the first's prefix from the cache and still answers the same
      const other: ChatMessage[] = [
        { role: 'user', content: 'Lock 3 digits, 0-1, same code every time. Digit 1? [9 9 9]' },
      ];
      const o = { temperature: 0.7, max_tokens: 3, seed: 7 };
      expect((await chat.chat(other, o)).tokens).toEqual((await ref.chat.chat(other, o)).tokens);
      expect(chat.counts.reused).toBeGreaterThan(0);
      // the sampler at temperatures away from 1 (each id's probability exp((z − max)/T)): the same ids
      for (const [seed, temperature] of [0.3, 0.5, 2, 4].entries()) {
        const ot = { temperature, max_tokens: 4, seed: 20 + seed };
        expect((await chat.chat(other, ot)).tokens).toEqual((await ref.chat.chat(other, ot)).tokens);
      }
    },
  );

  it.each([16, 32, 24])(
    'the same GRPO step: the adapter after each of three steps (so the AdamW moments too) and the figures, bit for bit (hidden %i)',
    async (hidden) => {
      const { ref, fast, lm, ids } = await twin(5, hidden);
      // samples from the model itself (so π_old is the sampler's), two of them packed in one forward
      const samples: TokenSample[] = [];
      for (const [k, text] of ['Mirror 2 digits: Digit 1', 'Lock 2 digits, 0-1. Digit 1?', 'Echo 4 digits'].entries()) {
        const r = await ref.chat.chat([{ role: 'user', content: text }], { temperature: 1, max_tokens: 3, seed: k });
        const t = r.tokens!;
        samples.push({
          role: 'agent',
          ids: [...t.prompt, ...t.completion],
          spans: [[t.prompt.length, t.prompt.length + t.completion.length]],
          logprobs: t.logprobs,
          advantage: [1, -0.5, 0.25][k]!,
          key: String(k),
        });
      }
      const lr = 3e-3;
      const weightDecay = 0.5; // large enough that a step without it leaves a different adapter
      const klCoef = 0.3; // the k3 KL to the base: a second forward with the adapter off
      const reference = new LoraTrainer(ref.llm, {
        lr,
        weightDecay,
        klCoef,
        temperature: 1,
        allowedTokens: ref.allowed,
        minibatchTokens: 1e9,
      });
      const tiny = tinyTrainer(lm, { ...TINY_TRAIN_DEFAULTS, lr, temperature: 1, allowed: ids, weightDecay, klCoef });
      for (let step = 0; step < 3; step++) {
        const a = await reference.trainStep(
          samples.map((s) => ({ ids: s.ids, spans: s.spans, oldLogprobs: s.logprobs, advantage: s.advantage })),
        );
        const b = await tiny.step(samples);
        for (const k of ['loss', 'clipFraction', 'approxKl', 'klToBase', 'gradNorm', 'tokens'] as const)
          expect(b[k]).toBe(a[k]);
        if (step > 0) expect(b.klToBase).toBeGreaterThan(0); // the adapter has moved off the base
        expect(adapter(fast)).toEqual(adapter(ref));
      }
      expect(adapter(fast).some(([k, v]) => k.endsWith('.B') && v.some((x) => x !== 0))).toBe(true); // it did train
      const state = await reference.exportState();
      expect(state.step).toBe(3);
    },
  );

  it('the spike guard on each path: the same step skipped (only the spike), the same adapter after', async () => {
    const { ref, fast, lm, ids } = await twin(6);
    const r = await ref.chat.chat([{ role: 'user', content: 'Lock 2 digits, 0-1. Digit 1?' }], {
      temperature: 1,
      max_tokens: 3,
      seed: 1,
    });
    const t = r.tokens!;
    const sample = (advantage: number): TokenSample => ({
      role: 'agent',
      ids: [...t.prompt, ...t.completion],
      spans: [[t.prompt.length, t.prompt.length + t.completion.length]],
      logprobs: t.logprobs,
      advantage,
      key: 'a',
    });
    const o = { lr: 1e-3, temperature: 1, skipSpikes: 10 };
    const reference = new LoraTrainer(ref.llm, { ...o, allowedTokens: ref.allowed, minibatchTokens: 1e9 });
    const tiny = tinyTrainer(lm, { ...TINY_TRAIN_DEFAULTS, ...o, allowed: ids });
    const skipped: [boolean, boolean][] = [];
    for (let step = 0; step < 24; step++) {
      // step 20's advantage is 1,000 times the others': its gradient norm too (no clip, no KL)
      const adv = (step % 2 ? -1 : 1) * (step === 20 ? 1000 : 1);
      const a = await reference.trainStep([
        { ids: sample(adv).ids, spans: sample(adv).spans, oldLogprobs: t.logprobs, advantage: adv },
      ]);
      const b = await tiny.step([sample(adv)]);
      expect(b.gradNorm).toBe(a.gradNorm);
      skipped.push([a.skipped === true, b.skipped === true]);
      expect(adapter(fast)).toEqual(adapter(ref));
    }
    expect(skipped.flatMap(([a, b], i) => (a || b ? [i] : []))).toEqual([20]);
    expect(skipped[20]).toEqual([true, true]);
    expect((await reference.exportState()).step).toBe(23); // the skipped step is not counted
  });

  it('a scaled learning rate on each path (the policies the Lab builds): the same log-probs after each step, not the unscaled ones', async () => {
    const policy = (path: 'fast' | 'reference') =>
      createTinyPolicy({
        allowed: '01234',
        seed: 7,
        lr: 3e-3,
        weightDecay: 0,
        klCoef: 0,
        temperature: 1,
        layers: 2,
        hidden: 16,
        std: 0.4,
        path,
      });
    const [fast, reference, unscaled] = [await policy('fast'), await policy('reference'), await policy('fast')];
    const messages: ChatMessage[] = [{ role: 'user', content: 'Lock 2 digits, 0-1. Digit 1?' }];
    const reply = await fast.chat.chat(messages, { temperature: 1, max_tokens: 3, seed: 2 });
    const sample: TokenSample = { role: 'agent', ...extendTrace(null, reply.tokens!)!, advantage: 1, key: 'a' };
    for (const [i, factor] of [1, 0.25, 0.25].entries()) {
      fast.trainer.scaleLr!(factor);
      reference.trainer.scaleLr!(factor);
      for (const p of [fast, reference, unscaled]) await p.trainer.step([sample]);
      const a = await fast.score(messages, reply.text);
      const b = await reference.score(messages, reply.text);
      const c = await unscaled.score(messages, reply.text);
      expect(a.logprobs).toEqual(b.logprobs);
      if (i > 0) expect(a.logprobs).not.toEqual(c.logprobs);
    }
  });

  it('one Lab cycle on each path: the same report', async () => {
    const runner = createSandboxWorkerApi();
    const settings = {
      seed: 2,
      designer: 'learned' as const,
      space: 'chain2' as const,
      levels: 2,
      plays: 4,
      probePlays: 2,
      probeEvery: 1,
      probeLevels: [
        { family: 2, L: 0, A: 0, D: 0 },
        { family: 2, L: 1, A: 0, D: 3 },
      ],
    };
    const run = async (path: 'fast' | 'reference') => {
      const lab = new LabLoop(
        settings,
        await engineLabDeps(2, 'learned', runner, { path, temperature: 1, space: 'chain2' }),
      );
      const r = await lab.cycle();
      await lab.close();
      return JSON.parse(JSON.stringify({ p0: lab.initialProbe, r }, (k, v) => (k === 'ms' ? undefined : v)));
    };
    const fast = await run('fast');
    expect(fast.r.steps.agent).toBeGreaterThan(0); // the agent trained (so the step is compared too)
    expect(fast.r.designs.some((d: { trained: boolean }) => d.trained)).toBe(true); // and the designer, its edit slot scored by each path
    expect(fast).toEqual(await run('reference'));
  }, 120_000);

  it('the WebAssembly kernels are there on Node 20 (without them both sides of the two comparisons below run the loops)', () => {
    expect(TinyKernels.create()).toBeInstanceOf(TinyKernels);
  });

  /**
   * Spies on the kernels' entry points (they call through): `during(f)` runs f and says how many
   * kernel calls it made, so each comparison shows its kernel side on the kernels and its loops side off them.
   */
  const kernelCalls = () => {
    const spies = [
      vi.spyOn(TinyKernels.prototype, 'attendBlock'),
      vi.spyOn(TinyKernels.prototype, 'linear'),
      vi.spyOn(TinyKernels.prototype, 'linearBack'),
      vi.spyOn(TinyKernels.prototype, 'segmentAttention16'),
      vi.spyOn(TinyKernels.prototype, 'attentionBack16'),
      vi.spyOn(TinyKernels.prototype, 'swiglu'),
      vi.spyOn(TinyKernels.prototype, 'expRow'),
    ];
    const count = () => spies.reduce((a, s) => a + s.mock.calls.length, 0);
    return {
      spies,
      during<T>(f: () => T): { value: T; calls: number } {
        const c0 = count();
        const value = f();
        return { value, calls: count() - c0 };
      },
      async duringAsync<T>(f: () => Promise<T>): Promise<{ value: T; calls: number }> {
        const c0 = count();
        const value = await f();
        return { value, calls: count() - c0 };
      },
      restore: () => spies.forEach((s) => s.mockRestore()),
    };
  };

  it('attention and projections on WebAssembly give the JavaScript loops’ values, bit for bit, for blocks of every length', async () => {
    const m = await tinyModel('01234', { seed: 4, layers: 2, hidden: 16, std: 0.4 });
    // a trained-looking adapter (a fresh one's B is 0, which would hide the delta's arithmetic)
    for (const [k, t] of m.llm.lora!.w) {
      const b = (t as { data: Float32Array }).data;
      if (k.endsWith('.B')) for (let i = 0; i < b.length; i++) b[i] = Math.sin(i) * 0.05;
    }
    m.llm.adapterChanged();
    const withKernel = new TinyLm(m.llm as never, m.weights);
    const loopsOnly = new TinyLm(m.llm as never, m.weights, { wasm: false });
    const ids = (n: number, k: number) => Array.from({ length: n }, (_, i) => 40 + ((i * 7 + k) % 60));
    const seqs = [withKernel.newSeq(), loopsOnly.newSeq()];
    const other = [withKernel.newSeq(), loopsOnly.newSeq()];
    const kernels = kernelCalls();
    const calls = [0, 0];
    try {
      // blocks below and above the kernel's threshold, odd and even (the last row pairs with none), two items in one call
      for (const [k, n] of [69, 1, 3, 4, 5, 34, 33, 1, 2, 300].entries()) {
        const [a, b] = [withKernel, loopsOnly].map((lm, i) => {
          const r = kernels.during(() =>
            lm.step([
              { seq: seqs[i]!, ids: ids(n, k) },
              { seq: other[i]!, ids: ids(n + 1, k + 1) },
            ]),
          );
          calls[i]! += r.calls;
          return r.value;
        });
        expect(Array.from(a!)).toEqual(Array.from(b!));
      }
      // the kernel side really ran attention and the projections on WebAssembly, the loops side never did
      const [attend, linear] = kernels.spies;
      expect(attend!.mock.calls.length).toBeGreaterThan(0);
      expect(linear!.mock.calls.length).toBeGreaterThan(0);
      expect(calls[0]).toBeGreaterThan(0);
      expect(calls[1]).toBe(0);
    } finally {
      kernels.restore();
    }
    // every k and v row of the top layer (they read layer 0's attention output) is the same too
    for (const [x, y] of [seqs, other]) {
      const n = x!.tokens.length * 16;
      expect(Array.from(x!.k[1]!.subarray(0, n))).toEqual(Array.from(y!.k[1]!.subarray(0, n)));
      expect(Array.from(x!.v[1]!.subarray(0, n))).toEqual(Array.from(y!.v[1]!.subarray(0, n)));
    }
  });

  for (const hidden of [16, 32])
    it(`the GRPO step on WebAssembly and on the loops: the same adapter after each of two steps (hidden ${hidden}: ${hidden / 16} head${hidden > 16 ? 's' : ''})`, async () => {
      const make = async (wasm: boolean) => {
        const m = await tinyModel('01234', { seed: 6, layers: 2, hidden, std: 0.4 });
        const lm = new TinyLm(m.llm as never, m.weights, { wasm });
        const ids = [...m.allowed].sort((a, b) => a - b);
        return { m, lm, chat: new TinyChat('toy', lm, m.tokenizer, ids), ids };
      };
      const [k, j] = [await make(true), await make(false)];
      const samples: TokenSample[] = [];
      for (const [n, text] of ['Lock 3 digits, 0-4. Digit 1?', 'Mirror 2 digits: Digit 1', 'Echo 4'].entries()) {
        const t = (await k.chat.chat([{ role: 'user', content: text }], { temperature: 1, max_tokens: 4, seed: n }))
          .tokens!;
        const ids = [...t.prompt, ...t.completion];
        samples.push({
          role: 'agent',
          ids,
          spans: [[t.prompt.length, ids.length]],
          logprobs: t.logprobs,
          advantage: [0.8, -1, 0.3][n]!,
          key: String(n),
        });
      }
      const o = { lr: 1e-2, temperature: 1, ...TINY_TRAIN_DEFAULTS };
      const [a, b] = [tinyTrainer(k.lm, { ...o, allowed: k.ids }), tinyTrainer(j.lm, { ...o, allowed: j.ids })];
      const kernels = kernelCalls();
      try {
        for (let step = 0; step < 2; step++) {
          const onKernels = await kernels.duringAsync(() => a.step(samples));
          const onLoops = await kernels.duringAsync(() => b.step(samples));
          expect(onKernels.value).toMatchObject({ ...onLoops.value, ms: expect.any(Number) });
          expect(adapter(k.m)).toEqual(adapter(j.m));
          // the WebAssembly step's forward and backward ran on the kernels, the loops step's never did
          expect(onKernels.calls).toBeGreaterThan(0);
          expect(onLoops.calls).toBe(0);
        }
        expect(kernels.spies[2]!.mock.calls.length).toBeGreaterThan(0); // linearBack: the backward on WebAssembly
        // the trainer's attention, forward and backward, on WebAssembly too (the packed samples: three segments)
        expect(kernels.spies[3]!.mock.calls.length).toBeGreaterThan(0);
        expect(kernels.spies[4]!.mock.calls.length).toBeGreaterThan(0);
      } finally {
        kernels.restore();
      }
    });

  it('the module’s exponential is Math.exp bit for bit: random arguments, fdlibm’s branch edges and the special values', async () => {
    const { instance } = await WebAssembly.instantiate(Buffer.from(TINY_KERNELS_WASM, 'base64'));
    const x = instance.exports as unknown as {
      memory: WebAssembly.Memory;
      expsub2(ep: number, n: number, mp: number, store: number): void;
    };
    const edges = [
      0,
      -0,
      Infinity,
      -Infinity,
      NaN,
      5e-324,
      -5e-324,
      1e-300,
      2 ** -27,
      -(2 ** -27),
      2 ** -28,
      0.34657359027997264,
      -0.34657359027997264,
      0.3465735902799727,
      -0.3465735902799727,
      1.0397207708399179,
      -1.0397207708399179,
      1.039720770839918,
      709.782712893384,
      709.7827128933841,
      710,
      -745.1332191019411,
      -745.1332191019412,
      -707.7,
      -708.4,
      -709.1,
      -720,
      -744,
      700,
    ];
    const rng = createRng(7);

    const n = 60_000;
    const xs = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const u = rng.next() - 0.5;
      xs[i] =
        i < edges.length
          ? edges[i]!
          : [u * 120, u * 1500, u * 1e-7, u * 3, -700 - 50 * rng.next(), u * 2 ** -20][i % 6]! *
            (i % 12 < 6 ? 1 : 1 + 1e-12);
    }
    x.memory.grow(Math.ceil((16 * (n + 2)) / 65536));
    const m = new Float64Array(x.memory.buffer);
    // lane a the arguments as they are (m = 0: x − 0 is x), lane b the same reversed and shifted (m = −0.5)
    for (let i = 0; i < n; i++) {
      m[4 + 2 * i] = xs[i]!;
      m[4 + 2 * i + 1] = xs[n - 1 - i]! - 0.5;
    }
    m[0] = 0;
    m[1] = -0.5;
    x.expsub2(32, n, 0, 1);
    let bad = 0;
    let sa = 0;
    let sb = 0;
    for (let i = 0; i < n; i++) {
      const ea = Math.exp(xs[i]! - 0);
      const eb = Math.exp(xs[n - 1 - i]! - 0.5 - -0.5);
      if (!Object.is(m[4 + 2 * i], ea)) bad++;
      if (!Object.is(m[4 + 2 * i + 1], eb)) bad++;
      sa += ea;
      sb += eb;
    }
    expect(bad).toBe(0);
    // the sums, from +0 in order (NaN and Infinity among the arguments make them NaN: compare finite ones too)
    expect([m[2], m[3]]).toEqual([sa, sb]);
    // store = 0: the sums only, the values left as they are
    const before = m.slice(4, 4 + 2000);
    x.expsub2(32, 1000, 0, 0);
    expect(m.slice(4, 4 + 2000)).toEqual(before);
    let s0 = 0;
    for (let j = 0; j < 1000; j++) s0 += Math.exp(before[2 * j]! - 0);
    expect(m[2]).toBe(s0);
  });

  it('the committed WebAssembly is the compile of tiny_kernels.wat', async () => {
    const { generate } = await import('../../scripts/build_tiny_kernels.js');
    expect(readFileSync(new URL('../../src/engine/tiny/tiny_kernels_wasm.ts', import.meta.url), 'utf8')).toBe(
      await generate(),
    );
  });
});
