/**
 * The Lab: SPADE's whole mechanism at toy scale. Per cycle:
 *   1. the cycle's skill is one family of the level space (spaces.ts; the chain space has one, the
 *      grid's rotate); the designer writes K levels of it:
 *        learned   a tiny model prompted with the family writes K − 1 (its reply, read by the space);
 *                  the last slot is an ACCEL-style edit — one knob up from a level the agent won at
 *                  least half the time (a uniform level while there is none) — scored, centred and,
 *                  by default, trained on like the model's own designs (its log-probs taken from the
 *                  designer's policy), so the designer is pushed past levels the agent has mastered;
 *        untrained the same model, prompt, buffer and edit slot as learned, never trained (the ablation);
 *        gated     scripted: a mastery-gated ladder (half the slots at the lowest rung not mastered, the
 *                  rest at lower rungs against forgetting);
 *        sfl       (once `frontier`) scripted, Sampling-For-Learnability style: the K − 2 levels played so far with the
 *                  highest learnability p(1 − p) (their latest win rates), one edit as above, one
 *                  uniform level; it never looks at the probe;
 *        ladder    scripted: the space's levels easiest first, `ladderStep` cycles on each, K times;
 *        random    uniform levels of the family;   fixed  the space's fixed level, K times;
 *        scripted  (once `control`, which it never was: it calls no model) memory plus random edits (a level
 *                  the agent won at least once and at most 85% of the time, one knob moved by one;
 *                  uniform while there is none);
 *        hand      a person's curriculum: the cycle's K levels as picked by hand (hand.ts; the
 *                  settings' `curriculum`, one group of level letters a cycle), no buffer, no model;
 *      On a space whose designer sees the agent (the climb) learned, untrained and scripted first
 *      replay half the cycle's levels from a PLR buffer (plrReplays), and the prompt names the agent's
 *      frontier rung (designerPrompt).
 *   2. each valid level's program is loaded in the sandbox (once per run: loaded levels are kept);
 *   3. the agent plays it N times without the hint; the hinted arm plays it N times with the hint
 *      on the same seeds — by default the oracle (families.ts oracleReply: a scripted player that
 *      follows the hint exactly, standing in for the pretrained model's instruction following a
 *      fresh tiny model lacks), or the agent itself (`hinted: 'agent'`);
 *   4. the designer's raw reward is the chosen estimator of those returns (estimators.ts:
 *      `learnability` 4p̂(1 − p̂) by default; `paper_blend`, `hint_regret` …), 0 for an invalid
 *      description; designerAdvantages centres the K raw values of the cycle times a role scale;
 *   5. the agent's unhinted plays are z-scored per level (groupAdvantages; a level whose plays all
 *      scored the same gives no sample) and both roles are updated through trainRound (grpo_rounds.ts)
 *      — TokenSamples in minibatches to each role's PolicyTrainer, the engine's clipped-GRPO trainer;
 *   6. the agent plays the probe (the space's probe levels, no hint, fixed environment and sampling
 *      seeds), the Lab's measure of learning: its mean, per stage and over the hardest half.
 * The probe is also played once before the first cycle (cycle 0).
 *
 * What is the same for every designer: K levels × N plays a cycle and the training settings. What is
 * not: the optimiser steps — a level the agent loses (or wins) every time gives no agent sample, so a
 * designer that plays where the agent sometimes wins gives it more steps. That is part of what a
 * curriculum does; each cycle reports its steps per role so a comparison shows it.
 *
 * Pure: the models and trainers come in as LabPolicies (src/lab/roles.ts builds them on
 * the engine), the sandbox as an EnvRunner. Everything follows from the settings: environment seeds
 * and sampling seeds are hashes of (seed, cycle, design, play); the designs and the minibatch order
 * use Rngs forked from the seed.
 *
 * The agent's conversation is not playEpisode's (core/spade/agent.ts): no system prompt (the tiny
 * model's cost grows with the prompt's bytes) and one reply token per turn; the hint is appended to
 * the first observation with the same HINT_PREFIX, returns are episodeReturn's and the token trace is
 * extendTrace's, so training is the loop's own.
 */
import type { Estimator } from '../config.ts';
import type { EnvRunner } from '../env/checker.ts';
import type { ChatMessage, ChatModel } from '../llm/chat_model.ts';
import { createRng, hashSeed, type Rng } from '../rng.ts';
import {
  designerAdvantages,
  episodeReturn,
  estimate,
  groupAdvantages,
  INVALID_REWARD,
  mean,
  regret,
  winRate,
} from '../spade/estimators.ts';
import { ConfigError } from '../errors.ts';
import { HINT_PREFIX } from '../spade/prompts.ts';
import { extendTrace, type TokenSample, type TokenTrace } from '../train/grpo.ts';
import { trainRound, type PolicyTrainer, type UpdateStats } from '../train/grpo_rounds.ts';
import { describeLevel, FAMILIES, hintText, levelCode, levelValues, oracleReply, type Level } from './families.ts';
import { checkCurriculum, curriculumCycles, formatCurriculum, groupLevels } from './hand.ts';
import type { ParsedLevel } from './levels.ts';
import { SPACE, SPACES, type LevelSpace, type SpaceName } from './spaces.ts';

export const DESIGNERS = [
  'learned',
  'untrained',
  'scripted',
  'gated',
  'sfl',
  'ladder',
  'random',
  'fixed',
  'hand',
] as const;
export type DesignerKind = (typeof DESIGNERS)[number];

/**
 * Earlier names still read (links, commands): 'regret' was the learned designer's name, 'frontier'
 * the SFL-style scripted designer's and 'control' the scripted memory-and-edit rule's (it never
 * called a model, so it was no untrained designer: round 4 renamed it).
 */
