// `spade run` against a server that behaves like a small vLLM deployment (4,096-token window,
// HTTP 400 on over-long requests, prose instead of code on some designer calls): the run finishes,
// no request is rejected, unusable replies are recorded as invalid designs, valid ones are scored.
//
// `spade run --preset paper` against the small vLLM-like server (4,096-token window): the run
// records the paper preset in its config, and per cycle the env-reward scale it computed
// (min(50, unhinted plays ÷ designs × envReuse)) and the designer's window (lag 1: the designs of
// the cycle before, with the plays of their environments). Reduced so it runs in well under a
// minute on two cores: 2 cycles, 1 skill (8 designs, the paper's k), 4 plays, 6 turns.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import type { ArchiveRecord, MetricsRecord, RunSpec } from '../../src/core/spade/run_store.ts';
import { startSmallVllm, type SmallVllm } from '../helpers/small_vllm_server.ts';

let server: SmallVllm;
beforeAll(async () => {
  server = await startSmallVllm(4096);
});
afterAll(() => server.close());

const lines = async <T>(file: string): Promise<T[]> =>
  (await readFile(file, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as T);

describe('a run against a small vLLM-like server', () => {
  it('fits every request in the advertised 4,096-token window and records bad replies as invalid', async () => {
    const out = join(await mkdtemp(join(tmpdir(), 'spade-vllm-')), 'run');
    const err: string[] = [];
    const printed: string[] = [];
    const code = await main(
      [
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'Qwen/Qwen3-0.6B',
        '--iterations',
        '2',
        '--set',
        'playsPerEnv=2',
        '--out',
        out,
        '--json',
      ],
      { out: (l) => printed.push(l), err: (l) => err.push(l) },
    );
    expect(code, err.join('\n')).toBe(0);
    expect(server.stats.rejected).toBe(0);
    expect(server.stats.prose).toBeGreaterThan(0);
    const archive = await lines<ArchiveRecord>(join(out, 'archive.jsonl'));
    expect(archive).toHaveLength(12); // 2 cycles × 3 skills × 2 designs per skill
    const prose = archive.filter((a) => a.attempts[0]!.failures[0]?.startsWith('no program found'));
    expect(prose.length).toBeGreaterThan(0);
    expect(archive.filter((a) => a.stats).length).toBeGreaterThan(0);
    for (const a of archive) {
      expect(a.error ?? null).toBeNull(); // no task lost to a failed call
      for (const c of a.calls ?? []) expect(c.window).toBe(4096); // the window came from /v1/models
    }
    const metrics = await lines<MetricsRecord>(join(out, 'metrics.jsonl'));
    expect(metrics.map((m) => m.cycle)).toEqual([0, 1]);
    console.log(
      `small vLLM run: ${server.stats.requests} requests, ${server.stats.rejected} rejected, ${server.stats.prose} prose designer replies, ${archive.filter((a) => a.valid).length}/${archive.length} valid, largest prompt ${Math.max(...metrics.map((m) => m.budget?.maxPromptTokens ?? 0))} tokens (estimated)`,
    );
  });
});

describe('a paper-preset run against a small vLLM-like server', () => {
  it('records the computed env-reward scale and the designer window per cycle', async () => {
    const out = join(await mkdtemp(join(tmpdir(), 'spade-paper-')), 'run');
    const err: string[] = [];
    const t0 = performance.now();
    const code = await main(
      [
        'run',
        '--backend',
        'openai',
        '--base-url',
        server.url,
        '--model',
        'Qwen/Qwen3-0.6B',
        '--preset',
        'paper',
        '--iterations',
        '2',
        '--set',
        'skillsPerCycle=1',
        '--set',
        'playsPerEnv=4',
        '--set',
        'maxTurns=6',
        '--out',
        out,
        '--json',
      ],
      { out: () => undefined, err: (l) => err.push(l) },
    );
    const seconds = (performance.now() - t0) / 1000;
    expect(code, err.join('\n')).toBe(0);
    const spec = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as RunSpec;
    expect(spec.config).toMatchObject({
      preset: 'paper',
      envsPerSkill: 8,
      envReuse: 4,
      designerLag: 1,
      trainSteps: 'batch',
    });
    const archive = await lines<ArchiveRecord>(join(out, 'archive.jsonl'));
    expect(archive).toHaveLength(16); // 2 cycles × 1 skill × 8 designs
    const metrics = await lines<MetricsRecord>(join(out, 'metrics.jsonl'));
    const table = metrics.map((m) => {
      const designs = archive.filter((a) => a.cycle === m.cycle && a.rawReward != null).length;
      const plays = archive.filter((a) => a.cycle === m.cycle).reduce((n, a) => n + (a.stats?.noHint.length ?? 0), 0);
      // the scale as the reference computes it, from this cycle's own numbers
      expect(m.envRewardScale).toBe(designs && plays ? Math.min(50, (plays / designs) * 4) : 1);
      return {
        cycle: m.cycle,
        designs,
        valid: m.valid,
        unhintedPlays: plays,
        envRewardScale: m.envRewardScale,
        window: m.designerWindow,
        meanDesignerAdvantage: m.meanDesignerAdvantage,
      };
    });
    expect(table[0]!.window).toEqual({ lag: 1, designsOf: null, rounds: 4, designs: 0, plays: 0 });
    expect(table[1]!.window).toEqual({
      lag: 1,
      designsOf: 0,
      rounds: 4,
      designs: table[0]!.designs,
      plays: table[0]!.unhintedPlays,
    });
    console.log(
      `paper-preset run: ${seconds.toFixed(1)} s, ${server.stats.requests} requests\n${JSON.stringify(table, null, 1)}`,
    );
  }, 120_000);
});
