/**
 * The environment checker: Gymnasium's env checker plus SPADE's validation.
 * Each check returns a name, pass/fail and a message written so that a Designer
 * model can fix its code from it. Runs against any EnvRunner (the in-process
 * SandboxHost, or a worker pool).
 */
import { createRng } from '../rng.ts';
import { serializeError } from '../errors.ts';
import type { LoadedEnv, ResetResult, StepResult } from './contract.ts';
import type { SandboxLimits } from './limits.ts';

type Awaitable<T> = T | Promise<T>;

/** What the checker (and the play UI, and the agent) need from a sandbox. */
export interface EnvRunner {
  load(code: string, maxTurns?: number, limits?: SandboxLimits): Awaitable<LoadedEnv>;
  reset(id: string, seed: number): Awaitable<ResetResult>;
  step(id: string, action: string): Awaitable<StepResult>;
  solution(id: string): Awaitable<string[]>;
  dispose(id: string): Awaitable<void>;
}

export const CHECK_NAMES = [
  'loads',
  'reset',
  'step',
  'garbage_input',
  'solution_solves',
  'multi_turn',
  'not_solved_at_reset',
  'deterministic',
  'random_policy_ends',
  'closes',
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

interface Check {
  name: CheckName;
  ok: boolean;
  message: string;
}

export interface CheckReport {
  ok: boolean;
  className: string | null;
  setting: 'games' | 'tool_use' | null;
  checks: Check[];
  /** Solution length per checked seed (steps), when solution() worked. */
  solutionSteps: number[];
  ms: number;
}

export interface CheckOptions {
  maxTurns?: number;
  seeds?: number[];
  limits?: SandboxLimits;
  /** Seed of the random policy. */
  policySeed?: number;
}

/** Probe actions every environment must survive (SPADE: "1", "2", "test", garbage). */
const GARBAGE_ACTIONS = [
  '',
  '1',
  '2',
  'test',
  '\\boxed{}',
  '\\boxed{zzz not a command}',
  '\\boxed{-99999999999}',
  '<tool_call>{not json</tool_call>',
  '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
  '<answer></answer>',
  '\u0000\u{1F600}\\boxed{\u202E}',
  'x'.repeat(4000),
];

const short = (s: string, n = 80): string => (s.length > n ? `${s.slice(0, n)}…` : s);
const errText = (err: unknown): string => {
  const e = serializeError(err);
  return `${e.name}: ${e.message}`;
};

/** What each check reads: the runner, one loaded instance, the seeds and the turn limit. */
interface Probe {
  runner: EnvRunner;
  id: string;
  setting: LoadedEnv['setting'];
  seeds: number[];
  maxTurns: number;
}

/** A check's verdict: null when it passed, else the message a designer can act on. */
type Problem = string | null;

/** 2. reset returns the right shape on every seed. */
async function checkReset(p: Probe): Promise<Problem> {
  try {
    for (const s of p.seeds) await p.runner.reset(p.id, s);
    return null;
  } catch (err) {
    return errText(err);
  }
}

/** 3. step returns the right shape. */
async function checkStep(p: Probe): Promise<Problem> {
  try {
    await p.runner.reset(p.id, p.seeds[0]!);
    await p.runner.step(p.id, '\\boxed{1}');
    return null;
  } catch (err) {
    return errText(err);
  }
}

/** 4. garbage input never crashes (each probe on a fresh episode). */
async function checkGarbage(p: Probe): Promise<Problem> {
  for (const a of GARBAGE_ACTIONS) {
    try {
      await p.runner.reset(p.id, p.seeds[0]!);
      await p.runner.step(p.id, a);
    } catch (err) {
      return `step(${JSON.stringify(short(a, 30))}) failed: ${errText(err)}. Unknown or malformed actions must return a helpful observation with reward 0, never throw.`;
    }
  }
  return null;
}

/**
 * 5. the reference solution reaches reward 1 and terminates on every seed; records its actions
 * and lengths. solution() is asked of the probe instance, and its actions are played on `player`,
 * a fresh instance on which solution() is never called: an environment cannot tell this play from
 * an agent's (one that opens its goal only once solution() has run fails here).
 */
async function checkSolution(p: Probe, player: string, solutions: string[][], steps: number[]): Promise<Problem> {
  for (const s of p.seeds) {
    try {
      await p.runner.reset(p.id, s);
      const actions = await p.runner.solution(p.id);
      solutions.push(actions);
      if (actions.length === 0)
        return `solution() returned no actions for seed ${s}; return the list of actions that solves the episode.`;
      await p.runner.reset(player, s);
      let last: StepResult | null = null;
      let n = 0;
      for (const a of actions) {
        last = await p.runner.step(player, a);
        n++;
        if (last[2] || last[3]) break;
      }
      steps.push(n);
      if (!last || !last[2] || last[1] < 1)
        return (
          `replaying solution() for seed ${s} ended with reward ${last?.[1]}, terminated=${last?.[2]}, truncated=${last?.[3]} after ${n} steps. ` +
          `Success must return reward 1.0 and terminated=true, and solution() must match the hidden state created by reset(seed) ` +
          `(its actions are played on a fresh instance reset with the same seed, where solution() was never called).` +
          (last ? ` Last observation: ${JSON.stringify(short(last[0], 160))}` : '')
        );
      if (n > p.maxTurns)
        return `the solution for seed ${s} needs ${n} steps but maxTurns is ${p.maxTurns}; make the task shorter.`;
    } catch (err) {
      return `while replaying solution() for seed ${s}: ${errText(err)}`;
    }
  }
  return null;
}

/** 7. the goal is not already met at reset: a do-nothing first action must not win. */
async function checkNotSolvedAtReset(p: Probe): Promise<Problem> {
  const lazy =
    p.setting === 'tool_use' ? ['<answer></answer>', '<answer>done</answer>'] : ['\\boxed{}', '\\boxed{done}'];
  for (const s of p.seeds) {
    for (const a of lazy) {
      try {
        await p.runner.reset(p.id, s);
        const r = await p.runner.step(p.id, a);
        if (r[2] && r[1] >= 1)
          return `seed ${s}: the first action ${JSON.stringify(a)} already wins (reward ${r[1]}). The goal must not be met at reset.`;
      } catch (err) {
        return `seed ${s}: ${errText(err)}`;
      }
    }
  }
  return null;
}

/** 8. determinism: same seed, same actions → same transcript, in this instance and in a fresh one. */
async function checkDeterministic(p: Probe, solutions: string[][], fresh: () => Promise<LoadedEnv>): Promise<Problem> {
  const actions = [...GARBAGE_ACTIONS.slice(1, 4), ...(solutions[0] ?? [])];
  const transcript = async (id: string): Promise<string> => {
    const parts: unknown[] = [await p.runner.reset(id, p.seeds[0]!)];
    for (const a of actions) {
      const r = await p.runner.step(id, a);
      parts.push(r);
      if (r[2] || r[3]) break;
    }
    return JSON.stringify(parts);
  };
  try {
    const a = await transcript(p.id);
    const b = await transcript(p.id);
    const c = await transcript((await fresh()).id);
    if (a === b && a === c) return null;
    return `the same seed and actions gave different transcripts${a === b ? ' in a fresh instance' : ''}. Derive all randomness from Math.random (seeded by reset) and reset every field in reset().`;
  } catch (err) {
    return errText(err);
  }
}

/** 9. a random policy (garbage and solution actions) ends every seed's episode within maxTurns. */
async function checkRandomPolicyEnds(p: Probe, solutions: string[][], policySeed: number): Promise<Problem> {
  const rng = createRng(policySeed);
  const pool = [...GARBAGE_ACTIONS.slice(1, 6), ...solutions.flat()];
  for (const s of p.seeds) {
    try {
      await p.runner.reset(p.id, s);
      let ended = false;
      for (let t = 0; t < p.maxTurns && !ended; t++) {
        const r = await p.runner.step(p.id, rng.pick(pool));
        ended = r[2] || r[3];
      }
      if (!ended)
        return `seed ${s}: after ${p.maxTurns} random actions the episode had not ended. Count turns and return truncated=true once maxTurns (the constructor argument) is reached.`;
    } catch (err) {
      return `seed ${s}: ${errText(err)}`;
    }
  }
  return null;
}

/**
 * 10. close() returns promptly and never throws, on every instance the checker opened (each is
 * disposed, which calls close() under the step limit). Empties `open`.
 */
async function checkCloses(runner: EnvRunner, open: string[]): Promise<Problem> {
  const problems: string[] = [];
  for (const id of open.splice(0)) {
    try {
      await runner.dispose(id);
    } catch (err) {
      problems.push(errText(err));
    }
  }
  if (problems.length === 0) return null;
  return `${problems.join(' ')} Give close() nothing to do but drop state: no loops, no waiting, no throwing.`;
}

/**
 * Run every check in order; a failure of loads, reset, step or a fatal garbage failure stops the
 * rest. The instances opened are always closed: when the checks ran to the end `closes` is the
 * last check, and when they stopped early a close() that failed is still reported as `closes`.
 */
export async function checkEnv(runner: EnvRunner, code: string, opts: CheckOptions = {}): Promise<CheckReport> {
  const t0 = performance.now();
  const maxTurns = opts.maxTurns ?? 12;
  const seeds = opts.seeds ?? [0, 1, 2];
  const checks: Check[] = [];
  const report: CheckReport = { ok: false, className: null, setting: null, checks, solutionSteps: [], ms: 0 };
  const verdict = (name: CheckName, problem: Problem, passed: string) =>
    checks.push(problem === null ? { name, ok: true, message: passed } : { name, ok: false, message: problem });
  const finish = () => {
    report.ok = checks.length === CHECK_NAMES.length && checks.every((c) => c.ok);
    report.ms = performance.now() - t0;
    return report;
  };
  const open: string[] = [];
  const load = async (): Promise<LoadedEnv> => {
    const env = await runner.load(code, maxTurns, opts.limits);
    open.push(env.id);
    return env;
  };
  try {
    // 1. loads
    let env: LoadedEnv;
    try {
      env = await load();
    } catch (err) {
      verdict('loads', errText(err), '');
      return finish();
    }
    report.className = env.className;
    report.setting = env.setting;
    verdict('loads', null, `found ${env.className} (${env.setting === 'tool_use' ? 'tool use' : 'game'})`);
    const p: Probe = { runner, id: env.id, setting: env.setting, seeds, maxTurns };

    const reset = await checkReset(p);
    verdict('reset', reset, `reset(seed) returned [observation, info] for seeds ${seeds.join(', ')}`);
    if (reset) return finish();
    const step = await checkStep(p);
    verdict('step', step, 'step(action) returned [observation, reward, terminated, truncated, info]');
    if (step) return finish();
    const garbage = await checkGarbage(p);
    verdict('garbage_input', garbage, `survived ${GARBAGE_ACTIONS.length} malformed actions`);
    if (garbage && /Timeout|Memory|restarted|lost/.test(garbage)) return finish();

    const solutions: string[][] = [];
    // the solution is played, and the later checks run, on an instance that never ran solution()
    let player: LoadedEnv;
    try {
      player = await load();
    } catch (err) {
      verdict('solution_solves', `loading a second instance failed: ${errText(err)}`, '');
      return finish();
    }
    const q: Probe = { ...p, id: player.id };
    verdict(
      'solution_solves',
      await checkSolution(p, player.id, solutions, report.solutionSteps),
      `solution() solves seeds ${seeds.join(', ')} (${report.solutionSteps.join(', ')} steps)`,
    );
    // 6. several steps: a one-step solution is a quiz, not a game
    const longest = report.solutionSteps.length ? Math.max(...report.solutionSteps) : 0;
    verdict(
      'multi_turn',
      longest >= 2
        ? null
        : 'the reference solution finishes in one step, so this is a one-shot quiz. Hide state that the agent must uncover by acting over several turns (3+ at medium difficulty).',
      `the reference solution takes up to ${longest} steps`,
    );
    verdict('not_solved_at_reset', await checkNotSolvedAtReset(q), 'doing nothing does not win');
    verdict(
      'deterministic',
      await checkDeterministic(p, solutions, load),
      'the same seed and actions give the same transcript',
    );
    verdict(
      'random_policy_ends',
      await checkRandomPolicyEnds(q, solutions, opts.policySeed ?? 12345),
      `random play ends within ${maxTurns} turns`,
    );
    verdict('closes', await checkCloses(runner, open), 'close() returned promptly on every instance');
    return finish();
  } finally {
    if (open.length) {
      const closes = await checkCloses(runner, open);
      if (closes) {
        verdict('closes', closes, '');
        finish();
      }
    }
  }
}
