/**
 * The Lab's settings as one schema table of Fields (schema.ts), like config.ts's CONFIG_SCHEMA: each
 * setting a person, a flag or a link chooses has its type, the range a link and the Lab's inputs
 * accept, its key in the link, its default and the reason for that default. The defaults come from lab.ts's
 * LAB_LOOP_DEFAULTS and PRE_REGISTERED_CYCLES — one source: `spade lab`, `spade lab compare` and
 * the Lab panel start from the same values, so a Lab link and a command with the same settings print
 * the same numbers. One preset, `browser`, sets what the Lab's live comparison runs by default (fewer
 * seeds than the command: a tab is not a batch job), with its reason.
 *
 * Read by the link parser (core/url_state.ts), the Lab (state/lab.svelte.ts, ui/LabPanel.svelte)
 * and `spade lab` (cli/cmd_lab.ts). A second table, LAB_RUN_SCHEMA, gives the range of the settings
 * `spade lab` takes as flags that no link carries (the sampling temperature, the probe's spacing);
 * every Lab setting's range is checked where it enters — the link (parseLabField), the CLI's flags
 * (cmd_lab.ts) and the Lab worker's entry (checkLabSettings) — so no value outside it reaches a run.
 * The Lab's other algorithm settings (minibatches, the ladder's step) stay in lab.ts's LAB_LOOP_DEFAULTS.
 */
import { ESTIMATORS } from '../config.ts';
import { ConfigError } from '../errors.ts';
import { DESIGNERS, designerNamed, LAB_LOOP_DEFAULTS, PRE_REGISTERED_CYCLES } from './lab.ts';
import { MAX_CURRICULUM_CHARS, MAX_WHO_CHARS } from './hand.ts';
import { SPACES } from './spaces.ts';
import {
  defaultsOf,
  field,
  fieldProblem,
  int,
  num,
  oneOf,
  parseField,
  text,
  type Field,
  type Infer,
} from '../schema.ts';

/** The schema table, in the order the Lab shows its inputs. */
export const LAB_SCHEMA = {
  seed: field(int(0, 2 ** 31 - 1), {
    default: LAB_LOOP_DEFAULTS.seed,
    why: 'seed 1: the first deciding seed of every pre-registration (docs/lab.md); every random choice of a run derives from it, so a link replays the run',
    url: 'lab.seed',
  }),
  cycles: field(int(1, 1000), {
    default: PRE_REGISTERED_CYCLES,
    why: 'pre-registration 3 (docs/lab.md): at 40 cycles a scripted curriculum beat random levels on seeds 1–10 (frontier − random +0.08 [0.03, 0.14]); at 80 random levels caught up. Up to 1,000: round 4 asks for 600-cycle runs of the climb (about 7 minutes each here)',
    url: 'lab.cycles',
  }),
  designer: field(oneOf(DESIGNERS), {
    default: LAB_LOOP_DEFAULTS.designer,
    why: "the method's own designer: a tiny model trained on the designer reward; the others are scripted references and baselines",
    url: 'lab.designer',
  }),
  estimator: field(oneOf(ESTIMATORS), {
    default: LAB_LOOP_DEFAULTS.estimator,
    why: 'learnability 4p(1 − p) sees a level the agent wins 1 time in 8 (0.44), which paper_blend scores like one it never wins (pre-registration 3)',
    url: 'lab.est',
  }),
  space: field(oneOf(SPACES), {
    default: LAB_LOOP_DEFAULTS.space,
    why: 'the lock chain at alphabet 5, lengths 2–9: each length learnable once the one before it is, a probe that weighs every stage, and room for a curriculum (the alphabet-2 chain had none; pre-registration 3)',
    url: 'lab.space',
  }),
  levels: field(int(1, 8), {
    default: LAB_LOOP_DEFAULTS.levels,
    why: 'K = 4 levels a cycle: the learned designer writes 3 and one slot is an edit of a level the agent can already win',
    url: 'lab.K',
  }),
  plays: field(int(1, 16), {
    default: LAB_LOOP_DEFAULTS.plays,
    why: 'N = 8 plays per level and arm: 32 agent episodes a cycle at K = 4',
    url: 'lab.N',
  }),
  probePlays: field(int(1, 32), {
    default: LAB_LOOP_DEFAULTS.probePlays,
    why: '16 plays per probe level, on fixed seeds (8 at temperature 1 differed from an independent probe by up to 0.08)',
    url: 'lab.P',
  }),
  /** The hand designer's curriculum (hand.ts): a group of K level letters per cycle, joined by ".". */
  curriculum: field(text(MAX_CURRICULUM_CHARS), {
    default: '',
    why: 'none until a person picks levels ("You design the curriculum"); a link carries it so the same seed replays the same curriculum to the same numbers',
    url: 'lab.hand',
  }),
  /** Who made the hand-made curriculum, as the class board shows it (plain text). */
  who: field(text(MAX_WHO_CHARS), {
    default: '',
    why: 'unnamed unless its author gives a name; shown as text, never as markup',
    url: 'lab.who',
  }),
  /** The seeds "Compare designers" runs, from `seed` up. */
  seeds: field(int(1, 20), {
    default: 10,
    why: 'pre-registered: ten seeds decide (`spade lab compare --seeds 1-10` takes them as a range)',
    url: 'lab.S',
  }),
} as const satisfies Record<string, Field & { url: string }>;

