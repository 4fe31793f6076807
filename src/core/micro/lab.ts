/**
 * The micro self-play lab: SPADE's whole mechanism at toy scale. Per cycle:
 *   1. the cycle's skill is one family (the families rotate: cycle c has families[(c − 1) mod n]);
 *      the designer writes K level descriptions of it (levels.ts) — 'regret': a learned tiny model
 *      prompted with the family writes K − 1 and one slot is an untrained exploration move (the
 *      control's, below), scored with the others so a batch always has contrast; 'random': uniform
 *      levels of the family; 'fixed': one medium level, K times; 'control': the method's
 *      "no designer training" ablation — memory plus random edits (a level from memory whose win
 *      rate was in [0.15, 0.85], one knob moved by one; a uniform level when memory has none);
 *   2. each valid description becomes an environment program (families.ts) loaded in the sandbox;
 *   3. the agent plays it N times without the hint; the hinted arm plays it N times with the hint
 *      on the same seeds — by default the oracle (families.ts oracleReply: a scripted player that
 *      follows the hint exactly, standing in for the pretrained model's instruction following a
 *      fresh tiny model lacks), or the agent itself (`hinted: 'agent'`);
 *   4. the designer's raw reward is the chosen estimator (estimators.ts, paper_blend by default:
 *      plateau and regret) of those returns, 0 for an invalid description; designerAdvantages
 *      centres the K raw values of the cycle (one skill: the family) times a fixed role scale;
 *   5. the agent's unhinted plays are z-scored per level (groupAdvantages; hinted plays are not
 *      trained) and both roles are updated through trainRound (grpo_rounds.ts) — TokenSamples in
 *      minibatches to each role's PolicyTrainer, the engine's clipped-GRPO trainer;
 *   6. the agent plays a fixed probe set (PROBE_LEVELS, no hint, fixed environment and sampling
 *      seeds), the lab's measure of learning; its chance level is `probeChance`.
 * The probe set is also played once before the first cycle (cycle 0). Every designer gives the
 * agent the same compute: K levels × N plays and the same training settings per cycle.
 *
 * Pure: the models and trainers come in as MicroPolicies (engine/micro_policy.ts builds them on
 * the engine: two tiny fresh models, one per role), the sandbox as an EnvRunner. Everything follows
 * from the settings: environment seeds and sampling seeds are hashes of (seed, cycle, design, play),
 * the designs and the minibatch order use Rngs forked from the seed.
 *
 * The agent's conversation here is not playEpisode's (core/spade/agent.ts): no system prompt (the
 * tiny model's cost grows with the prompt's bytes) and one reply token per turn; the hint is
 * appended to the first observation with the same HINT_PREFIX, returns are episodeReturn's and the
 * token trace is extendTrace's, so training is the loop's own.
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
import { trainRound, type PolicyTrainer, type UpdateStats } from '../train/grpo_rounds.ts';
import {
  chance,
  describeLevel,
  difficulty,
  FAMILIES,
  hintText,
  KNOB_MAX,
  levelCode,
  levelValues,
  MAIN_FAMILIES,
  oracleReply,
  type Level,
} from './families.ts';
import { parseLevel } from './levels.ts';

export const DESIGNERS = ['regret', 'random', 'fixed', 'control'] as const;
export type DesignerKind = (typeof DESIGNERS)[number];

export interface MicroSettings {
  seed: number;
  designer: DesignerKind;
  /** Levels played per cycle, K (default 5: the regret designer writes K − 1, the last is the exploration slot). */
  levels: number;
  /** Plays per level and arm, N (default 8). */
  plays: number;
  /** Designer reward (default paper_blend, the method's: plateau and regret). */
  estimator: Estimator;
  /** Plays per probe level (default 8, fixed seeds). */
  probePlays: number;
  /** Sampling temperature of both roles; the trainers are built with the same (engine/micro_policy.ts). */
  temperature: number;
  /** The designer's role scale on the centred reward (default 1: rewards are already in [0, 1]). */
  designerScale: number;
  /** Trainer minibatch budget in tokens and passes per batch (the agent's steps per cycle follow from them). */
  minibatchTokens: number;
  trainEpochs: number;
  /** The probe set (default PROBE_LEVELS; tests use fewer). */
  probeLevels: Level[];
  /** The families the cycles rotate over (default MAIN_FAMILIES; the trap ablation adds TRAP_FAMILIES). */
  families: number[];
  /** Who plays the hinted arm: the scripted 'oracle' (default) or the 'agent' itself. */
  hinted: 'oracle' | 'agent';
  /** The fixed designer's knob levels (default FIXED_KNOBS; the learning-curve check uses the easiest). */
  fixedKnobs: { L: number; A: number; D: number };
}

