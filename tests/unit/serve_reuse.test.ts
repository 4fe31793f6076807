// `spade serve` resets a session's environment in place when the session resets to the same
// environment, as OpenEnv resets a session's environment: no load, and the same episode as on a fresh
// instance; another environment gets a fresh instance and the old one is disposed; and a reused
// instance that loses its worker to a neighbour's kill replays its current episode (its new seed).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { recordFromCode, type EnvRecord } from '../../src/core/env/envset.ts';
import { DEFAULT_LIMITS } from '../../src/core/env/limits.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { EnvCatalog } from '../../src/platform/node/serve/env_catalog.ts';
import { SpadeServer } from '../../src/platform/node/serve/server.ts';
import { OpenEnvWsClient } from '../../src/platform/node/serve/ws_client.ts';
import { solutionOf } from '../helpers/solution_of.ts';

const lantern = SEED_ENVS.find((e) => e.title === 'Lantern Lock')!;
const other = SEED_ENVS.find((e) => e.title !== 'Lantern Lock' && e.setting === 'games')!;
// a native loop QuickJS cannot interrupt, on the action "spring": the watchdog kills its worker
const trap = recordFromCode(
  `// @title Trap\nclass TrapEnv { reset(s){ return ['go', {}]; } step(a){ if (a.includes('spring')) { let n = 0; Array.prototype.join.call({ get length() { return n++ ? 2 ** 32 - 1 : 0; } }); } return ['x', 0, false, false, {}]; } solution(){ return ['\\\\boxed{1}']; } }`,
);

/** Reset to `rec` at `seed` and play `plan`: the observations' data, the reset's first. */
async function play(c: OpenEnvWsClient, rec: EnvRecord, seed: number, plan: string[]): Promise<unknown[]> {
  const r = await c.reset({ env_id: rec.id, seed });
  expect(r.type).toBe('observation');
  const out: unknown[] = [r.data.observation];
  for (const text of plan) {
    const s = await c.step({ text });
    expect(s.type).toBe('observation');
    out.push(s.data.observation, s.data.reward, s.data.done);
  }
  return out;
}

let server: SpadeServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

describe('a session that resets to the same environment resets its instance in place', () => {
  it('no load, the same episode as a fresh instance; another environment gets a fresh one', async () => {
    server = await SpadeServer.start({ catalog: new EnvCatalog('s', [lantern, other]), port: 0, workers: 1 });
    const loads = vi.spyOn(server.pool, 'load');
    const plan = await solutionOf(lantern, 3);
    const c = await OpenEnvWsClient.connect(server.url);
    const first = await play(c, lantern, 3, plan);
    expect(first[first.length - 1]).toBe(true); // the reference solution wins
    expect(loads).toHaveBeenCalledTimes(1);
    const again = await play(c, lantern, 3, plan);
    expect(loads).toHaveBeenCalledTimes(1); // reset in place
    expect(again).toEqual(first);
    // a fresh instance (another session) plays the very same episode
    const fresh = await OpenEnvWsClient.connect(server.url);
    expect(await play(fresh, lantern, 3, plan)).toEqual(first);
    expect(loads).toHaveBeenCalledTimes(2);
    await fresh.close();
    // another environment: a fresh instance, the old one disposed
    expect((await c.reset({ env_id: other.id, seed: 1 })).type).toBe('observation');
    expect(loads).toHaveBeenCalledTimes(3);
    for (let i = 0; i < 500 && server.stats().liveEnvs > 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(server.stats().liveEnvs).toBe(1);
    await c.close();
  });

  it("a reused instance lost to a neighbour's kill replays its current episode, with its new seed", async () => {
    server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [lantern, trap]),
      port: 0,
      workers: 1,
      graceMs: 300,
      limits: { ...DEFAULT_LIMITS, stepMs: 200 },
    });
    const plan1 = await solutionOf(lantern, 1);
    const plan6 = await solutionOf(lantern, 6);
    expect(plan6.length).toBeGreaterThanOrEqual(2);
    const expected = await (async () => {
      const fresh = await OpenEnvWsClient.connect(server!.url);
      const out = await play(fresh, lantern, 6, plan6);
      await fresh.close();
      return out;
    })();
    const victim = await OpenEnvWsClient.connect(server.url);
    await play(victim, lantern, 1, plan1.slice(0, 1));
    // the same environment again, at seed 6: reset in place; one step of the new episode
    const got: unknown[] = [(await victim.reset({ env_id: lantern.id, seed: 6 })).data.observation];
    const s1 = await victim.step({ text: plan6[0]! });
    got.push(s1.data.observation, s1.data.reward, s1.data.done);
    // the neighbour's step kills the worker while the victim's next step waits behind it
    const bad = await OpenEnvWsClient.connect(server.url);
    expect((await bad.reset({ env_id: trap.id })).type).toBe('observation');
    const replays = server.stats().replays;
    const [hit, next] = await Promise.all([bad.step({ text: 'spring' }), victim.step({ text: plan6[1]! })]);
    expect(hit.type).toBe('error');
    expect(next.type).toBe('observation');
    got.push(next.data.observation, next.data.reward, next.data.done);
    expect(server.stats().replays).toBeGreaterThan(replays);
    for (const text of plan6.slice(2)) {
      const s = await victim.step({ text });
      got.push(s.data.observation, s.data.reward, s.data.done);
    }
    expect(got).toEqual(expected); // seed 6's episode, as a fresh instance plays it
    await victim.close();
    bad.terminate();
  });

  it('an environment that keeps state between episodes is not replayed into a state the client never saw', async () => {
    // its observation counts the resets this instance has had: a fresh load cannot replay the second episode
    const counting = recordFromCode(
      `// @title Counting\nlet resets = 0;\nclass CountingEnv { reset(s){ resets++; return ['episode ' + resets, {}]; } step(a){ return ['still ' + resets, 0, false, false, {}]; } solution(){ return ['\\\\boxed{1}']; } }`,
    );
    server = await SpadeServer.start({
      catalog: new EnvCatalog('s', [counting, trap]),
      port: 0,
      workers: 1,
      graceMs: 300,
      limits: { ...DEFAULT_LIMITS, stepMs: 200 },
    });
    const victim = await OpenEnvWsClient.connect(server.url);
    expect((await victim.reset({ env_id: counting.id, seed: 1 })).data.observation).toMatchObject({
      text: 'episode 1',
    });
    expect((await victim.reset({ env_id: counting.id, seed: 1 })).data.observation).toMatchObject({
      text: 'episode 2',
    });
    expect((await victim.step({ text: 'a' })).data.observation).toMatchObject({ text: 'still 2' });
    const bad = await OpenEnvWsClient.connect(server.url);
    expect((await bad.reset({ env_id: trap.id })).type).toBe('observation');
    const [hit, next] = await Promise.all([bad.step({ text: 'spring' }), victim.step({ text: 'b' })]);
    expect(hit.type).toBe('error');
    // the replay (a fresh load: "episode 1") differs from what the client saw: the episode ends, said plainly
    expect(next.type).toBe('error');
    expect(JSON.stringify(next.data)).toContain('did not replay to the same state');
    // the session goes on: a reset starts a new episode
    expect((await victim.reset({ env_id: counting.id, seed: 2 })).type).toBe('observation');
    await victim.close();
    bad.terminate();
  });
});