export const DESIGNER_ALIASES: Readonly<Record<string, DesignerKind>> = {
  regret: 'learned',
  frontier: 'sfl',
  control: 'scripted',
};

/** The designers that write with the designer model (the learned one trains it, the untrained one never does). */
export const MODEL_DESIGNERS: readonly DesignerKind[] = ['learned', 'untrained'];

/** A designer by its name or an earlier one; null when it names none. */
export function designerNamed(name: string): DesignerKind | null {
  if ((DESIGNERS as readonly string[]).includes(name)) return name as DesignerKind;
  return (Object.hasOwn(DESIGNER_ALIASES, name) ? DESIGNER_ALIASES[name] : undefined) ?? null; // own keys only
}

export interface LabLoopSettings {
  seed: number;
  designer: DesignerKind;
  /** The level space (spaces.ts). */
  space: SpaceName;
  /** Levels played per cycle, K (the learned designer writes K − 1, the last is the edit slot). */
  levels: number;
  /** Plays per level and arm, N. */
  plays: number;
  /** Designer reward of the learned designer (and the reward every cycle reports). */
  estimator: Estimator;
  /** Plays per probe level (fixed seeds). */
  probePlays: number;
  /** Sampling temperature of both roles; the trainers are built with the same (src/lab/roles.ts). */
  temperature: number;
  /** The designer's role scale on the centred reward (1: rewards are already in [0, 1]). */
  designerScale: number;
  /**
   * The hand designer's levels (hand.ts): one group of K level characters per cycle, joined by ".";
   * '' for every other designer. A live hand run grows it a cycle at a time (setCurriculum).
   */
  curriculum: string;
  /** Trainer minibatch budget in tokens and passes per batch (the agent's steps per cycle follow from them). */
  minibatchTokens: number;
  trainEpochs: number;
  /** The probe levels; null: the space's probe (tests use fewer). */
  probeLevels: Level[] | null;
  /** The families the cycles rotate over; null: the space's (the grid's trap ablation adds the vault). */
  families: number[] | null;
  /** Who plays the hinted arm: the scripted 'oracle' or the 'agent' itself. */
  hinted: 'oracle' | 'agent';
  /** The fixed designer's level; null: the space's fixed level (the learning-curve check uses the easiest). */
  fixedLevel: Omit<Level, 'family'> | null;
  /** The ladder's cycles per rung; null: the run's planned cycles spread over the family's levels (else 5). */
  ladderStep: number | null;
  /** The run's length when known (runLabSeed, the Lab's worker): the ladder's rungs and the last two probes follow it. */
  plannedCycles: number | null;
  /** Train the learned designer on its edit slot too (false: scored and centred, never trained). */
  trainEdit: boolean;
  /**
   * Levels replayed a cycle from the level buffer (PLR: learnability p(1 − p) with staleness) by the
   * designers with a buffer (learned, untrained, scripted); null: half the levels on a space whose
   * designer sees the agent (the climb), 0 elsewhere (the earlier spaces' runs, unchanged).
   */
  replay: number | null;
  /**
   * Probe after every this-many cycles (and, in a run of known length, after its last two: the
   * gain's); 1: after every cycle. The probe is most of a cycle's cost (8 levels × 16 plays).
   */
  probeEvery: number;
  /**
   * On a space whose designer sees the agent (the climb): the model designers (learned, untrained)
   * write a step from the frontier rung their prompt names — one letter of DESIGNER_STEPS, two rungs
   * below it to two above — instead of a rung; their edit slot is written (and trained on) the same
   * way. false: they write the rung itself (pre-registration 4).
   */
  designerSteps: boolean;
}

/**
 * The Lab's defaults — one source for `spade lab`, `spade lab compare` and the Lab panel
 * (settings.ts builds the panel's table from these). What each value is and why: docs/lab.md,
 * "Pre-registration 3".
 */
export const LAB_LOOP_DEFAULTS: LabLoopSettings = {
  seed: 1,
  designer: 'learned',
  space: 'chain',
  levels: 4,
  plays: 8,
  estimator: 'learnability',
  probePlays: 16,
  temperature: 1,
  designerScale: 1,
  curriculum: '',
  minibatchTokens: 600,
  trainEpochs: 1,
  probeLevels: null,
  families: null,
  hinted: 'oracle',
  fixedLevel: null,
  ladderStep: null,
  plannedCycles: null,
  trainEdit: true,
  replay: null,
  probeEvery: 5,
  designerSteps: false,
};

/** The steps a step-writing designer may write (designerSteps): a = two rungs below the frontier … e = two above. */
export const DESIGNER_STEPS = 'abcde';
const STEP_BACK = 2;

/** The cycles of a run by default (pre-registration 3, docs/lab.md). */
export const PRE_REGISTERED_CYCLES = 40;

/** One role's model and, when the role learns, its trainer (the engine's GRPO step). */
export interface LabPolicy {
  chat: ChatModel;
  trainer: PolicyTrainer | null;
  /**
   * The token record of `reply` as this policy would have written it after `messages`: its ids and
   * log π under the current adapter (for training the learned designer on its edit slot). Absent:
   * the edit slot is not trained.
   */
  score?(messages: ChatMessage[], reply: string): Promise<TokenTrace>;
}

export interface LabLoopDeps {
  runner: EnvRunner;
  agent: LabPolicy;
  /** Required for the learned designer; ignored by the others. */
  designer?: LabPolicy;
}

