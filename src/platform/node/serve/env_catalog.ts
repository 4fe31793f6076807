/**
 * The environments `spade serve` offers: the seed library, env-set files, share links, environment
 * files and run directories (their valid environments), merged into one catalog; a watched run
 * directory adds the new valid environments as the loop writes them. Choosing one for a reset: by
 * id, or by a sampling rule — uniform, or weighted by the designer's scores (regret, learnability).
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import {
  checkSetSize,
  decodeShareLink,
  parseEnvSetJson,
  recordFromCode,
  type EnvRecord,
} from '../../../core/env/envset.ts';
import { SEED_ENVS } from '../../../core/env/seeds/index.ts';
import { EnvSetError, UsageError } from '../../../core/errors.ts';
import { createRng, hashSeed } from '../../../core/rng.ts';
import { runEnvRecords } from '../../../core/spade/run_envs.ts';
import { DirRunStore } from '../run_dir.ts';
import type { SampleRule } from './openenv.ts';

/** The most bytes of a watched or served run's archive.jsonl read at once. */
const MAX_ARCHIVE_BYTES = 256 * 2 ** 20;

/** The designer's scores of an environment, as its run recorded them (null: never played). */
export interface EnvScores {
  regret: number | null;
  winRate: number | null;
  winRateHinted: number | null;
  /** The azr_learnability estimator's value: 1 − p̂ when 0 < p̂ < 1, else 0 (p̂ the win rate). */
  learnability: number | null;
  designerReward: number | null;
}

export function scoresOf(rec: EnvRecord): EnvScores {
  const w = rec.stats.winRate ?? null;
  return {
    regret: rec.stats.regret ?? null,
    winRate: w,
    winRateHinted: rec.stats.winRateHinted ?? null,
    learnability: w === null ? null : w > 0 && w < 1 ? 1 - w : 0,
    designerReward: rec.stats.designerReward ?? null,
  };
}

/** The weight an environment gets under `rule` (uniform: 1; regret: max(0, regret); learnability: as scored). */
export function sampleWeight(rec: EnvRecord, rule: SampleRule): number {
  if (rule === 'uniform') return 1;
  const s = scoresOf(rec);
  return Math.max(0, (rule === 'regret' ? s.regret : s.learnability) ?? 0);
}

/**
 * Pick an environment under `rule`: proportional to sampleWeight; when every weight is 0 (no
 * environment was scored, e.g. the seed library) the pick is uniform. `u` is a uniform draw in [0, 1).
 */
export function sampleEnv(envs: readonly EnvRecord[], rule: SampleRule, u: number): EnvRecord {
  if (envs.length === 0) throw new EnvSetError('The served set has no environments yet.');
  const weights = envs.map((e) => sampleWeight(e, rule));
  const total = weights.reduce((a, b) => a + b, 0);
  if (total <= 0) return envs[Math.min(envs.length - 1, Math.floor(u * envs.length))]!;
  let x = u * total;
  for (let i = 0; i < envs.length; i++) {
    x -= weights[i]!;
    if (x < 0) return envs[i]!;
  }
  return envs[envs.length - 1]!;
}

/** A uniform draw for a reset: reproducible from (seed, episode id) when a seed is given. */
export function drawFor(seed: number | null, episodeId: string | null): number {
  if (seed === null) return Math.random();
  return createRng(hashSeed(`${seed}:${episodeId ?? ''}`)).next();
}

/** One source named on the command line. */
export type SourceKind = 'seeds' | 'envset' | 'link' | 'envfile' | 'rundir';

export function sourceKind(source: string): SourceKind {
  if (source === 'seeds') return 'seeds';
  if (/[#&]set=|^set=/.test(source)) return 'link';
  if (source.endsWith('.json')) return 'envset';
  if (source.endsWith('.js')) return 'envfile';
  return 'rundir';
}

async function readSource(source: string): Promise<EnvRecord[]> {
  const kind = sourceKind(source);
  if (kind === 'seeds') return SEED_ENVS;
  if (kind === 'link') return decodeShareLink(source).envs;
  if (!existsSync(source))
    throw new UsageError(
      `${source} does not exist. Name "seeds", an env-set .json, a share link, environment .js files or a run directory.`,
    );
  if (kind === 'envset') {
    checkSetSize((await stat(source)).size, source);
    return parseEnvSetJson(await readFile(source, 'utf8')).envs;
  }
  if (kind === 'envfile') return [recordFromCode(await readFile(source, 'utf8'))];
  return readRunDir(source);
}

/** The valid environments of a run directory's archive, with their statistics. */
export async function readRunDir(dir: string): Promise<EnvRecord[]> {
  if (!existsSync(resolve(dir, 'archive.jsonl')) && !existsSync(resolve(dir, 'config.json')))
    throw new UsageError(`${dir} is not a run directory (no archive.jsonl or config.json in it).`);
  const store = new DirRunStore(dir, { maxBytes: { 'archive.jsonl': MAX_ARCHIVE_BYTES } });
  return runEnvRecords(basename(resolve(dir)), await store.readArchive());
}

/** The served set: records by id, in the order they arrived. */
export class EnvCatalog {
  private readonly byId = new Map<string, EnvRecord>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly title: string,
    envs: readonly EnvRecord[] = [],
  ) {
    this.add(envs);
  }

  /** Adds the records whose ids are new; returns how many were added. */
  add(envs: readonly EnvRecord[]): number {
    let n = 0;
    for (const e of envs) {
      if (this.byId.has(e.id)) continue;
      this.byId.set(e.id, e);
      n++;
    }
    return n;
  }

  get size(): number {
    return this.byId.size;
  }

  list(): EnvRecord[] {
    return [...this.byId.values()];
  }

  get(id: string): EnvRecord | undefined {
    return this.byId.get(id);
  }

  /**
   * Re-read `dir` every `everyMs` and add its new valid environments; `onAdded` hears how many
   * arrived. A read that fails (a run writing its first cycle) is retried at the next tick.
   */
  watch(dir: string, everyMs: number, onAdded: (n: number) => void, onError: (err: Error) => void): void {
    let running = false;
    this.timer = setInterval(() => {
      if (running) return;
      running = true;
      readRunDir(dir)
        .then((envs) => {
          const n = this.add(envs);
          if (n > 0) onAdded(n);
        }, onError)
        .finally(() => (running = false));
    }, everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** A catalog from command-line sources (none: the seed library). */
export async function loadCatalog(sources: readonly string[]): Promise<EnvCatalog> {
  const list = sources.length ? sources : ['seeds'];
  const envs: EnvRecord[] = [];
  for (const s of list) envs.push(...(await readSource(s)));
  const title =
    list.length === 1 ? (list[0] === 'seeds' ? 'SPADE seed library' : basename(list[0]!)) : `${list.length} sources`;
  return new EnvCatalog(title, envs);
}
