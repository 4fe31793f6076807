/**
 * URL state, TF-Playground style: only the fields listed in URL_SCHEMA live in
 * the URL hash (plus, for sharing, a compressed env set under "set"). Parsing is
 * forgiving: a bad value is dropped with a warning and the default stays; it
 * never throws. Pure: the browser side (state/url.svelte.ts) writes the result
 * with history.replaceState only when the string changes.
 */
import { CONFIG_SCHEMA, checkField, DEFAULTS, type Config } from './config.ts';

export const PANELS = ['run', 'environments', 'memory', 'training', 'models', 'settings'] as const;
export type Panel = (typeof PANELS)[number];
export const THEMES = ['system', 'light', 'dark'] as const;
export type Theme = (typeof THEMES)[number];

/** Config fields that are shareable through the URL. */
export const URL_CONFIG_KEYS = [
  'seed',
  'setting',
  'difficulty',
  'estimator',
  'playsPerEnv',
] as const satisfies readonly (keyof Config)[];

export interface UrlState {
  panel: Panel;
  theme: Theme;
  config: Pick<Config, (typeof URL_CONFIG_KEYS)[number]>;
  /** A compressed env set (share link payload), kept opaque here. */
  set: string | null;
}

export const URL_DEFAULTS: UrlState = {
  panel: 'run',
  theme: 'system',
  config: Object.fromEntries(URL_CONFIG_KEYS.map((k) => [k, DEFAULTS[k]])) as UrlState['config'],
  set: null,
};

/** Parse a location hash ("#a=1&b=2" or "a=1&b=2"). Returns state and warnings. */
export function parseUrlState(hash: string): { state: UrlState; warnings: string[] } {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const warnings: string[] = [];
  const state: UrlState = { ...URL_DEFAULTS, config: { ...URL_DEFAULTS.config } };
  const panel = params.get('panel');
  if (panel !== null) {
    if ((PANELS as readonly string[]).includes(panel)) state.panel = panel as Panel;
    else warnings.push(`unknown panel "${panel}" in the link; showing "${state.panel}"`);
  }
  const theme = params.get('theme');
  if (theme !== null) {
    if ((THEMES as readonly string[]).includes(theme)) state.theme = theme as Theme;
    else warnings.push(`unknown theme "${theme}" in the link; using "${state.theme}"`);
  }
  for (const key of URL_CONFIG_KEYS) {
    const raw = params.get(key);
    if (raw === null) continue;
    const field = CONFIG_SCHEMA[key];
    const num = Number(raw);
    const value = field.kind === 'enum' || raw.trim() === '' || Number.isNaN(num) ? raw : num;
    const problem = checkField(key, value);
    if (problem) warnings.push(`ignored from the link: ${problem}`);
    else (state.config as Record<string, unknown>)[key] = value;
  }
  const set = params.get('set');
  if (set) state.set = set;
  return { state, warnings };
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
