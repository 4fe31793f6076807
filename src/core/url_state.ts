/**
 * URL state, TF-Playground style: the app's one link parser (parseUrlState) and its one formatter
 * (formatUrlState), over one table of every key a link may carry (LINK_KEYS). Each key is a Field
 * (schema.ts): the open panel, the theme, the config fields whose Field has a `url` (config.ts), the
 * Lab's settings (`lab.*`, lab/settings.ts's LAB_SCHEMA), a compressed env set under "set" and a
 * run file's address under "run". Parsing returns only the fields that are present AND valid (the
 * Playground's `hasKey`): a bad value is dropped with a LinkProblem and never replaces what the app
 * already holds (a saved seed stays when a link says `seed=abc`). Hostile links are bounded: a hash
 * past MAX_HASH_CHARS or MAX_LINK_KEYS is refused whole, a value past its Field's length is dropped,
 * unknown and repeated keys are reported; it never throws. Pure: the browser side
 * (state/app.svelte.ts, state/lab.svelte.ts, ui/App.svelte) applies the fields and writes the hash
 * with history.replaceState only when its text changes.
 */
import { applyPreset, CONFIG_KEYS, CONFIG_SCHEMA, DEFAULTS, type Config } from './config.ts';
import { MAX_LINK_CHARS } from './env/envset.ts';
import { LAB_KEYS, LAB_SCHEMA, parseLabField, type LabChoices, type LabKey } from './lab/settings.ts';
import { field, oneOf, parseField, text, type Field } from './schema.ts';

export const PANELS = ['run', 'environments', 'memory', 'training', 'lab', 'models', 'settings'] as const;
export type Panel = (typeof PANELS)[number];
export const THEMES = ['system', 'light', 'dark'] as const;
export type Theme = (typeof THEMES)[number];

type Schema = typeof CONFIG_SCHEMA;
/** The config keys a link carries: those whose Field has a `url`. */
export type UrlConfigKey = { [K in keyof Schema]: Schema[K]['url'] extends string ? K : never }[keyof Schema];

/** Config fields that are shareable through the URL: those with a `url`, in schema order. */
export const URL_CONFIG_KEYS: readonly UrlConfigKey[] = CONFIG_KEYS.filter(
  (k): k is UrlConfigKey => typeof CONFIG_SCHEMA[k].url === 'string',
);

type UrlConfig = Pick<Config, UrlConfigKey>;

/**
 * The longest hash read at all: Chromium's limit on a URL (2 MiB), so no link a browser can open is
 * refused for its length (a `run=data:…` link is the longest kind); a longer one is refused whole.
 */
export const MAX_HASH_CHARS = 2 * 2 ** 20;
/** The most keys a hash may have: several times what the app writes (panel, theme, set, run, the URL config keys, the lab's). */
export const MAX_LINK_KEYS = 64;
/** The longest value of a setting (panel, theme, config, lab): the longest valid one is under 20 characters. */
export const MAX_SETTING_CHARS = 100;

/** The app's own link keys, beside the config's and the Lab's. */
export const APP_LINK_FIELDS = {
  panel: field(oneOf(PANELS), {
    default: 'run',
    why: 'the self-play run is what the app is for; a link names another panel to open it',
    url: 'panel',
  }),
  theme: field(oneOf(THEMES), { default: 'system', why: "follow the system's light or dark setting", url: 'theme' }),
  set: field(text(MAX_LINK_CHARS), {
    default: '',
    why: 'no shared set unless a link brings one (its payload: a compressed env set, envset.ts)',
    url: 'set',
  }),
  run: field(text(MAX_HASH_CHARS), {
    default: '',
    why: "no run file unless a link names one (its address, checked before it is fetched); bounded by the hash's own limit, since a data: run file is long",
    url: 'run',
  }),
} as const;

/** Where a link key's value goes, and the Field that reads it. */
type LinkKey =
  | { to: 'panel' | 'theme' | 'set' | 'run'; scope: 'app'; field: Field }
  | { to: 'config'; name: UrlConfigKey; scope: 'app'; field: Field }
  | { to: 'lab'; name: LabKey; scope: 'lab'; field: Field };

/**
 * Every key a link may carry, in the order a link is written: panel, theme, the config's, set, run,
 * then the Lab's (so a link the app wrote before reads the same).
 */