/**
 * The designer's prompt for a family (a few bytes: its reply, the level, is what it learns); on a
 * space whose designer sees the agent, `rung` is the agent's frontier — its lowest rung not yet
 * mastered (LabLoop.frontierRung), written as a letter — so a policy can follow it.
 */
const designerPrompt = (family: number, rung: number | null = null): ChatMessage[] => [
  { role: 'user', content: rung === null ? `F${family}:` : `F${family} m${String.fromCharCode(97 + rung)}:` },
];

/** A rung counts as mastered when the mean of its latest two training win rates is at least this (gated ladder, designer prompt). */
export const MASTERED = 0.5;

/** PLR's settings: rank temperature β of the learnability score and the staleness mix ρ (Jiang et al. 2021). */
const PLR = { beta: 0.3, rho: 0.3 } as const;

/** The oracle as a ChatModel (the hinted arm by default): oracleReply on the conversation. */
const ORACLE: ChatModel = {
  backend: 'scripted',
  model: 'oracle',
  capabilities: { streaming: false, logprobs: false, trainable: false, contextWindow: 4096 },
  chat: async (messages) => ({
    text: oracleReply(messages, HINT_PREFIX),
    finishReason: 'stop',
    usage: { promptTokens: 0, completionTokens: 1 },
    ms: 0,
  }),
};

/**
 * The win rates that make a level "in band" for the control's edits: at least one win (1 of N counts)
 * and at most 85% (the method's positive-example band, whose lower end 0.15 dropped levels won 1 of 8).
 */
const MEMORY_BAND = { minWins: 1, max: 0.85 } as const;

/** The win rate from which the edit slot moves one knob up (ACCEL: edit what the agent can already do). */
export const EDIT_FROM = 0.5;

const median = (xs: readonly number[]) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export interface LabEpisode {
  return: number;
  turns: number;
  actions: string[];
  trace: TokenTrace | null;
}

export interface DesignReport {
  index: number;
  /** What the designer wrote (for scripted designs: the level as the space writes it). */
  text: string;
  /** The edit slot of the learned designer. */
  explore: boolean;
  /** A level replayed from the buffer (PLR), not a new design: it does not enter the designer's reward. */
  replay?: boolean;
  /** Whether this design trained the designer (the model's own, or the edit slot when trainEdit). */
  trained: boolean;
  level: Level | null;
  description: string | null;
  /** The level's place in the space, 0–1 (spaces.ts rank). */
  difficulty: number | null;
  /** Why the description is not a level (invalid design: raw reward 0, not played). */
  invalid?: string;
  noHint: number[];
  withHint: number[];
  winRate: number | null;
  regret: number | null;
  /** The estimator's value (or INVALID_REWARD). */
  raw: number;
  /** Centred × scale (designerAdvantages). */
  advantage: number;
}

export interface ProbeReport {
  /** Mean return per probe level (the probe's order). */
  byLevel: number[];
  /** Mean return per stage of the space (spaces.ts stages). */
  byStage: number[];
  /** Mean return over the hardest half of the probe (the climb's top half: its primary measure). */
  hardHalf: number;
  mean: number;
  /** The highest stage (rung) the probe won at least half the time; −1 when none. */
  topRung: number;
}

export interface CycleReport {
  cycle: number;
  /** The cycle's skill: the family its levels are of. */
  family: number;
  designs: DesignReport[];
  /** Distinct valid levels among the cycle's designs. */
  distinctLevels: number;
  /** Mean place in the space (0–1) of the valid designs (null when none was valid). */
  meanDifficulty: number | null;
  meanRegret: number;
  medianRegret: number;
  meanDesignerReward: number;
  /** Mean unhinted return over this cycle's designed levels. */
  meanReturn: number;
  /** The optimiser steps of this cycle, each (a step the spike guard skipped among them, marked). */
  updates: UpdateStats[];
  /** Optimiser steps per role (the updates made, counted: a skipped step is not one). */
  steps: { agent: number; designer: number };
  samples: { agent: number; designer: number };
  /** The probe after this cycle's update (null: not probed this cycle, LabLoopSettings.probeEvery). */
  probe: ProbeReport | null;
  ms: number;
}

/** A design as written: its text, and for a scripted one the level itself (it may lie outside the space: the fixed level). */
interface Written {
  text: string;
  explore: boolean;
  replay?: boolean;
  level?: Level;
  /** Why a step-writing designer's reply is no step (the reply is then no level). */
  invalid?: string;
  tokens?: TokenTrace | null;
}

/** Play one episode of a loaded level: one reply token per turn, the hint on the first observation. */
export async function playLabEpisode(
  runner: EnvRunner,
  envId: string,
  model: ChatModel,
  o: { seed: number; hint: string | null; maxTurns: number; sampleSeed: number; temperature: number },
): Promise<LabEpisode> {
  const [obs0] = await runner.reset(envId, o.seed);
  const messages: ChatMessage[] = [{ role: 'user', content: o.hint ? `${obs0}${HINT_PREFIX}${o.hint}` : obs0 }];
  const ep: LabEpisode = { return: 0, turns: 0, actions: [], trace: null };
  let trace: TokenTrace | null | undefined;
  for (let t = 0; t < o.maxTurns; t++) {
    const reply = await model.chat(messages, { temperature: o.temperature, max_tokens: 1, seed: o.sampleSeed + t });
    if (reply.tokens && trace !== null) trace = extendTrace(trace ?? null, reply.tokens);
    const [obs, reward, terminated, truncated] = await runner.step(envId, reply.text);
    ep.turns++;
    ep.actions.push(reply.text);
    if (terminated || truncated) {
      ep.return = episodeReturn(reward, terminated);
      break;
    }
    messages.push({ role: 'assistant', content: reply.text }, { role: 'user', content: obs });
  }
  ep.trace = trace ?? null;
  return ep;
}

