/**
 * The engine from the command line (Node; `webgpu` package, or `--device cpu` for the CPU references):
 *   spade engine init     --arch llama|qwen2|qwen3 --layers N --hidden N --out DIR [--seed S] [--heads N]
 *                         [--kv-heads N] [--intermediate N] [--dtype f32|bf16] [--std 0.02] [--json]
 *                         (a fresh random checkpoint in the Hugging Face layout: io/init_checkpoint.ts)
 *   spade engine logits   --model DIR [--adapter DIR] --tokens 1,2,3 [--all] [--device gpu|cpu]
 *                         [--weights f32|bf16|f16|q4] [--json]
 *   spade engine generate --model DIR [--adapter DIR] --tokens 1,2,3 [--tokens 4,5 ...] --max-new N
 *                         [--temperature 0] [--top-p 1] [--top-k 0] [--min-p 0] [--seed 0]
 *                         [--max-batch 16] [--steps-per-readback 8] [--device gpu|cpu]
 *                         [--weights f32|bf16|f16|q4] [--kv f32|f16] [--json]
 * --json: the last line is one JSON object with `logits` (last position, or every position with --all)
 * or `tokens` (the generated ids), plus `weights` (the base's storage format) and `weightBytes`
 * (what the base weights take on the device; on the CPU the dequantised f32 copy).
 * `generate` with --tokens given more than once decodes the prompts together, as one batch of the
 * engine's scheduler (batch.ts; prompt i samples with seed + i), and prints one line per prompt;
 * with --json the object has `batch: [{ tokens }, ...]` in prompt order instead of `tokens`.
 * --steps-per-readback K: K steps are recorded and submitted before one read-back of their ids
 * (the ids stay on the GPU in between; default 8; the same tokens for every K; on the CPU every
 * step is read at once). One prompt decodes with generate(), several with the scheduler, which
 * records K steps at a time once every prompt is decoding and none waits for a free row.
 * --kv f16: the scheduler's paged KV cache holds k and v as f16 (half the memory; each value rounded
 * to nearest even, so logits move by ~1e-4 relative and the tokens may differ from f32's); the
 * prompts, even one, then go through the scheduler. Default f32, the reference.
 */
import { UsageError } from '../core/errors.ts';
import {
  initCheckpointFiles,
  initConfig,
  paramCount,
  parseWeightFormat,
  type Architecture,
  type InitDType,
  type KvFormat,
  type WeightFormat,
} from '../engine/engine_api.ts';
import { loadEngineFromDir } from '../platform/node/engine.ts';
import { writeModelFiles } from '../platform/node/model_files.ts';
import {
  flag,
  intFlag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandGroup,
  type CommandSpec,
  type Flags,
  type Io,
} from './args.ts';

/** Every --tokens value as a list of ids (the flag may be repeated: one prompt each). */
function parseTokens(a: Args): number[][] {
  const raws = a.flags.get('tokens') ?? [];
  if (raws.length === 0) throw new UsageError('--tokens 1,2,3 is required');
  return raws.map((raw) => {
    const ids = raw.split(',').map((s) => Number(s.trim()));
    if (raw.trim() === '' || ids.some((n) => !Number.isInteger(n) || n < 0))
      throw new UsageError(`--tokens must be comma-separated token ids; got "${raw}"`);
    return ids;
  });
}

