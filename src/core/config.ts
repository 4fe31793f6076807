/**
 * The playground's typed configuration: one schema table gives every knob its
 * type, range, default and the reason for that default, as Fields (schema.ts: the one vocabulary
 * of settings, link keys and records). DEFAULTS and validateConfig() derive from the table, and
 * so do the URL state (url_state.ts: a Field's `url` is its key in a link) and the Settings panel.
 *
 * "paper" numbers are the public recipe of SPADE (arXiv 2608.19197; docs/loop.md); where the
 * paper's setting is too big for a browser the playground default is smaller and says so.
 */
import { ConfigError } from './errors.ts';
import { defaultsOf, field, fieldProblem, int, num, oneOf, ownField, type Field, type Infer } from './schema.ts';

export const SETTINGS = ['games', 'tool_use'] as const;
export type Setting = (typeof SETTINGS)[number];
export const DIFFICULTIES = ['easy', 'medium', 'hard'] as const;
export type Difficulty = (typeof DIFFICULTIES)[number];
export const ESTIMATORS = [
  'paper_blend',
  'hint_regret',
  'floored_regret',
  'solve_rate_plateau',
  'learning_potential',
  'variance',
  'azr_learnability',
  'paired',
  'learnability',
  'alpha_curriculum',
] as const;
export type Estimator = (typeof ESTIMATORS)[number];
export const PRESET_NAMES = ['laptop', 'paper'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** The schema table. Order here is the order shown in Settings. */
export const CONFIG_SCHEMA = {
  preset: field(oneOf(PRESET_NAMES), {
    default: 'laptop',
    why: 'the named set of values the others start from (PRESETS below): laptop keeps a browser cycle short, paper is the reference recipe; every key stays overridable',
    url: 'preset',
  }),
  seed: field(int(0, 2 ** 32 - 1), {
    default: 1,
    why: 'every random choice derives from it, so a run replays exactly',
    url: 'seed',
  }),
  setting: field(oneOf(SETTINGS), {
    default: 'games',
    why: 'the cognitive (games) setting needs no tool schemas, easiest for small models',
    url: 'setting',
  }),
  difficulty: field(oneOf(DIFFICULTIES), {
    default: 'medium',
    why: 'medium asks for 3+ steps of hidden state, the method default',
    url: 'difficulty',
  }),
  skillsPerCycle: field(int(1, 6), { default: 3, why: 'paper: 3 of 6 skills per cycle, rotated' }),
  playsPerEnv: field(int(1, 16), {
    default: 4,
    why: 'paper uses 16 plays each with and without hint; 4 keeps a browser cycle short',
    url: 'playsPerEnv',
  }),
  maxTurns: field(int(1, 50), { default: 12, why: 'paper allows 25 turns; small models rarely use more than 12' }),
  envsPerSkill: field(int(1, 16), {
    default: 2,
    why: 'paper: 8 per skill; the designer reward is centred within a skill, so 2 is the fewest that gives a signal in every cycle',
  }),
  envRewardScaleMode: field(oneOf(['fixed', 'computed']), {
    default: 'fixed',
    why: "fixed: envRewardScale; computed: the reference's min(cap, agent plays per step ÷ designs × envReuse), which gives the designer's few samples the weight of the agent plays they cost",
  }),
  envRewardScale: field(num(0, 10), {
    default: 1,
    why: "scale of the centred designer reward when envRewardScaleMode is fixed; 1 keeps it on the agent's return scale",
  }),
  envRewardScaleCap: field(num(1, 1000), {
    default: 50,
    why: "the reference's cap on the computed scale (about 50 at paper settings): larger weights destabilise training",
  }),
  checks: field(oneOf(['paper', 'strict']), {
    default: 'paper',
    why: "paper: SPADE's validator (loads, shapes, probe and garbage actions, determinism), solvability left to regret; strict adds the solution replay and four more",
  }),
  maxConsecutiveErrors: field(int(1, 100), {
    default: 3,
    why: 'one bad reply ends one task; three failed tasks in a row mean the model or server is down',
  }),
  repairTurns: field(int(0, 5), {
    default: 1,
    why: 'one repair turn fixes most checker failures; only the first attempt is trained on',
  }),
  estimator: field(oneOf(ESTIMATORS), {
    default: 'paper_blend',
    why: 'paper recipe: 0.6 plateau(win rate) + 0.4 clip(regret/0.15)',
    url: 'estimator',
  }),
  designerTemperature: field(num(0, 2), { default: 0.6, why: 'paper: 0.6 for both roles' }),
  hintTemperature: field(num(0, 2), { default: 0.3, why: 'hints should be focused, not creative' }),
  agentTemperature: field(num(0, 2), { default: 0.6, why: 'paper: 0.6 for both roles' }),
  agentTokenBudget: field(int(100, 16000), {
    default: 2000,
    why: 'paper: 8k tokens per episode; small models need far less',
  }),
  designerMaxTokens: field(int(500, 32768), { default: 3000, why: 'paper: 16k; a seed environment is ~1.5k tokens' }),
  concurrency: field(int(1, 64), {
    default: 8,
    why: "the run's one budget of model chats in flight: a designer, validator or hint call holds a slot for the call, a play one for its episode (its agent turns come one at a time); the local engine decodes them together in one step and servers batch them, WebLLM answers one at a time. The engine's batch and the sandbox pools follow it (CONCURRENCY_SIZES)",
  }),
  llmValidator: field(oneOf(['off', 'on']), {
    default: 'off',
    why: 'an extra model call per environment; the checker catches most problems',
  }),
  thinking: field(oneOf(['off', 'on']), {
    default: 'off',
    why: "Qwen3's <think> block spends a small model's window and max_tokens before the answer; off sends enable_thinking: false (chat template, server, WebLLM) for every role",
  }),
  excerptWords: field(int(50, 6000), {
    default: 200,
    why: 'paper cuts to 6,000 words; 200 words (~270 tokens) leave a 4k-token window room for the contract, one example and the reply',
  }),
  memoryCapacity: field(int(1, 1000), { default: 200, why: 'paper: 200 records, oldest evicted first' }),
  sandboxMemoryMiB: field(int(4, 512), { default: 32, why: 'plenty for a text game; stops allocation bombs early' }),
  sandboxStackKiB: field(int(32, 256), {
    default: 256,
    why: 'above 256 KiB deep recursion can overflow the host stack',
  }),
  resetTimeoutMs: field(int(10, 60000), { default: 1000, why: 'reset may build a puzzle; one second is generous' }),
  stepTimeoutMs: field(int(5, 60000), { default: 250, why: 'a step is a state update; longer means a hang' }),
  maxCodeKiB: field(int(1, 1024), { default: 64, why: 'a designer budget of 16k tokens is ~64 KiB of code' }),
  maxObservationKiB: field(int(1, 1024), { default: 16, why: 'observations go into a small context window' }),
  maxActionKiB: field(int(1, 1024), {
    default: 64,
    why: 'a 16k-token reply is ~64 KiB; a longer action is a runaway model, refused before the sandbox sees it',
  }),
  modelCallTimeoutS: field(int(1, 7200), {
    default: 600,
    why: 'a 16k-token designer reply at ~30 tokens/s takes ~9 min; longer means a stuck server',
  }),
  modelIdleTimeoutS: field(int(1, 3600), {
    default: 60,
    why: 'a live server sends a token every few ms; a minute of silence (first token included) means a hang',
  }),
  maxReplyChars: field(int(1000, 10_000_000), {
    default: 200_000,
    why: 'the longest budget (16k tokens) is ~64k characters; 3x that leaves room, far below a 10 MB flood',
  }),
  trainLr: field(num(0, 0.1), {
    default: 1e-4,
    why: 'paper: 1e-6 for full fine-tuning; a LoRA adapter of rank 8 needs ~100x more to move in a few updates',
  }),
  clipLow: field(num(0, 1), { default: 0.2, why: 'paper: ratio clipped below at 1 − 0.2' }),
  clipHigh: field(num(0, 1), {
    default: 0.28,
    why: 'paper: clipped above at 1 + 0.28 (a looser upper clip keeps rare good tokens rising)',
  }),
  klCoef: field(num(0, 1), {
    default: 0,
    why: 'paper: 0 for games (the default setting); use 0.005 for tool use, as the paper does',
  }),
  tisCap: field(num(0, 100), {
    default: 2,
    why: "reference: truncated importance sampling, each token weighted by min(π_learner / π_sampler, 2) (slime's --tis-clip default); 0 turns it off (ratio against the sampler's log-probs)",
  }),
  trainSteps: field(oneOf(['minibatches', 'batch']), {
    default: 'minibatches',
    why: 'minibatches: one optimiser step per minibatch of minibatchTokens per epoch; batch: one step per role per rollout batch, as the reference does (trainEpochs and minibatchTokens then unused)',
  }),
  trainEpochs: field(int(1, 16), {
    default: 2,
    why: "passes over a cycle's samples; the clipped ratio keeps a second pass safe and doubles what a slow cycle teaches",
  }),
  minibatchTokens: field(int(64, 65536), {
    default: 4096,
    why: "tokens per optimiser step: one forward/backward's activations must fit the GPU (≈ 7 MB per token on a 0.5B layout)",
  }),
  maxGradNorm: field(num(0.01, 100), { default: 1, why: 'global gradient-norm clip, the usual 1.0' }),
  envReuse: field(int(1, 8), {
    default: 1,
    why: "paper: a generation of games serves 4 agent updates; each extra round replays the cycle's environments (unhinted), so 1 keeps a browser cycle short",
  }),
  designerLag: field(int(0, 8), {
    default: 1,
    why: "cycles (regenerations) the designer's update waits: its designs then earn a reward recomputed over every play of the window (envReuse rounds included), as the reference's delay of one regeneration interval does; 0 trains on the cycle's own plays at once",
  }),
  probeEvery: field(int(0, 100), {
    default: 1,
    why: 'evaluate the fixed probe set every K updates (0: never); one cycle of a small model is the natural unit',
  }),
} as const satisfies Record<string, Field>;

type Schema = typeof CONFIG_SCHEMA;
export type Config = { -readonly [K in keyof Schema]: Infer<Schema[K]> };
export type ConfigKey = keyof Config;

export const CONFIG_KEYS = Object.keys(CONFIG_SCHEMA) as ConfigKey[];

export const DEFAULTS: Readonly<Config> = Object.freeze(defaultsOf(CONFIG_SCHEMA) as Config);

/** A size that follows `concurrency`: the knob clamped to [min, max], with the reason for the bounds. */
interface DerivedSize {
  min: number;
  max: number;
  why: string;
}

/**
 * What follows from `concurrency`, the run's one budget of model chats in flight (the loop's
 * slots: phases.ts TaskContext.budget). Each size is made from it where its pool or scheduler is
 * built (cli/cmd_run.ts, state/envs.svelte.ts); the engine takes its batch as a number.
 */
export const CONCURRENCY_SIZES = {
  decodeBatch: {
    min: 1,
    max: 64,
    why: "rows the local engine's scheduler decodes in one step (engine/model/batch.ts maxBatch): every chat the budget lets into flight gets a row at once, and a larger batch would never fill",
  },
  cliSandboxWorkers: {
    min: 1,
    max: 4,
    why: "worker threads of `spade run`: a play's step takes milliseconds between chats of seconds, so a few workers keep up with every play in flight; more than 4 take a laptop's cores from the model for checks that finish in under a second",
  },
  browserSandboxWorkers: {
    min: 2,
    max: 4,
    why: "the page's Web Workers: at least 2 so a check and a play (or a hand-played game) never wait for each other; at most 4, as in the CLI, since the page shares the machine's cores with the browser",
  },
} as const satisfies Record<string, DerivedSize>;

/**
 * The sizes of CONCURRENCY_SIZES for a budget of `concurrency` chats in flight (a value that is
 * not a number, as in a run saved before the knob existed, reads the knob's default).
 */
export function concurrencySizes(concurrency: number): Record<keyof typeof CONCURRENCY_SIZES, number> {
  const c = Number.isFinite(concurrency) ? Math.floor(concurrency) : DEFAULTS.concurrency;
  const size = (d: DerivedSize) => Math.min(d.max, Math.max(d.min, c));
  return {
    decodeBatch: size(CONCURRENCY_SIZES.decodeBatch),
    cliSandboxWorkers: size(CONCURRENCY_SIZES.cliSandboxWorkers),
    browserSandboxWorkers: size(CONCURRENCY_SIZES.browserSandboxWorkers),
  };
}

/** Check one field; returns a message a user can act on, or null when valid. */
export function checkField(key: string, value: unknown): string | null {
  const f = ownField(CONFIG_SCHEMA as Record<string, Field>, key);
  if (!f) return `unknown setting "${key}"; known settings: ${CONFIG_KEYS.join(', ')}`;
  return fieldProblem(key, f, value);
}

export type ValidationResult = { ok: true; config: Config } | { ok: false; issues: string[] };

/** Validate a partial config over DEFAULTS. Never throws; lists every problem. */
export function validateConfig(input: unknown): ValidationResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, issues: ['config must be an object of settings, e.g. {"seed": 1}'] };
  }
  const issues: string[] = [];
  const config: Record<string, unknown> = { ...DEFAULTS };
  for (const [key, value] of Object.entries(input)) {
    const problem = checkField(key, value);
    if (problem) issues.push(problem);
    else config[key] = value;
  }
  return issues.length ? { ok: false, issues } : { ok: true, config: config as Config };
}