/** The fixed designer's level: medium difficulty (L1 A1 D1 = 1/3), in the cycle's family. */
export const FIXED_KNOBS = { L: 1, A: 1, D: 1 } as const;

/** Probe levels: every main family at knob levels 0/0/0, 1/1/1 and 2/2/2 (buckets easy, medium, hard). */
export const PROBE_LEVELS: Level[] = MAIN_FAMILIES.flatMap((family) =>
  [0, 1, 2].map((k) => ({ family, L: k, A: k, D: k })),
);

/**
 * The settings `spade micro compare` and the Lab use, fixed on seeds 1–10 before any other seed was
 * run (docs/micro.md, "Pre-registered settings"): 4 levels × 8 plays per cycle (32 agent episodes),
 * 8 probe plays per probe level, the agent's minibatches of 600 tokens (4–6 optimiser steps a cycle).
 */
export const MICRO_DEFAULTS: MicroSettings = {
  seed: 0,
  designer: 'regret',
  levels: 4,
  plays: 8,
  estimator: 'paper_blend',
  probePlays: 8,
  temperature: 1,
  designerScale: 1,
  minibatchTokens: 600,
  trainEpochs: 1,
  probeLevels: [], // PROBE_LEVELS, filled in by the constructor
  families: [...MAIN_FAMILIES],
  hinted: 'oracle',
  fixedKnobs: { ...FIXED_KNOBS },
};

/** One role's model and, when the role learns, its trainer (the engine's GRPO step). */
export interface MicroPolicy {
  chat: ChatModel;
  trainer: PolicyTrainer | null;
}

export interface MicroDeps {
  runner: EnvRunner;
  agent: MicroPolicy;
  /** Required for the 'regret' designer; ignored by the others. */
  designer?: MicroPolicy;
}

/** The designer's prompt for a family (a few bytes: its reply, three knob digits L A D, is what it learns). */
export const designerPrompt = (family: number): ChatMessage[] => [{ role: 'user', content: `F${family}:` }];

