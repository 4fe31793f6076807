/**
 * The environment library as a rune class: the seed library, imported sets and a
 * set opened from a share link; the selected environment; checker reports. Imported
 * sets persist in the store, so a reload keeps them. Environment code only ever
 * runs in the sandbox worker pool.
 */
import { concurrencySizes, DEFAULTS } from '../core/config.ts';
import { SEED_ENVS } from '../core/env/seeds/index.ts';
import { HOSTILE_DEMOS } from '../core/env/hostile.ts';
import {
  decodeShareLink,
  encodeShareLink,
  envSetToJson,
  makeEnvSet,
  parseEnvSetJson,
  recordFromCode,
  type EnvRecord,
  type EnvSet,
} from '../core/env/envset.ts';
import { loadSavedSets, removeSavedSet, saveSet, type SavedSet } from '../core/env/saved_sets.ts';
import type { CheckReport } from '../core/env/checker.ts';
import { serializeError } from '../core/errors.ts';
import type { SandboxPool } from '../core/sandbox/pool.ts';
import type { SandboxLimits } from '../core/env/limits.ts';
import type { Store } from '../core/store.ts';
import { createBrowserSandboxPool } from '../platform/browser/sandbox_pool.ts';

/** Hostile programs the user can run to watch the sandbox contain them. */
const HOSTILE_RECORDS: EnvRecord[] = HOSTILE_DEMOS.map((d) =>
  recordFromCode(d.code, {
    title: d.title,
    skill: 'sandbox demo',
    hint: `This program misbehaves on purpose; the sandbox should stop it with ${d.expect}.`,
  }),
);

export interface EnvGroup {
  key: string;
  title: string;
  envs: EnvRecord[];
  /** The store key of an imported set (its Remove deletes that key); null for the other groups. */
  storeKey: string | null;
}

let sharedPool: SandboxPool | null = null;
/**
 * The page's one pool of sandbox workers, sized from a budget of `concurrency` chats in flight
 * (config.ts CONCURRENCY_SIZES.browserSandboxWorkers; the knob's default when none is given). A run
 * that asks for another size gets a new pool when the current one is idle; otherwise (a game played
 * by hand, a check under way) it shares the pool it finds.
 */
export function sandboxPool(concurrency?: number): SandboxPool {
  const size = concurrencySizes(concurrency ?? DEFAULTS.concurrency).browserSandboxWorkers;
  if (sharedPool && concurrency !== undefined && sharedPool.size !== size && sharedPool.idle) {
    void sharedPool.terminate();
    sharedPool = null;
  }
  sharedPool ??= createBrowserSandboxPool({ size });
  return sharedPool;
}

export class EnvLibrary {
  /** Imported sets, each with the store key it is saved under. */
  imported = $state<SavedSet[]>([]);
  shared = $state<EnvSet | null>(null);
  /** Environments produced by the current run (set by the app from RunState). */
  runEnvs = $state<EnvRecord[]>([]);
  /** Levels handed over from the Lab ("play this level yourself"), newest first. */
  labEnvs = $state<EnvRecord[]>([]);
  selectedId = $state<string | null>(null);
  reports = $state<Record<string, CheckReport | { error: string } | 'running'>>({});
  message = $state<{ kind: 'ok' | 'error'; text: string } | null>(null);

  constructor(
    private readonly store: Store,
    /** Called when the set from the link is kept or closed, so the link payload can leave the URL. */
    private readonly onSharedClosed: () => void = () => undefined,
  ) {}

  groups = $derived.by((): EnvGroup[] => {
    const g: EnvGroup[] = [];
    if (this.shared)
      g.push({ key: 'shared', title: `From link: ${this.shared.title}`, envs: this.shared.envs, storeKey: null });
    for (const { key, set } of this.imported)
      g.push({ key: `imported:${key}`, title: set.title, envs: set.envs, storeKey: key });
    if (this.runEnvs.length) g.push({ key: 'run', title: 'Made in this run', envs: this.runEnvs, storeKey: null });
    if (this.labEnvs.length) g.push({ key: 'lab', title: 'From the Lab', envs: this.labEnvs, storeKey: null });
    g.push({ key: 'seeds', title: 'Seed library', envs: SEED_ENVS, storeKey: null });
    g.push({ key: 'hostile', title: 'Contained failures (demos)', envs: HOSTILE_RECORDS, storeKey: null });
    return g;
  });

