/**
 * The Lab worker: src/core/lab/lab.ts's LabLoop off the page, on the CPU — the lab's two models are
 * 2 layers × hidden 16 (the climb's agent 32), where a GPU dispatch would cost more than the arithmetic — by the tiny
 * model's fast path (engineLabDeps' default, which this worker never changes: engine/tiny's TinyLm,
 * contiguous KV, plain Float32Array loops and WebAssembly SIMD kernels, the same numbers bit for bit
 * as the engine's CPU references, which only `spade lab --path reference` and `spade bench lab`
 * run), and the in-process QuickJS sandbox (createSandboxWorkerApi: generated environments still run
 * only in QuickJS, here inside this worker). Nothing is downloaded: both models are made from the
 * seed on the spot (engine/tiny/tiny_model.ts's tinyModel, the `engine init` path).
 *
 * The models and trainers are built by src/lab/roles.ts, as `spade lab` builds them (the
 * trainers at the lab's sampling temperature), so a browser run prints the CLI's numbers for the
 * same settings. run() refuses settings outside their ranges (core/lab/settings.ts checkLabSettings:
 * a ConfigError naming each) before it builds anything, as the link and the CLI do.
 *
 * Several labs live side by side under a key (the panel's run, and one per seed and designer for
 * "Compare designers"); one runs at a time. check() runs a family's learning-curve check
 * (roles.ts learningCheck, as `spade lab check`). run() streams events through a comlink proxy callback and stops
 * between cycles when pause() was called — also when the pause came between two run() calls (the panel runs
 * a cycle a call): the request stands until a run() takes it, or pause(false) withdraws it before a new
 * run starts. Created by
 * `new Worker(new URL('../../workers/lab.worker.ts', import.meta.url), { type: 'module' })`.
 */
import {
  LAB_LOOP_DEFAULTS,
  LabLoop,
  type CycleReport,
  type LabLoopSettings,
  type ProbeReport,
} from '../src/core/lab/lab.ts';
import type { EnvRunner } from '../src/core/env/checker.ts';
import { createSandboxWorkerApi } from '../src/core/sandbox/worker_api.ts';
import { engineLabDeps, learningCheck, screenLabSeed, type LearningCheck } from '../src/lab/roles.ts';
import type { ScreenResult } from '../src/core/lab/lab.ts';
import { checkLabSettings } from '../src/core/lab/settings.ts';
import type { SpaceName } from '../src/core/lab/spaces.ts';
import { exposeApi } from '../src/platform/rpc.ts';

/** The settings a lab is made from (what the panel's link carries, minus the cycle count). */
export type LabSettings = Pick<
  LabLoopSettings,
  'seed' | 'designer' | 'space' | 'estimator' | 'levels' | 'plays' | 'probePlays' | 'plannedCycles'
> &
  Partial<Pick<LabLoopSettings, 'probeEvery'>> & {
    /**
     * The hand designer's curriculum (core/lab/hand.ts; '' or absent for the others). A live hand run
     * sends it grown by the next cycle's picks: the lab keeps going while the cycles played are unchanged.
     */
    curriculum?: string;
    /** Both roles' sampling temperature (absent: LAB_LOOP_DEFAULTS.temperature; the panel leaves it out). */
    temperature?: number;
  };

export type LabEvent =
  /** The probe before any training (cycle 0). */
  | { type: 'probe0'; key: string; probe: ProbeReport; ms: number }
  /** Inside a cycle: sandbox episodes started so far (resets, hint look-ups included) of about `of`. */
  | { type: 'progress'; key: string; cycle: number; episodes: number; of: number }
  | { type: 'cycle'; key: string; report: CycleReport };

export interface LabWorkerApi {
  /**
   * Run lab `key` (made from `settings` on first use, or afresh when they changed) until it has
   * `cycles` cycles or pause() is called; resolves with the cycles done and whether it was paused.
   */
  run(
    key: string,
    settings: LabSettings,
    cycles: number,
    onEvent: (e: LabEvent) => void,
  ): Promise<{ cycles: number; paused: boolean }>;
  /** The learning-curve check of one family (the fixed designer on its easiest level for `cycles` cycles). */
  check(family: number, seed: number, cycles: number, space: SpaceName): Promise<LearningCheck>;
  /** The dead-seed screen of a seed (its fresh agent on the space's easiest level, as `spade lab compare`). */
  screen(seed: number, space: SpaceName): Promise<ScreenResult>;
  /**
   * Stop the running lab after its current cycle, or the next run() before its first (the request
   * stands until a run takes it); pause(false) withdraws a request (a new ▶ starts with it).
   */
  pause(on?: boolean): void;
  /** Forget lab `key` (every lab when omitted), unloading its probe environments. */
  reset(key?: string): Promise<void>;
}

/** Progress events at most this often (ms): the page redraws a counter, not a chart. */
const PROGRESS_MS = 250;