/** `spade engine init`: write a fresh random checkpoint (see the header). */
async function engineInit(a: Args, io: Io): Promise<number> {
  const arch = flag(a, 'arch') ?? 'llama';
  if (arch !== 'llama' && arch !== 'qwen2' && arch !== 'qwen3')
    throw new UsageError(`--arch must be llama, qwen2 or qwen3; got "${arch}"`);
  const out = flag(a, 'out');
  if (!out) throw new UsageError('engine init needs --out DIR (where to write the checkpoint)');
  const dtype = flag(a, 'dtype') ?? 'f32';
  if (dtype !== 'f32' && dtype !== 'bf16') throw new UsageError(`--dtype must be f32 or bf16; got "${dtype}"`);
  const std = Number(flag(a, 'std') ?? 0.02);
  if (!(std > 0)) throw new UsageError(`--std must be a number > 0; got "${flag(a, 'std')}"`);
  const opt = (name: string) => (a.flags.has(name) ? intFlag(a, name, 0) : undefined);
  let config;
  try {
    config = initConfig({
      arch: arch as Architecture,
      layers: intFlag(a, 'layers', 2),
      hidden: intFlag(a, 'hidden', 64),
      heads: opt('heads'),
      kvHeads: opt('kv-heads'),
      intermediate: opt('intermediate'),
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const seed = intFlag(a, 'seed', 0);
  const ck = initCheckpointFiles(config, { dtype: dtype as InitDType, seed, std });
  await writeModelFiles(out, ck.files);
  const summary = {
    ok: true,
    dir: out,
    architecture: ck.config.architecture,
    layers: ck.config.numLayers,
    hidden: ck.config.hiddenSize,
    heads: ck.config.numHeads,
    kvHeads: ck.config.numKvHeads,
    intermediate: ck.config.intermediateSize,
    vocab: ck.config.vocabSize,
    params: paramCount(ck.config),
    dtype,
    seed,
    files: [...ck.files.keys()],
  };
  if (a.flags.has('json')) io.out(JSON.stringify(summary));
  else
    io.out(
      `wrote a fresh ${summary.architecture} (${summary.layers} layers, hidden ${summary.hidden}, ` +
        `${summary.params.toLocaleString('en')} parameters, ${dtype}, seed ${seed}) to ${out}: ${summary.files.join(', ')}`,
    );
  return 0;
}

/** Decode steps per read-back of one prompt's ids (the host's per-token cost falls with K; see docs/benchmarks.md). */
const DEFAULT_STEPS_PER_READBACK = 8;

/** The flags `engine logits` and `engine generate` share: the checkpoint and where it runs. */
const LOAD_FLAGS: Flags = {
  model: { value: 'DIR', help: 'a Hugging Face checkpoint directory (config.json, *.safetensors)' },
  adapter: { value: 'DIR', help: 'a LoRA adapter directory to apply' },
  tokens: { value: '1,2,3', help: 'the prompt as comma-separated token ids', repeat: true },
  device: { value: 'gpu|cpu', help: 'WebGPU, or the CPU references', default: 'gpu' },
  weights: { value: 'f32|bf16|f16|q4', help: "the base weights' storage on the GPU", default: 'f32' },
};

const ENGINE_INIT: CommandSpec = {
  name: 'engine init',
  usage: '--out DIR [flags]',
  summary: 'Write a small random-initialised checkpoint in the Hugging Face layout (a plumbing check, not a model).',
  flags: {
    out: { value: 'DIR', help: 'where to write the checkpoint (required)' },
    arch: { value: 'llama|qwen2|qwen3', help: 'the architecture', default: 'llama' },
    layers: { value: 'N', help: 'transformer layers', default: 2 },
    hidden: { value: 'N', help: 'hidden size', default: 64 },
    heads: { value: 'N', help: 'attention heads (default: hidden / 16)' },
    'kv-heads': { value: 'N', help: 'key/value heads (default: heads / 2 when even, else heads)' },
    intermediate: { value: 'N', help: 'MLP width (default: 2 × hidden, rounded up to 8)' },
    dtype: { value: 'f32|bf16', help: 'the stored weights', default: 'f32' },
    std: { value: 'X', help: "the initial weights' standard deviation", default: 0.02 },
    seed: { value: 'S', help: 'the random initialisation', default: 0 },
    json: JSON_FLAG,
  },
  example: 'spade engine init --arch qwen2 --layers 2 --hidden 64 --out models/tiny',
};

const ENGINE_LOGITS: CommandSpec = {
  name: 'engine logits',
  usage: '--model DIR --tokens 1,2,3 [flags]',
  summary: "Our engine's logits for a prompt of token ids (the last position, or every one with --all).",
  flags: { ...LOAD_FLAGS, all: { help: 'every position, not only the last' }, json: JSON_FLAG },
  example: 'spade engine logits --model models/tiny --tokens 1,2,3 --device cpu --json',
};

const ENGINE_GENERATE: CommandSpec = {
  name: 'engine generate',
  usage: '--model DIR --tokens 1,2,3 [--tokens 4,5 ...] [flags]',
  summary:
    'Decode new token ids with our engine; --tokens given more than once decodes the prompts as one batch\n' +
    'of the scheduler (prompt i samples with seed + i).',
  flags: {
    ...LOAD_FLAGS,
    'max-new': { value: 'N', help: 'new tokens per prompt at most', default: 16 },
    temperature: { value: 'T', help: '0: greedy', default: 0 },
    'top-p': { value: 'P', help: 'nucleus sampling', default: 1 },
    'top-k': { value: 'K', help: '0: off', default: 0 },
    'min-p': { value: 'P', help: '0: off', default: 0 },
    seed: { value: 'S', help: 'the sampling seed', default: 0 },
    'max-batch': { value: 'N', help: "the scheduler's rows per step at most", default: 16 },
    'steps-per-readback': {
      value: 'K',
      help: 'decode steps recorded before one read-back of their ids',
      default: DEFAULT_STEPS_PER_READBACK,
    },
    kv: { value: 'f32|f16', help: 'the KV cache format (f16: half the memory)', default: 'f32' },
    json: JSON_FLAG,
  },
  example: 'spade engine generate --model models/tiny --tokens 1,2,3 --max-new 8 --device cpu',
};

const ENGINE: CommandGroup = {
  name: 'engine',
  summary: 'Our WebGPU engine (or its CPU references) on a checkpoint from the command line.',
  subcommands: [ENGINE_INIT, ENGINE_LOGITS, ENGINE_GENERATE],
};

export async function engine(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(ENGINE, argv, io);
  if (!picked) return 0;
  const a = parseCommand(picked.spec, picked.rest, io);
  if (!a) return 0;
  const sub = picked.spec.name.split(' ')[1];
  if (sub === 'init') return engineInit(a, io);
  const dir = flag(a, 'model');
  if (sub !== 'logits' && sub !== 'generate') throw new UsageError('engine needs "init", "logits" or "generate"');
  if (!dir) throw new UsageError(`engine ${sub} needs --model DIR (a Hugging Face checkpoint directory)`);
  const prompts = parseTokens(a);
  if (sub === 'logits' && prompts.length > 1) throw new UsageError('engine logits takes --tokens once');
  const ids = prompts[0]!;
  let weights: WeightFormat;
  try {
    weights = parseWeightFormat(flag(a, 'weights') ?? 'f32'); // f32: the reference
  } catch (err) {
    throw new UsageError(`--${(err as Error).message}`);
  }
  const kv = flag(a, 'kv') ?? 'f32';
  if (kv !== 'f32' && kv !== 'f16') throw new UsageError(`--kv must be f32 or f16; got "${kv}"`);
  if (sub !== 'generate' && a.flags.has('kv')) throw new UsageError('--kv applies to engine generate only');
  const kvFormat: KvFormat = kv;
  // the checkpoint's token ids only: no tokenizer is read
  const engine = await loadEngineFromDir(dir, flag(a, 'adapter'), flag(a, 'device') ?? 'gpu', {
    weights,
    kvFormat,
    tokenizer: false,
  });
  const model = (await engine.summary())!;
  const stored = { weights: model.weights, weightBytes: model.weightBytes };
  try {
    if (prompts.some((p) => p.some((i) => i >= model.vocab)))
      throw new UsageError(`token ids must be below the vocabulary size ${model.vocab}`);
    if (sub === 'logits') {
      const all = a.flags.has('all');
      const rows = (await engine.logits(ids, { all })).map((r) => Array.from(r));
      if (a.flags.has('json')) io.out(JSON.stringify({ ok: true, ...stored, logits: all ? rows : rows[0] }));
      else
        for (const [t, r] of rows.entries())
          io.out(
            `position ${all ? t : ids.length - 1}: ${r
              .slice(0, 8)
              .map((x) => x.toFixed(4))
              .join(' ')} …`,
          );
      return 0;
    }
    const perReadback = intFlag(a, 'steps-per-readback', DEFAULT_STEPS_PER_READBACK);
    if (perReadback < 1) throw new UsageError('--steps-per-readback must be a whole number ≥ 1');
    // one prompt with the f32 cache decodes with generate(), several (or --kv f16) as one scheduler batch
    const results = await engine.decode(prompts, {
      maxNew: intFlag(a, 'max-new', 16),
      temperature: Number(flag(a, 'temperature') ?? 0),
      topP: Number(flag(a, 'top-p') ?? 1),
      topK: intFlag(a, 'top-k', 0),
      minP: Number(flag(a, 'min-p') ?? 0),
      seed: intFlag(a, 'seed', 0), // prompt i samples with seed + i
      maxBatch: intFlag(a, 'max-batch', 16),
      stepsPerReadback: perReadback,
    });
    if (a.flags.has('json'))
      io.out(
        JSON.stringify(
          prompts.length === 1
            ? { ok: true, ...stored, kv: kvFormat, tokens: results[0] }
            : { ok: true, ...stored, kv: kvFormat, batch: results.map((tokens) => ({ tokens })) },
        ),
      );
    else for (const tokens of results) io.out(tokens.join(','));
    return 0;
  } finally {
    await engine.unload();
  }
}