/** A level's hint for one seed: only the vault trap's reads solution() (after a reset); the others need no call. */
async function hintFor(runner: EnvRunner, envId: string, level: Level, seed: number): Promise<string> {
  if (!FAMILIES[level.family]?.trap) return hintText(level);
  await runner.reset(envId, seed);
  return hintText(level, await runner.solution(envId));
}

/** Most levels kept loaded in the sandbox (the chain space's 8 always fit; the grid's are replaced oldest first). */
const LOADED_LEVELS = 24;

/** The Lab: call cycle() repeatedly; the state (adapters, baselines, memory, rngs) lives inside. */
export class LabLoop {
  readonly settings: LabLoopSettings;
  readonly space: LevelSpace;
  readonly history: CycleReport[] = [];
  /** The probe before any training (cycle 0); set by start(). */
  initialProbe: ProbeReport | null = null;
  /** The samples the last cycle trained on, per role (for inspection and tests). */
  lastBatch: { agent: TokenSample[]; designer: TokenSample[] } = { agent: [], designer: [] };
  /** Levels played, their unhinted win rates and cycle (the scripted designers' memory and the buffer; newest last, ≤ 200). */
  readonly memory: { level: Level; winRate: number; cycle: number }[] = [];
  private readonly designRng: Rng;
  private readonly trainRng: Rng;
  private baseline: Record<string, number> = {};
  /** Loaded level programs (level code → env id), oldest first. */
  private loaded = new Map<string, string>();

  constructor(
    settings: Partial<LabLoopSettings>,
    readonly deps: LabLoopDeps,
  ) {
    this.settings = { ...LAB_LOOP_DEFAULTS, ...settings };
    const s = this.settings;
    if (!SPACES.includes(s.space))
      throw new RangeError(`space must be one of ${SPACES.join(', ')}; got ${String(s.space)}`);
    this.space = SPACE[s.space];
    const named = designerNamed(String(s.designer));
    if (!named) throw new RangeError(`designer must be one of ${DESIGNERS.join(', ')}; got ${String(s.designer)}`);
    s.designer = named;
    if (MODEL_DESIGNERS.includes(s.designer) && !deps.designer)
      throw new RangeError(
        `The ${s.designer} designer needs a designer policy (a model${s.designer === 'learned' ? ' and its trainer' : ''})`,
      );
    if (s.replay !== null && !(Number.isInteger(s.replay) && s.replay >= 0 && s.replay < s.levels))
      throw new RangeError(`replay must be a whole number from 0 to levels − 1, or null; got ${s.replay}`);
    for (const k of ['levels', 'plays', 'probePlays', 'probeEvery'] as const)
      if (!Number.isInteger(s[k]) || s[k] < 1) throw new RangeError(`${k} must be a whole number ≥ 1; got ${s[k]}`);
    for (const k of ['ladderStep', 'plannedCycles'] as const)
      if (s[k] !== null && !(Number.isInteger(s[k]) && s[k]! >= 1))
        throw new RangeError(`${k} must be a whole number ≥ 1 or null; got ${s[k]}`);
    if (MODEL_DESIGNERS.includes(s.designer) && s.levels < 2)
      throw new RangeError(`The ${s.designer} designer needs levels ≥ 2 (its designs and the edit slot)`);
    if (s.designer === 'hand') checkCurriculum(this.space, s.curriculum, s.levels);
    if (s.designer === 'sfl' && s.levels < 3)
      throw new RangeError('The sfl (frontier) designer needs levels ≥ 3 (its replays, an edit and a uniform level)');
    const families = this.families();
    if (!families.length || families.some((f) => !FAMILIES[f]))
      throw new RangeError(`families must name families 0-${FAMILIES.length - 1}; got ${JSON.stringify(families)}`);
    const root = createRng(s.seed);
    this.designRng = root.fork();
    this.trainRng = root.fork();
  }

  /**
   * A hand run's curriculum, grown (a live run adds each cycle's picks before it plays it): the
   * cycles already played must keep their levels, else a ConfigError (start a new run instead).
   */
  setCurriculum(text: string): void {
    const s = this.settings;
    checkCurriculum(this.space, text, s.levels);
    const played = this.history.length;
    const was = curriculumCycles(s.curriculum).slice(0, played);
    if (formatCurriculum(curriculumCycles(text).slice(0, played)) !== formatCurriculum(was))
      throw new ConfigError(
        `The curriculum changes cycles already played (1–${played}); start a new run to play a different one.`,
      );
    s.curriculum = text;
  }

  /** The families the cycles rotate over. */
  families(): readonly number[] {
    return this.settings.families ?? this.space.families;
  }

  /** The probe levels. */
  probeLevels(): Level[] {
    return this.settings.probeLevels ?? this.space.probe;
  }

  /** Load the probe levels and measure the untrained agent (cycle 0). Called by the first cycle() if not before. */
  async start(): Promise<ProbeReport> {
    if (!this.initialProbe) this.initialProbe = await this.probe();
    return this.initialProbe;
  }

  /** The family of cycle `cycle` (1-based): the families rotate. */
  familyOf(cycle: number): number {
    const f = this.families();
    return f[(cycle - 1) % f.length]!;
  }

  /** The family's designable levels (for the trap ablation's vault: the grid of that family). */
  private levelsOf(family: number): Level[] {
    const own = this.space.levelsOf(family);
    return own.length ? own : SPACE.grid.levelsOf(family);
  }

  private uniform(family: number): Level {
    return { ...this.designRng.pick(this.levelsOf(family)) };
  }