/** validateConfig that throws a ConfigError listing every issue. */
export function parseConfig(input: unknown): Config {
  const r = validateConfig(input);
  if (!r.ok) throw new ConfigError(`Invalid config: ${r.issues.join('; ')}`, { issues: r.issues });
  return r.config;
}

/** A preset's value for one key: one value, or one per setting (the reference differs between them). */
type PresetValue<K extends ConfigKey> = Config[K] | { games: Config[K]; tool_use: Config[K] };
interface PresetEntry<K extends ConfigKey = ConfigKey> {
  value: PresetValue<K>;
  why: string;
}
type PresetTable = { [K in ConfigKey]?: PresetEntry<K> };

/**
 * Named presets: the values a preset sets over DEFAULTS, each with its reason. `laptop` is the
 * schema's defaults (small, for a browser), named so a run can say which it used; `paper` is the
 * reference recipe (SPADE's public training scripts; docs/loop.md has the table with sources).
 */
export const PRESETS: Record<PresetName, PresetTable> = {
  laptop: {},
  paper: {
    envsPerSkill: { value: 8, why: 'reference: 24 games per regeneration over 3 skills' },
    playsPerEnv: { value: 16, why: 'reference: 16 plays per game, and 16 hinted plays for the regret' },
    maxTurns: { value: 25, why: 'reference: up to 25 turns' },
    agentTokenBudget: { value: 8192, why: "reference: the actor's 8k tokens" },
    designerMaxTokens: { value: 16384, why: "reference: the proposer's 16k tokens" },
    excerptWords: {
      value: { games: 6000, tool_use: 4000 },
      why: 'reference: documents cut to 6,000 (games) or 4,000 (tool use)',
    },
    envReuse: {
      value: { games: 4, tool_use: 8 },
      why: 'reference: a generation of games serves 4 steps (games) or 8 (the tool-use blend run) before regeneration',
    },
    designerLag: {
      value: 1,
      why: "reference: the proposer's update waits one regeneration interval, so its reward covers every play of the window",
    },
    envRewardScaleMode: { value: 'computed', why: 'reference: the scale is computed from the batch (auto-compute on)' },
    envRewardScaleCap: { value: 50, why: 'reference: max env-reward scale 50' },
    klCoef: {
      value: { games: 0, tool_use: 0.005 },
      why: 'reference: no KL for games, 0.005 (low-variance k3) for tool use',
    },
    trainSteps: { value: 'batch', why: 'reference: one optimiser step per rollout batch' },
    tisCap: { value: 2, why: "reference: truncated importance sampling on, ratio capped at 2 (slime's default)" },
    trainEpochs: { value: 1, why: 'reference: each rollout batch is passed over once' },
  },
};

