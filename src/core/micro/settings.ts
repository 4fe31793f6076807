/**
 * The micro lab's settings as one schema table, the lab's twin of config.ts's CONFIG_SCHEMA: each
 * setting a person, a flag or a link chooses has its type, the range a link and the Lab's inputs
 * accept, its key in the link, its default and the reason for that default. The defaults are the
 * pre-registered settings (docs/micro.md), which `spade micro check` and `spade micro compare` use.
 * Two named presets say where the other two entry points start from, each value that differs from
 * the default with its reason: `cli` (`spade micro`, one run) and `browser` (the Lab panel).
 *
 * Read by the link parser (core/url_state.ts), the Lab (state/lab.svelte.ts, ui/LabPanel.svelte)
 * and `spade micro` (cli/cmd_micro.ts). The lab's algorithm settings past these (temperature,
 * minibatches, the probe set) stay in lab.ts's MICRO_DEFAULTS, whose values the rows below reuse.
 */
import { DESIGNERS, MICRO_DEFAULTS, type DesignerKind } from './lab.ts';

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
interface LabEnumField {
  kind: 'enum';
  values: readonly DesignerKind[];
  default: DesignerKind;
  why: string;
  /** Its key in the link. */
  url: string;
}
type LabField = LabIntField | LabEnumField;

/** The schema table, in the order the Lab shows its inputs. */
export const LAB_SCHEMA = {
  seed: {
    kind: 'int',
    min: 0,
    max: 2 ** 31 - 1,
    default: 1,
    why: 'the learning-curve checks and the first deciding seed are seed 1 (docs/micro.md); every random choice of a run derives from it, so a link replays the run',
    url: 'lab.seed',
  },
  cycles: {
    kind: 'int',
    min: 1,
    max: 200,
    default: 16,
    why: 'pre-registered: 16 cycles, 8 per main family (docs/micro.md)',
    url: 'lab.cycles',
  },
  designer: {
    kind: 'enum',
    values: DESIGNERS,
    default: MICRO_DEFAULTS.designer,
    why: "the method's own designer (a tiny model trained on the regret reward); the other three are its baselines",
    url: 'lab.designer',
  },
  levels: {
    kind: 'int',
    min: 1,
    max: 8,
    default: MICRO_DEFAULTS.levels,
    why: 'pre-registered K = 4 levels a cycle: the regret designer writes 3 and one slot is an exploration move',
    url: 'lab.K',
  },
  plays: {
    kind: 'int',
    min: 1,
    max: 16,
    default: MICRO_DEFAULTS.plays,
    why: 'pre-registered N = 8 plays per level and arm (32 agent episodes a cycle at K = 4)',
    url: 'lab.N',
  },
  probePlays: {
    kind: 'int',
    min: 1,
    max: 16,
    default: MICRO_DEFAULTS.probePlays,
    why: 'pre-registered: 8 plays per probe level, on fixed seeds',
    url: 'lab.P',
  },
  /** The seeds "Compare designers" runs, from `seed` up. */
  seeds: {
    kind: 'int',
    min: 1,
    max: 20,
    default: 10,
    why: 'pre-registered: seeds 1–10 decide (`spade micro compare --seeds 1-10` takes them as a range)',
    url: 'lab.S',
  },
} as const satisfies Record<string, LabField>;

type Schema = typeof LAB_SCHEMA;
export type LabKey = keyof Schema;
/** The lab's settings: the worker's (seed, designer, K, N, probe plays), the cycle count, and the comparison's seeds. */
export type LabChoices = { -readonly [K in LabKey]: Schema[K] extends LabEnumField ? DesignerKind : number };

export const LAB_KEYS = Object.keys(LAB_SCHEMA) as LabKey[];

export const LAB_PRESET_NAMES = ['cli', 'browser'] as const;
export type LabPresetName = (typeof LAB_PRESET_NAMES)[number];

/**
 * Named presets: what an entry point sets over the defaults, each with its reason. Both keep the
 * pre-registered K, N and probe plays, so a Lab link and a `spade micro` command with the same
 * seed, designer and cycles print the same numbers.
 */
export const LAB_PRESETS: Record<LabPresetName, { [K in LabKey]?: { value: LabChoices[K]; why: string } }> = {
  cli: {
    seed: {
      value: MICRO_DEFAULTS.seed,
      why: "`spade micro`'s default since the command's first version; keeping it keeps earlier commands printing what they printed",
    },
    cycles: {
      value: 10,
      why: "one run's default since the command's first version: 5 cycles per main family, well under a minute on a laptop CPU (runs of 4 cycles took 9–14 s, docs/micro.md)",
    },
  },
  browser: {
    cycles: {
      value: 3,
      why: "a demonstration: the default comparison (8 runs) stays under 2 minutes in Chromium (100 s on docs/micro.md's machine; 4 cycles took ~180 s); the pre-registered result is shown from MEASURED",
    },
    seeds: { value: 2, why: 'the fewest seeds that give an interval, so the default comparison is 8 runs' },
  },
};

/** The defaults (the pre-registered settings), with a preset's values over them when one is named. */
export function labDefaults(preset?: LabPresetName): LabChoices {
  const out = Object.fromEntries(LAB_KEYS.map((k) => [k, LAB_SCHEMA[k].default])) as LabChoices;
  if (preset) for (const [k, e] of Object.entries(LAB_PRESETS[preset])) (out as Record<string, unknown>)[k] = e.value;
  return out;
}

/**
 * One setting's value from a link's text: the value, or a message saying what the
 * setting accepts (named by its link key).
 */
export function parseLabField<K extends LabKey>(
  key: K,
  text: string,
): { ok: true; value: LabChoices[K] } | { ok: false; message: string } {
  const field: LabField = LAB_SCHEMA[key];
  if (field.kind === 'enum') {
    return (field.values as readonly string[]).includes(text)
      ? { ok: true, value: text as LabChoices[K] }
      : { ok: false, message: `${field.url} must be one of ${field.values.join(', ')}` };
  }
  const v = Number(text);
  if (text.trim() !== '' && Number.isInteger(v) && v >= field.min && v <= field.max)
    return { ok: true, value: v as LabChoices[K] };
  return { ok: false, message: `${field.url} must be a whole number from ${field.min} to ${field.max}` };
}

/**
 * Typed-in settings made valid: numbers rounded and clamped into their range, anything that is no
 * number (or an unknown designer) replaced by `fallback`'s value.
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
