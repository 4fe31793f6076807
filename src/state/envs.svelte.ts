/**
 * The environment library as a rune class: the seed library, imported sets and a
 * set opened from a share link; the selected environment; checker reports. Imported
 * sets persist in the store, so a reload keeps them. Environment code only ever
 * runs in the sandbox worker pool.
 */
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
import type { CheckReport } from '../core/env/checker.ts';
import { serializeError } from '../core/errors.ts';
import type { SandboxPool } from '../core/sandbox/pool.ts';
import type { SandboxLimits } from '../core/sandbox/limits.ts';
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
  removable: boolean;
}

let sharedPool: SandboxPool | null = null;
/** One pool of sandbox workers for the page (two workers: play and checks don't block each other). */
export function sandboxPool(): SandboxPool {
  sharedPool ??= createBrowserSandboxPool({ size: 2 });
  return sharedPool;
}

export class EnvLibrary {
  imported = $state<EnvSet[]>([]);
  shared = $state<EnvSet | null>(null);
  /** Environments produced by the current run (set by the app from RunState). */
  runEnvs = $state<EnvRecord[]>([]);
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
      g.push({ key: 'shared', title: `From link: ${this.shared.title}`, envs: this.shared.envs, removable: false });
    this.imported.forEach((set, i) =>
      g.push({ key: `imported-${i}`, title: set.title, envs: set.envs, removable: true }),
    );
    if (this.runEnvs.length) g.push({ key: 'run', title: 'Made in this run', envs: this.runEnvs, removable: false });
    g.push({ key: 'seeds', title: 'Seed library', envs: SEED_ENVS, removable: false });
    g.push({ key: 'hostile', title: 'Contained failures (demos)', envs: HOSTILE_RECORDS, removable: false });
    return g;
  });

  all = $derived(this.groups.flatMap((g) => g.envs));
  selected = $derived(this.all.find((e) => e.id === this.selectedId) ?? null);

  async load(): Promise<void> {
    try {
      const keys = await this.store.keys('envsets');
      const sets: EnvSet[] = [];
      for (const k of keys) {
        const raw = await this.store.get<unknown>('envsets', k);
        try {
          sets.push(parseEnvSetJson(JSON.stringify(raw)));
        } catch {
          /* a damaged saved set is skipped; it stays in storage for inspection */
        }
      }
      this.imported = sets;
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
        text: `Opened "${this.shared.title}" from the link (${this.shared.envs.length} environments).`,
      };
    } catch (err) {
      this.message = { kind: 'error', text: serializeError(err).message };
    }
  }

  async importText(text: string, name = 'file'): Promise<void> {
    try {
      const set = parseEnvSetJson(text);
      await this.store.put('envsets', `set-${Date.now().toString(36)}`, set);
      this.imported = [...this.imported, set];
      this.selectedId = set.envs[0]?.id ?? this.selectedId;
      this.message = { kind: 'ok', text: `Imported "${set.title}" from ${name} (${set.envs.length} environments).` };
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

  async removeImported(index: number): Promise<void> {
    const keys = await this.store.keys('envsets');
    if (keys[index]) await this.store.delete('envsets', keys[index]!);
    this.imported = this.imported.filter((_, i) => i !== index);
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
