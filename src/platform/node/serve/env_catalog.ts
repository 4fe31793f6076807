/**
 * The environments `spade serve` offers: the seed library, env-set files, share links, environment
 * files and run directories (their valid environments), merged into one catalog; a watched run
 * directory adds the new valid environments as the loop writes them. Choosing one for a reset: by
 * id, or by a sampling rule — uniform, or weighted by the designer's scores (regret, learnability),
 * computed in log space so that no score overflows the draw.
 *
 * Everything here is read as untrusted: files are read only if regular and within their bound
 * (regular_file.ts), run directories line by line against the run-record schema (a bad line is
 * skipped and named), and every record remembers where it came from, so that one the server
 * refuses (it fails to load and reset: useCheck) or renames is named with its file. Ids cannot be
 * forged into a collision: a record with a seed's id and other code, or an id already served with
 * other code, is renamed (`id~2`) and said so; two run directories with the same base name get
 * distinct run ids (`name`, `name~2`).
 */
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import {
  decodeShareLink,
  freeId,
  MAX_SET_BYTES,
  parseEnvSetJson,
  recordFromCode,
  reservedCode,
  type EnvRecord,
} from '../../../core/env/envset.ts';
import { SEED_ENVS } from '../../../core/env/seeds/index.ts';
import { EnvSetError, UsageError } from '../../../core/errors.ts';
import { createRng, hashSeed } from '../../../core/rng.ts';
import { runEnvId, runEnvRecords } from '../../../core/spade/run_envs.ts';
import { readRegularText } from '../regular_file.ts';
import { DirRunStore } from '../run_dir.ts';
import { ArchiveTail } from './archive_tail.ts';
import type { SampleRule } from './openenv.ts';

/** The most bytes of a watched or served run's archive.jsonl read at once. */
export const MAX_ARCHIVE_BYTES = 256 * 2 ** 20;
/** The most bytes of an environment .js file read: the env-set cap for one program's code (1 MiB). */
const MAX_ENV_FILE_BYTES = 2 ** 20;

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
function sampleWeight(rec: EnvRecord, rule: SampleRule): number {
  if (rule === 'uniform') return 1;
  const s = scoresOf(rec);
  const w = (rule === 'regret' ? s.regret : s.learnability) ?? 0;
  return Number.isFinite(w) ? Math.max(0, w) : w === Infinity ? Number.MAX_VALUE : 0;
}

/**
 * Pick an environment under `rule`: proportional to sampleWeight; when every weight is 0 (no
 * environment was scored, e.g. the seed library) the pick is uniform. `u` is a uniform draw in
 * [0, 1). The weights are taken in log space and scaled by the largest (exp(log w − log max)), so
 * their sum is at most the number of environments whatever the scores (1e308 twice would
 * overflow a plain sum to Infinity and always pick the last one).
 */
export function sampleEnv(envs: readonly EnvRecord[], rule: SampleRule, u: number): EnvRecord {
  if (envs.length === 0) throw new EnvSetError('The served set has no environments yet.');
  const logs = new Float64Array(envs.length);
  let top = -Infinity;
  for (let i = 0; i < envs.length; i++) {
    const w = sampleWeight(envs[i]!, rule);
    logs[i] = w > 0 ? Math.log(w) : -Infinity;
    if (logs[i]! > top) top = logs[i]!;
  }
  if (top === -Infinity) return envs[Math.min(envs.length - 1, Math.floor(u * envs.length))]!;
  let total = 0;
  for (let i = 0; i < envs.length; i++) total += logs[i] === -Infinity ? 0 : Math.exp(logs[i]! - top);
  let x = u * total;
  let last = 0;
  for (let i = 0; i < envs.length; i++) {
    if (logs[i] === -Infinity) continue;
    last = i;
    x -= Math.exp(logs[i]! - top);
    if (x < 0) return envs[i]!;
  }
  return envs[last]!; // rounding left x at 0: the last environment with a weight
}

/** A uniform draw for a reset: reproducible from (seed, episode id) when a seed is given. */
export function drawFor(seed: number | null, episodeId: string | null): number {
  if (seed === null) return Math.random();
  return createRng(hashSeed(`${seed}:${episodeId ?? ''}`)).next();
}

/** One source named on the command line. */
type SourceKind = 'seeds' | 'envset' | 'link' | 'envfile' | 'rundir';