export const LINK_KEYS: readonly LinkKey[] = [
  { to: 'panel', scope: 'app', field: APP_LINK_FIELDS.panel },
  { to: 'theme', scope: 'app', field: APP_LINK_FIELDS.theme },
  ...URL_CONFIG_KEYS.map((name): LinkKey => ({ to: 'config', name, scope: 'app', field: CONFIG_SCHEMA[name] })),
  { to: 'set', scope: 'app', field: APP_LINK_FIELDS.set },
  { to: 'run', scope: 'app', field: APP_LINK_FIELDS.run },
  ...LAB_KEYS.map((name): LinkKey => ({ to: 'lab', name, scope: 'lab', field: LAB_SCHEMA[name] })),
];
const BY_URL = new Map(LINK_KEYS.map((k) => [k.field.url!, k]));

/** What a link sets (formatUrlState's input): the app's part always, the Lab's and a run's when present. */
export interface UrlState {
  panel: Panel;
  theme: Theme;
  config: UrlConfig;
  /** A compressed env set (share link payload), kept opaque here. */
  set: string | null;
  /** A run file's address (`#run=URL`). */
  run?: string | null;
  /** The Lab's settings, written where they differ from `labDefaults` (formatUrlState's second argument). */
  lab?: LabChoices;
}

/** The fields a hash sets: each one present in it and valid; absent or rejected fields are missing. */
export interface UrlFields {
  panel?: Panel;
  theme?: Theme;
  config: Partial<UrlConfig>;
  /** The Lab's settings (lab/settings.ts). */
  lab: Partial<LabChoices>;
  set?: string;
  /** A run file's address (`#run=URL`), kept as written: the app checks its scheme before it fetches. */
  run?: string;
}

/**
 * Why part of a link was not used. `scope` says who shows it: the Lab its `lab.*` keys, the app the
 * rest. `key` is the key it concerns (null for the whole link), cut to 40 characters.
 */
export interface LinkProblem {
  code: 'too-long' | 'too-many-keys' | 'unknown-key' | 'duplicate-key' | 'bad-value';
  scope: 'app' | 'lab';
  key: string | null;
  message: string;
}

export const URL_DEFAULTS: UrlState = {
  panel: APP_LINK_FIELDS.panel.default,
  theme: APP_LINK_FIELDS.theme.default,
  config: Object.fromEntries(URL_CONFIG_KEYS.map((k) => [k, DEFAULTS[k]])) as UrlConfig,
  set: null,
};

/** A key or value as a message quotes it: at most 40 characters. */
const quote = (text: string) => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);

/** The most characters a key's value may have: a setting's MAX_SETTING_CHARS, a text Field's own length. */
const limitOf = (f: Field) => (f.kind === 'text' ? f.maxLength : MAX_SETTING_CHARS);

/**
 * Parse a location hash ("#a=1&b=2" or "a=1&b=2") into the fields it validly sets, with a problem
 * for each part it did not use. A repeated key counts once: its first value, as a browser's
 * URLSearchParams.get reads it. Every key is read by its Field (LINK_KEYS); problems about values
 * come in the table's order.
 */
