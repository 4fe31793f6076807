// The run's one concurrency budget: the loop never has more model chats in flight than
// `concurrency` (task-level and play-level chats draw on the same slots), a budget of 1 finishes
// without deadlock, the limiter never lets a late caller past its max, and the sizes that follow
// the knob (the engine's decode batch, the CLI and browser sandbox pools) follow it. An
// OpenAI-compatible server is under the same budget, in the app (the Models panel's client) as in
// `spade run`: it sees up to `concurrency` requests in flight and never more (no cap of the client's
// own below it: the old default of 4 kept a budget of 6 at 4).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { CONCURRENCY_SIZES, concurrencySizes, DEFAULTS, type Config } from '../../src/core/config.ts';
import { Limiter } from '../../src/core/limiter.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { chunkText } from '../../src/core/spade/corpus.ts';
import { SpadeLoop } from '../../src/core/spade/loop.ts';
import { StoreRunStore } from '../../src/core/spade/run_store.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { ModelsState } from '../../src/state/models.svelte.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

/** One model for every role that counts its chats in flight; each chat takes a few ms of wall time. */
class CountingChatModel implements ChatModel {
  readonly backend = 'test';
  readonly model = 'counting-double';
  readonly capabilities;
  inFlight = 0;
  peak = 0;
  calls = 0;
  private readonly inner = scriptedTrio();
  constructor() {
    this.capabilities = this.inner.capabilities;
  }
  async chat(messages: ChatMessage[], options?: ChatOptions): Promise<ChatResult> {
    this.calls++;
    this.inFlight++;
    this.peak = Math.max(this.peak, this.inFlight);
    try {
      await new Promise((r) => setTimeout(r, 2));
      return await this.inner.chat(messages, options);
    } finally {
      this.inFlight--;
    }
  }
}

const corpus = chunkText(
  'Binary search halves an interval.\n\nEach probe tells which half holds the target.',
  'doc',
  50,
);

/** One cycle of four tasks (two skills, two designs each), six plays per task. */
async function runCycle(concurrency: number) {
  const model = new CountingChatModel();
  const config: Config = {
    ...DEFAULTS,
    seed: 5,
    concurrency,
    skillsPerCycle: 2,
    envsPerSkill: 2,
    playsPerEnv: 3,
    maxTurns: 6,
    repairTurns: 0,
  };
  const store = new StoreRunStore(new MemoryStore(), `budget-${concurrency}`);
  await new SpadeLoop({
    spec: {
      config,
      skills: ['mathematical', 'logical_deduction'],
      models: { designer: 'double', hint: 'double', agent: 'double' },
      corpus: 'test',
      createdAt: '2026-12-01T00:00:00Z',
    },
    models: { designer: model, hint: model, agent: model },
    runner: inProcessRunner(),
    corpus,
    store,
  }).run(1);
  return { model, archive: await store.readArchive(), rollouts: await store.readRollouts() };
}

describe('the concurrency budget', () => {
  it('keeps model chats in flight within `concurrency`, designer, hint and agent chats together', async () => {
    const { model, archive, rollouts } = await runCycle(2);
    expect(archive.filter((a) => a.valid)).toHaveLength(4);
    expect(rollouts).toHaveLength(4 * 6); // every task ran its hinted and unhinted plays
    expect(model.peak).toBe(2); // the budget is used, and never exceeded
  });

  it('reaches but never passes a larger budget', async () => {
    const { model } = await runCycle(5);
    expect(model.peak).toBe(5);
  });

  it('finishes a cycle with a budget of 1: one chat at a time, no deadlock', async () => {
    const { model, archive, rollouts } = await runCycle(1);
    expect(archive.filter((a) => a.valid)).toHaveLength(4);
    expect(rollouts).toHaveLength(4 * 6);
    expect(model.peak).toBe(1);
    expect(model.calls).toBeGreaterThan(4 * 6);
  }, 20_000);

  it('the limiter hands a freed slot to the waiter, so a caller that comes in between waits', async () => {
    const limiter = new Limiter(1);
    let inFlight = 0;
    let peak = 0;
    const job = async () => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 1));
      inFlight--;
    };
    let release!: () => void;
    const first = limiter.run(() => new Promise<void>((r) => (release = r)));
    const waiting = limiter.run(job);
    let late: Promise<void> | undefined;
    release(); // the first run's slot frees in the next microtask; the late caller comes right after
    queueMicrotask(() => (late = limiter.run(job)));
    await Promise.all([first, waiting]);
    await late;
    expect(peak).toBe(1);
  });

  it('refuses a budget that is not a whole number ≥ 1 (it would never run anything)', () => {
    expect(() => new Limiter(0)).toThrow(/concurrency/);
    expect(() => new Limiter(Number.NaN)).toThrow(RangeError);
  });
});