  all = $derived(this.groups.flatMap((g) => g.envs));
  selected = $derived(this.all.find((e) => e.id === this.selectedId) ?? null);

  async load(): Promise<void> {
    try {
      // a damaged saved set is skipped and said so; it stays in storage for inspection
      const { sets, damaged } = await loadSavedSets(this.store);
      this.imported = sets;
      if (damaged.length)
        this.message = {
          kind: 'error',
          text: `${damaged.length} saved env set(s) could not be read and are not shown: ${damaged[0]!.problem}`,
        };
    } catch (err) {
      this.message = { kind: 'error', text: `Could not read saved env sets: ${serializeError(err).message}` };
    }
    this.selectedId ??= this.all[0]?.id ?? null;
  }

  /** Open a share-link payload; a bad link becomes a message, never an exception. */
  openShared(payload: string | null): void {
    if (!payload) return;
    try {
      this.shared = decodeShareLink(`#set=${payload}`);
      this.selectedId = this.shared.envs[0]?.id ?? this.selectedId;
      this.message = {
        kind: 'ok',
        text: `Opened "${this.shared.title}" from the link (${this.shared.envs.length} environment${this.shared.envs.length === 1 ? '' : 's'}).${(this.shared.notices ?? []).map((n) => ` ${n}`).join('')}`,
      };
    } catch (err) {
      this.message = { kind: 'error', text: serializeError(err).message };
    }
  }

  async importText(text: string, name = 'file'): Promise<void> {
    try {
      const set = parseEnvSetJson(text);
      this.imported = [...this.imported, await saveSet(this.store, set)];
      this.selectedId = set.envs[0]?.id ?? this.selectedId;
      this.message = {
        kind: 'ok',
        text: `Imported "${set.title}" from ${name} (${set.envs.length} environment${set.envs.length === 1 ? '' : 's'}).${(set.notices ?? []).map((n) => ` ${n}`).join('')}`,
      };
    } catch (err) {
      this.message = { kind: 'error', text: `Could not import ${name}: ${serializeError(err).message}` };
    }
  }

  async keepShared(): Promise<void> {
    if (!this.shared) return;
    await this.importText(envSetToJson(this.shared), 'the link');
    this.shared = null;
    this.onSharedClosed();
  }

  /** Remove the imported set saved under `key`. */
  async removeImported(key: string): Promise<void> {
    try {
      await removeSavedSet(this.store, key);
      this.imported = this.imported.filter((s) => s.key !== key);
    } catch (err) {
      this.message = { kind: 'error', text: `Could not remove the set: ${serializeError(err).message}` };
    }
  }

  setFor(env: EnvRecord): EnvSet {
    const group = this.groups.find((g) => g.envs.includes(env));
    return group?.key === 'seeds'
      ? makeEnvSet(env.title, [env])
      : makeEnvSet(group?.title ?? env.title, group?.envs ?? [env]);
  }

  exportJson(set: EnvSet): string {
    return envSetToJson(set);
  }

  /** A full share URL for this page, or a message when the set is too big. */
  shareUrl(set: EnvSet, base: string): string | null {
    try {
      return `${base}#panel=environments&set=${encodeShareLink(set)}`;
    } catch (err) {
      this.message = { kind: 'error', text: serializeError(err).message };
      return null;
    }
  }

  async check(env: EnvRecord, maxTurns: number, limits?: SandboxLimits): Promise<void> {
    this.reports[env.id] = 'running';
    try {
      this.reports[env.id] = await sandboxPool().check(env.code, { maxTurns, limits });
    } catch (err) {
      this.reports[env.id] = { error: serializeError(err).message };
    }
  }
}