export function parseUrlState(hash: string): { fields: UrlFields; problems: LinkProblem[] } {
  const fields: UrlFields = { config: {}, lab: {} };
  const problems: LinkProblem[] = [];
  const text = hash.replace(/^#/, '');
  if (text.length > MAX_HASH_CHARS) {
    const message = `The link is too long (${text.length.toLocaleString('en')} characters; a link may have at most ${MAX_HASH_CHARS.toLocaleString('en')}); nothing in it was used. Copy the whole link again, or share a file instead.`;
    return { fields, problems: [{ code: 'too-long', scope: 'app', key: null, message }] };
  }
  const params = [...new URLSearchParams(text)];
  if (params.length > MAX_LINK_KEYS) {
    const message = `The link has ${params.length} parts; a link may have at most ${MAX_LINK_KEYS}; nothing in it was used. Copy the whole link again.`;
    return { fields, problems: [{ code: 'too-many-keys', scope: 'app', key: null, message }] };
  }
  const first = new Map<string, string>();
  for (const [key, value] of params) {
    const scope = BY_URL.get(key)?.scope ?? 'app';
    if (!BY_URL.has(key)) {
      problems.push({
        code: 'unknown-key',
        scope,
        key: key.slice(0, 40),
        message: `ignored from the link: unknown key ${quote(key)}`,
      });
    } else if (first.has(key)) {
      problems.push({
        code: 'duplicate-key',
        scope,
        key,
        message: `ignored from the link: a second ${key}; the first one was used`,
      });
    } else first.set(key, value);
  }
  for (const [key, value] of first) {
    const k = BY_URL.get(key)!;
    const limit = limitOf(k.field);
    if (value.length <= limit) continue;
    first.delete(key);
    problems.push({
      code: 'too-long',
      scope: k.scope,
      key,
      message:
        k.to === 'set'
          ? `ignored from the link: its environment set is ${value.length.toLocaleString('en')} characters; a set link holds at most ${limit.toLocaleString('en')}. Copy the whole link again, or share the set as a file.`
          : `ignored from the link: ${key} is ${value.length.toLocaleString('en')} characters long; it may be at most ${limit}`,
    });
  }
  for (const k of LINK_KEYS) {
    const url = k.field.url!;
    const raw = first.get(url);
    if (raw === undefined || ((k.to === 'set' || k.to === 'run') && raw === '')) continue;
    if (k.to === 'lab') {
      // the Lab's reader also takes a designer's earlier name
      const r = parseLabField(k.name, raw);
      if (r.ok) (fields.lab as Record<string, unknown>)[k.name] = r.value;
      else problems.push({ code: 'bad-value', scope: 'lab', key: url, message: `ignored from the link: ${r.message}` });
      continue;
    }
    const r = parseField(url, k.field, raw);
    if (!r.ok) {
      problems.push({ code: 'bad-value', scope: 'app', key: url, message: `ignored from the link: ${r.message}` });
      continue;
    }
    if (k.to === 'config') (fields.config as Record<string, unknown>)[k.name] = r.value;
    else (fields as unknown as Record<string, unknown>)[k.to] = r.value;
  }
  return { fields, problems };
}

/**
 * `current` with the hash's fields applied: each field the hash validly sets replaces the current
 * one, every other field stays. The env set is the exception: it is the link's payload, not a
 * setting, so a hash without one has none.
 */
export function applyUrlFields(current: UrlState, fields: UrlFields): UrlState {
  return {
    panel: fields.panel ?? current.panel,
    theme: fields.theme ?? current.theme,
    config: { ...current.config, ...fields.config },
    set: fields.set ?? null,
  };
}

/**
 * The full config after a link: a link naming a preset applies that preset's values first (they
 * include keys a link does not list), then the link's own fields over it — so `preset=paper&seed=3`
 * is the paper recipe with seed 3. A link without a preset changes only the fields it sets.
 */
export function configFromLink(current: Config, fields: Pick<UrlFields, 'config'>): Config {
  const withLink = { ...current, ...fields.config };
  if (!fields.config.preset) return withLink;
  return { ...applyPreset(withLink, fields.config.preset), ...fields.config };
}

/**
 * The one formatter: a hash without "#", every key of LINK_KEYS whose value differs from its
 * default, in the table's order. The Lab's settings, when given, are compared with `labDefaults`
 * (the Lab's own starting values: its `browser` preset), so a link holds only what was changed;
 * without `labDefaults` every one of them is written (none is taken for a default).
 */
export function formatUrlState(state: UrlState, labDefaults?: LabChoices): string {
  const params = new URLSearchParams();
  for (const k of LINK_KEYS) {
    const url = k.field.url!;
    let value: unknown;
    let dflt: unknown;
    if (k.to === 'config') [value, dflt] = [state.config[k.name], URL_DEFAULTS.config[k.name]];
    else if (k.to === 'lab') {
      if (!state.lab) continue;
      [value, dflt] = [state.lab[k.name], labDefaults?.[k.name]];
    } else if (k.to === 'set' || k.to === 'run') [value, dflt] = [state[k.to] ?? '', ''];
    else [value, dflt] = [state[k.to], URL_DEFAULTS[k.to]];
    if (value !== dflt) params.set(url, String(value));
  }
  return params.toString();
}
