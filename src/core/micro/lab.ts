/**
 * The micro self-play lab (issue 15): SPADE's whole mechanism at toy scale. Per cycle:
 *   1. the designer writes K level descriptions (levels.ts) — a learned tiny model ('regret'), uniform
 *      random levels ('random') or one fixed medium level ('fixed');
 *   2. each valid description becomes an environment program (families.ts) loaded in the sandbox;
 *   3. the agent plays it N times without and N times with the hint, on matched seeds;
 *   4. the designer's raw reward is the chosen estimator (estimators.ts, paper_blend by default) of
 *      those returns, 0 for an invalid description; designerAdvantages centres the K raw values of
 *      the cycle (one skill, "micro") times a fixed role scale;
 *   5. the agent's unhinted plays are z-scored per level (groupAdvantages, as agentTokenSamples:
 *      hinted plays are not trained) and both roles are updated through trainRound (schedule.ts) —
 *      TokenSamples in minibatches to each role's PolicyTrainer, the engine's clipped-GRPO trainer;
 *   6. the agent plays a fixed probe set (PROBE_LEVELS, no hint, fixed seeds); returns per
 *      difficulty bucket are the lab's measure of learning.
 * The probe set is also played once before the first cycle (cycle 0).
 *
 * Pure: the models and trainers come in as MicroPolicies (cli/cmd_micro.ts builds them on the
 * engine: two tiny fresh models, one per role), the sandbox as an EnvRunner. Everything follows from
 * the settings: environment seeds and sampling seeds are hashes of (seed, cycle, design, play), the
 * random designer and the minibatch order use Rngs forked from the seed.
 *
 * The agent's conversation here is not playEpisode's (core/spade/agent.ts): no system prompt (the
 * tiny model's cost grows with the prompt's bytes, and the agent prompt is ~180 of them) and one
 * reply token per turn; the hint is appended to the first observation with the same HINT_PREFIX,
 * returns are episodeReturn's and the token trace is extendTrace's, so training is the loop's own.
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
import { HINT_PREFIX } from '../spade/prompts.ts';
import { extendTrace, type TokenSample, type TokenTrace } from '../train/grpo.ts';
import { trainRound, type PolicyTrainer, type UpdateStats } from '../train/schedule.ts';
import { describeLevel, difficulty, FAMILIES, hintText, levelCode, levelValues, type Level } from './families.ts';
import { parseLevel } from './levels.ts';

export const DESIGNERS = ['regret', 'random', 'fixed'] as const;
export type DesignerKind = (typeof DESIGNERS)[number];

export interface MicroSettings {
  seed: number;
  designer: DesignerKind;
  /** Levels designed per cycle, K (default 4: enough for designerAdvantages to centre on). */
  levels: number;
  /** Plays per level and condition, N (default 4: a group with signal most of the time). */
  plays: number;
  /** Designer reward (default paper_blend, the method's). */
  estimator: Estimator;
  /** Plays per probe level (default 2, fixed seeds). */
  probePlays: number;
  /** Sampling temperature of both roles (default 1: the policy's own distribution, so π_old is exact). */
  temperature: number;
  /** The designer's role scale on the centred reward (default 1: rewards are already in [0, 1]). */
  designerScale: number;
  /** Trainer minibatch budget in tokens and passes per batch (defaults 2000 and 1: one step per cycle per role). */
  minibatchTokens: number;
  trainEpochs: number;
  /** The probe set (default PROBE_LEVELS; tests use fewer). */
  probeLevels: Level[];
}

export const MICRO_DEFAULTS: MicroSettings = {
  seed: 0,
  designer: 'regret',
  levels: 4,
  plays: 4,
  estimator: 'paper_blend',
  probePlays: 2,
  temperature: 1,
  designerScale: 1,
  minibatchTokens: 2000,
  trainEpochs: 1,
  probeLevels: [], // PROBE_LEVELS, filled in by the constructor (declared below)
};

/** One role's model and, when the role learns, its trainer (the engine's GRPO step). */
export interface MicroPolicy {
  chat: ChatModel;
  trainer: PolicyTrainer | null;
}

