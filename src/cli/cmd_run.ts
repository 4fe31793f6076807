/**
 * `spade run` — headless self-play into a run directory.
 *
 *   spade run --backend openai --base-url http://127.0.0.1:8000/v1 --model M [--api-key K]
 *             --iterations N --out DIR [--resume] [--record FILE] [--corpus default|none|FILE]
 *             [--skills a,b,c] [--preset laptop|paper] [--config FILE.json] [--set key=value ...]
 *             [--memory env_memory.json] [--json]
 *             (--preset: a named set of values, docs/loop.md; --config/--set override any key after it)
 *   spade run --backend replay --replay FILE --iterations N --out DIR
 *   spade run export DIR --out FILE [--gzip]     (one run file for the app's review mode)
 *   spade run --backend local --model-dir DIR [--adapter DIR] [--device gpu|cpu] [--train] --iterations N --out DIR
 *             (--train: GRPO updates of a LoRA adapter after every cycle, saved under DIR/train/)
 *
 * Writes DIR/config.json, archive.jsonl, rollouts.jsonl, metrics.jsonl, memory.json (and state.json
 * for --resume). On stderr (cli/progress.ts): the context window and where it came from at the start,
 * each cycle's environments as they finish (the probe's and a training round's plays and steps too),
 * the calls clamped to the window at the end. Ctrl-C stops at the next step, says what the directory
 * kept and the command that resumes it, and exits 130; a run in which no model call succeeded exits 1.
 */
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { readUserFile } from '../platform/node/regular_file.ts';
import { dirname, join, resolve } from 'node:path';
import { concurrencySizes, DEFAULTS, parseConfig, type Config } from '../core/config.ts';
import { RunFileError, serializeError, StorageError, UsageError } from '../core/errors.ts';
import { findUrlWithCredentials } from '../core/llm/base_url.ts';
import {
  modelLimits,
  WrappedChatModel,
  type ChatMessage,
  type ChatModel,
  type ChatOptions,
  type ChatResult,
} from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import { RecordingChatModel, ReplayChatModel } from '../core/llm/replay.ts';
import { defaultSkills, SpadeLoop, type LoopEvent } from '../core/spade/loop.ts';
import { importMemory, type SpadeMemoryEntry } from '../core/spade/memory.ts';
import {
  checkRunFileSize,
  makeRunFile,
  MAX_RUN_FILE_BYTES,
  parseRunFileJson,
  RunFileScanner,
  runFileToGzip,
  runFileToJson,
} from '../core/spade/run_file.ts';
import type { MetricsRecord, RunSpec, RunState } from '../core/spade/run_store.ts';
import { loadCorpus } from '../platform/node/corpus.ts';
import { DirRunStore, readBounded, repairJsonlTail, type RunDirFile } from '../platform/node/run_dir.ts';
import { createNodeSandboxPool } from '../platform/node/sandbox_pool.ts';
import {
  flag,
  intFlag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandSpec,
  type Io,
} from './args.ts';
import { CONFIG_FLAGS, configLayers } from './cmd_config.ts';
import { MODEL_FLAGS, modelFromFlags } from './model_flags.ts';
import { startProgress, type Progress } from './progress.ts';

export const RUN: CommandSpec = {
  name: 'run',
  usage: '--backend openai|replay|local --out DIR [flags]',
  summary:
    'Headless self-play into a run directory (config.json, archive.jsonl, rollouts.jsonl, metrics.jsonl,\n' +
    'memory.json), with progress on stderr (docs/loop.md). With no GPU, point --backend openai at a hosted\n' +
    'API or at a CPU server (Ollama, llama.cpp); see README "Run self-play without a GPU".',
  flags: {
    out: { value: 'DIR', help: 'the run directory (required)' },
    iterations: { value: 'N', help: 'cycles to run', default: 1 },
    ...MODEL_FLAGS,
    ...CONFIG_FLAGS,
    skills: { value: 'a,b,c', help: 'the skills to design for (default: all of the setting)' },
    corpus: { value: 'default|none|FILE', help: 'text the designer draws themes from', default: 'default' },
    record: { value: 'FILE', help: 'write every model call to a transcript that --backend replay plays back' },
    memory: { value: 'FILE', help: "start from another run's memory.json" },
    resume: { help: 'continue the run in --out from its last finished cycle' },
    train: { help: 'local: GRPO updates of a LoRA adapter after every cycle (saved under DIR/train/)' },
    json: JSON_FLAG,
  },
  notes: [
    'Environment: OPENAI_API_KEY (the key when --api-key is not given).',
    '--backend local --model-dir with a fresh random model is a plumbing check: it writes no valid',
    'environments and takes minutes per cycle on a CPU; use a hosted API or a CPU server for a real run.',
  ],
  example: [
    'spade run --backend openai --base-url http://127.0.0.1:11434/v1 --model qwen2.5:1.5b --iterations 3 --out runs/a',
    'spade run --backend replay --replay runs/a.jsonl --out runs/b',
  ],
};