/** Where a resolved value came from, in increasing precedence. */
type ConfigSource = 'default' | 'preset' | 'link' | 'flag';

/** A preset's values for a setting (the keys it sets, nothing else). */
export function presetValues(name: PresetName, setting: Setting): Partial<Config> {
  const out: Record<string, unknown> = {};
  for (const [k, e] of Object.entries(PRESETS[name]) as [ConfigKey, PresetEntry][]) {
    const v = e.value;
    out[k] = typeof v === 'object' && v !== null ? (v as Record<Setting, unknown>)[setting] : v;
  }
  return out as Partial<Config>;
}

/** `config` with a preset's values applied (for its setting) and `preset` set to its name. */
export function applyPreset(config: Config, name: PresetName): Config {
  return { ...config, ...presetValues(name, config.setting), preset: name };
}

/**
 * `config` switched to another setting: a key the preset sets per setting (excerptWords, envReuse,
 * klCoef under `paper`) follows the new setting, unless the user had changed it from the preset's value.
 */
export function changeSetting(config: Config, setting: Setting): Config {
  const before = presetValues(config.preset, config.setting) as Record<string, unknown>;
  const after = presetValues(config.preset, setting) as Record<string, unknown>;
  const out: Record<string, unknown> = { ...config, setting };
  for (const k of Object.keys(after)) if (config[k as ConfigKey] === before[k]) out[k] = after[k];
  return out as Config;
}

