/**
 * `spade engine generate` with --tokens repeated: the prompts decode as one batch of the scheduler
 * and each result equals the same prompt generated alone with the matching seed (CPU references).
 */
import { describe, expect, it } from 'vitest';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/spade.ts';
import { writeTinyCheckpoint } from '../helpers/tiny_checkpoint.ts';

async function run(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err, json: () => JSON.parse(out[out.length - 1]!) };
}

describe('spade engine generate --tokens … --tokens … (a batch)', () => {
  it('prints one result per prompt, each equal to that prompt decoded alone with seed + i', async () => {
    const d = join(await mkdtemp(join(tmpdir(), 'spade-batch-cli-')), 'tiny');
    await writeTinyCheckpoint(d, 'qwen2', 'f32', 3);
    const common = ['--model', d, '--max-new', '6', '--temperature', '0.9', '--device', 'cpu', '--seed', '5'];
    const prompts = ['1,2,3', '7', '4,4,9,11,2'];
    const batch = await run('engine', 'generate', ...prompts.flatMap((p) => ['--tokens', p]), ...common, '--json');
    expect(batch.code, batch.err.join('\n')).toBe(0);
    const got = batch.json();
    expect(got).toMatchObject({ ok: true, weights: 'f32' });
    expect(got.batch).toHaveLength(3);
    for (const [i, p] of prompts.entries()) {
      const alone = await run('engine', 'generate', '--tokens', p, ...common.slice(0, -1), String(5 + i), '--json');
      expect(alone.code, alone.err.join('\n')).toBe(0);
      expect(got.batch[i].tokens).toEqual(alone.json().tokens);
      expect(got.batch[i].tokens.length).toBeGreaterThan(0);
    }
    // the plain form prints one line of ids per prompt
    const plain = await run('engine', 'generate', ...prompts.flatMap((p) => ['--tokens', p]), ...common);
    expect(plain.out.map((l) => l.split(',').map(Number))).toEqual(
      got.batch.map((b: { tokens: number[] }) => b.tokens),
    );
  });

  it('rejects an empty prompt and a repeated --tokens for logits', async () => {
    const d = join(await mkdtemp(join(tmpdir(), 'spade-batch-cli-')), 'tiny');
    await writeTinyCheckpoint(d, 'llama', 'f32', 1);
    const empty = await run('engine', 'generate', '--model', d, '--tokens', '1', '--tokens', '', '--device', 'cpu');
    expect(empty.code).toBe(2);
    expect(empty.err.join('\n')).toContain('--tokens must be comma-separated token ids');
    const logits = await run('engine', 'logits', '--model', d, '--tokens', '1', '--tokens', '2', '--device', 'cpu');
    expect(logits.code).toBe(2);
    expect(logits.err.join('\n')).toContain('engine logits takes --tokens once');
  });
});