function sourceKind(source: string): SourceKind {
  if (source === 'seeds') return 'seeds';
  if (/[#&]set=|^set=/.test(source)) return 'link';
  if (source.endsWith('.json')) return 'envset';
  if (source.endsWith('.js')) return 'envfile';
  return 'rundir';
}

/** A record and where it came from (a file, a run directory's task, a link), for messages. */
export interface CatalogEntry {
  rec: EnvRecord;
  from: string;
}

/** What reading a source found: its environments and what was skipped or changed on the way. */
export interface SourceRead {
  entries: CatalogEntry[];
  /** Lines skipped (file and line number), records renamed off a seed's id, and the like. */
  warnings: string[];
}

async function readSource(source: string, runId: string): Promise<SourceRead> {
  const kind = sourceKind(source);
  if (kind === 'seeds') return { entries: SEED_ENVS.map((rec) => ({ rec, from: 'the seed library' })), warnings: [] };
  if (kind === 'link') {
    const set = decodeShareLink(source);
    return { entries: set.envs.map((rec) => ({ rec, from: 'the share link' })), warnings: set.notices ?? [] };
  }
  if (kind === 'rundir') return readRunDir(source, runId);
  const text = await readRegularText(source, kind === 'envset' ? MAX_SET_BYTES : MAX_ENV_FILE_BYTES);
  if (text === null)
    throw new UsageError(
      `${source} does not exist. Name "seeds", an env-set .json, a share link, environment .js files or a run directory.`,
    );
  if (kind === 'envset') {
    let set;
    try {
      set = parseEnvSetJson(text);
    } catch (err) {
      if (err instanceof EnvSetError) throw new EnvSetError(`${source}: ${err.message}`, err.data);
      throw err;
    }
    return { entries: set.envs.map((rec) => ({ rec, from: source })), warnings: set.notices ?? [] };
  }
  return { entries: [{ rec: recordFromCode(text), from: source }], warnings: [] };
}

/**
 * The valid environments of a run directory's archive, with their statistics; ids are
 * `RUNID:cC:I` (RUNID the directory's base name unless given). Lines that are not a valid archive
 * record are skipped and named in `warnings`.
 */
export async function readRunDir(dir: string, runId = basename(resolve(dir))): Promise<SourceRead> {
  assertRunDir(dir);
  const store = new DirRunStore(dir, { maxBytes: { 'archive.jsonl': MAX_ARCHIVE_BYTES } });
  const archive = await store.readArchive();
  const file = join(dir, 'archive.jsonl');
  const records = runEnvRecords(runId, archive);
  const place = new Map(archive.map((a) => [runEnvId(runId, a.cycle, a.index), `cycle ${a.cycle}, task ${a.index}`]));
  return {
    entries: records.map((rec) => ({ rec, from: `${file} (${place.get(rec.id) ?? rec.id})` })),
    warnings: [...store.warnings],
  };
}

/** A UsageError unless `dir` holds archive.jsonl or config.json (a run directory). */
function assertRunDir(dir: string): void {
  if (!existsSync(join(dir, 'archive.jsonl')) && !existsSync(join(dir, 'config.json')))
    throw new UsageError(
      existsSync(dir)
        ? `${dir} is not a run directory (no archive.jsonl or config.json in it).`
        : `${dir} does not exist. Name "seeds", an env-set .json, a share link, environment .js files or a run directory.`,
    );
}

/**
 * What a watched run directory's archive holds that is new since the last read (archive_tail.ts:
 * only appended bytes are read; a replaced or truncated archive is read whole), as catalog entries.
 */
async function readRunDirTail(dir: string, tail: ArchiveTail, runId: string): Promise<SourceRead> {
  const read = await tail.read();
  if (read.mode === 'missing') assertRunDir(dir);
  const records = runEnvRecords(runId, read.records);
  const place = new Map(
    read.records.map((a) => [runEnvId(runId, a.cycle, a.index), `cycle ${a.cycle}, task ${a.index}`]),
  );
  return {
    entries: records.map((rec) => ({ rec, from: `${tail.path} (${place.get(rec.id) ?? rec.id})` })),
    warnings: read.warnings,
  };
}

/** Run ids for run directories: the base name, or `name~2`, … when another directory has it. */
function runIds(dirs: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const taken = new Set<string>();
  for (const d of dirs) {
    const full = resolve(d);
    if (out.has(full)) continue;
    const base = basename(full);
    const id = taken.has(base) ? freeId(base, (x) => taken.has(x)) : base;
    taken.add(id);
    out.set(full, id);
  }
  return out;
}

/** The check a record passes before it is served: null, or why it is refused. */
export type EnvCheck = (rec: EnvRecord) => Promise<string | null>;

/** The served set: records by id, in the order they arrived. */
export class EnvCatalog {
  private readonly byId = new Map<string, CatalogEntry>();
  /** Every program met, served or refused, by its own id: a re-read (--watch) neither re-checks nor re-names it. */
  private readonly met = new Map<string, string[]>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private check: EnvCheck | null = null;
  private log: (line: string) => void = () => undefined;
  /** Run ids of the run directories read, by resolved path (loadCatalog sets them; watch uses them). */
  readonly runIds = new Map<string, string>();
  /** Watched archives, by resolved run directory: each read takes only what was appended since the last. */
  private readonly tails = new Map<string, ArchiveTail>();

  constructor(
    readonly title: string,
    envs: readonly EnvRecord[] = [],
    from = title,
  ) {
    this.addUnchecked(envs.map((rec) => ({ rec, from })));
  }

  get size(): number {
    return this.byId.size;
  }

  list(): EnvRecord[] {
    return [...this.byId.values()].map((e) => e.rec);
  }

  get(id: string): EnvRecord | undefined {
    return this.byId.get(id)?.rec;
  }

  /** Where a served record came from. */
  origin(id: string): string | undefined {
    return this.byId.get(id)?.from;
  }

  /** Where log lines (renamed ids, refused records) go. */
  logTo(log: (line: string) => void): void {
    this.log = log;
  }

  /** True when this program was met before under this id (served, renamed or refused); marks it met. */
  private meet(rec: EnvRecord): boolean {
    const codes = this.met.get(rec.id);
    if (codes?.includes(rec.code)) return true;
    if (codes) codes.push(rec.code);
    else this.met.set(rec.id, [rec.code]);
    return false;
  }

  /**
   * The id `e` is served under: its own, or a fresh `id~N` when its id is a seed's (reserved) or
   * is served with other code — said so through the log.
   */
  private idFor(e: CatalogEntry): string {
    const { rec } = e;
    const have = this.byId.get(rec.id);
    const seed = reservedCode(rec.id);
    if (!have && (seed === undefined || seed === rec.code)) return rec.id;
    const id = freeId(rec.id, (x) => this.byId.has(x) || reservedCode(x) !== undefined);
    this.log(
      `${e.from}: "${rec.title.slice(0, 80)}" has the id ${rec.id} of ${seed !== undefined && seed !== rec.code ? 'a seed environment' : `"${have!.rec.title.slice(0, 80)}" (${have!.from})`} but other code: served as ${id}.`,
    );
    return id;
  }

  /** Adds the entries whose programs are new, without the check; returns how many were added. */
  private addUnchecked(entries: readonly CatalogEntry[]): number {
    let n = 0;
    for (const e of entries) {
      if (this.meet(e.rec)) continue;
      this.place(e);
      n++;
    }
    return n;
  }

  private place(e: CatalogEntry): void {
    const id = this.idFor(e);
    this.byId.set(id, id === e.rec.id ? e : { ...e, rec: { ...e.rec, id } });
  }

  /** Adds records (unchecked until useCheck, after it checked); returns how many were added. */
  async add(envs: readonly EnvRecord[], from = this.title): Promise<number> {
    return this.admit(envs.map((rec) => ({ rec, from })));
  }

  /** Adds entries that pass the check (when one is set), naming each refused one with its source and reason. */
  async admit(entries: readonly CatalogEntry[]): Promise<number> {
    if (!this.check) return this.addUnchecked(entries);
    let n = 0;
    for (const e of entries) {
      if (this.meet(e.rec)) continue; // served, renamed or refused already
      const problem = await this.check(e.rec);
      if (problem !== null) {
        this.log(`${e.from}: "${e.rec.title.slice(0, 80)}" is not served: ${problem}`);
        continue;
      }
      this.place(e);
      n++;
    }
    return n;
  }

  /**
   * From now on, every record passes `check` before it is served; the records already here are
   * checked now and those that fail are removed, each named with its source and reason.
   */
  async useCheck(check: EnvCheck, log: (line: string) => void, concurrency = 1): Promise<void> {
    this.log = log;
    const todo = [...this.byId];
    const problems = new Array<string | null>(todo.length).fill(null);
    // `concurrency` checks at a time (the pool spreads them over its workers), results in order
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < todo.length; i = next++) problems[i] = await check(todo[i]![1].rec);
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, todo.length)) }, worker));
    todo.forEach(([id, e], i) => {
      if (problems[i] === null) return;
      this.byId.delete(id);
      log(`${e.from}: "${e.rec.title.slice(0, 80)}" is not served: ${problems[i]}`);
    });
    this.check = check;
  }

  /** The tail that reads `dir`'s archive.jsonl for this catalog (one per directory). */
  tailOf(dir: string): ArchiveTail {
    const full = resolve(dir);
    let tail = this.tails.get(full);
    if (!tail) this.tails.set(full, (tail = new ArchiveTail(join(full, 'archive.jsonl'), MAX_ARCHIVE_BYTES)));
    return tail;
  }

  /**
   * Look at `dir` every `everyMs` and add its new valid environments; `onAdded` hears how many
   * arrived. Each tick reads only what was appended to archive.jsonl since the last read (nothing
   * when it is unchanged; all of it when it was replaced or truncated: archive_tail.ts). A read
   * that fails (a run writing its first cycle, a file swapped for a FIFO) is retried at the next
   * tick; each distinct failure and each skipped line is reported once. Returns the tail (its
   * counters say what each tick read).
   */
  watch(
    dir: string,
    everyMs: number,
    onAdded: (n: number) => void,
    onError: (err: Error) => void,
    runId = this.runIds.get(resolve(dir)) ?? basename(resolve(dir)),
  ): ArchiveTail {
    const tail = this.tailOf(dir);
    let running = false;
    let lastError = '';
    const told = new Set<string>();
    this.timer = setInterval(() => {
      if (running) return;
      running = true;
      readRunDirTail(dir, tail, runId)
        .then(async (read) => {
          lastError = '';
          for (const w of read.warnings)
            if (!told.has(w)) {
              told.add(w);
              this.log(w);
            }
          const n = await this.admit(read.entries);
          if (n > 0) onAdded(n);
        })
        .catch((err: unknown) => {
          const e = err instanceof Error ? err : new Error(String(err));
          if (e.message === lastError) return;
          lastError = e.message;
          onError(e);
        })
        .finally(() => (running = false));
    }, everyMs);
    this.timer.unref();
    return tail;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * A catalog from command-line sources (none: the seed library). Run directories with the same
 * base name get distinct run ids (`watch`, when given, takes part in the naming). Warnings (lines
 * skipped, ids renamed) go to `log`.
 */
export async function loadCatalog(
  sources: readonly string[],
  log: (line: string) => void = () => undefined,
  watch?: string,
): Promise<EnvCatalog> {
  const list = sources.length ? sources : watch ? [] : ['seeds'];
  const ids = runIds([...list.filter((s) => sourceKind(s) === 'rundir'), ...(watch ? [watch] : [])]);
  const title =
    list.length === 0
      ? basename(resolve(watch!))
      : list.length === 1
        ? list[0] === 'seeds'
          ? 'SPADE seed library'
          : basename(list[0]!)
        : `${list.length} sources`;
  const catalog = new EnvCatalog(title);
  catalog.logTo(log);
  for (const [dir, id] of ids) catalog.runIds.set(dir, id);
  for (const s of list) {
    const read = await readSource(s, ids.get(resolve(s)) ?? basename(resolve(s)));
    for (const w of read.warnings) log(w);
    await catalog.admit(read.entries);
  }
  // a watched run that has started already: what it holds now (one that has not is read later),
  // through the tail the watch goes on with, so its first tick reads only what came after
  if (watch && existsSync(watch)) {
    try {
      const read = await readRunDirTail(
        watch,
        catalog.tailOf(watch),
        ids.get(resolve(watch)) ?? basename(resolve(watch)),
      );
      for (const w of read.warnings) log(w);
      await catalog.admit(read.entries);
    } catch (err) {
      log(`reading ${watch}: ${(err as Error).message}`);
    }
  }
  return catalog;
}