const RUN_EXPORT: CommandSpec = {
  name: 'run export',
  usage: 'DIR --out FILE [flags]',
  summary: 'One run file from a run directory: the app opens it to review the run.',
  positionals: true,
  flags: {
    out: { value: 'FILE', help: 'the run file to write (its folder is created)' },
    gzip: { help: 'gzip it (the app opens both)' },
    json: JSON_FLAG,
  },
  example: 'spade run export runs/a --out runs/a.spade-run.json',
};
import { attachTraining } from './run_training.ts';

/** The local engine's scheduler counters (loaded lazily: other backends never load the engine). */
async function localDecodeStats(model: ChatModel) {
  const { EngineChatModel } = await import('../engine/engine_api.ts');
  if (!(model instanceof EngineChatModel)) return undefined;
  const { maxBatch: _, ...stats } = await model.engine.decodeStats();
  return stats;
}

/**
 * A checkpoint whose tokenizer has under this many ids is a fresh random model (`spade engine init`
 * and the app's "tiny fresh model" write a byte-level tokenizer of 259 ids); every language model
 * worth running has tens of thousands.
 */
const FRESH_VOCAB_BELOW = 1000;

/** The warning a fresh random model gets at once: what it is, what it costs, what to use instead. */
async function freshModelWarning(model: ChatModel, dir: string): Promise<string | null> {
  if (model.backend !== 'local') return null;
  const { EngineChatModel } = await import('../engine/engine_api.ts');
  if (!(model instanceof EngineChatModel)) return null;
  const s = await model.engine.summary();
  if (!s || s.vocab >= FRESH_VOCAB_BELOW) return null;
  return [
    `warning: ${dir} is a fresh random model (${s.vocab} token ids, random weights). It writes no valid`,
    '  environments, so its cycles end with "no training signal", and on a CPU each cycle takes minutes.',
    '  It checks the plumbing, not SPADE. For a real run without a GPU use --backend openai with a hosted',
    '  API (--base-url https://.../v1 --model M, the key in OPENAI_API_KEY) or a CPU server (ollama pull',
    '  qwen2.5:1.5b, then --base-url http://127.0.0.1:11434/v1 --model qwen2.5:1.5b); README: "Run',
    '  self-play without a GPU".',
  ].join('\n');
}

/** The run's config: defaults < --preset (or the --link's) < --link < --config, --set, --seed. */
async function configFromFlags(a: Args): Promise<Config> {
  return (await configLayers(a)).config;
}

/**
 * The loop's progress on stderr: per cycle, a counter of its environments (cli/progress.ts: a bar
 * on a terminal, else a line as each environment finishes) noting what the loop is doing; a line for
 * each failed task; the cycle's figures as it ends.
 */