  /** The latest win rate of each level of the family the agent has played, newest first. */
  private latest(family: number): { level: Level; winRate: number; cycle: number }[] {
    const seen = new Map<string, { level: Level; winRate: number; cycle: number }>();
    for (let i = this.memory.length - 1; i >= 0; i--) {
      const m = this.memory[i]!;
      const key = describeLevel(m.level);
      if (m.level.family === family && !seen.has(key)) seen.set(key, m);
    }
    return [...seen.values()];
  }

  /**
   * The edit: one knob up from a level won at least EDIT_FROM (its latest win rate), else a uniform
   * level. On a space whose designer sees the agent (the climb) the edit starts from the hardest such
   * levels (the top rank won), as ACCEL edits the buffer's frontier; elsewhere from any (as recorded).
   */
  private editLevel(family: number): Level {
    const r = this.designRng;
    let from = this.latest(family).filter((m) => m.winRate >= EDIT_FROM);
    if (this.space.designerSeesAgent && from.length) {
      const top = Math.max(...from.map((m) => this.space.rank(m.level)));
      from = from.filter((m) => this.space.rank(m.level) === top);
    }
    const ups = from.flatMap((m) => this.space.up(m.level));
    return ups.length ? { ...r.pick(ups) } : this.uniform(family);
  }

  /** The scripted rule's move (the designer kind 'scripted', once 'control'): an in-band level of the family from memory with one knob moved by one, else a uniform one. */
  private controlLevel(family: number): Level {
    const r = this.designRng;
    const s = this.settings;
    const band = this.memory.filter(
      (m) =>
        m.level.family === family && m.winRate * s.plays >= MEMORY_BAND.minWins - 1e-9 && m.winRate <= MEMORY_BAND.max,
    );
    if (!band.length) return this.uniform(family);
    const l = r.pick(band).level;
    const moves = [...this.space.up(l), ...this.space.down(l)];
    return moves.length ? { ...r.pick(moves) } : { ...l };
  }

  /** The frontier's replays: the levels played so far with the highest p(1 − p), at most n (ties: newest first). */
  private frontierLevels(family: number, n: number): Level[] {
    return this.latest(family)
      .map((m) => ({ ...m, learn: m.winRate * (1 - m.winRate) }))
      .filter((m) => m.learn > 0)
      .sort((a, b) => b.learn - a.learn)
      .slice(0, n)
      .map((m) => ({ ...m.level }));
  }

  /**
   * The agent's frontier rung: the lowest stage of the family it has not mastered — the mean of the
   * latest two training win rates of that stage's levels below MASTERED, or never played. The gated
   * ladder plays it; the designer's prompt shows it (on a space whose designer sees the agent).
   */
  frontierRung(family: number): number {
    const sp = this.space;
    const recent = new Map<number, number[]>();
    for (let i = this.memory.length - 1; i >= 0; i--) {
      const m = this.memory[i]!;
      if (m.level.family !== family) continue;
      const st = sp.stageOf(m.level);
      const got = recent.get(st) ?? [];
      if (got.length < 2) recent.set(st, [...got, m.winRate]);
    }
    for (let st = 0; st < sp.stages.length; st++) {
      const w = recent.get(st);
      if (!w || mean(w) < MASTERED) return st;
    }
    return sp.stages.length - 1;
  }

  /** The family's levels of one stage (rung). */
  private rungLevels(family: number, stage: number): Level[] {
    return this.levelsOf(family).filter((l) => this.space.stageOf(l) === stage);
  }

  /**
   * The gated ladder's K levels: mastery-gated (the frontier rung, frontierRung) with replay of lower
   * rungs against forgetting — half the slots at the frontier, one at the rung below, the rest at
   * uniform rungs below that (the frontier again while there are none); the nuisance knobs uniform.
   */
  private gatedLevels(family: number): Level[] {
    const r = this.designRng;
    const f = this.frontierRung(family);
    const K = this.settings.levels;
    const at = (st: number) => ({ ...r.pick(this.rungLevels(family, st)) });
    const out: Level[] = [];
    const atFrontier = Math.max(1, Math.ceil(K / 2));
    for (let k = 0; k < K; k++) {
      if (k < atFrontier) out.push(at(f));
      else if (k === atFrontier && f >= 1) out.push(at(f - 1));
      else if (f >= 2) out.push(at(r.int(f - 1)));
      else out.push(at(f));
    }
    return out;
  }

  /** The replays a cycle takes from the level buffer (LabLoopSettings.replay). */
  replayCount(): number {
    const s = this.settings;
    if (!['learned', 'untrained', 'scripted'].includes(s.designer)) return 0;
    return s.replay ?? (this.space.designerSeesAgent ? Math.floor(s.levels / 2) : 0);
  }

  /**
   * Up to n distinct levels from the buffer (every level played, its latest win rate), as
   * Prioritized Level Replay samples them: learnability p(1 − p) by rank, weight (1/rank)^(1/β),
   * mixed with staleness (cycles since last played) as (1 − ρ)·P_score + ρ·P_stale. Only levels with
   * p(1 − p) > 0 are in the draw: a level always won or always lost has nothing to teach.
   */
  private plrReplays(family: number, cycle: number, n: number): Level[] {
    const r = this.designRng;
    let pool = this.latest(family)
      .map((m) => ({ ...m, learn: m.winRate * (1 - m.winRate) }))
      .filter((m) => m.learn > 0)
      .sort((a, b) => b.learn - a.learn);
    const out: Level[] = [];
    while (out.length < n && pool.length) {
      const score = pool.map((_, i) => (1 / (i + 1)) ** (1 / PLR.beta));
      const stale = pool.map((m) => cycle - m.cycle);
      const zs = score.reduce((a, b) => a + b, 0);
      const zc = stale.reduce((a, b) => a + b, 0);
      const w = pool.map(
        (_, i) => (1 - PLR.rho) * (score[i]! / zs) + PLR.rho * (zc > 0 ? stale[i]! / zc : 1 / pool.length),
      );
      let u = r.next() * w.reduce((a, b) => a + b, 0);
      let i = 0;
      while (i < pool.length - 1 && (u -= w[i]!) > 0) i++;
      out.push({ ...pool[i]!.level });
      pool = pool.filter((_, j) => j !== i);
    }
    return out;
  }