/** The oracle as a ChatModel (the hinted arm by default): oracleReply on the conversation. */
export const ORACLE: ChatModel = {
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

/** The win rate that makes a level "in band" for memory edits (the method's positive-example band). */
export const MEMORY_BAND = [0.15, 0.85] as const;

export const BUCKETS = ['easy', 'medium', 'hard'] as const;
export type Bucket = (typeof BUCKETS)[number];
export const bucketOf = (d: number): Bucket => (d < 1 / 3 ? 'easy' : d < 2 / 3 ? 'medium' : 'hard');

/** The probe's chance level: the mean of `chance` over its levels (a uniform random player's probe return). */
export const probeChance = (levels: readonly Level[]) => mean(levels.map(chance));

export interface MicroEpisode {
  return: number;
  turns: number;
  actions: string[];
  trace: TokenTrace | null;
}

export interface DesignReport {
  index: number;
  /** What the designer wrote (for the exploration slot and the baselines: the level's description). */
  text: string;
  /** The untrained exploration slot of the regret designer (scored, never trained). */
  explore: boolean;
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
  /** Mean return per family (index order; NaN-free: families without probe levels are 0). */
  byFamily: number[];
  /** Mean return per probe level (the probe set's order). */
  byLevel: number[];
  mean: number;
}

export interface CycleReport {
  cycle: number;
  /** The cycle's skill: the family its levels are of. */
  family: number;
  designs: DesignReport[];
  /** Distinct valid levels among the cycle's designs. */
  distinctLevels: number;
  /** Mean difficulty of the valid designs (null when none was valid). */
  meanDifficulty: number | null;
  meanRegret: number;
  medianRegret: number;
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

export const median = (xs: readonly number[]) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

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

/** A level's hint for one seed: reset, then hintText (only the vault trap's reads solution()). */
async function hintFor(runner: EnvRunner, envId: string, level: Level, seed: number): Promise<string> {
  await runner.reset(envId, seed);
  return hintText(level, await runner.solution(envId));
}

/** A uniform level of `family`. */
const randomLevel = (r: Rng, family: number): Level => ({
  family,
  L: r.int(KNOB_MAX + 1),
  A: r.int(KNOB_MAX + 1),
  D: r.int(KNOB_MAX + 1),
});

/** The micro lab: call cycle() repeatedly; the state (adapters, baselines, memory, rngs) lives inside. */
export class MicroLab {
  readonly settings: MicroSettings;
  readonly history: CycleReport[] = [];
  /** The probe before any training (cycle 0); set by start(). */
  initialProbe: ProbeReport | null = null;
  /** The samples the last cycle trained on, per role (for inspection and tests). */
  lastBatch: { agent: TokenSample[]; designer: TokenSample[] } = { agent: [], designer: [] };
  /** Levels played and their unhinted win rates (the control's and the exploration slot's memory; newest last, ≤ 200). */
  readonly memory: { level: Level; winRate: number }[] = [];
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
    if (s.designer === 'regret' && s.levels < 2)
      throw new RangeError('The regret designer needs levels ≥ 2 (its designs and the exploration slot)');
    if (!s.families.length || s.families.some((f) => !FAMILIES[f]))
      throw new RangeError(`families must name families 0-${FAMILIES.length - 1}; got ${JSON.stringify(s.families)}`);
    const root = createRng(s.seed);
    this.designRng = root.fork();
    this.trainRng = root.fork();
  }

  /** Load the probe levels and measure the untrained agent (cycle 0). Called by the first cycle() if not before. */
  async start(): Promise<ProbeReport> {
    if (!this.initialProbe) this.initialProbe = await this.probe();
    return this.initialProbe;
  }

  /** The family of cycle `cycle` (1-based): the families rotate. */
  familyOf(cycle: number): number {
    const f = this.settings.families;
    return f[(cycle - 1) % f.length]!;
  }

  /** The control's move: an in-band level of the family from memory with one knob moved by one, else a uniform one. */
  private controlLevel(family: number): Level {
    const r = this.designRng;
    const band = this.memory.filter(
      (m) => m.level.family === family && m.winRate >= MEMORY_BAND[0] && m.winRate <= MEMORY_BAND[1],
    );
    if (!band.length) return randomLevel(r, family);
    const l = { ...r.pick(band).level };
    const knob = r.pick(['L', 'A', 'D'] as const);
    const step = r.int(2) ? 1 : -1;
    l[knob] = l[knob] + step < 0 || l[knob] + step > KNOB_MAX ? l[knob] - step : l[knob] + step;
    return l;
  }

  /** The designer's K descriptions for this cycle, with the token record of each a model wrote. */
  private async design(
    cycle: number,
    family: number,
  ): Promise<{ text: string; explore: boolean; tokens?: TokenTrace | null }[]> {
    const s = this.settings;
    const out: { text: string; explore: boolean; tokens?: TokenTrace | null }[] = [];
    for (let k = 0; k < s.levels; k++) {
      const level = (l: Level, explore = false) => out.push({ text: describeLevel(l), explore });
      if (s.designer === 'random') level(randomLevel(this.designRng, family));
      else if (s.designer === 'fixed') level({ family, ...s.fixedKnobs });
      else if (s.designer === 'control' || k === s.levels - 1)
        level(this.controlLevel(family), s.designer === 'regret');
      else {
        const reply = await this.deps.designer!.chat.chat(designerPrompt(family), {
          temperature: s.temperature,
          max_tokens: 3,
          seed: hashSeed(`${s.seed}:design:${cycle}:${k}`),
        });
        out.push({
          text: `${family}${reply.text}`, // the short form: family, then the model's L A D digits
          explore: false,
          tokens: reply.tokens ? extendTrace(null, reply.tokens) : null,
        });
      }
    }
    return out;
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
        const hint = await hintFor(runner, env.id, level, seed);
        const b = await playMicroEpisode(runner, env.id, hinted, {
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
    const family = this.familyOf(cycle);
    const written = await this.design(cycle, family);
    const designs: DesignReport[] = [];
    const agentSamples: TokenSample[] = [];
    for (const [k, w] of written.entries()) {
      const parsed = parseLevel(w.text);
      const d: DesignReport = {
        index: k,
        text: w.text,
        explore: w.explore,
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
    const skill = FAMILIES[family]!.name;
    const { advantages, baseline } = designerAdvantages(
      designs.map((d) => ({ skill, raw: d.raw })),
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
    for (const d of valid) this.memory.push({ level: d.level!, winRate: d.winRate! });
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
    return { byBucket, byFamily, byLevel: perLevel.map((x) => x.ret), mean: mean(perLevel.map((x) => x.ret)) };
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