function loopProgress(io: Io, iterations: number, perCycle: number) {
  let counter: Progress | null = null;
  const plays = new Map<number, number>();
  const note = (text: string) => counter?.note(text);
  return {
    onEvent(e: LoopEvent) {
      switch (e.type) {
        case 'cycle_start':
          counter?.interrupt();
          plays.clear();
          counter = startProgress(io, {
            label: `cycle ${e.cycle + 1}/${iterations}`,
            unit: 'environments',
            total: perCycle,
          });
          note(`designing for ${e.skills.join(', ')}`);
          return;
        case 'designer_output':
          return note(`environment ${e.index + 1}: designed (attempt ${e.attempt + 1}), checking`);
        case 'checks':
          return note(
            `environment ${e.index + 1}: checks ${e.ok ? 'pass' : `fail (${e.failures.length})`} on attempt ${e.attempt + 1}`,
          );
        case 'hint':
          return note(`environment ${e.index + 1}: hint written, playing`);
        case 'rollout_end': {
          const n = (plays.get(e.index) ?? 0) + 1;
          plays.set(e.index, n);
          return note(
            `environment ${e.index + 1}: ${n} plays done, the last ${e.hinted ? 'with' : 'without'} hint → ${e.return}`,
          );
        }
        case 'task_error':
          return counter?.say(
            `cycle ${e.cycle + 1}, environment ${e.index + 1} failed (${e.phase}): ${e.message.slice(0, 160)}`,
          );
        case 'env_scored': {
          const r = e.record;
          const what = r.stats
            ? `regret ${r.stats.regret.toFixed(2)}`
            : r.error
              ? `failed (${r.error.phase})`
              : 'invalid';
          return counter?.tick(1, `environment ${e.index + 1}: ${what}`);
        }
        case 'cycle_end':
          counter?.finish(
            `validity ${(e.metrics.validityRate * 100).toFixed(0)}%, mean regret ${e.metrics.meanRegret?.toFixed(2) ?? '–'}`,
          );
          counter = null;
          return;
        case 'error':
          return counter ? counter.say(`error: ${e.message}`) : io.err(`error: ${e.message}`);
        default:
          return;
      }
    },
    interrupt() {
      counter?.interrupt();
      counter = null;
    },
  };
}

/** The window the run budgets every call in, and where it came from, in one line (said at the start). */
export function windowLine(model: ChatModel): string {
  const n = model.capabilities.contextWindow.toLocaleString('en');
  if (model instanceof OpenAIChatModel) {
    const served = model.servedWindow?.toLocaleString('en');
    if (model.windowSource === 'server')
      return `context window: ${n} tokens, as the server reports it (GET /v1/models)`;
    if (model.windowSource === 'setting')
      return `context window: ${n} tokens, from --context-window (the server reports ${served ?? 'none'})`;
    return (
      `context window: ${n} tokens, the fallback: the server reports none (llama.cpp and Ollama do not) and no ` +
      '--context-window was given. Pass the window the model was started with (llama-server -c, ' +
      "OLLAMA_CONTEXT_LENGTH): with less, prompts are shrunk and replies clamped to fit (counted in metrics.jsonl's budget)"
    );
  }
  if (model instanceof ReplayChatModel)
    return `context window: ${n} tokens, ${model.header.contextWindow ? 'as recorded' : "the replay's default (the recording names none)"}`;
  return `context window: ${n} tokens, the checkpoint's`;
}

/** The context budget of the cycles run, in one line (said at the end): calls clamped, prompts shrunk, calls skipped. */
function budgetLine(metrics: MetricsRecord[], window: number): string | null {
  const b = metrics.map((m) => m.budget).filter((x) => x !== undefined);
  if (!b.length) return null;
  const sum = (k: keyof (typeof b)[number]) => b.reduce((a, x) => a + (x[k] ?? 0), 0);
  return (
    `context: ${sum('clamped')} of ${sum('calls')} designer, repair, validator and hint calls had max_tokens clamped to fit the ` +
    `${window.toLocaleString('en')}-token window, ${sum('shrunk')} prompts shrunk, ${sum('skipped')} calls not sent; ` +
    `${sum('agentTurnsDropped')} agent turns dropped, ${sum('contextFullPlays')} plays ended with the window full`
  );
}

/** A ChatModel that counts the calls that answered and the calls that failed (a run with no answer fails). */
class CallCounter extends WrappedChatModel {
  ok = 0;
  failed = 0;
  lastError: unknown = null;
  override async chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult> {
    try {
      const r = await this.inner.chat(messages, options);
      this.ok++;
      return r;
    } catch (err) {
      if ((err as Error)?.name !== 'AbortError') {
        this.failed++;
        this.lastError = err;
      }
      throw err;
    }
  }
}

/** A word as a POSIX shell reads it back unchanged. */
function shellWord(w: string): string {
  return /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/** The command that resumes this run: the same arguments, --resume added, the API key left out. */
function resumeCommand(argv: string[]): string {
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--api-key') i++;
    else if (argv[i]!.startsWith('--api-key=')) continue;
    else words.push(argv[i]!);
  }
  if (!words.includes('--resume')) words.push('--resume');
  return ['spade run', ...words.map(shellWord)].join(' ');
}

