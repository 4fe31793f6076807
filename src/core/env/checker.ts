/**
 * The environment checker: Gymnasium's env checker plus SPADE's validation.
 * Each check returns a name, pass/fail and a message written so that a Designer
 * model can fix its code from it. Runs against any EnvRunner (the in-process
 * SandboxHost, or a worker pool).
 */
import { createRng } from '../rng.ts';
import { serializeError } from '../errors.ts';
import type { LoadedEnv, ResetResult, StepResult } from './contract.ts';
import type { SandboxLimits } from '../sandbox/limits.ts';

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
] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

export interface Check {
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
export const GARBAGE_ACTIONS = [
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

export async function checkEnv(runner: EnvRunner, code: string, opts: CheckOptions = {}): Promise<CheckReport> {
  const t0 = performance.now();
  const maxTurns = opts.maxTurns ?? 12;
  const seeds = opts.seeds ?? [0, 1, 2];
  const checks: Check[] = [];
  const report: CheckReport = { ok: false, className: null, setting: null, checks, solutionSteps: [], ms: 0 };
  const pass = (name: CheckName, message: string) => checks.push({ name, ok: true, message });
  const fail = (name: CheckName, message: string) => checks.push({ name, ok: false, message });
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
      fail('loads', errText(err));
      return finish();
    }
    report.className = env.className;
    report.setting = env.setting;
    pass('loads', `found ${env.className} (${env.setting === 'tool_use' ? 'tool use' : 'game'})`);

    // 2. reset shape on every seed
    try {
      for (const s of seeds) await runner.reset(env.id, s);
      pass('reset', `reset(seed) returned [observation, info] for seeds ${seeds.join(', ')}`);
    } catch (err) {
      fail('reset', errText(err));
      return finish();
    }

    // 3. step shape
    try {
      await runner.reset(env.id, seeds[0]!);
      await runner.step(env.id, '\\boxed{1}');
      pass('step', 'step(action) returned [observation, reward, terminated, truncated, info]');
    } catch (err) {
      fail('step', errText(err));
      return finish();
    }

    // 4. garbage input never crashes (each probe on a fresh episode)
    {
      let problem = '';
      for (const a of GARBAGE_ACTIONS) {
        try {
          await runner.reset(env.id, seeds[0]!);
          await runner.step(env.id, a);
        } catch (err) {
          problem = `step(${JSON.stringify(short(a, 30))}) failed: ${errText(err)}. Unknown or malformed actions must return a helpful observation with reward 0, never throw.`;
          break;
        }
      }
      if (problem) {
        fail('garbage_input', problem);
        if (/Timeout|Memory|restarted|lost/.test(problem)) return finish();
      } else pass('garbage_input', `survived ${GARBAGE_ACTIONS.length} malformed actions`);
    }

    // 5 + 6. the reference solution reaches reward 1 and terminates; it takes several steps
    const solutions: string[][] = [];
    {
      let problem = '';
      for (const s of seeds) {
        try {
          await runner.reset(env.id, s);
          const actions = await runner.solution(env.id);
          solutions.push(actions);
          if (actions.length === 0) {
            problem = `solution() returned no actions for seed ${s}; return the list of actions that solves the episode.`;
            break;
          }
          let last: StepResult | null = null;
          let steps = 0;
          for (const a of actions) {
            last = await runner.step(env.id, a);
            steps++;
            if (last[2] || last[3]) break;
          }
          report.solutionSteps.push(steps);
          if (!last || !last[2] || last[1] < 1) {
            problem =
              `replaying solution() for seed ${s} ended with reward ${last?.[1]}, terminated=${last?.[2]}, truncated=${last?.[3]} after ${steps} steps. ` +
              `Success must return reward 1.0 and terminated=true, and solution() must match the hidden state created by reset(seed).` +
              (last ? ` Last observation: ${JSON.stringify(short(last[0], 160))}` : '');
            break;
          }
          if (steps > maxTurns) {
            problem = `the solution for seed ${s} needs ${steps} steps but maxTurns is ${maxTurns}; make the task shorter.`;
            break;
          }
        } catch (err) {
          problem = `while replaying solution() for seed ${s}: ${errText(err)}`;
          break;
        }
      }
      if (problem) fail('solution_solves', problem);
      else
        pass(
          'solution_solves',
          `solution() solves seeds ${seeds.join(', ')} (${report.solutionSteps.join(', ')} steps)`,
        );
    }
    if (report.solutionSteps.length && Math.max(...report.solutionSteps) >= 2) {
      pass('multi_turn', `the reference solution takes up to ${Math.max(...report.solutionSteps)} steps`);
    } else {
      fail(
        'multi_turn',
        'the reference solution finishes in one step, so this is a one-shot quiz. Hide state that the agent must uncover by acting over several turns (3+ at medium difficulty).',
      );
    }

    // 7. the goal is not already met at reset: a do-nothing first action must not win
    {
      const lazy =
        env.setting === 'tool_use' ? ['<answer></answer>', '<answer>done</answer>'] : ['\\boxed{}', '\\boxed{done}'];
      let problem = '';
      for (const s of seeds) {
        for (const a of lazy) {
          try {
            await runner.reset(env.id, s);
            const r = await runner.step(env.id, a);
            if (r[2] && r[1] >= 1)
              problem = `seed ${s}: the first action ${JSON.stringify(a)} already wins (reward ${r[1]}). The goal must not be met at reset.`;
          } catch (err) {
            problem = `seed ${s}: ${errText(err)}`;
          }
          if (problem) break;
        }
        if (problem) break;
      }
      if (problem) fail('not_solved_at_reset', problem);
      else pass('not_solved_at_reset', 'doing nothing does not win');
    }

    // 8. determinism: same seed, same actions → same transcript (in a fresh instance too)
    {
      const actions = [...GARBAGE_ACTIONS.slice(1, 4), ...(solutions[0] ?? [])];
      const transcript = async (id: string): Promise<string> => {
        const parts: unknown[] = [await runner.reset(id, seeds[0]!)];
        for (const a of actions) {
          const r = await runner.step(id, a);
          parts.push(r);
          if (r[2] || r[3]) break;
        }
        return JSON.stringify(parts);
      };
      try {
        const a = await transcript(env.id);
        const b = await transcript(env.id);
        const other = await load();
        const c = await transcript(other.id);
        if (a === b && a === c) pass('deterministic', 'the same seed and actions give the same transcript');
        else
          fail(
            'deterministic',
            `the same seed and actions gave different transcripts${a === b ? ' in a fresh instance' : ''}. Derive all randomness from Math.random (seeded by reset) and reset every field in reset().`,
          );
      } catch (err) {
        fail('deterministic', errText(err));
      }
    }

    // 9. a random policy ends within maxTurns
    {
      const rng = createRng(opts.policySeed ?? 12345);
      const pool = [...GARBAGE_ACTIONS.slice(1, 6), ...solutions.flat()];
      let problem = '';
      for (const s of seeds) {
        try {
          await runner.reset(env.id, s);
          let ended = false;
          for (let t = 0; t < maxTurns && !ended; t++) {
            const r = await runner.step(env.id, rng.pick(pool));
            ended = r[2] || r[3];
          }
          if (!ended) {
            problem = `seed ${s}: after ${maxTurns} random actions the episode had not ended. Count turns and return truncated=true once maxTurns (the constructor argument) is reached.`;
            break;
          }
        } catch (err) {
          problem = `seed ${s}: ${errText(err)}`;
          break;
        }
      }
      if (problem) fail('random_policy_ends', problem);
      else pass('random_policy_ends', `random play ends within ${maxTurns} turns`);
    }
    return finish();
  } finally {
    for (const id of open) {
      try {
        await runner.dispose(id);
      } catch {
        /* the env may already be gone */
      }
    }
  }
}