export interface ResolvedConfig {
  config: Config;
  source: Record<ConfigKey, ConfigSource>;
}

/**
 * The configuration from its layers: defaults, the preset (named by the flags, else the link,
 * else the default), the link's fields, then the flags' — each later layer overrides the one
 * before, so any key stays overridable after a preset. The preset's per-setting values follow the
 * setting the upper layers choose. Throws a ConfigError listing every invalid value.
 */
export function resolveConfig(layers: {
  link?: Record<string, unknown>;
  flags?: Record<string, unknown>;
}): ResolvedConfig {
  const link = layers.link ?? {};
  const flags = layers.flags ?? {};
  const checked = parseConfig({ ...link, ...flags }); // every layer's values are valid
  const preset = (ownField(flags, 'preset') ?? ownField(link, 'preset') ?? DEFAULTS.preset) as PresetName;
  const setting = checked.setting;
  const fromPreset = presetValues(preset, setting);
  const config = { ...DEFAULTS, ...fromPreset, ...link, ...flags, preset } as Config;
  const source = Object.fromEntries(
    CONFIG_KEYS.map((k): [ConfigKey, ConfigSource] => [
      k,
      Object.hasOwn(flags, k)
        ? 'flag'
        : Object.hasOwn(link, k)
          ? 'link'
          : k in fromPreset || (k === 'preset' && preset !== DEFAULTS.preset)
            ? 'preset'
            : 'default',
    ]),
  ) as Record<ConfigKey, ConfigSource>;
  return { config, source };
}