/**
 * The Lab's settings that `spade lab` takes as flags and no link carries (the panel runs them at
 * their defaults, LAB_LOOP_DEFAULTS): their ranges, checked at the CLI and the worker as the link's are.
 */
export const LAB_RUN_SCHEMA = {
  temperature: field(num(0.1, 2), {
    default: LAB_LOOP_DEFAULTS.temperature,
    why: "1: the models' own distribution. From 0.1 to 2 (docs/lab.md): below 0.1 sampling is all but greedy (a level's plays repeat one reply, so GRPO's group advantages vanish); above 2 the policy is flatter than the fresh model's, and the largest logit gap the agent's adapter opens (about 4.5 nats, roles.ts) gives its best digit at most 0.70; the fast and reference paths give the same numbers at both ends",
  }),
  probeEvery: field(int(1, 400), {
    default: LAB_LOOP_DEFAULTS.probeEvery,
    why: 'the probe after every 5th cycle and the last two (the gain reads cycle 0 and the last two); at most the longest run',
  }),
  skipSpikes: field(num(0, 1000), {
    default: 0,
    why: "0: off. Else the agent skips a step whose gradient norm is over this many times the median of its last 64 steps' (the engine's SpikeGuard; from 1). Off by default: at 10 it made the pilot's gated and azr-steps agents worse (top half −0.27 and −0.23) and did not stop their collapses (docs/lab.md)",
  }),
  agentLrEnd: field(num(0.01, 1), {
    default: 1,
    why: "1: the agent's learning rate is constant. Else it falls linearly over the run to this fraction of itself at the last cycle; round 4 tried it against the climb's late collapses (docs/lab.md)",
  }),
  agentLr: field(num(0, 0.1), {
    default: 0,
    why: "0: the space's own agent learning rate (the climb's 1e-3, else 3e-3; src/lab/roles.ts). Round 4's pilots: at 2e-3 the climb's gated agents collapsed and relearned; at 1e-3 they held (docs/lab.md)",
  }),
} as const satisfies Record<string, Field>;

type Schema = typeof LAB_SCHEMA;
export type LabKey = keyof Schema;
/** The Lab's settings: the worker's, the cycle count, and the comparison's seeds. */
export type LabChoices = { -readonly [K in LabKey]: Infer<Schema[K]> };
export type LabRunKey = keyof typeof LAB_RUN_SCHEMA;
/** Every Lab setting's value type: the link's (LabChoices) and the flags-only ones (LAB_RUN_SCHEMA). */
export type LabValues = LabChoices & { -readonly [K in LabRunKey]: Infer<(typeof LAB_RUN_SCHEMA)[K]> };