/** What a stopped run kept, and the command that continues it (Ctrl-C). */
async function keptLines(store: DirRunStore, out: string, argv: string[], iterations: number): Promise<string[]> {
  const state = await store.readState();
  const cycles = state?.cycle ?? 0;
  const pending = state?.pending.length ?? 0;
  const kept =
    cycles === 0
      ? 'no finished cycle'
      : cycles === 1
        ? 'cycle 1 (finished and written)'
        : `cycles 1–${cycles} (finished and written)`;
  const lines = [
    `stopped ${cycles < iterations ? `during cycle ${cycles + 1} of ${iterations}` : `after cycle ${cycles}`}: ${out} keeps ${kept}` +
      (pending
        ? `, and ${pending} finished environment${pending === 1 ? '' : 's'} of cycle ${cycles + 1} (state.json)`
        : ''),
  ];
  const trainState = join(out, 'train', 'state.json');
  if (!existsSync(trainState) && existsSync(join(out, 'train')))
    lines.push(`  the adapter in ${join(out, 'train')} has no update yet`);
  else if (existsSync(trainState)) {
    const t = JSON.parse(await readFile(trainState, 'utf8')) as { updates: number; trainedThrough: number };
    lines.push(
      t.trainedThrough < 0
        ? `  the adapter in ${join(out, 'train')} has no update yet`
        : `  the adapter in ${join(out, 'train')} is trained through cycle ${t.trainedThrough + 1} (${t.updates} updates)`,
    );
  }
  lines.push(`  resume with: ${resumeCommand(argv)}`);
  return lines;
}

/**
 * The most `run export` reads of each file of a run directory, checked before reading. The run
 * file holds at most MAX_RUN_FILE_BYTES; archive and rollouts may be larger on disk, since the
 * training token ids they carry are left out of it.
 */
export const EXPORT_READ_LIMITS: Record<RunDirFile | 'memory.json', number> = {
  'config.json': 2 ** 20,
  'state.json': MAX_RUN_FILE_BYTES,
  'memory.json': MAX_RUN_FILE_BYTES,
  'metrics.jsonl': MAX_RUN_FILE_BYTES,
  'archive.jsonl': 4 * MAX_RUN_FILE_BYTES,
  'rollouts.jsonl': 4 * MAX_RUN_FILE_BYTES,
};

/**
 * `spade run export DIR --out FILE [--gzip] [--json]`: the run directory as one run file (the
 * format the app opens; core/spade/run_file.ts). Every file is read within EXPORT_READ_LIMITS, and
 * the result is validated (with the app's limits) before it is written, so the app never gets a
 * file from the CLI that it would refuse. FILE's folder is created when missing.
 */
async function exportRun(argv: string[], io: Io): Promise<number> {
  const a = parseCommand(RUN_EXPORT, argv, io);
  if (!a) return 0;
  const dir = a.positional[0];
  const out = flag(a, 'out');
  if (!dir || a.positional.length > 1)
    throw new UsageError('run export takes one run directory: spade run export DIR --out FILE');
  if (!out) throw new UsageError('run export needs --out FILE');
  const store = new DirRunStore(dir, { onWarning: (m) => io.err(`warning: ${m}`), maxBytes: EXPORT_READ_LIMITS });
  const spec = await store.readSpec();
  if (!spec) throw new UsageError(`${dir} holds no run (no config.json)`);
  const memoryPath = join(dir, 'memory.json');
  const memoryText = await readBounded(memoryPath, EXPORT_READ_LIMITS['memory.json']);
  let memory: SpadeMemoryEntry[] | null = null;
  if (memoryText !== null) {
    // the same structural limits as a run file (nesting, list length, value count) before parsing
    try {
      new RunFileScanner().push(new TextEncoder().encode(memoryText));
    } catch (err) {
      const e = err as RunFileError;
      throw new RunFileError(`${memoryPath}: ${e.message}`, { ...e.data, file: memoryPath });
    }
    try {
      memory = JSON.parse(memoryText) as SpadeMemoryEntry[];
    } catch (err) {
      throw new StorageError(`${memoryPath} is not valid JSON (${(err as Error).message.slice(0, 120)})`, {
        path: memoryPath,
      });
    }
  }
  const made = makeRunFile({
    spec,
    archive: await store.readArchive(),
    rollouts: await store.readRollouts(),
    metrics: await store.readMetrics(),
    memory,
    state: await store.readState(),
  });
  let text: string;
  try {
    text = runFileToJson(made);
  } catch (err) {
    // past V8's longest string: far over the run file cap
    if (err instanceof RangeError) throw tooBigForRunFile(dir);
    throw err;
  }
  const file = parseRunFileJson(text);
  const bytes = a.flags.has('gzip') ? runFileToGzip(file) : new TextEncoder().encode(runFileToJson(file));
  checkRunFileSize(bytes.length, `The run file for ${dir}`);
  await mkdir(dirname(resolve(out)), { recursive: true });
  await writeFile(out, bytes);
  const summary = {
    ok: true,
    out,
    bytes: bytes.length,
    cycles: file.metrics.length,
    environments: file.archive.length,
  };
  if (a.flags.has('json')) io.out(JSON.stringify(summary));
  else io.out(`wrote ${out}: ${summary.cycles} cycles, ${summary.environments} environments, ${summary.bytes} bytes`);
  return 0;
}

