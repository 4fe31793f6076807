/**
 * App state as a rune class: the open panel, the theme and the config. The URL hash mirrors the
 * schema-listed fields (core/url_state.ts): state/wiring.svelte.ts parses it and hands this state
 * its part (applyLink), and writes it back from urlState(); the full config persists in IndexedDB
 * so a reload loses nothing.
 */
import { DEFAULTS, validateConfig, type Config } from '../core/config.ts';
import {
  applyUrlFields,
  configFromLink,
  URL_CONFIG_KEYS,
  type Panel,
  type Theme,
  type UrlFields,
  type UrlState,
} from '../core/url_state.ts';
import { IdbStore } from '../platform/browser/idb_store.ts';
import { checkAppRecord } from '../core/spade/app_records.ts';
import { CheckedStore, type Store } from '../core/store.ts';

export class AppState {
  panel = $state<Panel>('run');
  theme = $state<Theme>('system');
  config = $state<Config>({ ...DEFAULTS });
  sharedSet = $state<string | null>(null);
  notices = $state<string[]>([]);
  readonly store: Store;

  /**
   * Every panel reads through this store: each record is checked against its schema
   * (core/spade/app_records.ts) and a damaged one is set aside with a notice here, so no stored
   * value can keep the app from starting.
   */
  constructor(store: Store = new IdbStore()) {
    this.store = new CheckedStore(store, checkAppRecord, (notice) => this.notices.push(notice));
  }

  /** Read the saved settings (the link's fields are applied over them after: applyLink). */
  async load(): Promise<void> {
    try {
      const saved = await this.store.get<Partial<Config>>('settings', 'config');
      if (saved) {
        const r = validateConfig(saved);
        if (r.ok) this.config = r.config;
        else this.notices.push(`Saved settings were partly invalid and were reset: ${r.issues.join('; ')}`);
      }
      const theme = await this.store.get<Theme>('settings', 'theme');
      if (theme) this.theme = theme;
    } catch (err) {
      this.notices.push((err as Error).message);
    }
  }

  /**
   * Apply the fields a link validly sets (the wiring's one parse); absent or rejected ones keep
   * their current value. `problems`: what the link got wrong outside the Lab's keys, as notices.
   */
  applyLink(fields: UrlFields, problems: readonly string[]): void {
    this.notices.push(...problems);
    const next = applyUrlFields(this.urlState(), fields);
    this.panel = next.panel;
    this.theme = next.theme;
    Object.assign(this.config, configFromLink($state.snapshot(this.config), fields));
    this.sharedSet = next.set;
  }

  urlState(): UrlState {
    const config = Object.fromEntries(URL_CONFIG_KEYS.map((k) => [k, this.config[k]])) as UrlState['config'];
    return { panel: this.panel, theme: this.theme, config, set: this.sharedSet };
  }

  async save(): Promise<void> {
    await this.store.put('settings', 'config', $state.snapshot(this.config));
    await this.store.put('settings', 'theme', this.theme);
  }
}
