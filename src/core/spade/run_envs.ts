/**
 * The environments a run produced, as env records (playable, checkable and shareable in the
 * Environments panel). Each record's id comes from its place in the run, (run, cycle, index), not
 * from its code: a designer that repeats a program makes two records, lists keyed by id stay valid,
 * and a later run's (cycle 0, index 0) is not mistaken for this one's (checker reports, play).
 */
import { recordFromCode, type EnvRecord } from '../env/envset.ts';
import type { ArchiveRecord } from './run_store.ts';

/** The id of the environment designed at (cycle, index) of run `runId`. */
export function runEnvId(runId: string, cycle: number, index: number): string {
  return `${runId}:c${cycle}:${index}`;
}

/** One record per valid archive entry with code, in archive order. */
export function runEnvRecords(runId: string, archive: readonly ArchiveRecord[]): EnvRecord[] {
  return archive
    .filter((a) => a.valid && a.code)
    .map((a) =>
      recordFromCode(a.code!, {
        id: runEnvId(runId, a.cycle, a.index),
        title: a.title,
        setting: a.setting,
        skill: a.skill,
        hint: a.hint ?? '',
        source: a.source,
        stats: a.stats
          ? {
              plays: a.stats.noHint.length * 2,
              winRate: a.stats.winRate,
              winRateHinted: a.stats.winRateHinted,
              regret: a.stats.regret,
              designerReward: a.stats.designerReward ?? undefined,
              checked: true,
            }
          : {},
      }),
    );
}
