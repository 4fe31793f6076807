// `spade run --train`'s run-directory store (cli/run_training.ts) on the CPU engine, fed cycles
// that carry a training signal (a fresh random model's own runs give none): updates.jsonl gets each
// optimiser step once — across two cycles trained in one process and across a resume — and a
// resume reloads the optimiser, so its step count goes on from the saved one instead of restarting.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attachTraining } from '../../src/cli/run_training.ts';
import { DEFAULTS, type Config } from '../../src/core/config.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from '../../src/core/spade/run_store.ts';
import { EngineChatModel, engineCapabilities } from '../../src/engine/engine_api.ts';
import { decodeTrainerState } from '../../src/engine/train/train.ts';
import { nodeEngine } from '../../src/platform/node/engine.ts';
import { inProcessRunner } from '../helpers/in_process_runner.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

const cfg: Config = {
  ...DEFAULTS,
  seed: 3,
  maxTurns: 1,
  trainSteps: 'minibatches',
  trainEpochs: 1,
  minibatchTokens: 1, // one sample per optimiser step
  designerLag: 0,
  envReuse: 1,
  probeEvery: 0,
};

/**
 * Cycle c's records with a training signal: two unhinted plays of one environment that scored 1
 * and 0 (ids tagged 100 + c), and two designs of one skill with different win rates.
 */
function cycle(c: number): {
  cycle: number;
  archive: ArchiveRecord[];
  rollouts: RolloutRecord[];
  metrics: MetricsRecord;
} {
  const rollouts = [1, 0].map(
    (r, play) =>
      ({
        cycle: c,
        index: 0,
        skill: 's',
        envId: 'e',
        play,
        seed: play,
        hinted: false,
        return: r,
        end: 'terminated',
        turns: [],
        tokens: 1,
        trace: { ids: [100 + c, play, 9, 10], spans: [[2, 4]], logprobs: [-1, -2] },
      }) as unknown as RolloutRecord,
  );
  const design = (index: number, noHint: number[]) =>
    ({
      cycle: c,
      index,
      skill: 's',
      valid: true,
      firstAttemptValid: true,
      code: 'class E {}',
      envId: `e-${index}`,
      attempts: [{ tokens: { prompt: [200 + c, index], completion: [7, 8], logprobs: [-1, -1] } }],
      stats: { noHint, withHint: [1, 1], winRate: noHint.filter((x) => x > 0).length / noHint.length, timedOut: false },
    }) as unknown as ArchiveRecord;
  return {
    cycle: c,
    archive: [design(0, [1, 0]), design(1, [0, 0])],
    rollouts,
    metrics: {} as MetricsRecord,
  };
}

/** The CPU engine on the tiny checkpoint, as the `local` chat model `spade run --train` samples from. */
async function localModel(): Promise<EngineChatModel> {
  const engine = await nodeEngine('cpu');
  const s = await engine.load({ kind: 'memory', files: tinyCheckpointFiles('qwen2', 'f32', 3).files });
  return new EngineChatModel(engine, 'tiny', engineCapabilities(s));
}

const updateLines = async (out: string) =>
  (await readFile(join(out, 'train', 'updates.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { cycle: number; update: number });

const optimiserSteps = async (out: string) =>
  decodeTrainerState(await readFile(join(out, 'train', 'optimizer.safetensors'))).step;

describe("spade run --train's train/ files", () => {
  it('writes each optimiser step once, and a resume continues the optimiser’s step count', async () => {
    const out = await mkdtemp(join(tmpdir(), 'spade-train-files-'));
    const runner = inProcessRunner();
    const io = { out: () => undefined, err: () => undefined };

    const first = await attachTraining({ model: await localModel(), cfg, out, runner, io });
    await first.afterCycle(cycle(0));
    await first.afterCycle(cycle(1));
    const steps = await optimiserSteps(out);
    const lines = await updateLines(out);
    expect(steps).toBeGreaterThan(1);
    // one line per optimiser step: cycle 1's save does not append cycle 0's lines again
    expect(lines).toHaveLength(steps);
    expect(lines.map((l) => l.update)).toEqual(lines.map((l) => l.cycle + 1));
    expect(lines.some((l) => l.cycle === 1)).toBe(true);

    // a resume in a new engine: the adapter and AdamW's state come back from train/
    const resumed = await attachTraining({ model: await localModel(), cfg, out, runner, io });
    await resumed.afterCycle(cycle(2));
    const after = await updateLines(out);
    expect(after.length).toBeGreaterThan(lines.length);
    expect(await optimiserSteps(out)).toBe(after.length);
    expect(JSON.parse(await readFile(join(out, 'train', 'state.json'), 'utf8'))).toEqual({
      updates: 3,
      trainedThrough: 2,
    });
    expect(existsSync(join(out, 'train', 'probe.jsonl'))).toBe(true); // probed once, before the first update
  }, 120_000);
});
