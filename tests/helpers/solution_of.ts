/**
 * The reference solution of an environment at a seed, played through a sandbox pool of the test's own
 * (not the server's), so a serve test can compare what the server does with what the plan should do.
 */
import type { EnvRecord } from '../../src/core/env/envset.ts';
import { createNodeSandboxPool } from '../../src/platform/node/sandbox_pool.ts';

export async function solutionOf(rec: EnvRecord, seed: number): Promise<string[]> {
  const pool = createNodeSandboxPool();
  try {
    const env = await pool.load(rec.code);
    await pool.reset(env.id, seed);
    return await pool.solution(env.id);
  } finally {
    await pool.terminate();
  }
}