export interface MicroDeps {
  runner: EnvRunner;
  agent: MicroPolicy;
  /** Required for the 'regret' designer; ignored by 'random' and 'fixed'. */
  designer?: MicroPolicy;
}

/** The designer's prompt (kept to a few bytes: its reply, four digits, is what it learns). */
export const DESIGNER_PROMPT: ChatMessage[] = [{ role: 'user', content: 'Level:' }];

/** The fixed designer's level: medium difficulty (L1 A1 D2 = 4/9), the family rotating over the K slots. */
export const FIXED_KNOBS = { L: 1, A: 1, D: 2 } as const;

/** Probe levels: every family at difficulty 0, 1/3 and 2/3 (buckets easy, medium, hard). */
export const PROBE_LEVELS: Level[] = FAMILIES.flatMap((_, family) =>
  [0, 1, 2].map((k) => ({ family, L: k, A: k, D: k })),
);

export const BUCKETS = ['easy', 'medium', 'hard'] as const;
export type Bucket = (typeof BUCKETS)[number];
export const bucketOf = (d: number): Bucket => (d < 1 / 3 ? 'easy' : d < 2 / 3 ? 'medium' : 'hard');

export interface MicroEpisode {
  return: number;
  turns: number;
  actions: string[];
  trace: TokenTrace | null;
}

export interface DesignReport {
  index: number;
  /** What the designer wrote. */
  text: string;
  level: Level | null;
  description: string | null;
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
  /** Mean return per difficulty bucket. */
  byBucket: Record<Bucket, number>;
  /** Mean return per family (index order). */
  byFamily: number[];
  mean: number;
}

export interface CycleReport {
  cycle: number;
  designs: DesignReport[];
  /** Mean difficulty of the valid designs (null when none was valid). */
  meanDifficulty: number | null;
  meanRegret: number;
  meanDesignerReward: number;
  /** Mean unhinted return over this cycle's designed levels. */
  meanReturn: number;
  /** The optimiser steps of this cycle, per role. */
  updates: UpdateStats[];
  samples: { agent: number; designer: number };
  /** The probe set after this cycle's update. */
  probe: ProbeReport;
  ms: number;
}