  /** The ladder's rung at `cycle`: the family's levels easiest first, `ladderStep` cycles each. */
  private ladderLevel(family: number, cycle: number): Level {
    const levels = this.levelsOf(family);
    const s = this.settings;
    const step = s.ladderStep ?? (s.plannedCycles ? Math.max(1, Math.floor(s.plannedCycles / levels.length)) : 5);
    return { ...levels[Math.min(levels.length - 1, Math.floor((cycle - 1) / step))]! };
  }

  /** The designer's K descriptions for this cycle, with the token record of each it trains on. */
  private async design(cycle: number, family: number): Promise<Written[]> {
    const s = this.settings;
    const sp = this.space;
    const out: Written[] = [];
    const level = (l: Level, explore = false) => out.push({ text: sp.reply(l), explore, level: l });
    if (s.designer === 'gated') {
      for (const l of this.gatedLevels(family)) level(l);
      return out;
    }
    if (s.designer === 'hand') {
      const group = curriculumCycles(s.curriculum)[cycle - 1];
      if (group === undefined)
        throw new ConfigError(
          `The hand-made curriculum has ${curriculumCycles(s.curriculum).length} cycles; pick the levels of cycle ${cycle} first.`,
        );
      for (const l of groupLevels(sp, family, group)) level(l);
      return out;
    }
    const replays = this.plrReplays(family, cycle, this.replayCount());
    for (const l of replays) out.push({ text: sp.reply(l), explore: false, replay: true, level: l });
    const frontier = sp.designerSeesAgent ? this.frontierRung(family) : null;
    const prompt = designerPrompt(family, frontier);
    const steps = s.designerSteps && frontier !== null ? frontier : null; // the rung the steps count from
    if (s.designer === 'sfl') {
      const replays = this.frontierLevels(family, s.levels - 2);
      for (let k = 0; k < s.levels - 2; k++) level(replays[k] ?? this.uniform(family));
      level(this.editLevel(family));
      level(this.uniform(family));
      return out;
    }
    for (let k = replays.length; k < s.levels; k++) {
      if (s.designer === 'random') level(this.uniform(family));
      else if (s.designer === 'fixed') level(s.fixedLevel ? { family, ...s.fixedLevel } : sp.fixed(family));
      else if (s.designer === 'ladder') level(this.ladderLevel(family, cycle));
      else if (s.designer === 'scripted' && (k < s.levels - 1 || this.replayCount() === 0))
        level(this.controlLevel(family));
      else if (k === s.levels - 1) {
        // the edit slot (the scripted rule has one only with a buffer: its recorded runs had none)
        const l = this.editLevel(family);
        // written as the designer writes: a step when it writes steps (an edit out of their reach
        // is played but not trained on), else the rung
        const step = steps === null ? null : this.stepOf(family, steps, l);
        const text = step ?? sp.reply(l);
        const scorer = s.designer === 'learned' ? this.deps.designer?.score : undefined;
        const tokens = s.trainEdit && scorer && (steps === null || step !== null) ? await scorer(prompt, text) : null;
        out.push({ text, explore: true, tokens, level: l });
      } else {
        const reply = await this.deps.designer!.chat.chat(prompt, {
          temperature: s.temperature,
          max_tokens: sp.replyTokens,
          seed: hashSeed(`${s.seed}:design:${cycle}:${k}`),
        });
        const tokens = reply.tokens ? extendTrace(null, reply.tokens) : null;
        out.push({
          text: reply.text,
          explore: false,
          tokens,
          ...(steps === null ? {} : this.stepLevel(family, steps, reply.text)),
        });
      }
    }
    return out;
  }

  /** The level a step-writing designer's reply means: the rung `from` + step (clamped to the ladder), or why it is none. */
  private stepLevel(family: number, from: number, text: string): { level: Level } | { invalid: string } {
    const i = DESIGNER_STEPS.indexOf(String(text).trim().charAt(0));
    if (i < 0)
      return { invalid: `"${text}" is not a step: write one letter ${DESIGNER_STEPS[0]}-${DESIGNER_STEPS.at(-1)}` };
    const rung = Math.min(this.space.stages.length - 1, Math.max(0, from + i - STEP_BACK));
    return { level: { ...this.designRng.pick(this.rungLevels(family, rung)) } };
  }

  /** The step from rung `from` that writes `l`'s rung, or null when it is further than the steps reach. */
  private stepOf(family: number, from: number, l: Level): string | null {
    const i = this.space.stageOf(l) - from + STEP_BACK;
    return l.family === family && i >= 0 && i < DESIGNER_STEPS.length ? DESIGNER_STEPS[i]! : null;
  }

