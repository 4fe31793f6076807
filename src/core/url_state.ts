/**
 * URL state, TF-Playground style, and the app's one link parser. A location hash carries the open
 * panel, the theme, the config fields whose schema entry says `url: true` (config.ts), the micro
 * lab's settings (`lab.*`, micro/settings.ts's LAB_SCHEMA), a compressed env set under "set" and a
 * run file's address under "run". Parsing returns only the fields that are present AND valid (the
 * Playground's `hasKey`): a bad value is dropped with a LinkProblem and never replaces what the app
 * already holds (a saved seed stays when a link says `seed=abc`). Hostile links are bounded: a hash
 * past MAX_HASH_CHARS or MAX_LINK_KEYS is refused whole, a value past its length limit is dropped,
 * unknown and repeated keys are reported; it never throws. Pure: the browser side
 * (state/app.svelte.ts, state/lab.svelte.ts, ui/App.svelte) applies the fields and writes the hash
 * with history.replaceState only when its text changes.
 */
import { applyPreset, CONFIG_KEYS, CONFIG_SCHEMA, checkField, DEFAULTS, type Config } from './config.ts';
import { MAX_LINK_CHARS } from './env/envset.ts';
import { LAB_KEYS, LAB_SCHEMA, parseLabField, type LabChoices } from './micro/settings.ts';

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

/**
 * The longest hash read at all: Chromium's limit on a URL (2 MiB), so no link a browser can open is
 * refused for its length (a `run=data:…` link is the longest kind); a longer one is refused whole.
 */
export const MAX_HASH_CHARS = 2 * 2 ** 20;
/** The most keys a hash may have: several times what the app writes (panel, theme, set, run, the URL config keys, the lab's). */
export const MAX_LINK_KEYS = 64;
/** The longest value of a setting (panel, theme, config, lab): the longest valid one is under 20 characters. */
export const MAX_SETTING_CHARS = 100;

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
  /** The micro lab's settings (micro/settings.ts). */
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
  panel: 'run',
  theme: 'system',
  config: Object.fromEntries(URL_CONFIG_KEYS.map((k) => [k, DEFAULTS[k]])) as UrlConfig,
  set: null,
};

const LAB_URL_KEYS = new Map(LAB_KEYS.map((k) => [LAB_SCHEMA[k].url as string, k]));
const KNOWN_KEYS = new Set<string>(['panel', 'theme', 'set', 'run', ...URL_CONFIG_KEYS, ...LAB_URL_KEYS.keys()]);

/** A key or value as a message quotes it: at most 40 characters. */
const quote = (text: string) => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);

/**
 * Parse a location hash ("#a=1&b=2" or "a=1&b=2") into the fields it validly sets, with a problem
 * for each part it did not use. A repeated key counts once: its first value, as a browser's
 * URLSearchParams.get reads it.
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
    const scope = LAB_URL_KEYS.has(key) ? 'lab' : 'app';
    if (!KNOWN_KEYS.has(key)) {
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
  // a run address is bounded by the hash's limit alone (a `data:` run file is long)
  const limit = (key: string) => (key === 'run' ? Infinity : key === 'set' ? MAX_LINK_CHARS : MAX_SETTING_CHARS);
  for (const [key, value] of first) {
    if (value.length <= limit(key)) continue;
    first.delete(key);
    problems.push({
      code: 'too-long',
      scope: LAB_URL_KEYS.has(key) ? 'lab' : 'app',
      key,
      message:
        key === 'set'
          ? `ignored from the link: its environment set is ${value.length.toLocaleString('en')} characters; a set link holds at most ${MAX_LINK_CHARS.toLocaleString('en')}. Copy the whole link again, or share the set as a file.`
          : `ignored from the link: ${key} is ${value.length.toLocaleString('en')} characters long; it may be at most ${limit(key)}`,
    });
  }
  const bad = (key: string, message: string, scope: LinkProblem['scope'] = 'app') =>
    problems.push({ code: 'bad-value', scope, key, message });

  const panel = first.get('panel');
  if (panel !== undefined) {
    if ((PANELS as readonly string[]).includes(panel)) fields.panel = panel as Panel;
    else bad('panel', `unknown panel ${quote(panel)} in the link; it was ignored`);
  }
  const theme = first.get('theme');
  if (theme !== undefined) {
    if ((THEMES as readonly string[]).includes(theme)) fields.theme = theme as Theme;
    else bad('theme', `unknown theme ${quote(theme)} in the link; it was ignored`);
  }
  for (const key of URL_CONFIG_KEYS) {
    const raw = first.get(key);
    if (raw === undefined) continue;
    const num = Number(raw);
    const value = CONFIG_SCHEMA[key].kind === 'enum' || raw.trim() === '' || Number.isNaN(num) ? raw : num;
    const problem = checkField(key, value);
    if (problem) bad(key, `ignored from the link: ${problem}`);
    else (fields.config as Record<string, unknown>)[key] = value;
  }
  for (const [url, key] of LAB_URL_KEYS) {
    const raw = first.get(url);
    if (raw === undefined) continue;
    const r = parseLabField(key, raw);
    if (r.ok) (fields.lab as Record<string, unknown>)[key] = r.value;
    else bad(url, `ignored from the link: ${r.message}`, 'lab');
  }
  const set = first.get('set');
  if (set) fields.set = set;
  const run = first.get('run');
  if (run) fields.run = run;
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

/** The lab's part of a hash (no "#"): the settings that differ from `defaults`, in schema order. */
export function formatLabLink(s: LabChoices, defaults: LabChoices): string {
  const params = new URLSearchParams();
  for (const k of LAB_KEYS) if (s[k] !== defaults[k]) params.set(LAB_SCHEMA[k].url, String(s[k]));
  return params.toString();
}

/** The run part of a hash (no "#"): `run=` and the address, encoded. */
export const formatRunLink = (url: string): string => `run=${encodeURIComponent(url)}`;