/** An EnvRunner that counts episode starts (reset calls) for the progress line. */
function counting(inner: EnvRunner, onReset: () => void): EnvRunner {
  return {
    load: (code, maxTurns, limits) => inner.load(code, maxTurns, limits),
    reset: (id, seed) => {
      onReset();
      return inner.reset(id, seed);
    },
    step: (id, action) => inner.step(id, action),
    solution: (id) => inner.solution(id),
    dispose: (id) => inner.dispose(id),
  };
}

interface Entry {
  lab: LabLoop;
  made: string;
}

const labs = new Map<string, Entry>();
const sandbox = createSandboxWorkerApi();
let pauseRequested = false;
let running = false;
/** What the counting runner reports to (the run in progress). */
let onReset: () => void = () => undefined;
const runner = counting(sandbox, () => onReset());

async function labFor(key: string, s: LabSettings): Promise<LabLoop> {
  const temperature = s.temperature ?? LAB_LOOP_DEFAULTS.temperature;
  const made = JSON.stringify([
    s.seed,
    s.designer,
    s.space,
    s.estimator,
    s.levels,
    s.plays,
    s.probePlays,
    temperature,
    s.probeEvery,
  ]);
  const have = labs.get(key);
  // a hand lab takes the grown curriculum here (keepsPlayed), or starts over when it changes the past
  if (have?.made === made && (s.designer !== 'hand' || keepsPlayed(have.lab, s.curriculum ?? ''))) return have.lab;
  if (have) await have.lab.close();
  const lab = new LabLoop(
    { ...s, temperature, curriculum: s.curriculum ?? '' },
    await engineLabDeps(s.seed, s.designer, runner, { temperature, space: s.space }),
  );
  labs.set(key, { lab, made });
  return lab;
}

/** Whether a hand lab can go on with `curriculum`: the cycles it has played keep their levels. */
function keepsPlayed(lab: LabLoop, curriculum: string): boolean {
  try {
    lab.setCurriculum(curriculum);
    return true;
  } catch {
    return false;
  }
}

/** Let queued messages (a pause) in: the in-process sandbox and CpuOps never yield to the event loop. */
const yieldToMessages = () => new Promise<void>((r) => setTimeout(r, 0));

const api: LabWorkerApi = {
  async run(key, settings, cycles, onEvent) {
    // the ranges of core/lab/settings.ts (the seed is left out: a comparison's rows count up from the panel's)
    const { temperature, levels, plays, probePlays } = settings;
    checkLabSettings({ temperature, levels, plays, probePlays });
    if (running) throw new Error('The lab is already running; pause it first.');
    running = true;
    const emit = (e: LabEvent) => void Promise.resolve(onEvent(e)).catch(() => undefined);
    try {
      const lab = await labFor(key, settings);
      if (!lab.initialProbe) {
        const t0 = performance.now();
        const probe = await lab.start();
        emit({ type: 'probe0', key, probe, ms: performance.now() - t0 });
      }
      const s = lab.settings;
      const perCycle = s.levels * s.plays * 2 + lab.probeLevels().length * s.probePlays; // plays of both arms, probe
      while (lab.history.length < cycles) {
        await yieldToMessages();
        if (pauseRequested) {
          pauseRequested = false;
          return { cycles: lab.history.length, paused: true };
        }
        const cycle = lab.history.length + 1;
        let episodes = 0;
        let last = 0;
        onReset = () => {
          episodes++;
          const now = performance.now();
          if (now - last < PROGRESS_MS) return;
          last = now;
          emit({ type: 'progress', key, cycle, episodes, of: perCycle });
        };
        const report = await lab.cycle();
        onReset = () => undefined;
        emit({ type: 'cycle', key, report });
      }
      return { cycles: lab.history.length, paused: false };
    } finally {
      // unload the probe environments between runs (the lab reloads them when it continues): a
      // comparison keeps 8 labs, whose probe sets together would fill the sandbox
      await labs.get(key)?.lab.close();
      onReset = () => undefined;
      running = false;
    }
  },
  async check(family, seed, cycles, space) {
    if (running) throw new Error('The lab is already running; pause it first.');
    running = true;
    try {
      return await learningCheck(family, seed, cycles, sandbox, { space });
    } finally {
      running = false;
    }
  },
  async screen(seed, space) {
    if (running) throw new Error('The lab is already running; pause it first.');
    running = true;
    try {
      return await screenLabSeed(seed, space, sandbox, { temperature: LAB_LOOP_DEFAULTS.temperature });
    } finally {
      running = false;
    }
  },
  pause(on = true) {
    pauseRequested = on;
  },
  async reset(key) {
    for (const k of key === undefined ? [...labs.keys()] : [key]) {
      await labs.get(k)?.lab.close();
      labs.delete(k);
    }
  },
};

exposeApi(api);
