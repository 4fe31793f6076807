/**
 * The Lab's settings as one schema table, the Lab's twin of config.ts's CONFIG_SCHEMA: each setting
 * a person, a flag or a link chooses has its type, the range a link and the Lab's inputs accept, its
 * key in the link, its default and the reason for that default. The defaults come from lab.ts's
 * MICRO_DEFAULTS and PRE_REGISTERED_CYCLES — one source: `spade micro`, `spade micro compare` and
 * the Lab panel start from the same values, so a Lab link and a command with the same settings print
 * the same numbers. One preset, `browser`, sets what the Lab's live comparison runs by default (fewer
 * seeds than the command: a tab is not a batch job), with its reason.
 *
 * Read by the link parser (core/url_state.ts), the Lab (state/lab.svelte.ts, ui/LabPanel.svelte)
 * and `spade micro` (cli/cmd_micro.ts). The Lab's algorithm settings past these (temperature,
 * minibatches, the ladder's step) stay in lab.ts's MICRO_DEFAULTS.
 */
import { ESTIMATORS, type Estimator } from '../config.ts';
import { DESIGNERS, designerNamed, MICRO_DEFAULTS, PRE_REGISTERED_CYCLES, type DesignerKind } from './lab.ts';
import { SPACES, type SpaceName } from './spaces.ts';

interface LabIntField {
  kind: 'int';
  /** The range a link or the Lab's inputs accept. */
  min: number;
  max: number;
  default: number;
  why: string;
  /** Its key in the link. */
  url: string;
}
interface LabEnumField<T extends string> {
  kind: 'enum';
  values: readonly T[];
  default: T;
  why: string;
  /** Its key in the link. */
  url: string;
}
type LabField = LabIntField | LabEnumField<string>;

/** The schema table, in the order the Lab shows its inputs. */
export const LAB_SCHEMA = {
  seed: {
    kind: 'int',
    min: 0,
    max: 2 ** 31 - 1,
    default: MICRO_DEFAULTS.seed,
    why: 'seed 1: the first deciding seed of every pre-registration (docs/micro.md); every random choice of a run derives from it, so a link replays the run',
    url: 'lab.seed',
  },
  cycles: {
    kind: 'int',
    min: 1,
    max: 400,
    default: PRE_REGISTERED_CYCLES,
    why: 'pre-registered (docs/micro.md, pre-registration 3): the budget at which a scripted curriculum beat random levels on seeds 1–10',
    url: 'lab.cycles',
  },
  designer: {
    kind: 'enum',
    values: DESIGNERS,
    default: MICRO_DEFAULTS.designer,
    why: "the method's own designer: a tiny model trained on the designer reward; the others are scripted references and baselines",
    url: 'lab.designer',
  },
  estimator: {
    kind: 'enum',
    values: ESTIMATORS,
    default: MICRO_DEFAULTS.estimator,
    why: 'learnability 4p(1 − p) sees a level the agent wins 1 time in 8 (0.44), which paper_blend scores like one it never wins (pre-registration 3)',
    url: 'lab.est',
  },
  space: {
    kind: 'enum',
    values: SPACES,
    default: MICRO_DEFAULTS.space,
    why: 'the lock chain: each length learnable once the one before it is, and a probe that weighs every stage (pre-registration 3)',
    url: 'lab.space',
  },
  levels: {
    kind: 'int',
    min: 1,
    max: 8,
    default: MICRO_DEFAULTS.levels,
    why: 'K = 4 levels a cycle: the learned designer writes 3 and one slot is an edit of a level the agent can already win',
    url: 'lab.K',
  },
  plays: {
    kind: 'int',
    min: 1,
    max: 16,
    default: MICRO_DEFAULTS.plays,
    why: 'N = 8 plays per level and arm: 32 agent episodes a cycle at K = 4',
    url: 'lab.N',
  },
  probePlays: {
    kind: 'int',
    min: 1,
    max: 32,
    default: MICRO_DEFAULTS.probePlays,
    why: '16 plays per probe level, on fixed seeds (8 at temperature 1 differed from an independent probe by up to 0.08)',
    url: 'lab.P',
  },
  /** The seeds "Compare designers" runs, from `seed` up. */
  seeds: {
    kind: 'int',
    min: 1,
    max: 20,
    default: 10,
    why: 'pre-registered: ten seeds decide (`spade micro compare --seeds 1-10` takes them as a range)',
    url: 'lab.S',
  },
} as const satisfies Record<string, LabField>;

type Schema = typeof LAB_SCHEMA;
export type LabKey = keyof Schema;
/** The Lab's settings: the worker's, the cycle count, and the comparison's seeds. */
export type LabChoices = {
  -readonly [K in LabKey]: K extends 'designer'
    ? DesignerKind
    : K extends 'estimator'
      ? Estimator
      : K extends 'space'
        ? SpaceName
        : number;
};

export const LAB_KEYS = Object.keys(LAB_SCHEMA) as LabKey[];

export const LAB_PRESET_NAMES = ['browser'] as const;
export type LabPresetName = (typeof LAB_PRESET_NAMES)[number];

/** Named presets: what an entry point sets over the defaults, each with its reason. */
export const LAB_PRESETS: Record<LabPresetName, { [K in LabKey]?: { value: LabChoices[K]; why: string } }> = {
  browser: {
    seeds: {
      value: 1,
      why: "a tab's live comparison: every arm on one seed (minutes); the ten-seed result is shown from the command's runs (docs/micro.md)",
    },
  },
};

/** The defaults, with a preset's values over them when one is named. */
export function labDefaults(preset?: LabPresetName): LabChoices {
  const out = Object.fromEntries(LAB_KEYS.map((k) => [k, LAB_SCHEMA[k].default])) as LabChoices;
  if (preset) for (const [k, e] of Object.entries(LAB_PRESETS[preset])) (out as Record<string, unknown>)[k] = e.value;
  return out;
}

/**
 * One setting's value from a link's text: the value, or a message saying what the setting accepts
 * (named by its link key). A designer's earlier name (regret) is read as its current one.
 */
export function parseLabField<K extends LabKey>(
  key: K,
  text: string,
): { ok: true; value: LabChoices[K] } | { ok: false; message: string } {
  const field: LabField = LAB_SCHEMA[key];
  if (field.kind === 'enum') {
    const v =
      key === 'designer' ? designerNamed(text) : (field.values as readonly string[]).includes(text) ? text : null;
    return v !== null
      ? { ok: true, value: v as LabChoices[K] }
      : { ok: false, message: `${field.url} must be one of ${field.values.join(', ')}` };
  }
  const v = Number(text);
  if (text.trim() !== '' && Number.isInteger(v) && v >= field.min && v <= field.max)
    return { ok: true, value: v as LabChoices[K] };
  return { ok: false, message: `${field.url} must be a whole number from ${field.min} to ${field.max}` };
}

/**
 * Typed-in settings made valid: numbers rounded and clamped into their range, anything that is no
 * number (or an unknown name) replaced by `fallback`'s value.
 */
export function clampLabChoices(s: LabChoices, fallback: LabChoices): LabChoices {
  const out = { ...s };
  for (const k of LAB_KEYS) {
    const field: LabField = LAB_SCHEMA[k];
    if (field.kind === 'enum') {
      if (!(field.values as readonly string[]).includes(String(s[k])))
        (out as Record<string, unknown>)[k] = fallback[k];
      continue;
    }
    const v = Number(s[k]);
    (out as Record<string, unknown>)[k] = Number.isFinite(v)
      ? Math.min(field.max, Math.max(field.min, Math.round(v)))
      : fallback[k];
  }
  return out;
}