/** Every Lab setting's Field, the link's and the flags-only ones, by name (own keys only). */
export function labField(key: string): Field | undefined {
  if (Object.hasOwn(LAB_SCHEMA, key)) return LAB_SCHEMA[key as LabKey];
  if (Object.hasOwn(LAB_RUN_SCHEMA, key)) return LAB_RUN_SCHEMA[key as LabRunKey];
  return undefined;
}

export const LAB_KEYS = Object.keys(LAB_SCHEMA) as LabKey[];

export const LAB_PRESET_NAMES = ['browser'] as const;
export type LabPresetName = (typeof LAB_PRESET_NAMES)[number];

/** Named presets: what an entry point sets over the defaults, each with its reason. */
export const LAB_PRESETS: Record<LabPresetName, { [K in LabKey]?: { value: LabChoices[K]; why: string } }> = {
  browser: {
    seeds: {
      value: 1,
      why: "a tab's live comparison: every arm on one seed (minutes); the ten-seed result is shown from the command's runs (docs/lab.md)",
    },
  },
};

/** The defaults, with a preset's values over them when one is named. */
export function labDefaults(preset?: LabPresetName): LabChoices {
  const out = defaultsOf(LAB_SCHEMA) as LabChoices;
  if (preset) for (const [k, e] of Object.entries(LAB_PRESETS[preset])) (out as Record<string, unknown>)[k] = e.value;
  return out;
}

/**
 * One setting's value from a link's text (or a flag's: the flags-only settings too): the value, or a
 * message saying what the setting accepts (named by its link key, else its name). A designer's
 * earlier name (regret) is read as its current one.
 */
export function parseLabField<K extends LabKey | LabRunKey>(
  key: K,
  text: string,
): { ok: true; value: LabValues[K] } | { ok: false; message: string } {
  const f = labField(key) as (Field & { url?: string }) | undefined;
  if (!f) return { ok: false, message: `unknown Lab setting ${JSON.stringify(String(key))}` }; // own keys only
  return parseField(f.url ?? key, f, key === 'designer' ? (designerNamed(text) ?? text) : text) as
    { ok: true; value: LabValues[K] } | { ok: false; message: string };
}

/**
 * Every range problem of the settings given (keys without a Field are not looked at), each named as
 * `name(key)` says — `--temperature` at the CLI; an empty list when every value is in its range.
 */
function labSettingProblems(s: Readonly<Record<string, unknown>>, name: (key: string) => string = (k) => k): string[] {
  const out: string[] = [];
  for (const key of Object.keys(s)) {
    const f = labField(key);
    const problem = f && s[key] !== undefined ? fieldProblem(name(key), f, s[key]) : null;
    if (problem) out.push(problem);
  }
  return out;
}

/**
 * Throws a ConfigError (data.issues lists each problem) unless every setting given is in its range:
 * the Lab worker's entry, so a caller that skipped the link's and the CLI's checks is refused too.
 */
export function checkLabSettings(s: Readonly<Record<string, unknown>>): void {
  const issues = labSettingProblems(s);
  if (issues.length) throw new ConfigError(`Lab settings out of range: ${issues.join('; ')}.`, { issues });
}

/**
 * Typed-in settings made valid: numbers rounded and clamped into their range, anything that is no
 * number (or an unknown name, or text too long) replaced by `fallback`'s value.
 */
export function clampLabChoices(s: LabChoices, fallback: LabChoices): LabChoices {
  const out = { ...s };
  for (const k of LAB_KEYS) {
    const f: Field = LAB_SCHEMA[k];
    if (f.kind === 'enum' || f.kind === 'text') {
      if (fieldProblem(k, f, s[k]) !== null) (out as Record<string, unknown>)[k] = fallback[k];
      continue;
    }
    const v = Number(s[k]);
    (out as Record<string, unknown>)[k] = Number.isFinite(v)
      ? Math.min(f.max, Math.max(f.min, Math.round(v)))
      : fallback[k];
  }
  return out;
}
