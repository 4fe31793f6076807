/**
 * A run directory (Node): config.json (the run spec), archive.jsonl (environments
 * with statistics), rollouts.jsonl, metrics.jsonl, memory.json (SPADE's
 * env_memory.json fields) and state.json (for --resume). JSON files are written
 * atomically (temp + rename). writeCycle is idempotent: before appending cycle c it
 * truncates each .jsonl back to where cycle c began (recorded in .cycles.json), so
 * a crash between the appends and the state update never duplicates lines.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, rename, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StorageError } from '../../core/errors.ts';
import { exportMemory, type Memory } from '../../core/spade/memory.ts';
import type {
  ArchiveRecord,
  MetricsRecord,
  RolloutRecord,
  RunSpec,
  RunState,
  RunStore,
} from '../../core/spade/run_store.ts';

const FILES = ['archive.jsonl', 'rollouts.jsonl', 'metrics.jsonl'] as const;

async function writeJson(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, path);
}

async function readJson<T>(path: string): Promise<T | null> {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch (err) {
    throw new StorageError(`${path} is unreadable (${(err as Error).message}); fix or delete it to start over`, {
      path,
    });
  }
}

async function size(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

async function readJsonl<T>(path: string): Promise<T[]> {
  if (!existsSync(path)) return [];
  return (await readFile(path, 'utf8'))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as T);
}

export class DirRunStore implements RunStore {
  constructor(readonly dir: string) {}

  private p(name: string): string {
    return join(this.dir, name);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  readSpec() {
    return readJson<RunSpec>(this.p('config.json'));
  }
  async writeSpec(spec: RunSpec) {
    await this.init();
    await writeJson(this.p('config.json'), spec);
  }
  readState() {
    return readJson<RunState>(this.p('state.json'));
  }
  writeState(state: RunState) {
    return writeJson(this.p('state.json'), state);
  }
  async writeCycle(
    cycle: number,
    data: { archive: ArchiveRecord[]; rollouts: RolloutRecord[]; metrics: MetricsRecord },
  ) {
    const index = (await readJson<Record<string, Record<string, number>>>(this.p('.cycles.json'))) ?? {};
    const key = String(cycle);
    if (index[key]) {
      for (const f of FILES) if (existsSync(this.p(f))) await truncate(this.p(f), index[key]![f] ?? 0);
    } else {
      index[key] = Object.fromEntries(await Promise.all(FILES.map(async (f) => [f, await size(this.p(f))] as const)));
      await writeJson(this.p('.cycles.json'), index);
    }
    const lines = (xs: unknown[]) => xs.map((x) => `${JSON.stringify(x)}\n`).join('');
    await appendFile(this.p('archive.jsonl'), lines(data.archive));
    await appendFile(this.p('rollouts.jsonl'), lines(data.rollouts));
    await appendFile(this.p('metrics.jsonl'), lines([data.metrics]));
  }
  writeMemory(memory: Memory) {
    return writeJson(this.p('memory.json'), exportMemory(memory));
  }
  readArchive() {
    return readJsonl<ArchiveRecord>(this.p('archive.jsonl'));
  }
  readMetrics() {
    return readJsonl<MetricsRecord>(this.p('metrics.jsonl'));
  }
  readRollouts() {
    return readJsonl<RolloutRecord>(this.p('rollouts.jsonl'));
  }
}