function tooBigForRunFile(dir: string): RunFileError {
  return new RunFileError(
    `The run in ${dir} is far larger than a run file may be (${MAX_RUN_FILE_BYTES / 2 ** 20} MiB); export a run of fewer cycles.`,
    { limit: MAX_RUN_FILE_BYTES },
  );
}

/** The run a transcript's header describes, when it is a valid spec (a transcript may predate the field). */
function recordedRun(run: { spec: unknown; cycles: number } | undefined): { spec: RunSpec; cycles: number } | null {
  if (!run || !Number.isInteger(run.cycles) || run.cycles < 1) return null;
  const spec = run.spec as Partial<RunSpec> | null;
  if (!spec || typeof spec !== 'object' || !Array.isArray(spec.skills) || typeof spec.corpus !== 'string') return null;
  try {
    return { spec: { ...(spec as RunSpec), config: parseConfig(spec.config) }, cycles: run.cycles };
  } catch {
    return null;
  }
}

/**
 * The run's spec and how many cycles to run: the run directory's own (--resume; its cycles unless
 * --iterations says otherwise), a replay's recording (its settings and cycles), or the flags'. A
 * spec holding a URL with credentials is refused: nothing written to the run may carry them.
 */
function specOf(
  a: Args,
  io: Io,
  o: {
    existing: RunSpec | null;
    recorded: ReturnType<typeof recordedRun>;
    config: Config;
    model: ChatModel;
    iterations: number;
  },
): { spec: RunSpec; iterations: number } {
  const { existing, recorded, config, model } = o;
  let { iterations } = o;
  let spec: RunSpec;
  if (existing) {
    spec = existing;
    if (!a.flags.has('iterations') && existing.iterations) iterations = existing.iterations;
  } else if (recorded) {
    // a replay reproduces the recorded run: its settings, skills, corpus and cycles
    if (!a.flags.has('iterations')) iterations = recorded.cycles;
    spec = { ...recorded.spec, createdAt: new Date().toISOString(), iterations };
    io.err(
      `settings taken from the recording (seed ${spec.config.seed}, ${recorded.cycles} cycle${recorded.cycles === 1 ? '' : 's'}); --set, --config and --skills are ignored for a replay`,
    );
  } else {
    const skills =
      flag(a, 'skills')
        ?.split(',')
        .map((s) => s.trim())
        .filter(Boolean) ?? [];
    const valid = defaultSkills(config.setting);
    for (const s of skills)
      if (!valid.includes(s))
        throw new UsageError(`unknown ${config.setting} skill "${s}"; choose from ${valid.join(', ')}`);
    spec = {
      config,
      skills,
      models: { designer: model.model, hint: model.model, agent: model.model },
      corpus: flag(a, 'corpus')!,
      createdAt: new Date().toISOString(),
      iterations,
    };
  }
  // nothing written to the run may carry a URL's credentials (a recording's settings, a model name)
  const leaked = findUrlWithCredentials(JSON.stringify(spec));
  if (leaked)
    throw new UsageError(
      `the run's settings${recorded ? ' (taken from the recording)' : ''} hold a URL with a user name or password (${leaked}); ` +
        'they are not written to a run directory: remove them from the recording or the model name',
    );
  return { spec, iterations };
}

