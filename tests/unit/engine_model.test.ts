// The Llama-family model on the CPU references: every architecture variant loads from a tiny
// checkpoint (f32 and bf16) and runs; greedy generation with the KV cache equals full
// recomputation; LoRA gradients match central finite differences; PEFT export → import is lossless.
import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/core/rng.ts';
import { generate, sampleToken } from '../../src/engine/model/generate.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { exportPeft, importPeft, loraKey, type LoraModule } from '../../src/engine/io/peft.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { TINY_VARIANTS, tinyCheckpointFiles, type TinyDType, type TinyVariant } from '../helpers/tiny_checkpoint.ts';

async function tinyModel(variant: TinyVariant, dtype: TinyDType = 'f32', seed = 0) {
  const ck = tinyCheckpointFiles(variant, dtype, seed, { tokenizer: false });
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  return new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
}

const IDS = [5, 17, 99, 3, 250, 42, 7];

describe('LlamaModel on the CPU references', () => {
  it.each(TINY_VARIANTS.flatMap((v) => (['f32', 'bf16'] as const).map((d) => [v, d] as const)))(
    '%s (%s) loads and gives finite logits',
    async (variant, dtype) => {
      const m = await tinyModel(variant, dtype);
      const { logits } = m.forward(IDS);
      expect(logits.shape).toEqual([IDS.length, m.cfg.vocabSize]);
      expect(logits.data.every(Number.isFinite)).toBe(true);
      // a different input changes the last position
      const other = m.forward([...IDS.slice(0, -1), 8]).logits;
      expect(
        Math.max(
          ...other.data
            .slice(-m.cfg.vocabSize)
            .map((x, i) => Math.abs(x - logits.data[logits.data.length - m.cfg.vocabSize + i]!)),
        ),
      ).toBeGreaterThan(1e-6);
    },
  );

  it.each(TINY_VARIANTS)('%s: the KV cache gives the same logits and greedy tokens as recomputing', async (variant) => {
    const m = await tinyModel(variant);
    const full = m.forward(IDS).logits.data;
    const cache = m.newCache();
    m.forward(IDS.slice(0, 4), { cache });
    const rest = m.forward(IDS.slice(4), { cache }).logits.data;
    const V = m.cfg.vocabSize;
    const want = full.slice(4 * V);
    for (let i = 0; i < want.length; i++) expect(rest[i]).toBeCloseTo(want[i]!, 4);
    const a = await generate(m, IDS, { maxNew: 8, temperature: 0 });
    const b = await generate(m, IDS, { maxNew: 8, temperature: 0, noCache: true });
    expect(a).toEqual(b);
    expect(a).toHaveLength(8);
  });

  it('sampling is reproducible per seed', async () => {
    const m = await tinyModel('llama');
    const s1 = await generate(m, IDS, { maxNew: 6, temperature: 1, topP: 0.9, seed: 3 });
    expect(await generate(m, IDS, { maxNew: 6, temperature: 1, topP: 0.9, seed: 3 })).toEqual(s1);
  });

  it.each([0.25, 1, 4])('respects temperature %d: frequencies follow softmax(logits / T)', (t) => {
    const logits = new Float32Array([2, 1, 0.5, 0, -1]);
    const rng = createRng(11);
    const n = 20_000;
    const counts = new Array<number>(logits.length).fill(0);
    for (let i = 0; i < n; i++) counts[sampleToken(logits, { temperature: t }, rng)]!++;
    const e = Array.from(logits, (l) => Math.exp(l / t));
    const z = e.reduce((a, b) => a + b, 0);
    for (let i = 0; i < logits.length; i++) {
      const p = e[i]! / z;
      // within 4 standard errors of a binomial proportion (fixed seed, so not flaky)
      expect(Math.abs(counts[i]! / n - p), `token ${i} at T=${t}`).toBeLessThan(
        4 * Math.sqrt((p * (1 - p)) / n) + 1e-3,
      );
    }
  });

  it('low temperature concentrates on the argmax, high temperature spreads', () => {
    const logits = new Float32Array([2, 1, 0.5, 0, -1]);
    const share = (t: number) => {
      const rng = createRng(12);
      let top = 0;
      for (let i = 0; i < 5000; i++) if (sampleToken(logits, { temperature: t }, rng) === 0) top++;
      return top / 5000;
    };
    expect(share(0.1)).toBeGreaterThan(0.99); // softmax(l / 0.1)[0] ≈ 1 − 5e-5
    expect(share(1)).toBeGreaterThan(0.5); // 0.56
    expect(share(1)).toBeLessThan(0.6);
    expect(share(10)).toBeLessThan(0.3); // 0.23
  });

  it('generate passes its temperature to the sampler', async () => {
    const m = await tinyModel('llama');
    const greedy = await generate(m, IDS, { maxNew: 6, temperature: 0 });
    const sampled = [];
    for (const seed of [1, 2, 3, 4]) {
      // near zero the sampler is the argmax whatever the seed; at T = 2 it is not
      expect(await generate(m, IDS, { maxNew: 6, temperature: 1e-4, seed })).toEqual(greedy);
      sampled.push(await generate(m, IDS, { maxNew: 6, temperature: 2, seed }));
    }
    expect(sampled.filter((s) => s.join() === greedy.join())).toEqual([]);
  });

  it.each(['llama3', 'qwen2', 'qwen3'] as const)(
    '%s: LoRA gradients match central finite differences',
    async (variant) => {
      const m = await tinyModel(variant);
      const targets: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
      m.initLora(2, 4, targets, 1);
      // give B non-zero values so gradients reach A as well
      const rng = createRng(9);
      for (const [key, t] of m.lora!.w)
        if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
      const ids = IDS.slice(0, -1);
      const targetsIds = IDS.slice(1);
      const w = Float32Array.from(targetsIds, (_, i) => (i % 2 ? 0.7 : -0.4));
      const loss = () => {
        const { logits } = m.forward(ids);
        return m.ops.nll(logits, targetsIds, w).loss.data.reduce((s, x) => s + x, 0);
      };
      const { logits, tape } = m.forward(ids, { tape: true });
      const grads = m.backward(tape!, m.ops.nllBackward(logits, targetsIds, w, m.ops.nll(logits, targetsIds, w).lse));
      let checked = 0;
      for (const key of [
        loraKey(0, 'q_proj', 'A'),
        loraKey(1, 'v_proj', 'B'),
        loraKey(0, 'down_proj', 'A'),
        loraKey(1, 'gate_proj', 'B'),
        loraKey(1, 'o_proj', 'A'),
      ]) {
        const p = m.lora!.w.get(key)!.data;
        const g = grads.get(key)!.data;
        for (const idx of [0, Math.floor(p.length / 2), p.length - 1]) {
          const keep = p[idx]!;
          const h = 1e-2;
          p[idx] = keep + h;
          const up = loss();
          p[idx] = keep - h;
          const down = loss();
          p[idx] = keep;
          const fd = (up - down) / (2 * h);
          expect(Math.abs(g[idx]! - fd), `${key}[${idx}] analytic ${g[idx]} vs fd ${fd}`).toBeLessThan(
            2e-3 + 2e-2 * Math.abs(fd),
          );
          checked++;
        }
      }
      expect(checked).toBe(15);
    },
  );

  it('PEFT export → import is lossless and reproduces the logits', async () => {
    const m = await tinyModel('qwen2');
    m.initLora(4, 8, ['q_proj', 'v_proj', 'down_proj'], 2);
    for (const [key, t] of m.lora!.w) if (key.endsWith('.B')) t.data.fill(0.01);
    const before = m.forward(IDS).logits.data;
    const adapter = (await m.getLora())!;
    const files = exportPeft(adapter, { baseModel: 'tiny-qwen2' });
    const back = importPeft(JSON.parse(files.adapterConfigJson), files.weights, m.cfg);
    expect([...back.tensors.keys()].sort()).toEqual([...adapter.tensors.keys()].sort());
    for (const [k, t] of adapter.tensors) expect(back.tensors.get(k)!.data).toEqual(t.data);
    const m2 = await tinyModel('qwen2');
    m2.setLora(back);
    expect(m2.forward(IDS).logits.data).toEqual(before);
    // the adapter changes the model (B ≠ 0)
    expect((await tinyModel('qwen2')).forward(IDS).logits.data).not.toEqual(before);
  });

  it('per-token log-probs (teacher forcing) are normalised and match the logits', async () => {
    const m = await tinyModel('llama');
    const lp = await m.logprobs(IDS);
    expect(lp).toHaveLength(IDS.length - 1);
    const { logits } = m.forward(IDS);
    const V = m.cfg.vocabSize;
    const row = logits.data.slice(0, V);
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
    expect(lp[0]).toBeCloseTo(row[IDS[1]!]! - lse, 4);
  });

  it('log-probs with the LM head in chunks of 2 rows equal those of one chunk', async () => {
    const m = await tinyModel('qwen2');
    const one = await m.logprobs(IDS);
    const chunked = await m.logprobs(IDS, 2 * 4 * m.cfg.vocabSize); // 2 rows per chunk: 3 full, 1 partial
    expect(m.headChunkRows(2 * 4 * m.cfg.vocabSize)).toBe(2);
    expect(Array.from(chunked)).toEqual(Array.from(one));
  });
});

describe('an adapter trained by Python PEFT loads here', () => {
  it('reproduces PEFT 0.21 + transformers 5.17 logits to 1e-5 (tests/fixtures/peft_qwen2, made on an H200)', async () => {
    const { readFileSync } = await import('node:fs');
    const dir = new URL('../fixtures/peft_qwen2/', import.meta.url);
    const ck = tinyCheckpointFiles('qwen2', 'f32', 7, { tokenizer: false }); // the checkpoint PEFT was given
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const m = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    m.setLora(
      importPeft(
        JSON.parse(readFileSync(new URL('adapter_config.json', dir), 'utf8')),
        readFileSync(new URL('adapter_model.safetensors', dir)),
        loaded.config,
      ),
    );
    const want = JSON.parse(readFileSync(new URL('logits.json', dir), 'utf8')) as number[];
    const got = m.forward([5, 17, 99, 3, 250, 42, 7, 1, 64, 200, 11]).logits.data;
    const scale = Math.max(...want.map(Math.abs));
    let err = 0;
    for (let i = 0; i < want.length; i++) err = Math.max(err, Math.abs(got[i]! - want[i]!));
    expect(err / scale).toBeLessThan(1e-5);
  });
});