  /** The env id of a level's program, loaded once and kept (oldest unloaded past LOADED_LEVELS). */
  private async envFor(level: Level): Promise<string> {
    const code = levelCode(level);
    const have = this.loaded.get(code);
    if (have) {
      this.loaded.delete(code);
      this.loaded.set(code, have); // most recently used last
      return have;
    }
    const env = await this.deps.runner.load(code, levelValues(level).maxTurns);
    this.loaded.set(code, env.id);
    while (this.loaded.size > LOADED_LEVELS) {
      const [oldCode, oldId] = this.loaded.entries().next().value!;
      this.loaded.delete(oldCode);
      await this.deps.runner.dispose(oldId);
    }
    return env.id;
  }

  /**
   * Play one designed level N times without the hint (the agent) and N with it (the hinted arm), on
   * the same seeds; fill in the design's returns, win rate, regret and raw reward, and return the
   * agent's samples from the unhinted plays.
   */
  private async playLevel(cycle: number, k: number, level: Level, d: DesignReport): Promise<TokenSample[]> {
    const s = this.settings;
    const { runner, agent } = this.deps;
    const hinted = s.hinted === 'oracle' ? ORACLE : agent.chat;
    const samples: TokenSample[] = [];
    const v = levelValues(level);
    const env = await this.envFor(level);
    const unhinted: LabEpisode[] = [];
    for (let j = 0; j < s.plays; j++) {
      const seed = hashSeed(`${s.seed}:env:${cycle}:${k}:${j}`);
      const base = { seed, maxTurns: v.maxTurns, temperature: s.temperature };
      const a = await playLabEpisode(runner, env, agent.chat, {
        ...base,
        hint: null,
        sampleSeed: hashSeed(`${s.seed}:play:${cycle}:${k}:${j}:0`),
      });
      const hint = await hintFor(runner, env, level, seed);
      const b = await playLabEpisode(runner, env, hinted, {
        ...base,
        hint,
        sampleSeed: hashSeed(`${s.seed}:play:${cycle}:${k}:${j}:1`),
      });
      unhinted.push(a);
      d.noHint.push(a.return);
      d.withHint.push(b.return);
    }
    const stats = { noHint: d.noHint, withHint: d.withHint };
    d.winRate = winRate(d.noHint);
    d.regret = regret(stats);
    d.raw = estimate(s.estimator, stats);
    const adv = groupAdvantages(d.noHint);
    unhinted.forEach((ep, j) => {
      if (ep.trace && Math.abs(adv[j]!) > 1e-9)
        samples.push({ role: 'agent', ...ep.trace, advantage: adv[j]!, key: `${cycle}:${k}:${j}` });
    });
    return samples;
  }

  /**
   * One cycle: design → play with and without hint → rewards → update both roles → probe (when
   * `probe`, by default after every probeEvery-th cycle).
   */
  async cycle(o: { probe?: boolean } = {}): Promise<CycleReport> {
    const t0 = performance.now();
    await this.start();
    const s = this.settings;
    const { agent } = this.deps;
    const cycle = this.history.length + 1;
    const family = this.familyOf(cycle);
    const written = await this.design(cycle, family);
    const designs: DesignReport[] = [];
    const agentSamples: TokenSample[] = [];
    for (const [k, w] of written.entries()) {
      const parsed: ParsedLevel = w.invalid
        ? { ok: false, reason: w.invalid }
        : w.level
          ? { ok: true, level: w.level, clamped: false }
          : this.space.parse(family, w.text);
      const d: DesignReport = {
        index: k,
        text: w.text,
        explore: w.explore,
        ...(w.replay ? { replay: true } : {}),
        trained: false,
        level: parsed.ok ? parsed.level : null,
        description: parsed.ok ? describeLevel(parsed.level) : null,
        difficulty: parsed.ok ? this.space.rank(parsed.level) : null,
        noHint: [],
        withHint: [],
        winRate: null,
        regret: null,
        raw: INVALID_REWARD,
        advantage: 0,
      };
      designs.push(d);
      if (!parsed.ok) {
        d.invalid = parsed.reason;
        continue;
      }
      agentSamples.push(...(await this.playLevel(cycle, k, parsed.level, d)));
    }
    const skill = FAMILIES[family]!.name;
    // replays are not the designer's: they neither earn nor set its reward
    const { advantages, baseline } = designerAdvantages(
      designs.map((d) => ({ skill, raw: d.replay ? null : d.raw })),
      s.designerScale,
      this.baseline,
    );
    this.baseline = baseline;
    const designerSamples: TokenSample[] = [];
    designs.forEach((d, k) => {
      d.advantage = advantages[k] ?? 0;
      const tr = written[k]!.tokens;
      if (tr && Math.abs(d.advantage) > 1e-9) {
        d.trained = true;
        designerSamples.push({ role: 'designer', ...tr, advantage: d.advantage, key: `${cycle}:${k}` });
      }
    });
    const designerTrainer = s.designer === 'learned' ? (this.deps.designer?.trainer ?? null) : null;
    const batch = { agent: agent.trainer ? agentSamples : [], designer: designerTrainer ? designerSamples : [] };
    if (!designerTrainer) for (const d of designs) d.trained = false;
    this.lastBatch = batch;
    const dispatch: PolicyTrainer = {
      step: (mb) => (mb[0]!.role === 'agent' ? agent.trainer! : designerTrainer!).step(mb),
    };
    const updates = await trainRound(
      dispatch,
      batch,
      { minibatchTokens: s.minibatchTokens, trainEpochs: s.trainEpochs },
      this.trainRng,
    );
    const valid = designs.filter((d) => d.level);
    for (const d of valid) this.memory.push({ level: d.level!, winRate: d.winRate!, cycle });
    this.memory.splice(0, Math.max(0, this.memory.length - 200));
    const report: CycleReport = {
      cycle,
      family,
      designs,
      distinctLevels: new Set(valid.map((d) => d.description)).size,
      meanDifficulty: valid.length ? mean(valid.map((d) => d.difficulty!)) : null,
      meanRegret: mean(valid.map((d) => d.regret!)),
      medianRegret: median(valid.map((d) => d.regret!)),
      meanDesignerReward: mean(designs.map((d) => d.raw)),
      meanReturn: mean(valid.flatMap((d) => d.noHint)),
      updates,
      steps: {
        agent: updates.filter((u) => u.role === 'agent' && !u.skipped).length,
        designer: updates.filter((u) => u.role === 'designer' && !u.skipped).length,
      },
      samples: { agent: batch.agent.length, designer: batch.designer.length },
      probe:
        (o.probe ?? (s.plannedCycles ? probedCycle(cycle, s.plannedCycles, s.probeEvery) : cycle % s.probeEvery === 0))
          ? await this.probe()
          : null,
      ms: performance.now() - t0,
    };
    this.history.push(report);
    return report;
  }