/**
 * The model the loop calls: `model`, or with --record one that appends each call to the transcript
 * (started afresh, or on --resume repaired and appended to).
 */
async function recordingOf(a: Args, io: Io, model: ChatModel, spec: RunSpec, iterations: number): Promise<ChatModel> {
  const recordFile = flag(a, 'record');
  if (!recordFile) return model;
  // its folder may not exist yet (`--out runs/a --record runs/a.jsonl` on a fresh checkout)
  await mkdir(dirname(resolve(recordFile)), { recursive: true });
  if (!existsSync(recordFile) || !a.flags.has('resume')) writeFileSync(recordFile, '');
  else {
    // a transcript cut mid-line by a crash is repaired before anything is appended to it
    const w = await repairJsonlTail(recordFile);
    if (w) io.err(`warning: ${w}`);
  }
  return new RecordingChatModel(model, (line) => appendFileSync(recordFile, `${line}\n`), {
    spec,
    cycles: iterations,
  });
}

/** The memory a run starts with: --memory's file (an exported memory), else none. */
async function initialMemoryOf(a: Args, spec: RunSpec) {
  const memoryFile = flag(a, 'memory');
  if (!memoryFile) return undefined;
  try {
    return importMemory(JSON.parse(await readUserFile(memoryFile, '--memory')), spec.config.memoryCapacity);
  } catch (err) {
    throw new UsageError(`--memory ${memoryFile}: ${(err as Error).message}`);
  }
}

/**
 * A finished run's report: the context budget's line, the engine's batching, a warning when no model
 * call succeeded, and the summary (JSON or a line). Exit code 1 when no call succeeded.
 */
async function finishRun(
  io: Io,
  json: boolean,
  r: { store: DirRunStore; out: string; model: ChatModel; calls: CallCounter; state: RunState },
): Promise<number> {
  const { store, out, model, calls, state } = r;
  const metrics = await store.readMetrics();
  const budget = budgetLine(metrics, model.capabilities.contextWindow);
  if (budget) io.err(budget);
  const summary = {
    ok: calls.ok > 0 || calls.failed === 0,
    out,
    cycles: state.cycle,
    environments: (await store.readArchive()).length,
    memory: state.memory.records.length,
    lastMetrics: metrics[metrics.length - 1] ?? null,
    stopped: false,
    calls: { ok: calls.ok, failed: calls.failed },
    // the local engine's batching: steps, rows per step, prompt tokens prefilled vs reused from cached k/v
    ...(model.backend === 'local' ? { decode: await localDecodeStats(model) } : {}),
  };
  if (summary.decode) {
    const d = summary.decode;
    io.err(
      `engine: ${d.steps} decode steps, ${(d.rows / Math.max(1, d.steps)).toFixed(1)} rows per step (at most ${d.maxRows}); ` +
        `prompt tokens prefilled ${d.prefillTokens}, reused from cached k/v ${d.prefixReusedTokens}`,
    );
  }
  if (!summary.ok) {
    const last = serializeError(calls.lastError);
    io.err(
      `spade run: no model call succeeded (${calls.failed} failed; the last: ${last.name}: ${last.message.slice(0, 300)}). ` +
        'Check the server, the model name and the key with spade chat first.',
    );
  }
  if (json) io.out(JSON.stringify(summary));
  else io.out(`done: ${summary.cycles} cycles, ${summary.environments} environments → ${join(out, 'archive.jsonl')}`);
  return summary.ok ? 0 : 1;
}

/** Ctrl-C's exit code (128 + SIGINT), as shells report a process stopped by it. */
export const EXIT_INTERRUPTED = 130;