describe('sizes that follow the budget', () => {
  it('the decode batch, the CLI pool and the browser pool follow `concurrency` within their bounds', () => {
    expect(concurrencySizes(1)).toEqual({ decodeBatch: 1, cliSandboxWorkers: 1, browserSandboxWorkers: 2 });
    expect(concurrencySizes(3)).toEqual({ decodeBatch: 3, cliSandboxWorkers: 3, browserSandboxWorkers: 3 });
    expect(concurrencySizes(DEFAULTS.concurrency)).toEqual({
      decodeBatch: 8,
      cliSandboxWorkers: 4,
      browserSandboxWorkers: 4,
    });
    expect(concurrencySizes(64).decodeBatch).toBe(64);
    // a run saved before the knob existed reads its default
    expect(concurrencySizes(undefined as unknown as number)).toEqual(concurrencySizes(DEFAULTS.concurrency));
    for (const [name, d] of Object.entries(CONCURRENCY_SIZES)) {
      expect(d.why.length, name).toBeGreaterThan(40);
      expect(d.min).toBeLessThanOrEqual(d.max);
    }
  });

  it("the engine's scheduler admits at most the batch it is given, also when set after it is made", async () => {
    const ck = tinyCheckpointFiles('llama', 'f32', 0, { tokenizer: false });
    const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const model = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
    const decode = async (s: DecodeScheduler<CpuTensor>) => {
      // one-token prompts: every admitted request adds one row per step
      await Promise.all([1, 2, 3, 4, 5].map((t) => s.generate([t], { maxNew: 3, temperature: 0 })));
      return s.stats().maxRows;
    };
    expect(await decode(new DecodeScheduler(model, { maxBatch: concurrencySizes(2).decodeBatch }))).toBe(2);
    const later = new DecodeScheduler(model);
    later.maxBatch = concurrencySizes(3).decodeBatch;
    expect(await decode(later)).toBe(3);
    expect(() => (later.maxBatch = 0)).toThrow(RangeError);
  });
});

describe("an OpenAI-compatible server under the run's budget", () => {
  const BUDGET = 6;
  let server: FakeServer;
  /** Requests the server is answering now, and the most at once. */
  const seen = { inFlight: 0, peak: 0 };
  /**
   * Held until BUDGET requests are in flight together (then every one goes on, and nothing is held
   * again), so the peak shows whether the budget can be reached; a client that stays below it is
   * let go after a while and fails the peak assertion instead of hanging. That while is not a speed
   * target: the budget is reached ~0.35 s after the run starts on an idle 2-core machine (~0.9 s with
   * two CPU-bound processes beside it), and 10 s is over 20x that.
   */
  let open: (() => void) | null = null;
  let gate: Promise<void> = Promise.resolve();
  const arm = () => {
    seen.inFlight = 0;
    seen.peak = 0;
    gate = new Promise<void>((r) => {
      open = r;
      setTimeout(r, 10_000);
    });
  };
  beforeAll(async () => {
    // the server answers like the test doubles: designer, hint writer or agent by the system prompt
    const trio = scriptedTrio();
    server = await startFakeOpenAI({
      reply: async (body) => {
        seen.inFlight++;
        seen.peak = Math.max(seen.peak, seen.inFlight);
        if (seen.inFlight >= BUDGET) open?.();
        try {
          await gate;
          return (await trio.chat(body.messages as ChatMessage[])).text;
        } finally {
          seen.inFlight--;
        }
      },
    });
  });
  afterAll(() => server.close());

  /** A cycle of eight tasks: more designs than the budget, so it is the budget that holds them back. */
  const small = { skillsPerCycle: 4, envsPerSkill: 2, playsPerEnv: 1, maxTurns: 2, repairTurns: 0 };

  it("the app: the Models panel's client sees up to `concurrency` requests in flight, never more", async () => {
    arm();
    const models = new ModelsState(new MemoryStore());
    models.roles = { designer: 'openai', hint: 'openai', agent: 'openai' };
    models.openai = { baseURL: server.url, model: 'tiny', apiKey: '', contextWindow: null };
    const config: Config = { ...DEFAULTS, seed: 3, concurrency: BUDGET, ...small };
    const store = new StoreRunStore(new MemoryStore(), 'openai-budget');
    await new SpadeLoop({
      spec: {
        config,
        skills: ['mathematical', 'logical_deduction', 'spatial', 'pattern_recognition'],
        models: { designer: 'openai', hint: 'openai', agent: 'openai' },
        corpus: 'test',
        createdAt: '2026-12-01T00:00:00Z',
      },
      models: models.modelsForRun(),
      runner: inProcessRunner(),
      corpus,
      store,
    }).run(1);
    expect((await store.readArchive()).filter((a) => a.valid).length).toBeGreaterThan(0); // it ran over the wire
    expect(seen.peak).toBe(BUDGET);
  });

  it('spade run: the same budget, set with --set concurrency=N', async () => {
    arm();
    const out = await mkdtemp(join(tmpdir(), 'spade-budget-'));
    const sets = Object.entries({ ...small, concurrency: BUDGET }).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
    const err: string[] = [];
    const code = await main(
      ['run', '--backend', 'openai', '--base-url', server.url, '--model', 'tiny', '--out', join(out, 'r')].concat(
        ['--iterations', '1', '--corpus', 'none', '--json'],
        sets,
      ),
      { out: () => {}, err: (l) => err.push(l) },
    );
    expect(code, err.join('\n')).toBe(0);
    expect(seen.peak).toBe(BUDGET);
  }, 60_000);
});