  /**
   * The agent on the probe, no hint, fixed environment and sampling seeds (common random numbers:
   * an unchanged policy scores exactly the same, so a change is the policy's, not the dice's).
   */
  async probe(): Promise<ProbeReport> {
    const s = this.settings;
    const { runner, agent } = this.deps;
    const levels = this.probeLevels();
    const byLevel: number[] = [];
    for (const [i, level] of levels.entries()) {
      const env = await this.envFor(level);
      const rets: number[] = [];
      for (let j = 0; j < s.probePlays; j++) {
        const ep = await playLabEpisode(runner, env, agent.chat, {
          seed: 1000 + j,
          hint: null,
          maxTurns: levelValues(level).maxTurns,
          temperature: s.temperature,
          sampleSeed: hashSeed(`${s.seed}:probe:${i}:${j}`), // the same every cycle: only the policy changes the probe
        });
        rets.push(ep.return);
      }
      byLevel.push(mean(rets));
    }
    return probeReport(this.space, levels, byLevel);
  }

  /** Unload the level programs (a later cycle loads them again). */
  async close(): Promise<void> {
    const ids = [...this.loaded.values()];
    this.loaded = new Map();
    for (const id of ids) await this.deps.runner.dispose(id);
  }
}

/** The probe's figures from its per-level means. */
function probeReport(space: LevelSpace, levels: readonly Level[], byLevel: number[]): ProbeReport {
  const byStage = space.stages.map((_, st) => mean(byLevel.filter((_, i) => space.stageOf(levels[i]!) === st)));
  return {
    byLevel,
    byStage,
    hardHalf: mean(byLevel.filter((_, i) => space.hardHalf(levels[i]!))),
    mean: mean(byLevel),
    topRung: byStage.findLastIndex((x) => x >= 0.5),
  };
}

export interface ScreenResult {
  seed: number;
  /** The level screened on (the space's easiest) and the fresh agent's wins there. */
  level: string;
  wins: number;
  plays: number;
  pass: boolean;
}

/** Plays of the dead-seed screen (pre-registered: docs/lab.md). */
const SCREEN_PLAYS = 64;

/**
 * The dead-seed screen, the same for every arm (it reads only the seed's fresh agent): the untrained
 * agent plays the space's easiest level SCREEN_PLAYS times; a seed passes when it wins at least once.
 * A seed that never wins gives every arm nothing to train on, so it cannot tell designers apart.
 */
export async function screenSeed(
  seed: number,
  space: LevelSpace,
  runner: EnvRunner,
  agent: ChatModel,
  temperature = 1,
  plays = SCREEN_PLAYS,
): Promise<ScreenResult> {
  const level = space.levelsOf(space.families[0]!)[0]!;
  const env = await runner.load(levelCode(level), levelValues(level).maxTurns);
  let wins = 0;
  try {
    for (let j = 0; j < plays; j++) {
      const ep = await playLabEpisode(runner, env.id, agent, {
        seed: hashSeed(`${seed}:screen:${j}`),
        hint: null,
        maxTurns: levelValues(level).maxTurns,
        temperature,
        sampleSeed: hashSeed(`${seed}:screen-play:${j}`),
      });
      if (ep.return > 0) wins++;
    }
  } finally {
    await runner.dispose(env.id);
  }
  return { seed, level: describeLevel(level), wins, plays, pass: wins >= 1 };
}

export interface LabSummary {
  probeReturnFirst: number;
  probeReturnLast: number;
  difficultyFirst: number | null;
  difficultyLast: number | null;
  cycles: number;
}

/** The last probe of a lab (the cycle-0 probe when no cycle was probed yet). */
const lastProbe = (lab: Pick<LabLoop, 'history' | 'initialProbe'>): ProbeReport | null =>
  lab.history.findLast((c) => c.probe)?.probe ?? lab.initialProbe;

/** Whether cycle `c` (1-based) of a run of `cycles` is probed: every probeEvery-th, and the last two (the gain's). */
const probedCycle = (c: number, cycles: number, probeEvery: number) => c % probeEvery === 0 || c >= cycles - 1;

/** The CLI's headline numbers: the probe before training and the last one; the first and last cycle's mean designed level. */
export function summarise(lab: Pick<LabLoop, 'history' | 'initialProbe'>): LabSummary {
  const h = lab.history;
  return {
    probeReturnFirst: lab.initialProbe?.mean ?? 0,
    probeReturnLast: lastProbe(lab)?.mean ?? 0,
    difficultyFirst: h[0]?.meanDifficulty ?? null,
    difficultyLast: h.at(-1)?.meanDifficulty ?? null,
    cycles: h.length,
  };
}