/** Play one episode of a loaded level: one reply token per turn, the hint on the first observation. */
export async function playMicroEpisode(
  runner: EnvRunner,
  envId: string,
  model: ChatModel,
  o: { seed: number; hint: string | null; maxTurns: number; sampleSeed: number; temperature: number },
): Promise<MicroEpisode> {
  const [obs0] = await runner.reset(envId, o.seed);
  const messages: ChatMessage[] = [{ role: 'user', content: o.hint ? `${obs0}${HINT_PREFIX}${o.hint}` : obs0 }];
  const ep: MicroEpisode = { return: 0, turns: 0, actions: [], trace: null };
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

/** A level's hint for one seed: reset, then the code from solution(). */
async function hintFor(runner: EnvRunner, envId: string, seed: number): Promise<string> {
  await runner.reset(envId, seed);
  return hintText(await runner.solution(envId));
}

/** The micro lab: call cycle() repeatedly; the state (adapters, baselines, rngs) lives inside. */
export class MicroLab {
  readonly settings: MicroSettings;
  readonly history: CycleReport[] = [];
  /** The probe before any training (cycle 0); set by start(). */
  initialProbe: ProbeReport | null = null;
  /** The samples the last cycle trained on, per role (for inspection and tests). */
  lastBatch: { agent: TokenSample[]; designer: TokenSample[] } = { agent: [], designer: [] };
  private readonly designRng: Rng;
  private readonly trainRng: Rng;
  private baseline: Record<string, number> = {};
  private probeEnvs: { level: Level; id: string }[] | null = null;

  constructor(
    settings: Partial<MicroSettings>,
    readonly deps: MicroDeps,
  ) {
    this.settings = { ...MICRO_DEFAULTS, probeLevels: PROBE_LEVELS, ...settings };
    const s = this.settings;
    if (!DESIGNERS.includes(s.designer))
      throw new RangeError(`designer must be one of ${DESIGNERS.join(', ')}; got ${String(s.designer)}`);
    if (s.designer === 'regret' && !deps.designer)
      throw new RangeError('The regret designer needs a designer policy (a model and its trainer)');
    for (const k of ['levels', 'plays', 'probePlays'] as const)
      if (!Number.isInteger(s[k]) || s[k] < 1) throw new RangeError(`${k} must be a whole number ≥ 1; got ${s[k]}`);
    const root = createRng(s.seed);
    this.designRng = root.fork();
    this.trainRng = root.fork();
  }

  /** Load the probe levels and measure the untrained agent (cycle 0). Called by the first cycle() if not before. */
  async start(): Promise<ProbeReport> {
    if (!this.initialProbe) this.initialProbe = await this.probe();
    return this.initialProbe;
  }

  /** The designer's K descriptions for this cycle, with the token record of each when a model wrote it. */
  private async design(cycle: number): Promise<{ text: string; tokens?: TokenTrace | null }[]> {
    const s = this.settings;
    const out: { text: string; tokens?: TokenTrace | null }[] = [];
    for (let k = 0; k < s.levels; k++) {
      if (s.designer === 'random') {
        const r = this.designRng;
        out.push({ text: describeLevel({ family: r.int(FAMILIES.length), L: r.int(4), A: r.int(4), D: r.int(4) }) });
      } else if (s.designer === 'fixed') {
        out.push({ text: describeLevel({ family: k % FAMILIES.length, ...FIXED_KNOBS }) });
      } else {
        const reply = await this.deps.designer!.chat.chat(DESIGNER_PROMPT, {
          temperature: s.temperature,
          max_tokens: 4,
          seed: hashSeed(`${s.seed}:design:${cycle}:${k}`),
        });
        out.push({ text: reply.text, tokens: reply.tokens ? extendTrace(null, reply.tokens) : null });
      }
    }
    return out;
  }

  /**
   * Play one designed level N times without and N with the hint (same seeds), fill in the design's
   * returns, win rate, regret and raw reward, and return the agent's samples from the unhinted plays.
   */
  private async playLevel(cycle: number, k: number, level: Level, d: DesignReport): Promise<TokenSample[]> {
    const s = this.settings;
    const { runner, agent } = this.deps;
    const samples: TokenSample[] = [];
    const v = levelValues(level);
    const env = await runner.load(levelCode(level), v.maxTurns);
    try {
      const unhinted: MicroEpisode[] = [];
      for (let j = 0; j < s.plays; j++) {
        const seed = hashSeed(`${s.seed}:env:${cycle}:${k}:${j}`);
        const base = { seed, maxTurns: v.maxTurns, temperature: s.temperature };
        const a = await playMicroEpisode(runner, env.id, agent.chat, {
          ...base,
          hint: null,
          sampleSeed: hashSeed(`${s.seed}:play:${cycle}:${k}:${j}:0`),
        });
        const hint = await hintFor(runner, env.id, seed);
        const b = await playMicroEpisode(runner, env.id, agent.chat, {
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
    } finally {
      await runner.dispose(env.id);
    }
    return samples;
  }

  /** One cycle: design → play with and without hint → rewards → update both roles → probe. */
  async cycle(): Promise<CycleReport> {
    const t0 = performance.now();
    await this.start();
    const s = this.settings;
    const { agent } = this.deps;
    const cycle = this.history.length + 1;
    const written = await this.design(cycle);
    const designs: DesignReport[] = [];
    const agentSamples: TokenSample[] = [];
    for (const [k, w] of written.entries()) {
      const parsed = parseLevel(w.text);
      const d: DesignReport = {
        index: k,
        text: w.text,
        level: parsed.ok ? parsed.level : null,
        description: parsed.ok ? describeLevel(parsed.level) : null,
        difficulty: parsed.ok ? difficulty(parsed.level) : null,
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
    const { advantages, baseline } = designerAdvantages(
      designs.map((d) => ({ skill: 'micro', raw: d.raw })),
      s.designerScale,
      this.baseline,
    );
    this.baseline = baseline;
    const designerSamples: TokenSample[] = [];
    designs.forEach((d, k) => {
      d.advantage = advantages[k] ?? 0;
      const tr = written[k]!.tokens;
      if (tr && Math.abs(d.advantage) > 1e-9)
        designerSamples.push({ role: 'designer', ...tr, advantage: d.advantage, key: `${cycle}:${k}` });
    });
    const designerTrainer = s.designer === 'regret' ? (this.deps.designer?.trainer ?? null) : null;
    const batch = { agent: agent.trainer ? agentSamples : [], designer: designerTrainer ? designerSamples : [] };
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
    const report: CycleReport = {
      cycle,
      designs,
      meanDifficulty: valid.length ? mean(valid.map((d) => d.difficulty!)) : null,
      meanRegret: mean(valid.map((d) => d.regret!)),
      meanDesignerReward: mean(designs.map((d) => d.raw)),
      meanReturn: mean(valid.flatMap((d) => d.noHint)),
      updates,
      samples: { agent: batch.agent.length, designer: batch.designer.length },
      probe: await this.probe(),
      ms: performance.now() - t0,
    };
    this.history.push(report);
    return report;
  }

  /**
   * The agent on the fixed probe set, no hint, fixed environment and sampling seeds (common random
   * numbers: an unchanged policy scores exactly the same, so a change is the policy's, not the dice's).
   */
  async probe(): Promise<ProbeReport> {
    const s = this.settings;
    const { runner, agent } = this.deps;
    if (!this.probeEnvs) {
      this.probeEnvs = [];
      for (const level of this.settings.probeLevels) {
        const env = await runner.load(levelCode(level), levelValues(level).maxTurns);
        this.probeEnvs.push({ level, id: env.id });
      }
    }
    const perLevel: { level: Level; ret: number }[] = [];
    for (const [i, p] of this.probeEnvs.entries()) {
      const rets: number[] = [];
      for (let j = 0; j < s.probePlays; j++) {
        const ep = await playMicroEpisode(runner, p.id, agent.chat, {
          seed: 1000 + j,
          hint: null,
          maxTurns: levelValues(p.level).maxTurns,
          temperature: s.temperature,
          sampleSeed: hashSeed(`${s.seed}:probe:${i}:${j}`), // the same every cycle: only the policy changes the probe
        });
        rets.push(ep.return);
      }
      perLevel.push({ level: p.level, ret: mean(rets) });
    }
    const byBucket = Object.fromEntries(
      BUCKETS.map((b) => [b, mean(perLevel.filter((x) => bucketOf(difficulty(x.level)) === b).map((x) => x.ret))]),
    ) as Record<Bucket, number>;
    const byFamily = FAMILIES.map((_, f) => mean(perLevel.filter((x) => x.level.family === f).map((x) => x.ret)));
    return { byBucket, byFamily, mean: mean(perLevel.map((x) => x.ret)) };
  }

  /** Unload the probe environments. */
  async close(): Promise<void> {
    for (const p of this.probeEnvs ?? []) await this.deps.runner.dispose(p.id);
    this.probeEnvs = null;
  }
}

export interface MicroSummary {
  probeReturnFirst: number;
  probeReturnLast: number;
  difficultyFirst: number | null;
  difficultyLast: number | null;
  cycles: number;
}

/** The CLI's headline numbers: the probe before training and after the last cycle; the first and last cycle's mean designed difficulty. */
export function summarise(lab: Pick<MicroLab, 'history' | 'initialProbe'>): MicroSummary {
  const h = lab.history;
  return {
    probeReturnFirst: lab.initialProbe?.mean ?? 0,
    probeReturnLast: h.at(-1)?.probe.mean ?? lab.initialProbe?.mean ?? 0,
    difficultyFirst: h[0]?.meanDifficulty ?? null,
    difficultyLast: h.at(-1)?.meanDifficulty ?? null,
    cycles: h.length,
  };
}
