/**
 * URL state, TF-Playground style: the open panel, the theme, the config fields whose schema entry
 * says `url: true` (config.ts), and, for sharing, a compressed env set under "set" live in the URL
 * hash. Parsing returns only the fields that are present in the hash AND valid (the Playground's
 * `hasKey`): a bad value is dropped with a warning and never replaces what the app already holds
 * (a saved seed stays when a link says `seed=abc`); it never throws. Pure: the browser side
 * (state/app.svelte.ts) applies the fields and writes the hash with history.replaceState only when
 * its text changes.
 */
import { applyPreset, CONFIG_KEYS, CONFIG_SCHEMA, checkField, DEFAULTS, type Config } from './config.ts';

export const PANELS = ['run', 'environments', 'memory', 'training', 'lab', 'models', 'settings'] as const;
export type Panel = (typeof PANELS)[number];
export const THEMES = ['system', 'light', 'dark'] as const;
export type Theme = (typeof THEMES)[number];

type Schema = typeof CONFIG_SCHEMA;
/** The config keys whose schema entry has `url: true`. */
export type UrlConfigKey = { [K in keyof Schema]: Schema[K] extends { url: true } ? K : never }[keyof Schema];

/** Config fields that are shareable through the URL: the schema's `url` column, in schema order. */
export const URL_CONFIG_KEYS: readonly UrlConfigKey[] = CONFIG_KEYS.filter(
  (k): k is UrlConfigKey => (CONFIG_SCHEMA[k] as { url?: boolean }).url === true,
);

export type UrlConfig = Pick<Config, UrlConfigKey>;

export interface UrlState {
  panel: Panel;
  theme: Theme;
  config: UrlConfig;
  /** A compressed env set (share link payload), kept opaque here. */
  set: string | null;
}

/** The fields a hash sets: each one present in it and valid; absent or rejected fields are missing. */
export interface UrlFields {
  panel?: Panel;
  theme?: Theme;
  config: Partial<UrlConfig>;
  set?: string;
}

export const URL_DEFAULTS: UrlState = {
  panel: 'run',
  theme: 'system',
  config: Object.fromEntries(URL_CONFIG_KEYS.map((k) => [k, DEFAULTS[k]])) as UrlConfig,
  set: null,
};

/** Parse a location hash ("#a=1&b=2" or "a=1&b=2") into the fields it validly sets, with warnings. */
export function parseUrlState(hash: string): { fields: UrlFields; warnings: string[] } {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const warnings: string[] = [];
  const fields: UrlFields = { config: {} };
  const panel = params.get('panel');
  if (panel !== null) {
    if ((PANELS as readonly string[]).includes(panel)) fields.panel = panel as Panel;
    else warnings.push(`unknown panel "${panel}" in the link; it was ignored`);
  }
  const theme = params.get('theme');
  if (theme !== null) {
    if ((THEMES as readonly string[]).includes(theme)) fields.theme = theme as Theme;
    else warnings.push(`unknown theme "${theme}" in the link; it was ignored`);
  }
  for (const key of URL_CONFIG_KEYS) {
    const raw = params.get(key);
    if (raw === null) continue;
    const num = Number(raw);
    const value = CONFIG_SCHEMA[key].kind === 'enum' || raw.trim() === '' || Number.isNaN(num) ? raw : num;
    const problem = checkField(key, value);
    if (problem) warnings.push(`ignored from the link: ${problem}`);
    else (fields.config as Record<string, unknown>)[key] = value;
  }
  const set = params.get('set');
  if (set) fields.set = set;
  return { fields, warnings };
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
export function configFromLink(current: Config, fields: UrlFields): Config {
  const withLink = { ...current, ...fields.config };
  if (!fields.config.preset) return withLink;
  return { ...applyPreset(withLink, fields.config.preset), ...fields.config };
}

/** Serialize to a hash without "#"; fields equal to their default are left out. */
export function formatUrlState(state: UrlState): string {
  const params = new URLSearchParams();
  if (state.panel !== URL_DEFAULTS.panel) params.set('panel', state.panel);
  if (state.theme !== URL_DEFAULTS.theme) params.set('theme', state.theme);
  for (const key of URL_CONFIG_KEYS) {
    if (state.config[key] !== URL_DEFAULTS.config[key]) params.set(key, String(state.config[key]));
  }
  if (state.set) params.set('set', state.set);
  return params.toString();
}