export async function run(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand({ name: 'run', summary: RUN.summary, bare: RUN, subcommands: [RUN_EXPORT] }, argv, io);
  if (!picked) return 0;
  if (picked.spec === RUN_EXPORT) return exportRun(picked.rest, io);
  const a = parseCommand(RUN, argv, io);
  if (!a) return 0;
  const out = flag(a, 'out');
  if (!out) throw new UsageError('run needs --out DIR');
  const asked = intFlag(a, 'iterations');
  if (asked < 1) throw new UsageError('--iterations must be at least 1');
  const store = new DirRunStore(out, { onWarning: (m) => io.err(`warning: ${m}`) });
  const existing = await store.readSpec();
  if (existing && !a.flags.has('resume'))
    throw new UsageError(`${out} already holds a run; pass --resume to continue it, or choose another --out`);
  if (!existing && a.flags.has('resume')) throw new UsageError(`${out} holds no run to resume`);

  const config = existing ? existing.config : await configFromFlags(a);
  if (flag(a, 'backend') === 'local')
    io.err(`loading the checkpoint in ${flag(a, 'model-dir') ?? '?'} (${flag(a, 'device')})…`);
  const model = await modelFromFlags(a, modelLimits(config), config.thinking ?? DEFAULTS.thinking, (l) => io.err(l));
  const fresh = await freshModelWarning(model, flag(a, 'model-dir') ?? '');
  if (fresh) io.err(fresh);
  const recorded = model instanceof ReplayChatModel ? recordedRun(model.header.run) : null;
  const { spec, iterations } = specOf(a, io, { existing, recorded, config, model, iterations: asked });
  io.err(windowLine(model));
  const corpus = await loadCorpus(spec.corpus);
  const used = await recordingOf(a, io, model, spec, iterations);
  const calls = new CallCounter(used);
  const initialMemory = await initialMemoryOf(a, spec);
  const cfg = { ...DEFAULTS, ...spec.config };
  // the sandbox pool and the engine's batch follow the run's budget of chats in flight
  const sizes = concurrencySizes(cfg.concurrency);
  await model.setDecodeBatch?.(sizes.decodeBatch); // a capability the model declares (the local engine's)
  const pool = createNodeSandboxPool({ size: sizes.cliSandboxWorkers });
  const ac = new AbortController();
  const bar = loopProgress(io, iterations, spec.config.skillsPerCycle * (spec.config.envsPerSkill ?? 1));
  let training: Awaited<ReturnType<typeof attachTraining>> | null = null;
  // Ctrl-C: stop at the next step and say what was kept; a second Ctrl-C quits at once
  const onSig = () => {
    if (ac.signal.aborted) process.exit(EXIT_INTERRUPTED);
    bar.interrupt();
    training?.interrupt();
    io.err('stopping: the environments in flight are left for --resume (Ctrl-C again to quit at once)…');
    ac.abort();
  };
  process.on('SIGINT', onSig);
  const json = a.flags.has('json');
  try {
    let state: RunState;
    try {
      training = a.flags.has('train')
        ? await attachTraining({ model, cfg, out, runner: pool, io, signal: ac.signal })
        : null;
      if (training) {
        const done = (await store.readState())?.cycle ?? 0;
        const [archive, rollouts] = [await store.readArchive(), await store.readRollouts()];
        await training.catchUp(done, async (c) => ({
          archive: archive.filter((r) => r.cycle === c),
          rollouts: rollouts.filter((r) => r.cycle === c),
        }));
        await training.probeAtStart();
      }
      const loop = new SpadeLoop({
        spec,
        models: { designer: calls, hint: calls, agent: calls },
        runner: pool,
        corpus,
        store,
        signal: ac.signal,
        onEvent: (e) => bar.onEvent(e),
        initialMemory,
        ...(training ? { afterCycle: (c) => training!.afterCycle(c) } : {}),
      });
      state = await loop.run(iterations);
    } catch (err) {
      // stopped by Ctrl-C mid-probe or mid-round: an AbortError, which is no failure of the run
      if (!ac.signal.aborted) throw err;
    }
    if (ac.signal.aborted) {
      for (const l of await keptLines(store, out, argv, iterations)) io.err(l);
      if (json)
        io.out(JSON.stringify({ ok: false, out, stopped: true, cycles: (await store.readState())?.cycle ?? 0 }));
      return EXIT_INTERRUPTED;
    }
    return await finishRun(io, json, { store, out, model, calls, state: state! });
  } finally {
    process.off('SIGINT', onSig);
    await pool.terminate();
  }
}
