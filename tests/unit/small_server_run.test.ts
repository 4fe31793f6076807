// `spade run` against a server that behaves like a small vLLM deployment (4,096-token window,
// HTTP 400 on over-long requests, prose instead of code on some designer calls): the run finishes,
// no request is rejected, unusable replies are recorded as invalid designs, valid ones are scored.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import type { ArchiveRecord, MetricsRecord } from '../../src/core/spade/run_store.ts';
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
